"""BLEU as sacreBLEU computes it (Post, 2018, "A Call for Clarity in Reporting
BLEU Scores"): its tokenizers (13a, none, char, intl), its smoothing methods
(none, floor, add-k, exp), closest reference length with ties to the shorter,
brevity penalty, and effective order. An independent implementation; the
published test values of sacreBLEU's test/test_bleu.py and
test/test_sentence_bleu.py are checked in tests/python/test_eval_metrics.py.
"""

from __future__ import annotations

import math
import re
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

__all__ = ["BLEUScore", "compute_bleu", "bleu_score", "tokenize", "TOKENIZERS", "SMOOTH_METHODS"]

MAX_NGRAM_ORDER = 4
SMOOTH_METHODS = ("none", "floor", "add-k", "exp")
_SMOOTH_DEFAULTS = {"floor": 0.1, "add-k": 1.0}

# --- tokenizers ---------------------------------------------------------------

# mteval-v13a.pl: punctuation and symbols become tokens; a period or comma is
# split off unless it sits between digits; a dash after a digit is split off.
_13A_RULES = (
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
)


def _tok_13a(line: str) -> str:
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = f" {line} "
    for pattern, repl in _13A_RULES:
        line = pattern.sub(repl, line)
    return " ".join(line.split())


def _tok_none(line: str) -> str:
    return line


def _tok_char(line: str) -> str:
    return " ".join(line)


_INTL_RULES = None


def _category_class(prefix: str, negate: bool = False) -> str:
    """A regex character class of the code points whose Unicode general
    category starts with `prefix` (what the `regex` module writes \\p{P})."""
    ranges = []
    start = None
    for cp in range(sys.maxunicode + 1):
        inside = unicodedata.category(chr(cp)).startswith(prefix)
        if inside and start is None:
            start = cp
        elif not inside and start is not None:
            ranges.append((start, cp - 1))
            start = None
    if start is not None:
        ranges.append((start, sys.maxunicode))
    body = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges
    )
    return f"[{'^' if negate else ''}{body}]"


def _tok_intl(line: str) -> str:
    # sacreBLEU's "intl" (mteval-v14 international): punctuation after a
    # non-number and before a non-number is split off, symbols always.
    global _INTL_RULES
    if _INTL_RULES is None:
        p, s = _category_class("P"), _category_class("S")
        not_n = _category_class("N", negate=True)
        _INTL_RULES = (
            (re.compile(f"({not_n})({p})"), r"\1 \2 "),
            (re.compile(f"({p})({not_n})"), r" \1 \2"),
            (re.compile(f"({s})"), r" \1 "),
        )
    for pattern, repl in _INTL_RULES:
        line = pattern.sub(repl, line)
    return " ".join(line.split())


TOKENIZERS = {"13a": _tok_13a, "none": _tok_none, "char": _tok_char, "intl": _tok_intl}


def tokenize(line: str, tokenize: str = "13a", lowercase: bool = False) -> List[str]:
    """The tokens BLEU counts for `line` (sacreBLEU: lowercase, then the
    tokenizer over the right-stripped line, then whitespace split)."""
    try:
        tok = TOKENIZERS[tokenize]
    except KeyError:
        raise ValueError(f"unknown BLEU tokenizer {tokenize!r}; one of {sorted(TOKENIZERS)}") from None
    if lowercase:
        line = line.lower()
    return tok(line.rstrip()).split()


# --- statistics and score -----------------------------------------------------


def _ngrams(tokens: Sequence[str], max_order: int = MAX_NGRAM_ORDER) -> Counter:
    counts = Counter()
    for n in range(1, max_order + 1):
        for i in range(len(tokens) - n + 1):
            counts[tuple(tokens[i : i + n])] += 1
    return counts


def _closest_ref_len(hyp_len: int, ref_lens: Sequence[int]) -> int:
    best = None
    for ref_len in ref_lens:
        key = (abs(hyp_len - ref_len), ref_len)
        if best is None or key < best:
            best = key
    return 0 if best is None else best[1]


def _sentence_stats(hyp_tokens, refs_tokens, max_order=MAX_NGRAM_ORDER):
    hyp_len = len(hyp_tokens)
    ref_len = _closest_ref_len(hyp_len, [len(r) for r in refs_tokens])
    # Clip each hypothesis n-gram count by its largest count in one reference.
    max_ref = Counter()
    for ref in refs_tokens:
        for gram, count in _ngrams(ref, max_order).items():
            if count > max_ref[gram]:
                max_ref[gram] = count
    correct = [0] * max_order
    total = [max(hyp_len - n, 0) for n in range(max_order)]
    for gram, count in _ngrams(hyp_tokens, max_order).items():
        correct[len(gram) - 1] += min(count, max_ref[gram])
    return correct, total, hyp_len, ref_len


@dataclass
class BLEUScore:
    """One BLEU result: `score` on 0-100, the matched (`counts`) and total
    n-grams of each order, their `precisions` (0-100, after smoothing), the
    brevity penalty `bp`, and the hypothesis and reference lengths."""

    score: float
    counts: List[float] = field(default_factory=list)
    totals: List[float] = field(default_factory=list)
    precisions: List[float] = field(default_factory=list)
    bp: float = 1.0
    sys_len: int = 0
    ref_len: int = 0

    def __float__(self):
        return float(self.score)


def _my_log(x: float) -> float:
    return -9999999999.0 if x == 0.0 else math.log(x)


def compute_bleu(
    correct: Sequence[float],
    total: Sequence[float],
    sys_len: int,
    ref_len: int,
    smooth_method: str = "none",
    smooth_value: Optional[float] = None,
    effective_order: bool = False,
    max_ngram_order: int = MAX_NGRAM_ORDER,
) -> BLEUScore:
    """BLEU from sufficient statistics (sacreBLEU's BLEU.compute_bleu).

    precision_n = correct_n / total_n; score = BP * exp(mean_n log p_n) * 100,
    BP = exp(1 - ref_len / sys_len) when sys_len < ref_len, else 1. Smoothing
    of a zero correct_n: "exp" halves the previous floor (1/(2^k total_n)),
    "floor" uses smooth_value/total_n (default 0.1), "add-k" adds smooth_value
    (default 1) to correct_n and total_n for n > 1, "none" leaves it at 0 (the
    score is then 0). With effective_order, orders whose total is 0 are left
    out of the mean (for short sentences).
    """
    if smooth_method not in SMOOTH_METHODS:
        raise ValueError(f"unknown smooth_method {smooth_method!r}; one of {SMOOTH_METHODS}")
    if smooth_value is None:
        smooth_value = _SMOOTH_DEFAULTS.get(smooth_method, 0.0)
    correct = [float(x) for x in correct]
    total = [float(x) for x in total]
    if sys_len < ref_len:
        bp = math.exp(1.0 - ref_len / sys_len) if sys_len > 0 else 0.0
    else:
        bp = 1.0
    precisions = [0.0] * max_ngram_order
    if not any(correct):
        return BLEUScore(0.0, correct, total, precisions, bp, sys_len, ref_len)
    smooth_mteval = 1.0
    eff_order = max_ngram_order
    for n in range(1, max_ngram_order + 1):
        if smooth_method == "add-k" and n > 1:
            correct[n - 1] += smooth_value
            total[n - 1] += smooth_value
        if total[n - 1] == 0:
            break
        if effective_order:
            eff_order = n
        if correct[n - 1] == 0:
            if smooth_method == "exp":
                smooth_mteval *= 2
                precisions[n - 1] = 100.0 / (smooth_mteval * total[n - 1])
            elif smooth_method == "floor":
                precisions[n - 1] = 100.0 * smooth_value / total[n - 1]
        else:
            precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
    score = bp * math.exp(sum(_my_log(p) for p in precisions[:eff_order]) / eff_order)
    return BLEUScore(score, correct, total, precisions, bp, sys_len, ref_len)


def bleu_score(
    hypotheses,
    references,
    tokenize: str = "13a",
    smooth_method: str = "exp",
    smooth_value: Optional[float] = None,
    lowercase: bool = False,
    use_effective_order: bool = False,
    max_ngram_order: int = MAX_NGRAM_ORDER,
) -> BLEUScore:
    """Corpus BLEU with the details (see runlens.eval.metrics.corpus_bleu)."""
    if int(max_ngram_order) < 1:
        raise ValueError("BLEU: max_ngram_order must be at least 1")
    order = int(max_ngram_order)
    if isinstance(hypotheses, str):
        hypotheses = [hypotheses]
    if isinstance(references, str):
        references = [[references]]
    hypotheses = list(hypotheses)
    if any(isinstance(stream, str) for stream in references):
        raise TypeError(
            "corpus_bleu: references is a list of reference streams (each a list of strings, one per "
            "segment); with one reference per segment pass [references]"
        )
    streams = [list(stream) for stream in references]
    if not streams:
        raise ValueError("corpus_bleu: references must hold at least one reference stream")
    for stream in streams:
        if len(stream) != len(hypotheses):
            raise ValueError(
                f"corpus_bleu: a reference stream has {len(stream)} lines for {len(hypotheses)} hypotheses"
            )
    correct = [0] * order
    total = [0] * order
    sys_len = ref_len = 0
    for i, hyp in enumerate(hypotheses):
        hyp_tokens = _tokens(hyp, tokenize, lowercase)
        refs = [_tokens(stream[i], tokenize, lowercase) for stream in streams if stream[i] is not None]
        c, t, h, r = _sentence_stats(hyp_tokens, refs, order)
        for n in range(order):
            correct[n] += c[n]
            total[n] += t[n]
        sys_len += h
        ref_len += r
    return compute_bleu(correct, total, sys_len, ref_len, smooth_method, smooth_value, use_effective_order, order)


def _tokens(line, tok, lowercase):
    if not isinstance(line, str):
        raise TypeError(f"BLEU: expected a string, got {type(line).__name__}")
    return tokenize(line, tok, lowercase)
