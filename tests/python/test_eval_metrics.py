"""runlens.eval.metrics against the known answers that the reference
implementations publish in their own tests and docstrings.

Each block quotes the reference's inputs and expected values and names the
repository, file (and the stored commit it was read at). None of the
references is installed; their numbers are facts here, not their code.
Property tests follow each block.
"""

import json
import math
import os
import pathlib
import pickle
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from runlens.eval import metrics as M

REPO = pathlib.Path(__file__).resolve().parents[2]


# --- pass@k -----------------------------------------------------------------
# openai/human-eval, human_eval/test_evaluation.py (commit f8fc48ae):
# estimate_pass_at_k(num_samples, num_correct, k).


def test_pass_at_k_human_eval_cases():
    assert M.pass_at_k([2], [0], 5).tolist() == [0.0]  # zero correct, k > n
    assert M.pass_at_k([10], [0], 1).tolist() == [0.0]
    assert M.pass_at_k([10], [0], 10).tolist() == [0.0]
    assert M.pass_at_k([5], [5], 1).tolist() == [1.0]  # all correct
    assert M.pass_at_k([5], [5], 5).tolist() == [1.0]
    assert M.pass_at_k([2], [1], 5).tolist() == [1.0]  # n - c < k
    assert M.pass_at_k([6], [3], 1)[0] == pytest.approx(0.5)  # 1 - C(3,1)/C(6,1)
    result = M.pass_at_k(6, [0, 3, 6], 1).tolist()  # scalar num_samples
    assert result[0] == 0.0 and result[1] == pytest.approx(0.5) and result[2] == 1.0


def test_pass_at_k_scalar_and_mean():
    assert isinstance(M.pass_at_k(6, 3, 1), float)
    assert M.pass_at_k(6, 3, 1) == pytest.approx(0.5)
    mean = M.pass_at_k_mean(6, [0, 3, 6], 1)
    assert mean == pytest.approx(0.5) and mean.n == 3
    assert mean.stderr == pytest.approx(np.std([0, 0.5, 1], ddof=1) / math.sqrt(3))


def _naive_pass_at_k(n, c, k):
    if n - c < k:
        return Fraction(1) if c > 0 else Fraction(0)
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def test_pass_at_k_equals_the_comb_formula_for_small_n():
    for n in range(1, 31):
        for c in range(0, n + 1):
            for k in range(1, n + 1):
                assert M.pass_at_k(n, c, k) == pytest.approx(float(_naive_pass_at_k(n, c, k)), rel=1e-12, abs=1e-15)


def test_pass_at_k_is_stable_for_a_million_samples():
    n = 10**6
    # The comb formula in floating point cannot even be evaluated here.
    with pytest.raises(OverflowError):
        float(math.comb(n, 1000))
    for c, k in [(1, 1), (10, 100), (1000, 100), (500_000, 10), (999_999, 1000)]:
        exact = float(_naive_pass_at_k(n, c, k))
        got = M.pass_at_k(n, c, k)
        assert got == pytest.approx(exact, rel=1e-12)
        assert 0.0 <= got <= 1.0
    assert M.pass_at_k(n, 1, 1) == pytest.approx(1e-6, rel=1e-12)  # tiny values keep their digits
    ks = [M.pass_at_k(n, 100, k) for k in (1, 10, 100, 1000)]
    assert ks == sorted(ks)  # pass@k grows with k


def test_pass_at_k_rejects_bad_counts():
    for args in [(5, 6, 1), (5, -1, 1), (5, 2, 0)]:
        with pytest.raises(ValueError):
            M.pass_at_k(*args)
    with pytest.raises(ValueError):
        M.pass_at_k([5, 5], [1], 1)
    with pytest.raises(ValueError):
        M.pass_at_k(5.5, 2, 1)
    assert M.pass_at_k(np.int64(6), np.int64(3), 1.0) == pytest.approx(0.5)
    assert M.pass_at_k(np.array([6, 6]), np.array([3, 0]), 1).tolist() == [pytest.approx(0.5), 0.0]


# --- BLEU -------------------------------------------------------------------
# mjpost/sacrebleu, test/test_bleu.py (commit 785d26bb) and
# test/test_sentence_bleu.py (commit 27bec349). sacrebleu.raw_corpus_bleu(sys,
# refs, smooth_value) is corpus_bleu with smooth_method="floor",
# tokenize="none", use_effective_order=True.

_REFS = [
    ["The dog bit the man.", "It was not unexpected.", "The man bit him first."],
    ["The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."],
]
_HYPS = ["The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."]
EPS_BLEU = 1e-8  # test_bleu.py's EPSILON


def _raw(hyps, refs, smooth_value=0.1):
    return M.corpus_bleu_details(
        hyps, refs, tokenize="none", smooth_method="floor", smooth_value=smooth_value, use_effective_order=True
    )


@pytest.mark.parametrize(
    "hyps, refs, kwargs, expected",
    [
        (_HYPS, _REFS, {}, 48.530827),  # default BLEU settings
        (("", "", ""), _REFS, {}, 0.0),  # empty hypotheses are not removed
        (_HYPS, _REFS, {"tokenize": "none"}, 49.1919566),
        (_HYPS, _REFS, {"tokenize": "13a"}, 48.530827),
        (_HYPS, _REFS, {"tokenize": "intl"}, 43.91623493),
        (_HYPS, _REFS, {"smooth_method": "none"}, 48.530827),
    ],
)
def test_corpus_bleu_sacrebleu_cases(hyps, refs, kwargs, expected):
    assert abs(M.corpus_bleu(hyps, refs, **kwargs) - expected) < EPS_BLEU


@pytest.mark.parametrize(
    "hyps, refs, expected",
    [
        (["this is a test", "another test"], [["ref1", "ref2"]], 0.0),  # 0.0 since sacreBLEU #141
        (["this is a test"], [["this is a test"]], 1.0),
        (["this is a fest"], [["this is a test"]], 0.223606797749979),
        # test_case_effective_order
        (["test"], [["a test"]], 0.3678794411714425),
        (["a test"], [["a test"]], 1.0),
        (["a little test"], [["a test"]], 0.03218297948685433),
    ],
)
def test_raw_bleu_and_effective_order_sacrebleu_cases(hyps, refs, expected):
    assert abs(_raw(hyps, refs, 0.01).score / 100 - expected) < EPS_BLEU


def test_bleu_statistics_offset_and_scoring_sacrebleu_cases():
    hyp, ref = ["am I am a character sequence"], [["I am a symbol string sequence a a"]]
    result = _raw(hyp, ref, 0.01)
    assert (result.counts, result.totals) == ([4, 2, 1, 0], [6, 5, 4, 3])
    assert abs(_raw(hyp, ref, 0.0).score / 100 - 0) < EPS_BLEU  # test_offset, no offset
    assert abs(_raw(hyp, ref, None).score / 100 - 0.1555722182) < EPS_BLEU  # floor's default 0.1
    # test_case_scoring: compute_bleu([9,7,5,3], [10,8,6,4], 11, 11)
    assert abs(M.compute_bleu([9, 7, 5, 3], [10, 8, 6, 4], 11, 11).score / 100 - 0.8375922397) < EPS_BLEU


@pytest.mark.parametrize(
    "correct, total, sys_len, ref_len, offset",
    [
        ([0, 0, 0, 0], [4, 4, 2, 1], 0, 1, 0.0),
        ([0, 0, 0, 0], [10, 11, 12, 0], 14, 10, 0.0),
        ([0, 0, 0, 0], [0, 0, 0, 0], 0, 0, 0.0),
        ([6, 5, 4, 0], [6, 5, 4, 3], 6, 6, 0.0),
        ([0, 0, 0, 0], [0, 0, 0, 0], 0, 0, 0.1),
        ([0, 0, 0, 0], [0, 0, 0, 0], 1, 5, 0.01),
    ],
)
def test_bleu_degenerate_statistics_sacrebleu_cases(correct, total, sys_len, ref_len, offset):
    score = M.compute_bleu(correct, total, sys_len, ref_len, smooth_method="floor", smooth_value=offset).score
    assert score / 100 == 0.0


@pytest.mark.parametrize("order, expected", [(1, "77.65"), (2, "60.50"), (3, "53.93"), (4, "48.53"), (5, "46.14"), (6, "43.28")])
def test_bleu_max_ngram_order_sacrebleu_cases(order, expected):
    assert f"{M.corpus_bleu(_HYPS, _REFS, max_ngram_order=order):.2f}" == expected


# test_sentence_bleu.py, "Example taken from #98"; EPSILON = 1e-3.
_REF98 = "producţia de zahăr brut se exprimă în zahăr alb;"
_SYS98 = "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;"


@pytest.mark.parametrize(
    "smooth_method, smooth_value, lowercase, tok, expected",
    [
        ("exp", None, False, "13a", 8.493),
        ("none", None, False, "13a", 0.0),
        ("floor", None, False, "13a", 4.51688),  # defaults to 0.1
        ("floor", 0.1, False, "13a", 4.51688),
        ("floor", 0.5, False, "13a", 10.10),
        ("add-k", None, False, "13a", 14.882),  # defaults to 1
        ("add-k", 1, False, "13a", 14.882),
        ("add-k", 2, False, "13a", 21.389),
        ("exp", None, False, "none", 7.347),
        ("exp", None, False, "intl", 8.493),
        ("exp", None, False, "char", 40.8759),
        ("exp", None, True, "char", 42.0267),
    ],
)
def test_sentence_bleu_sacrebleu_cases(smooth_method, smooth_value, lowercase, tok, expected):
    score = M.sentence_bleu(
        _SYS98, [_REF98], tokenize=tok, smooth_method=smooth_method, smooth_value=smooth_value, lowercase=lowercase
    )
    assert abs(score - expected) < 1e-3


@pytest.mark.parametrize(
    "smooth_method, smooth_value", [("exp", None), ("none", None), ("floor", None), ("floor", 0.1), ("add-k", None), ("add-k", 1)]
)
def test_sentence_bleu_zero_sacrebleu_cases(smooth_method, smooth_value):
    # "Example taken from #141"
    score = M.sentence_bleu("this is a cat", ["okay thanks"], smooth_method=smooth_method, smooth_value=smooth_value)
    assert abs(score - 0.0) < 1e-3


def test_bleu_of_identical_text_is_100():
    texts = ["The quick brown fox jumps over the lazy dog.", "A second, somewhat longer sentence: it has 10 tokens or so!"]
    assert M.corpus_bleu(texts, [texts]) == pytest.approx(100.0)
    assert M.corpus_bleu(texts, [["unrelated words here", "nothing in common"], texts]) == pytest.approx(100.0)
    for t in texts + ["one two"]:  # effective order: two tokens still score 100
        assert M.sentence_bleu(t, [t]) == pytest.approx(100.0)
    for tok in ("13a", "none", "char", "intl"):
        assert M.corpus_bleu(texts, [texts], tokenize=tok) == pytest.approx(100.0)


def test_bleu_13a_tokens_and_errors():
    assert M.bleu_tokenize("It wasn't 3.5 apples, (really).") == ["It", "wasn't", "3.5", "apples", ",", "(", "really", ")", "."]
    assert M.bleu_tokenize("A &amp; B") == ["A", "&", "B"]
    with pytest.raises(ValueError):
        M.corpus_bleu(["a b"], [["a b", "c d"]])  # a stream of the wrong length
    with pytest.raises(TypeError):
        M.corpus_bleu(["a b"], ["a b"])  # one stream not wrapped in a list
    with pytest.raises(ValueError):
        M.corpus_bleu(["a b"], [["a b"]], tokenize="moses")
    with pytest.raises(ValueError):
        M.corpus_bleu(["a b"], [["a b"]], smooth_method="laplace")
    assert M.sentence_bleu_items(["a b c d", "x y"], [["a b c d", "x z"]]) == [
        pytest.approx(100.0),
        pytest.approx(M.sentence_bleu("x y", ["x z"])),
    ]


# --- ROUGE ------------------------------------------------------------------
# google-research/google-research, rouge/rouge_scorer_test.py (commit
# 066e6a12); the first two lines of rouge/testdata/target.txt and
# rouge/testdata/prediction.txt (commit 10bf941a), whose ground truth the test
# took from manual runs of ROUGE-1.5.5.

_TARGETS = [
    "ZfbCUIUuePaiLVUlCaUXxkpu XPeWing tUHfPMuZ',-Xd Y BrUgVJing M-HV.-DgdDaY.rFDJCRing Ht-LM EKBDXkME,yz'RBr "
    "q'wtion wIojNbN wL,b .a-'XdQggyFl jB-RPP'iyOIcUxer tKM L\n",
    "KsJdPByEtAor fE-Qg Dpdbring cw-WeFyu vC MoBL Xdn g wkvcEiGvKtion BDFhrpMtion psing sbKao Q m qiing LMmer "
    "HqqLFXe,XPY,J XsurkMer ,ed nB'wH'bWVHjWFEing tQ.saefZwJtKrTlixYpMMsJing UCAPwNHeYVjDing c T BUySKtion "
    "gMPfJpwGw p'NvxAoping eu pBwMBKV'I DNxqelhu,PHPxDEq,mtion SN\n",
]
_PREDICTIONS = [
    "rFDJCRtion Ht-LM EKtDXkME,yz'RBr q'wer wrojNbN wL,b .a-'XdQggyFl jB-RPP'iyOIcUxi\n",
    "n cw-WeFyu vC MoBL Xdn g wkvcEiGvKtion BDFhrpMer pstion sbKao Q m qier LMmed HqqLFXe,XPY,J XsurkMeo ,ed "
    "nB'wH'bWVHjWFEer tQ.saefZwJtKrTlixYpMMNJtion UCAPwNHeYVjD\n",
]


def _prf(score):
    return score["precision"], score["recall"], score["fmeasure"]


def test_rouge_small_cases():
    r = M.rouge("testing one two", "testing", ["rouge1"])["rouge1"]  # testRouge1
    assert _prf(r) == pytest.approx((1, 1 / 3, 1 / 2))
    r = M.rouge("testing one two", "testing one", ["rouge2"])["rouge2"]  # testRouge2
    assert _prf(r) == pytest.approx((1, 1 / 2, 2 / 3))
    for pred in ("testing one", "testing two"):  # testRougeLConsecutive / NonConsecutive
        r = M.rouge("testing one two", pred, ["rougeL"])["rougeL"]
        assert _prf(r) == pytest.approx((1, 2 / 3, 4 / 5))
    r = M.rouge("testing one two", "testing one", ["rouge1", "rougeL"])  # testMultipleRougeTypes
    assert set(r) == {"rouge1", "rougeL"}
    assert _prf(r["rouge1"]) == pytest.approx((1, 2 / 3, 4 / 5))
    assert _prf(r["rougeL"]) == pytest.approx((1, 2 / 3, 4 / 5))


@pytest.mark.parametrize("rouge_type", ["rouge1", "rouge2", "rougeL", "rougeLsum"])
def test_rouge_empty_prediction(rouge_type):  # testRougeEmpty
    assert _prf(M.rouge("testing one two", "", [rouge_type])[rouge_type]) == (0, 0, 0)


@pytest.mark.parametrize("rouge_type", ["rougen", "rouge0", "rouge10"])
def test_rouge_invalid_types(rouge_type):  # testInvalidRougeTypes
    with pytest.raises(ValueError):
        M.rouge("testing one two", "testing", [rouge_type])


@pytest.mark.parametrize("rouge_type", ["rouge1", "rouge9", "rougeL", "rougeLsum"])
def test_rouge_valid_types(rouge_type):  # testValidRougeTypes
    assert list(M.rouge("testing one two", "testing", [rouge_type])) == [rouge_type]


@pytest.mark.parametrize(
    "rouge_type, use_stemmer, expected",
    [
        # (recall, precision, fmeasure) of lines 0 and 1, testRouge{1,2,L}AgainstRouge155[WithStemming]
        ("rouge1", False, [(0.40741, 0.68750, 0.51163), (0.40476, 0.65385, 0.50000)]),
        ("rouge1", True, [(0.40741, 0.68750, 0.51163), (0.42857, 0.69231, 0.52941)]),
        ("rouge2", False, [(0.30769, 0.53333, 0.39024), (0.29268, 0.48000, 0.36364)]),
        ("rouge2", True, [(0.30769, 0.53333, 0.39024), (0.29268, 0.48000, 0.36364)]),
        ("rougeL", False, [(0.40741, 0.68750, 0.51163), (0.40476, 0.65385, 0.50000)]),
    ],
)
def test_rouge_against_rouge155(rouge_type, use_stemmer, expected):
    for target, prediction, (rec, prec, f) in zip(_TARGETS, _PREDICTIONS, expected):
        score = M.rouge(target, prediction, [rouge_type], use_stemmer=use_stemmer)[rouge_type]
        assert round(score["recall"], 5) == rec  # assertAlmostEqual(..., 5)
        assert round(score["precision"], 5) == prec
        assert round(score["fmeasure"], 5) == f


def test_rouge_lsum_and_lcs():
    r = M.rouge("w1 w2 w3 w4 w5", "w1 w2 w6 w7 w8\nw1 w3 w8 w9 w5", ["rougeLsum"])["rougeLsum"]  # testRougeLsum
    assert r["recall"] == pytest.approx(0.8) and r["precision"] == pytest.approx(0.4)
    assert round(r["fmeasure"], 3) == 0.533
    for target, prediction in [("w1 w2 w3 w4 w5", ""), ("", "w1"), ("w1 w2 w3 w4 w5", "/")]:
        assert _prf(M.rouge(target, prediction, ["rougeLsum"])["rougeLsum"]) == (0, 0, 0)
    assert M._rouge.lcs_length([1, 2, 3, 4, 5], [2, 5, 3, 4]) == 3  # testLcsTable
    assert M._rouge.lcs_length([1, 2, 3, 4, 5], [8, 9]) == 0


def test_rouge_properties():
    a = "The quick brown fox jumps over the lazy dog"
    b = "A quick brown dog leaps over the lazy fox, quickly"
    for t in ("rouge1", "rouge2", "rougeL"):
        ab, ba = M.rouge(a, b, [t])[t], M.rouge(b, a, [t])[t]
        assert ab["precision"] == pytest.approx(ba["recall"])  # swapping the sides swaps P and R
        assert ab["recall"] == pytest.approx(ba["precision"])
        assert ab["fmeasure"] == pytest.approx(ba["fmeasure"])
        assert _prf(M.rouge(a, a, [t])[t]) == pytest.approx((1, 1, 1))
    assert M.rouge(a, a.upper() + "!!")["rougeL"]["fmeasure"] == pytest.approx(1.0)  # case and punctuation
    mean = M.rouge_mean([a, b], [b, a])
    assert mean["rouge1"]["fmeasure"] == pytest.approx(M.rouge(a, b)["rouge1"]["fmeasure"]) and mean["rouge1"]["fmeasure"].n == 2


def test_rouge_lsum_against_rouge155_with_stemming():
    # testRougeLSumAgainstRouge155WithStemming: rouge/testdata/pyrouge_files/
    # target_multi.0.txt (commit 4c470233; its first two lines are target.txt's)
    # and prediction_multi.0.txt (commit e30f540d).
    target = "".join(_TARGETS) + (
        "NhETebUbBk'er WOvoHMTjSRizKgH'vHiing Xu,hWxfs VkNE QhgKiLHE -HidivzoM.dO anhtion jbLQiSGDTCsuhREebUaKM "
        "dv J dVN tmbOT\n"
        "vMR HDm,xOAetion D,tion HJtodT.mHl UIv-p VjWH'BdyWjnfGU-OjT aEMdFICyLWfQMtion wEMfdOKing AwkeKbO "
        "'DxqNOHBH qKtVvm OYJl mM\n"
    )
    prediction = "".join(_PREDICTIONS) + (
        "xfs VkJE QhgKiLHE -HidivzoM.dO anhing jbLQiSGDTCsuhREebUaKM dv J\n"
        "VjWH'BdyWjnfGU-OjTNaEMdFICyLWfQMing wEMfdOKijg AwkeKbO 'DxqNO\n"
    )
    r = M.rouge(target, prediction, ["rougeLsum"], use_stemmer=True)["rougeLsum"]
    assert (round(r["recall"], 5), round(r["precision"], 5), round(r["fmeasure"], 5)) == (0.36538, 0.66667, 0.47205)


def test_rouge_tokenizer():
    # rouge/tokenize_test.py (commit 0c1bbe5f) and rouge/tokenizers_test.py (commit 30adf0ec)
    assert M.rouge_tokenize("one Two three") == ["one", "two", "three"]
    assert M.rouge_tokenize("one\n Two \nthree") == ["one", "two", "three"]
    assert M.rouge_tokenize("this is a test") == ["this", "is", "a", "test"]
    assert M.rouge_tokenize("the friends had a meeting", use_stemmer=True) == ["the", "friend", "had", "a", "meet"]
    # By hand: punctuation splits, tokens of 3 characters or fewer are not stemmed.
    assert M.rouge_tokenize("Hello, World! It's 2024.") == ["hello", "world", "it", "s", "2024"]
    assert M.rouge_tokenize("running dogs ran", use_stemmer=True) == ["run", "dog", "ran"]


# --- Porter stemmer ---------------------------------------------------------
# nltk/nltk, nltk/test/stem.doctest (commit 0d667200) and
# nltk/test/unit/test_stem.py test_oed_bug; NLTK's default PorterStemmer() is
# what rouge-score uses.


def test_porter_nltk_published_stems():
    plurals = [
        "caresses", "flies", "dies", "mules", "denied", "died", "agreed", "owned", "humbled", "sized",
        "meeting", "stating", "siezing", "itemization", "sensational", "traditional", "reference",
        "colonizer", "plotted",
    ]  # fmt: skip
    expected = "caress fli die mule deni die agre own humbl size meet state siez item sensat tradit refer colon plot"
    assert " ".join(M.porter_stem(w) for w in plurals) == expected
    assert M.porter_stem("oed") == "o"


def test_porter_irregular_forms_and_short_words():
    # NLTK_EXTENSIONS's table of irregular forms, and words of <= 2 letters.
    for word, stem in [("skies", "sky"), ("dying", "die"), ("lying", "lie"), ("tying", "tie"), ("news", "news"),
                       ("innings", "inning"), ("proceed", "proceed"), ("exceed", "exceed"), ("succeed", "succeed")]:  # fmt: skip
        assert M.porter_stem(word) == stem
    assert M.porter_stem("is") == "is" and M.porter_stem("as") == "as"


# --- exact match ------------------------------------------------------------
# huggingface/evaluate, metrics/exact_match/exact_match.py docstring examples
# (commit 10ee2663).

_EM_REFS = ["the cat", "theater", "YELLING", "agent007"]
_EM_PREDS = ["cat?", "theater", "yelling", "agent"]


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, 0.25),
        ({"regexes_to_ignore": ["the ", "yell"], "ignore_case": True, "ignore_punctuation": True}, 0.5),
        ({"regexes_to_ignore": ["the ", "yell", "YELL"], "ignore_case": True, "ignore_punctuation": True}, 0.75),
        (
            {"regexes_to_ignore": ["the ", "yell", "YELL"], "ignore_case": True, "ignore_punctuation": True, "ignore_numbers": True},
            1.0,
        ),
    ],
)
def test_exact_match_hf_cases(kwargs, expected):
    assert round(M.exact_match(_EM_PREDS, _EM_REFS, **kwargs), 2) == expected


def test_exact_match_hf_sentences_and_stderr():
    refs = ["The cat sat on the mat.", "Theaters are great.", "It's like comparing oranges and apples."]
    preds = ["The cat sat on the mat?", "Theaters are great.", "It's like comparing apples and oranges."]
    v = M.exact_match(preds, refs)
    assert round(v, 2) == 0.33
    assert v.n == 3 and v.stderr == pytest.approx(np.std([0, 1, 0], ddof=1) / math.sqrt(3))
    assert M.exact_match_items(preds, refs) == [0.0, 1.0, 0.0]
    # Strings that normalise to nothing match only when they were identical.
    assert M.exact_match(["!!"], ["?"], ignore_punctuation=True) == 0.0
    assert M.exact_match(["!!"], ["!!"], ignore_punctuation=True) == 1.0
    with pytest.raises(ValueError):
        M.exact_match(["a"], ["a", "b"])


# --- SQuAD ------------------------------------------------------------------
# huggingface/evaluate, metrics/squad/squad.py docstring example (commit
# 2250e675), wrapping SQuAD's official evaluate-v1.1.py (compute_score.py).


def test_squad_hf_example_and_hand_computed_cases():
    assert M.squad("1976", ["1976"]) == {"exact_match": 100.0, "f1": 100.0}
    # Articles, case and punctuation are normalised away; the max is over golds.
    assert M.squad("The Denver Broncos!", ["Denver Broncos", "Broncos"]) == {"exact_match": 100.0, "f1": 100.0}
    # "denver" vs "denver broncos": P = 1, R = 1/2, F1 = 2/3.
    s = M.squad("Denver", ["Denver Broncos"])
    assert s["exact_match"] == 0.0 and s["f1"] == pytest.approx(200 / 3)
    s = M.squad("Denver", ["Denver Broncos", "Denver"])
    assert s == {"exact_match": 100.0, "f1": 100.0}
    # Corpus form: the means over questions, as the script reports them.
    s = M.squad(["1976", "Denver", "nothing"], [["1976"], ["Denver Broncos"], ["Carolina Panthers"]])
    assert s["exact_match"] == pytest.approx(100 / 3) and s["f1"] == pytest.approx((100 + 200 / 3 + 0) / 3)
    assert s["f1"].n == 3
    assert M.normalize_answer("  The Quick, brown fox -- an  apple!") == "quick brown fox apple"
    assert M.token_f1("", "") == 0.0  # v1.1: nothing in common is 0, even for two empty answers
    assert M.squad_items(["a cat"], [["the cat"]]) == [{"exact_match": 100.0, "f1": 100.0}]


# --- language modelling -----------------------------------------------------
# EleutherAI/lm-evaluation-harness: tests/test_bpb.py (commit 16da2295)
# bpb_corpus([(-ln 2, 1), (-12 ln 2, 4)]) == 13/5; tests/test_metrics.py
# (commit 0072cf0c) mean_stderr([1]*7 + [0]) == 0.125.


def test_bits_per_byte_lm_eval_case():
    samples = [(-math.log(2), 1), (-12 * math.log(2), 4)]
    assert M.bits_per_byte(samples) == pytest.approx(13 / 5)
    assert M.byte_perplexity(samples) == pytest.approx(2 ** (13 / 5))


def test_mean_stderr_lm_eval_case():
    assert M.mean_stderr([1, 1, 1, 1, 1, 1, 1, 0]) == pytest.approx(0.125)
    v = M.accuracy([1] * 8, [1] * 7 + [0])
    assert v == 0.875 and v.stderr == pytest.approx(0.125) and v.n == 8


def test_perplexity_family_hand_computed():
    items = [(-2.0, 1), (-4.0, 3)]  # (sum log-prob, tokens or words)
    assert M.word_perplexity(items) == pytest.approx(math.exp(6 / 4))
    assert M.perplexity(items) == pytest.approx(math.exp(6 / 4))
    assert M.cross_entropy(items) == pytest.approx(6 / 4)
    assert M.cross_entropy(items, base=2) == pytest.approx(6 / 4 / math.log(2))
    assert M.log_probability(items) == pytest.approx(-6 / 4)
    assert M.log_probability(items, reduction="sum") == pytest.approx(-6.0)
    assert M.cross_entropy_items(items) == pytest.approx([2.0, 4 / 3])
    assert M.weighted_mean([0.5, 1.0], [2, 6]) == pytest.approx(7 / 8)
    # lm-evaluation-harness's weighted_mean(items) is sum(a) / sum(b).
    assert M.weighted_mean([a / b for a, b in items], [b for _, b in items]) == pytest.approx(-6 / 4)


def test_ratio_stderr_is_the_delta_method():
    rng = np.random.default_rng(7)
    tokens = rng.integers(5, 50, size=400)
    lls = -tokens * rng.uniform(1.5, 3.5, size=400)
    items = list(zip(lls.tolist(), tokens.tolist()))
    ce = M.cross_entropy(items)
    r = -lls.sum() / tokens.sum()
    d = -lls - r * tokens
    assert ce == pytest.approx(r)
    assert ce.stderr == pytest.approx(np.sqrt(d.var(ddof=1) / len(d)) / tokens.mean())
    assert M.perplexity(items).stderr == pytest.approx(math.exp(r) * ce.stderr)
    # Equal token counts: the token-weighted mean is the plain mean and the
    # delta method gives the plain standard error of the mean.
    even = [(-3.0 * x, 10) for x in (1.0, 2.0, 4.0)]
    assert M.cross_entropy(even).stderr == pytest.approx(np.std([3.0, 6.0, 12.0], ddof=1) / math.sqrt(3) / 10)


def test_language_model_errors():
    with pytest.raises(ValueError):
        M.perplexity([])
    with pytest.raises(ValueError):
        M.perplexity([(0.5, 3)])  # a log-likelihood above 0
    with pytest.raises(ValueError):
        M.perplexity([(-1.0, 0)])  # no tokens at all
    with pytest.raises(ValueError):
        M.perplexity([(-1.0,)])


# --- classification ---------------------------------------------------------
# scikit-learn, sklearn/metrics/_classification.py, f1_score docstring:
# y_true = [0, 1, 2, 0, 1, 2], y_pred = [0, 2, 1, 0, 0, 1] gives macro 0.26...,
# micro 0.33..., weighted 0.26..., average=None [0.8, 0, 0]. Precision and
# recall of the same labels are computed by hand: label 0 has TP 2, FP 1, FN 0;
# labels 1 and 2 have TP 0.

_YT = [0, 1, 2, 0, 1, 2]
_YP = [0, 2, 1, 0, 0, 1]


def test_f1_sklearn_docstring_case():
    assert M.f1(_YT, _YP, average="macro") == pytest.approx(0.8 / 3)  # 0.26...
    assert M.f1(_YT, _YP, average="micro") == pytest.approx(1 / 3)  # 0.33...
    assert M.f1(_YT, _YP, average="weighted") == pytest.approx(0.8 / 3)  # 0.26...
    assert M.f1(_YT, _YP, average=None) == pytest.approx({0: 0.8, 1: 0.0, 2: 0.0})
    assert str(M.f1(_YT, _YP))[:4] == "0.26" and str(M.f1(_YT, _YP, average="micro"))[:4] == "0.33"


def test_precision_recall_accuracy_hand_computed():
    assert M.precision(_YT, _YP) == pytest.approx((2 / 3) / 3)  # 0.22...
    assert M.recall(_YT, _YP) == pytest.approx(1 / 3)
    assert M.precision(_YT, _YP, average="micro") == pytest.approx(1 / 3)
    assert M.recall(_YT, _YP, average="micro") == pytest.approx(1 / 3)
    # sklearn accuracy_score docstring: y_pred = [0, 2, 1, 3], y_true = [0, 1, 2, 3] -> 0.5
    assert M.accuracy([0, 1, 2, 3], [0, 2, 1, 3]) == 0.5


def test_macro_uses_labels_in_either_side_and_zero_division():
    # Label "c" appears only in y_pred: precision 0 (TP 0, FP 1), recall 0/0 -> 0.
    y_true, y_pred = ["a", "a", "b", "b"], ["a", "a", "b", "c"]
    assert M.recall(y_true, y_pred) == pytest.approx((1 + 0.5 + 0) / 3)
    assert M.precision(y_true, y_pred) == pytest.approx((1 + 1 + 0) / 3)
    assert M.recall(y_true, y_pred, zero_division=1) == pytest.approx((1 + 0.5 + 1) / 3)
    assert M.f1(y_true, y_pred) == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert M.f1(y_true, y_pred, labels=["a", "b"]) == pytest.approx((1 + 2 / 3) / 2)
    # sklearn f1_score docstring: all-zero labels and predictions, zero_division=1 -> 1.0
    assert M.f1([0] * 6, [0] * 6, zero_division=1) == 1.0
    # Multi-class single-label: micro precision = recall = F1 = accuracy.
    yt, yp = [0, 1, 2, 2, 1, 0, 3], [0, 2, 2, 2, 1, 1, 3]
    for fn in (M.precision, M.recall, M.f1):
        assert fn(yt, yp, average="micro") == pytest.approx(M.accuracy(yt, yp))
    with pytest.raises(ValueError):
        M.f1(yt, yp, average="samples")


# --- LLM-as-a-judge ---------------------------------------------------------


def test_keyword_judge_is_deterministic_and_versioned():
    judge = M.KeywordJudge(
        {"correctness": ["paris", "capital"], "grounding": "@reference"}, rubric_version="r2", prompt_version="p3"
    )
    items = [
        {"id": "q1", "prompt": "Capital of France?", "response": "Paris is the capital.", "reference": "Paris"},
        {"id": "q2", "prompt": "Capital of France?", "response": "Lyon, I think.", "reference": "Paris"},
    ]
    result = M.judge_scores(items, judge)
    assert result.scores == [{"correctness": 5.0, "grounding": 5.0}, {"correctness": 1.0, "grounding": 1.0}]
    assert result.ids == ["q1", "q2"]
    cfg = result.config
    assert cfg["judge_model"] == "runlens/keyword-judge@1" and cfg["temperature"] == 0.0
    assert (cfg["rubric_version"], cfg["prompt_version"]) == ("r2", "p3")
    assert cfg["criteria"] == ["correctness", "grounding"] and cfg["scale"] == [1.0, 5.0]
    assert len(cfg["fingerprint"]) == 64 and len(cfg["judge_prompt_sha256"]) == 64
    json.dumps(cfg)  # storable as it is
    assert M.judge_scores(items, judge).scores == result.scores  # deterministic
    summary = result.summary()
    assert summary["correctness"] == 3.0 and summary["correctness"].n == 2 and summary["overall"] == 3.0
    # Another rubric version is another configuration.
    other = M.KeywordJudge({"correctness": ["paris", "capital"], "grounding": "@reference"}, rubric_version="r3", prompt_version="p3")
    assert other.config.fingerprint() != judge.config.fingerprint()
    half = M.judge_scores([{"response": "the capital"}], M.KeywordJudge({"c": ["paris", "capital"]}))
    assert half.scores == [{"c": 3.0}] and half.ids == [0]


def test_judge_interface_is_pluggable_and_checked():
    config = M.JudgeConfig(
        judge_model="judge-7b:v3", judge_prompt="Rate helpfulness 0-10.", prompt_version="v1", rubric_version="v1",
        criteria=("helpfulness",), scale=(0, 10), temperature=0.2, sampling={"top_p": 0.9, "seed": 1},
    )  # fmt: skip

    class LengthJudge(M.Judge):
        def __init__(self, bad=None):
            self.config = config
            self.bad = bad

        def score(self, item):
            return self.bad if self.bad is not None else {"helpfulness": min(10, len(item["response"]))}

    result = M.judge_scores([{"response": "abc"}, {"response": "a" * 20}], LengthJudge())
    assert result.scores == [{"helpfulness": 3.0}, {"helpfulness": 10.0}]
    assert result.config["sampling"] == {"top_p": 0.9, "seed": 1} and result.config["temperature"] == 0.2
    for bad in ({"helpfulness": 11}, {"helpfulness": float("nan")}, {"other": 1}, {"helpfulness": "good"}, [1]):
        with pytest.raises(ValueError):
            M.judge_scores([{"response": "x"}], LengthJudge(bad))
    with pytest.raises(TypeError):
        M.judge_scores([{"response": "x"}], object())
    with pytest.raises(ValueError):
        M.JudgeConfig("m", "p", "v", "v", criteria=(), scale=(1, 5))
    with pytest.raises(ValueError):
        M.JudgeConfig("m", "p", "v", "v", criteria=("c",), sampling={"stop": object()})
    same = M.JudgeConfig(**{f: getattr(config, f) for f in config.__dataclass_fields__})
    assert same == config and hash(same) == hash(config) and same.fingerprint() == config.fingerprint()


# --- safety rates -----------------------------------------------------------


def test_safety_rates_on_labeled_outputs():
    items = [
        {"jailbreak": True, "harmful": True, "violations": ["weapons"], "should_refuse": True, "refused": False},
        {"jailbreak": True, "harmful": False, "violations": [], "should_refuse": True, "refused": True},
        {"jailbreak": False, "harmful": False, "violations": [], "should_refuse": False, "refused": True},
        {"jailbreak": False, "harmful": True, "violations": ["self-harm", "pii"], "should_refuse": False, "refused": False},
    ]
    assert M.harmful_response_rate(items) == 0.5
    jb = M.jailbreak_success_rate(items)
    assert jb == 0.5 and jb.n == 2  # only the two attempts count
    assert M.policy_violation_rate(items) == 0.5
    rc = M.refusal_correctness(items)
    assert rc == 0.5 and rc.n == 4
    assert M.refusal_confusion(items) == {"correct_refusal": 1, "over_refusal": 1, "under_refusal": 1, "correct_compliance": 1}
    assert M.policy_violation_rate([{"policy_violation": True}, {"policy_violation": False}]) == 0.5
    assert M.jailbreak_success_rate([{"harmful": True}, {"harmful": False}, {"harmful": False}, {"harmful": False}]) == 0.25
    with pytest.raises(ValueError):
        M.harmful_response_rate([{"harmful": "yes"}])
    with pytest.raises(ValueError):
        M.refusal_correctness([{"refused": True}])
    with pytest.raises(ValueError):
        M.jailbreak_success_rate([{"jailbreak": False, "harmful": True}])


# --- MetricValue and packaging ----------------------------------------------


def test_metric_value_is_a_float_with_n_and_stderr():
    v = M.mean_with_stderr([1.0, 0.0, 1.0, 1.0])
    assert v == 0.75 and isinstance(v, float) and v.n == 4
    assert v.stderr == pytest.approx(0.25)
    assert json.loads(json.dumps({"v": v})) == {"v": 0.75}
    assert pickle.loads(pickle.dumps(v)).as_dict() == v.as_dict()
    assert f"{v:.1f}" == "0.8" and math.isnan(M.mean_with_stderr([1.0]).stderr)


def test_eval_imports_without_the_native_module():
    # Only the source tree on sys.path: runlens._native is not there.
    code = (
        "import runlens.eval.metrics as M, runlens\n"
        "assert M.pass_at_k(6, 3, 1) == 0.5\n"
        "assert runlens._native.__name__ == 'runlens._no_native'\n"
        "try:\n"
        "    runlens.Emitter(run_id='r')\n"
        "except ImportError as e:\n"
        "    assert 'runlens._native' in str(e)\n"
        "else:\n"
        "    raise SystemExit('Emitter started without the native module')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO / "sdk" / "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_build_copies_the_eval_package():
    import runlens.eval

    built = pathlib.Path(runlens.eval.__file__).parent
    for src in (REPO / "sdk" / "python" / "runlens" / "eval").glob("*.py"):
        assert (built / src.name).read_text() == src.read_text(), f"{src.name} is stale in {built}"
