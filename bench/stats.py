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

Two designs for a difference (``Difference.paired`` says which):

- **unpaired** (``difference``): separate sweeps (``invoke bench-report`` of sweeps run apart), each side's repeats
  resampled independently, as above;
- **paired** (``paired_difference``): the study's rounds (``bench.study``), where round i ran every system once, so
  reading i of one system and reading i of the baseline share that round's conditions. The statistic is the median
  of the per-round ratios ``system / baseline``, as ``100 · (median ratio − 1)`` %, and its interval the percentile
  bootstrap of that median over the rounds (``scipy.stats.bootstrap``, ``method="percentile"``, the same resamples
  and seed). Noise common to a round (another job, a slower core for a while) moves both readings of the round and
  cancels in its ratio instead of widening both sides.

``Difference.half_width`` is the interval's half-width in %: the smallest difference the design resolved.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    from bench.results import Sweep

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
    paired: bool = False
    #: the rounds (paired) or the fewer side's repeats (unpaired) the difference was taken over
    n: int = 0

    @property
    def half_width(self) -> float | None:
        """Half the interval's width in % (the smallest difference this design resolved); None without one."""
        return None if self.interval is None else (self.interval.high - self.interval.low) / 2.0

    @property
    def design(self) -> str:
        """``paired, N rounds`` or ``unpaired``, for tables."""
        return "paired, %d rounds" % self.n if self.paired else "unpaired"

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
    n = min(len(values), len(base))
    if n < MIN_REPEATS:
        return Difference(pct, None, n=n)
    rng = np.random.default_rng(SEED)
    mine, theirs = _resampled_medians(values, rng), _resampled_medians(base, rng)
    return Difference(pct, _percentiles(100.0 * (mine / theirs - 1.0)), n=n)


def paired_difference(values: Sequence[float], base: Sequence[float]) -> Difference:
    """``values`` and ``base`` read in the same rounds (``values[i]`` and ``base[i]``: round i): the median of the
    per-round ratios as ``100 · (median ratio − 1)`` % and the 95 % percentile-bootstrap interval of that median
    over the rounds (``scipy.stats.bootstrap``); no interval under ``MIN_REPEATS`` rounds. Raises ValueError for
    no rounds or sides of different lengths (not paired)."""
    from scipy.stats import bootstrap

    if not values or len(values) != len(base):
        raise ValueError("expected the same rounds on both sides, got %d and %d readings" % (len(values), len(base)))
    ratios = np.asarray(values, dtype=float) / np.asarray(base, dtype=float)
    pct = 100.0 * (float(np.median(ratios)) - 1.0)
    if len(ratios) < MIN_REPEATS:
        return Difference(pct, None, paired=True, n=len(ratios))
    if np.ptp(ratios) == 0:  # every round the same ratio: the bootstrap distribution is that one value
        return Difference(pct, Interval(pct, pct), paired=True, n=len(ratios))
    found = bootstrap((ratios,), np.median, n_resamples=RESAMPLES, confidence_level=CONFIDENCE,
                      method="percentile", random_state=np.random.default_rng(SEED), vectorized=True, axis=-1)
    ci = found.confidence_interval
    return Difference(pct, Interval(100.0 * (float(ci.low) - 1.0), 100.0 * (float(ci.high) - 1.0)), paired=True,
                      n=len(ratios))


def paired(sweep: "Sweep", base: "Sweep", count: int) -> bool:
    """Whether ``sweep`` and ``base`` were read in the same paired rounds (``RunRecord.paired_rounds``, the study's)
    with a reading per round at ``count`` on both sides: their difference there is then paired."""
    mine, theirs = sweep.point(count), base.point(count)
    return bool(sweep.record.paired_rounds and sweep.record.paired_rounds == base.record.paired_rounds
                and mine and theirs and len(mine.readings) == len(theirs.readings))


def gap(sweep: "Sweep", base: "Sweep", count: int) -> Difference:
    """``sweep`` against ``base`` at ``count`` (both have a point there): paired over the study's rounds where
    ``paired``, else unpaired (``difference``, ``paired_difference``)."""
    mine, theirs = sweep.point(count), base.point(count)
    how = paired_difference if paired(sweep, base, count) else difference
    return how(mine.readings, theirs.readings)
