"""The Porter stemmer, as NLTK's ``PorterStemmer()`` computes it (its default
NLTK_EXTENSIONS mode), which is what Google's rouge-score applies when
``use_stemmer=True``.

Porter, M. "An algorithm for suffix stripping." Program 14.3 (1980): 130-137,
with the departures NLTK makes from the paper:

- a table of irregular forms (sky/skies -> sky, dying -> die, ...) that
  bypasses the algorithm;
- words of one or two letters are returned as they are;
- step 1a: a four-letter word in -ies keeps -ie (dies -> die);
- step 1b: -ied becomes -ie in a four-letter word, -i otherwise;
- the *o (cvc) condition also holds for a two-letter vowel-consonant stem;
- step 1c: y -> i only after a consonant that is not the first letter;
- step 2: -alli -> -al is tried first and step 2 then runs again; -bli -> -ble
  (not -abli -> -able); -fulli -> -ful; -logi -> -log measured with the l.

This is an independent implementation of the published rules; it is checked
against the stems NLTK publishes in its own tests (see
tests/python/test_eval_metrics.py and docs/evaluation.md).
"""

from __future__ import annotations

__all__ = ["stem"]

_VOWELS = frozenset("aeiou")

_IRREGULAR = {
    "skies": "sky",
    "sky": "sky",
    "dying": "die",
    "lying": "lie",
    "tying": "tie",
    "news": "news",
    "innings": "inning",
    "inning": "inning",
    "outings": "outing",
    "outing": "outing",
    "cannings": "canning",
    "canning": "canning",
    "howe": "howe",
    "proceed": "proceed",
    "exceed": "exceed",
    "succeed": "succeed",
}


def _consonant(word: str, i: int) -> bool:
    # A consonant is a letter other than a, e, i, o, u, and other than a y
    # that follows a consonant.
    ch = word[i]
    if ch in _VOWELS:
        return False
    if ch == "y":
        return i == 0 or not _consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """m in [C](VC){m}[V]: the number of vowel-to-consonant transitions."""
    m = 0
    previous_vowel = False
    for i in range(len(stem)):
        is_cons = _consonant(stem, i)
        if is_cons and previous_vowel:
            m += 1
        previous_vowel = not is_cons
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    """*o: the word ends consonant-vowel-consonant, the last not w, x or y; or
    (NLTK) it is a two-letter vowel-consonant word."""
    n = len(word)
    if n >= 3:
        if (
            _consonant(word, n - 3)
            and not _consonant(word, n - 2)
            and _consonant(word, n - 1)
            and word[-1] not in "wxy"
        ):
            return True
    return n == 2 and not _consonant(word, 0) and _consonant(word, 1)


def _m_positive(stem: str) -> bool:
    return _measure(stem) > 0


def _m_above_one(stem: str) -> bool:
    return _measure(stem) > 1


def _first_rule(word: str, rules) -> str:
    """Applies the rule of the first listed suffix that the word ends with;
    when that rule's condition fails the word is unchanged (later rules are
    not tried), as in the paper's step tables."""
    for suffix, replacement, condition in rules:
        if word.endswith(suffix):
            stem = word[: len(word) - len(suffix)]
            if condition is None or condition(stem):
                return stem + replacement
            return word
    return word


def _step1a(word: str) -> str:
    if word.endswith("ies") and len(word) == 4:
        return word[:-3] + "ie"
    return _first_rule(word, (("sses", "ss", None), ("ies", "i", None), ("ss", "ss", None), ("s", "", None)))


def _step1b(word: str) -> str:
    if word.endswith("ied"):
        return word[:-3] + ("ie" if len(word) == 4 else "i")
    if word.endswith("eed"):
        stem = word[:-3]
        return stem + "ee" if _measure(stem) > 0 else word
    stem = None
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            stem = word[: -len(suffix)]
            break
    if stem is None:
        return word
    for tail, full in (("at", "ate"), ("bl", "ble"), ("iz", "ize")):
        if stem.endswith(tail):
            return stem[: -len(tail)] + full
    if _double_consonant(stem):
        # hopp(ing) -> hop, but fall(ing) -> fall, hiss(ing), fizz(ed).
        return stem if stem[-1] in "lsz" else stem[:-1]
    if _measure(stem) == 1 and _cvc(stem):
        return stem + "e"
    return stem


def _step1c(word: str) -> str:
    if word.endswith("y") and len(word) > 2 and _consonant(word, len(word) - 2):
        return word[:-1] + "i"
    return word


_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("fulli", "ful"),
)


def _step2(word: str) -> str:
    if word.endswith("alli") and _m_positive(word[:-4]):
        return _step2(word[:-4] + "al")
    rules = [(suffix, repl, _m_positive) for suffix, repl in _STEP2]
    # -logi -> -log, the measure taken over the stem with its l (geo-logi).
    rules.append(("logi", "log", lambda _stem, w=word: _m_positive(w[:-3])))
    return _first_rule(word, rules)


_STEP3 = tuple(
    (suffix, repl, _m_positive)
    for suffix, repl in (
        ("icate", "ic"),
        ("ative", ""),
        ("alize", "al"),
        ("iciti", "ic"),
        ("ical", "ic"),
        ("ful", ""),
        ("ness", ""),
    )
)

_STEP4 = tuple(
    (suffix, "", _m_above_one if suffix != "ion" else (lambda stem: _measure(stem) > 1 and stem[-1] in "st"))
    for suffix in (
        "al",
        "ance",
        "ence",
        "er",
        "ic",
        "able",
        "ible",
        "ant",
        "ement",
        "ment",
        "ent",
        "ion",
        "ou",
        "ism",
        "ate",
        "iti",
        "ous",
        "ive",
        "ize",
    )
)


def _step5a(word: str) -> str:
    # Both (m>1) E -> and (m=1 and not *o) E -> are tried.
    if word.endswith("e"):
        stem = word[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            return stem
    return word


def _step5b(word: str) -> str:
    if word.endswith("ll") and _measure(word[:-1]) > 1:
        return word[:-1]
    return word


def stem(word: str) -> str:
    """The Porter stem of `word` (lowercased first), as NLTK's default
    PorterStemmer().stem(word) computes it."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    w = word.lower()
    if len(word) <= 2:
        return w
    w = _step1a(w)
    w = _step1b(w)
    w = _step1c(w)
    w = _step2(w)
    w = _first_rule(w, _STEP3)
    w = _first_rule(w, _STEP4)
    w = _step5a(w)
    w = _step5b(w)
    return w
