"""MetricValue and the standard errors the metrics report."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

__all__ = ["MetricValue", "mean_stderr", "mean_value", "ratio_value"]


class MetricValue(float):
    """A metric's value that is also a plain float (it compares, formats,
    rounds and serialises to JSON as its value), carrying the number of items
    `n` it was computed over and its standard error `stderr` (NaN where there
    is none: fewer than two items, or a metric that is not a mean of items).

        >>> v = exact_match(["a", "b"], ["a", "c"])
        >>> v == 0.5, v.n, round(v.stderr, 3)
        (True, 2, 0.5)
    """

    def __new__(cls, value, n, stderr=math.nan):
        obj = super().__new__(cls, value)
        obj.n = int(n)
        obj.stderr = float(stderr)
        return obj

    @property
    def value(self) -> float:
        return float(self)

    def as_dict(self):
        return {"value": float(self), "n": self.n, "stderr": self.stderr}

    def __repr__(self):
        return f"MetricValue(value={float(self)!r}, n={self.n}, stderr={self.stderr!r})"

    def __reduce__(self):
        return (MetricValue, (float(self), self.n, self.stderr))


def mean_stderr(values: Sequence[float]) -> float:
    """Standard error of the mean: the sample standard deviation (n - 1 in the
    denominator) over sqrt(n), as lm-evaluation-harness's mean_stderr; NaN for
    fewer than two values."""
    n = len(values)
    if n < 2:
        return math.nan
    mu = math.fsum(values) / n
    var = math.fsum((x - mu) ** 2 for x in values) / (n - 1)
    return math.sqrt(var / n)


def mean_value(values: Iterable[float], scale: float = 1.0) -> MetricValue:
    """The mean of per-item values (times `scale`) with its n and stderr."""
    values = [float(v) * scale for v in values]
    if not values:
        raise ValueError("a mean over no items is undefined")
    return MetricValue(math.fsum(values) / len(values), len(values), mean_stderr(values))


def ratio_value(numerators: Sequence[float], denominators: Sequence[float]):
    """R = sum(a) / sum(b) over items and its delta-method standard error,
    sqrt(var(a_i - R b_i) / (n mean(b)^2)) (NaN for fewer than two items).
    Returns (R, n, stderr)."""
    n = len(numerators)
    if n == 0:
        raise ValueError("a ratio over no items is undefined")
    total_b = math.fsum(denominators)
    if total_b <= 0:
        raise ValueError("the item counts (tokens, words or bytes) must add up to more than 0")
    r = math.fsum(numerators) / total_b
    if n < 2:
        return r, n, math.nan
    mean_b = total_b / n
    resid = [a - r * b for a, b in zip(numerators, denominators)]
    var = math.fsum(d * d for d in resid) / (n - 1)
    return r, n, math.sqrt(var / n) / mean_b
