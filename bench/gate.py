"""The regression gate (``invoke bench-report --baseline FILE RESULTS``): does a result fall below a baseline sweep?

A point of the result fails when its median images/s is below the baseline's at the same count by more than the
noise: below the lower bound of the baseline's 95 % interval (``bench.stats.median_interval``, 3 repeats or more),
or, for a baseline point without an interval (fewer than 3 repeats), below its median by more than
``tolerance_pct`` (default ``TOLERANCE_PCT``). The size of a drop is ``100 · (baseline median − measured) /
baseline median``. Counts the baseline lacks are not judged. A result that differs from the baseline in more
than the system (``bench.guard.differences``: another stack, host set, model, …) is refused, never judged.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from bench import guard, stats
from bench.results import Point, Sweep
from chexstack.errors import ChexstackError

#: Default tolerance below a baseline point that has no interval, in % (``--tolerance``). A round figure, not a
#: measurement: a site sets its own from its machines' run-to-run spread, or records 3+ repeats for an interval.
TOLERANCE_PCT = 5.0


@dataclass(frozen=True)
class Verdict:
    """One count: the result's median (``measured``), the baseline's median and the ``floor`` it must reach, which
    ``rule`` made that floor, and the drop below the baseline's median in % (negative: faster)."""

    count: int
    measured: float
    baseline: float
    floor: float
    rule: str
    drop_pct: float

    @property
    def failed(self) -> bool:
        return self.measured < self.floor


def floor(point: Point, tolerance_pct: float) -> tuple[float, str]:
    """(the images/s a result must reach at this baseline point, the rule in words)."""
    interval = stats.median_interval(point.readings)
    if interval is not None:
        return interval.low, "the baseline's 95 %% interval [%.1f, %.1f]" % (interval.low, interval.high)
    return (point.images_per_sec * (1 - tolerance_pct / 100.0),
            "%g %% below the baseline's median (no interval: %d repeat(s))" % (tolerance_pct, len(point.readings)))


def judge(result: Sweep, baseline: Sweep, tolerance_pct: float = TOLERANCE_PCT) -> list[Verdict]:
    """A ``Verdict`` per count of ``result`` that ``baseline`` has, smallest first (no refusal here: ``check``)."""
    out = []
    for p in result.points:
        base = baseline.point(p.count)
        if base is None:
            continue
        low, rule = floor(base, tolerance_pct)
        out.append(Verdict(p.count, p.images_per_sec, base.images_per_sec, low, rule,
                           100.0 * (base.images_per_sec - p.images_per_sec) / base.images_per_sec))
    return out


def check(result_path: Path, result: Sweep, baseline_path: Path, baseline: Sweep,
          tolerance_pct: float = TOLERANCE_PCT) -> list[Verdict]:
    """The verdicts of ``result`` against ``baseline`` (``judge``; ``drops`` names the failed ones). Raises
    ChexstackError (exit 2) when they are not comparable (``guard.refuse``: both files and each difference), share
    no count, or for a tolerance outside [0, 100)."""
    guard.refuse([(result_path, result, baseline_path, baseline)], "bench-report --baseline %s" % baseline_path)
    if tolerance_pct < 0 or tolerance_pct >= 100:
        raise ChexstackError("--tolerance %g: expected a percentage from 0 to below 100" % tolerance_pct)
    verdicts = judge(result, baseline, tolerance_pct)
    if not verdicts:
        raise ChexstackError("bench-report --baseline %s: %s has no count the baseline has (result %s, baseline %s)"
                             % (baseline_path, result_path, ",".join(str(p.count) for p in result.points),
                                ",".join(str(p.count) for p in baseline.points)))
    return verdicts


def drops(verdicts: list[Verdict], unit: str) -> list[str]:
    """Each point below its floor in words: count, measured and baseline images/s, the drop in % and the rule."""
    return ["%d %s: %.1f images/s vs baseline %.1f, %.1f %% drop (below %s)"
            % (v.count, unit, v.measured, v.baseline, v.drop_pct, v.rule) for v in verdicts if v.failed]


def table(verdicts: list[Verdict], unit: str, title: str) -> Table:
    """The verdicts on screen: count, measured, baseline, floor, drop, pass/FAIL."""
    out = Table(title=title)
    for col in (unit, "images/s", "baseline", "floor", "drop (%)", "verdict"):
        out.add_column(col, justify="right")
    for v in verdicts:
        out.add_row(str(v.count), "%.1f" % v.measured, "%.1f" % v.baseline, "%.1f" % v.floor, "%+.1f" % v.drop_pct,
                    "[red]FAIL[/]" if v.failed else "pass")
    return out
