"""Statistics over a point's repeats: the median images/s with its 95 % interval, and the difference between two
systems at one count in % with its 95 % interval.

Method: the percentile bootstrap (Efron & Tibshirani, *An Introduction to the Bootstrap*, Chapman & Hall 1993,
ch. 13, "The percentile interval"). ``RESAMPLES`` resamples of the repeats, drawn with replacement, each giving the
statistic; the interval is their 2.5th and 97.5th percentiles. The generator's seed is fixed (``SEED``), so the
same readings give the same interval in every report. The statistic is the median (a slow repeat, a machine
briefly shared, moves it less than a mean); for a difference it is the ratio of the two systems' medians, each
resampled independently (the systems' repeats are not paired), as ``100 · (ratio − 1)`` %.

With fewer than ``MIN_REPEATS`` repeats on either side there is no interval (``None``): a bootstrap of one or two
readings says nothing about the noise. With 3 to 5 repeats the 95 % interval of one median is the readings' range
(a resample's median is the smallest reading with probability P(Bin(n, 1/n) >= (n + 1) / 2) >= 5.8 %, above 2.5 %);
the issue's minimum for a readable 3 % difference is 5 repeats.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Sequence

import numpy as np

MIN_REPEATS = 3
CONFIDENCE = 0.95
RESAMPLES = 20_000
SEED = 0


@dataclass(frozen=True)
class Interval:
    """A closed interval [low, high] in the statistic's unit (images/s, or % for a difference)."""

    low: float
    high: float

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class Difference:
    """A system against the baseline at one count: ``pct`` = ``100 · (median / baseline median − 1)``, its 95 %
    ``interval`` (None: fewer than ``MIN_REPEATS`` repeats on a side)."""

    pct: float
    interval: Interval | None

    @property
    def distinguishable(self) -> bool | None:
        """False where the interval holds 0 ("not distinguishable"), None without an interval."""
        return None if self.interval is None else not self.interval.holds(0.0)


def _resampled_medians(values: Sequence[float], rng: np.random.Generator) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    return np.median(rng.choice(x, size=(RESAMPLES, len(x)), replace=True), axis=1)


def _percentiles(samples: np.ndarray) -> Interval:
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(samples, [tail, 100 - tail])
    return Interval(float(low), float(high))


def median_interval(values: Sequence[float]) -> Interval | None:
    """The 95 % percentile-bootstrap interval of the median of ``values`` (images/s of each repeat); None with
    fewer than ``MIN_REPEATS`` values."""
    if len(values) < MIN_REPEATS:
        return None
    return _percentiles(_resampled_medians(values, np.random.default_rng(SEED)))


def difference(values: Sequence[float], base: Sequence[float]) -> Difference:
    """``values`` (a system's repeats at one count) against ``base`` (the baseline's at the same count): the %
    difference of the medians and the 95 % percentile-bootstrap interval of ``100 · (ratio of medians − 1)``; no
    interval when either side has fewer than ``MIN_REPEATS`` repeats. Raises ValueError for an empty side."""
    if not values or not base:
        raise ValueError("expected repeats on both sides, got %d and %d" % (len(values), len(base)))
    pct = 100.0 * (statistics.median(values) / statistics.median(base) - 1.0)
    if min(len(values), len(base)) < MIN_REPEATS:
        return Difference(pct, None)
    rng = np.random.default_rng(SEED)
    mine, theirs = _resampled_medians(values, rng), _resampled_medians(base, rng)
    return Difference(pct, _percentiles(100.0 * (mine / theirs - 1.0)))
