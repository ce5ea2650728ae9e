"""LLM-as-a-judge: a pluggable scorer whose configuration is versioned.

A judge is any object with a `config` (a JudgeConfig: the judge model id, the
judge prompt and its version, the rubric version, the rubric's criteria and
scale, the temperature and other sampling settings) and a
`score(item) -> {criterion: score}` method. `judge_scores(items, judge)`
scores every item and returns the scores together with the configuration that
produced them, so a stored judged result always names its judge.

KeywordJudge is a deterministic local judge (keyword coverage per criterion)
for tests and for runs without a judge model.
"""

from __future__ import annotations

import abc
import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ._rouge import rouge_tokenize
from ._stats import MetricValue, mean_value

__all__ = ["JudgeConfig", "Judge", "KeywordJudge", "JudgeResult", "judge_scores"]


@dataclass(frozen=True)
class JudgeConfig:
    """What determines a judge's scores. Every field is provenance: change any
    of them and the scores are a different result (and a different cache key).

    judge_model: the judge model's id (with its version, e.g. "judge-7b:v3").
    judge_prompt: the judge prompt template; prompt_version names it.
    rubric_version: the version of the rubric (criteria and their wording).
    criteria: the rubric's criteria, in order; every score() names exactly these.
    scale: (lowest, highest) score a criterion can get, inclusive.
    temperature: the judge's sampling temperature (0 for greedy).
    sampling: any other decoding settings (top_p, max_tokens, seed, ...).
    """

    judge_model: str
    judge_prompt: str
    prompt_version: str
    rubric_version: str
    criteria: Tuple[str, ...]
    scale: Tuple[float, float] = (1.0, 5.0)
    temperature: float = 0.0
    sampling: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("judge_model", "judge_prompt", "prompt_version", "rubric_version"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise ValueError(f"JudgeConfig.{name} must be a non-empty string")
        object.__setattr__(self, "criteria", tuple(self.criteria))
        if not self.criteria or len(set(self.criteria)) != len(self.criteria):
            raise ValueError("JudgeConfig.criteria must name at least one criterion, each once")
        lo, hi = (float(x) for x in self.scale)
        if not lo < hi:
            raise ValueError("JudgeConfig.scale must be (lowest, highest) with lowest < highest")
        object.__setattr__(self, "scale", (lo, hi))
        object.__setattr__(self, "temperature", float(self.temperature))
        object.__setattr__(self, "sampling", dict(self.sampling))
        try:
            json.dumps(self.sampling, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"JudgeConfig.sampling must be JSON-serialisable: {exc}") from None

    def __hash__(self):
        return hash(self.fingerprint())

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready description, with the prompt's SHA-256 and the
        configuration's fingerprint."""
        d = {
            "judge_model": self.judge_model,
            "judge_prompt": self.judge_prompt,
            "judge_prompt_sha256": hashlib.sha256(self.judge_prompt.encode("utf-8")).hexdigest(),
            "prompt_version": self.prompt_version,
            "rubric_version": self.rubric_version,
            "criteria": list(self.criteria),
            "scale": list(self.scale),
            "temperature": self.temperature,
            "sampling": dict(self.sampling),
        }
        d["fingerprint"] = self.fingerprint()
        return d

    def fingerprint(self) -> str:
        """SHA-256 over the canonical JSON (sorted keys, no spaces) of every
        field: equal configurations, equal fingerprints."""
        canonical = json.dumps(
            {
                "judge_model": self.judge_model,
                "judge_prompt": self.judge_prompt,
                "prompt_version": self.prompt_version,
                "rubric_version": self.rubric_version,
                "criteria": list(self.criteria),
                "scale": list(self.scale),
                "temperature": self.temperature,
                "sampling": self.sampling,
            },
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Judge(abc.ABC):
    """The scorer interface. Subclass it, or pass any object with a `config`
    attribute (JudgeConfig) and a `score(item)` method."""

    config: JudgeConfig

    @abc.abstractmethod
    def score(self, item: Mapping[str, Any]) -> Mapping[str, float]:
        """{criterion: score} for one item: a mapping with at least
        "response" (the model's output), usually "prompt", optionally
        "reference" and "id"."""


_DEFAULT_KEYWORD_PROMPT = (
    "Score the response on each criterion from {lo} to {hi}: the share of the criterion's "
    "keywords that the response contains, mapped linearly onto the scale."
)


class KeywordJudge(Judge):
    """A deterministic local judge. rubric: {criterion: keywords}; a keyword
    (or phrase) is present when all its rouge-score tokens occur among the
    response's tokens (lowercased, punctuation dropped). A criterion whose
    keywords are the string "@reference" uses the item's "reference" tokens
    instead. score = lo + (present / keywords) * (hi - lo)."""

    def __init__(
        self,
        rubric: Mapping[str, Any],
        *,
        rubric_version: str = "1",
        prompt_version: str = "1",
        judge_model: str = "runlens/keyword-judge@1",
        scale: Tuple[float, float] = (1.0, 5.0),
        judge_prompt: Optional[str] = None,
    ):
        self._rubric = {}
        for criterion, keywords in rubric.items():
            if keywords == "@reference":
                self._rubric[criterion] = None
                continue
            if isinstance(keywords, str):
                keywords = [keywords]
            phrases = [tuple(rouge_tokenize(k)) for k in keywords]
            if not phrases or any(not p for p in phrases):
                raise ValueError(f"KeywordJudge: criterion {criterion!r} needs keywords with letters or digits")
            self._rubric[criterion] = phrases
        lo, hi = scale
        prompt = judge_prompt or _DEFAULT_KEYWORD_PROMPT.format(lo=lo, hi=hi)
        # The rubric's keywords are part of the prompt a model judge would get.
        prompt += "\nRubric: " + json.dumps(
            {c: ("@reference" if v is None else [" ".join(p) for p in v]) for c, v in self._rubric.items()},
            sort_keys=True,
        )
        self.config = JudgeConfig(
            judge_model=judge_model,
            judge_prompt=prompt,
            prompt_version=prompt_version,
            rubric_version=rubric_version,
            criteria=tuple(self._rubric),
            scale=scale,
            temperature=0.0,
        )

    def score(self, item):
        response = set(rouge_tokenize(str(item["response"])))
        lo, hi = self.config.scale
        out = {}
        for criterion, phrases in self._rubric.items():
            if phrases is None:
                wanted = set(rouge_tokenize(str(item.get("reference") or "")))
                share = len(wanted & response) / len(wanted) if wanted else 0.0
            else:
                share = sum(all(t in response for t in p) for p in phrases) / len(phrases)
            out[criterion] = lo + share * (hi - lo)
        return out


@dataclass
class JudgeResult:
    """Per-item rubric scores and the judge configuration that produced them.

    scores[i] is {criterion: score} of items[i]; ids[i] is items[i]["id"] when
    given, else i; config is judge.config.to_dict() (with its fingerprint)."""

    scores: List[Dict[str, float]]
    ids: List[Any]
    config: Dict[str, Any]

    def mean(self, criterion: Optional[str] = None) -> MetricValue:
        """Mean score of one criterion over the items, or (criterion=None) of
        each item's mean over the criteria; with n and stderr."""
        if criterion is None:
            return mean_value(math.fsum(s.values()) / len(s) for s in self.scores)
        if criterion not in self.config["criteria"]:
            raise KeyError(f"no criterion {criterion!r} in this judge's rubric")
        return mean_value(s[criterion] for s in self.scores)

    def summary(self) -> Dict[str, MetricValue]:
        out = {c: self.mean(c) for c in self.config["criteria"]}
        out["overall"] = self.mean()
        return out


def judge_scores(items: Sequence[Mapping[str, Any]], judge) -> JudgeResult:
    """Scores every item with `judge`; raises ValueError when the judge
    returns a criterion that is not in its rubric, leaves one out, or returns
    a score that is not a finite number within its scale."""
    config = getattr(judge, "config", None)
    if not isinstance(config, JudgeConfig):
        raise TypeError("judge_scores: the judge needs a `config` attribute that is a JudgeConfig")
    items = list(items)
    if not items:
        raise ValueError("judge_scores: no items")
    lo, hi = config.scale
    wanted = set(config.criteria)
    scores, ids = [], []
    for i, item in enumerate(items):
        raw = judge.score(item)
        if not isinstance(raw, Mapping) or set(raw) != wanted:
            got = sorted(raw) if isinstance(raw, Mapping) else type(raw).__name__
            raise ValueError(f"judge_scores: item {i}: the judge returned {got}, expected criteria {sorted(wanted)}")
        row = {}
        for criterion in config.criteria:
            value = raw[criterion]
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"judge_scores: item {i}: {criterion} score {value!r} is not a number") from None
            if not math.isfinite(value) or not lo <= value <= hi:
                raise ValueError(f"judge_scores: item {i}: {criterion} score {value} is outside the scale [{lo}, {hi}]")
            row[criterion] = value
        scores.append(row)
        ids.append(item.get("id", i) if isinstance(item, Mapping) else i)
    return JudgeResult(scores=scores, ids=ids, config=config.to_dict())
