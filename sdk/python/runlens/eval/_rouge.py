"""ROUGE-N, ROUGE-L and ROUGE-Lsum as Google's rouge-score computes them
(rouge_score.rouge_scorer.RougeScorer, which replicates ROUGE-1.5.5 with
`-e data -n 2`, and `-m` for the stemmer). An independent implementation; the
published values of its rouge/rouge_scorer_test.py are checked in
tests/python/test_eval_metrics.py.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Dict, List, Sequence

from . import _porter

__all__ = ["rouge_tokenize", "rouge_scores", "lcs_length"]

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_VALID = re.compile(r"^[a-z0-9]+$")
_TYPE = re.compile(r"^rouge([0-9])$")


def rouge_tokenize(text: str, use_stemmer: bool = False) -> List[str]:
    """rouge-score's tokenizer: lowercase, every run of characters other than
    a-z and 0-9 becomes a space, split on whitespace, Porter-stem tokens longer
    than 3 characters when `use_stemmer`, drop empty tokens."""
    text = _NON_ALNUM.sub(" ", text.lower())
    tokens = re.split(r"\s+", text)
    if use_stemmer:
        tokens = [_porter.stem(t) if len(t) > 3 else t for t in tokens]
    return [t for t in tokens if _VALID.match(t)]


def _fmeasure(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _score(precision: float, recall: float) -> Dict[str, float]:
    return {"precision": precision, "recall": recall, "fmeasure": _fmeasure(precision, recall)}


def _ngram_counts(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def _score_ngrams(target: Sequence[str], prediction: Sequence[str], n: int) -> Dict[str, float]:
    t, p = _ngram_counts(target, n), _ngram_counts(prediction, n)
    overlap = sum(min(count, p[gram]) for gram, count in t.items())
    return _score(overlap / max(sum(p.values()), 1), overlap / max(sum(t.values()), 1))


def _lcs_table(a: Sequence[str], b: Sequence[str]) -> List[List[int]]:
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        row, above = table[i], table[i - 1]
        ai = a[i - 1]
        for j in range(1, len(b) + 1):
            row[j] = above[j - 1] + 1 if ai == b[j - 1] else max(above[j], row[j - 1])
    return table


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists."""
    return _lcs_table(a, b)[len(a)][len(b)]


def _lcs_indices(ref: Sequence[str], can: Sequence[str]) -> List[int]:
    """Indices into `ref` of one LCS, read back the way rouge-score reads it
    (prefer moving left in `can` when that keeps the longer prefix)."""
    table = _lcs_table(ref, can)
    i, j = len(ref), len(can)
    out = []
    while i > 0 and j > 0:
        if ref[i - 1] == can[j - 1]:
            out.append(i - 1)
            i -= 1
            j -= 1
        elif table[i][j - 1] > table[i - 1][j]:
            j -= 1
        else:
            i -= 1
    out.reverse()
    return out


def _score_lcs(target: Sequence[str], prediction: Sequence[str]) -> Dict[str, float]:
    if not target or not prediction:
        return _score(0.0, 0.0)
    length = lcs_length(target, prediction)
    return _score(length / len(prediction), length / len(target))


def _summary_level_lcs(ref_sents: List[List[str]], can_sents: List[List[str]]) -> Dict[str, float]:
    """ROUGE-Lsum: union LCS of each reference sentence against all candidate
    sentences, each token counted at most as often as it occurs on both sides
    (ROUGE-1.5.5's rule against double counting)."""
    m = sum(len(s) for s in ref_sents)
    n = sum(len(s) for s in can_sents)
    if not ref_sents or not can_sents or not m or not n:
        return _score(0.0, 0.0)
    left_r = Counter(t for s in ref_sents for t in s)
    left_c = Counter(t for s in can_sents for t in s)
    hits = 0
    for ref in ref_sents:
        union = sorted(set().union(*(_lcs_indices(ref, can) for can in can_sents)))
        for token in (ref[i] for i in union):
            if left_c[token] > 0 and left_r[token] > 0:
                hits += 1
                left_c[token] -= 1
                left_r[token] -= 1
    return _score(hits / n, hits / m)


def rouge_scores(target: str, prediction: str, types: Sequence[str], use_stemmer: bool) -> Dict[str, Dict[str, float]]:
    if isinstance(types, str):
        types = (types,)
    for rouge_type in types:
        if rouge_type not in ("rougeL", "rougeLsum"):
            match = _TYPE.match(rouge_type)
            if not match or int(match.group(1)) == 0:
                raise ValueError(f"invalid rouge type {rouge_type!r}: rouge1..rouge9, rougeL or rougeLsum")
    target_tokens = prediction_tokens = None
    result = {}
    for rouge_type in types:
        if rouge_type == "rougeLsum":
            # Sentences are the non-empty lines.
            ref_sents = [rouge_tokenize(s, use_stemmer) for s in target.split("\n") if s]
            can_sents = [rouge_tokenize(s, use_stemmer) for s in prediction.split("\n") if s]
            result[rouge_type] = _summary_level_lcs(ref_sents, can_sents)
            continue
        if target_tokens is None:
            target_tokens = rouge_tokenize(target, use_stemmer)
            prediction_tokens = rouge_tokenize(prediction, use_stemmer)
        if rouge_type == "rougeL":
            result[rouge_type] = _score_lcs(target_tokens, prediction_tokens)
        else:
            result[rouge_type] = _score_ngrams(target_tokens, prediction_tokens, int(rouge_type[5:]))
    return result
