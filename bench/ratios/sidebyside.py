"""Side-by-side measurement for the ratio benchmarks: run two variants alternately in ONE process and report the
median of the per-round ratios (alternating cancels drift: other load on the machine, thermal state, caches).

Each variant returns a ``Rates`` (higher is better): wall-clock rate — what the goal is about — and the rate per
CPU-second of this process (all its threads), which other processes' load on a shared machine barely moves.
"""
from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable
from typing import NamedTuple


class Rates(NamedTuple):
    wall: float
    cpu: float


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(work: Callable[[], None], units: float) -> Rates:
    """Run ``work`` once; ``units`` done per wall second and per CPU-second of this process."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    work()
    return Rates(units / (time.perf_counter() - wall), units / max(cpu_seconds() - cpu, 1e-9))


def alternate(ours: Callable[[], Rates], baseline: Callable[[], Rates], rounds: int) -> list[tuple[Rates, Rates]]:
    """``rounds`` pairs of (ours, baseline); odd rounds run the baseline first."""
    pairs = []
    for r in range(rounds):
        if r % 2:
            b = baseline()
            a = ours()
        else:
            a = ours()
            b = baseline()
        pairs.append((a, b))
    return pairs


def rotate(variants: dict[str, Callable[[], Rates]], rounds: int) -> list[dict[str, Rates]]:
    """``rounds`` rounds of every one of ``variants`` ({name: run}), each round's order rotated by one (drift spreads
    over all of them); a round's ``{name: Rates}``."""
    names, out = list(variants), []
    for r in range(rounds):
        shift = r % len(names)
        out.append(dict((name, variants[name]()) for name in names[shift:] + names[:shift]))
    return out


def report(title: str, unit: str, pairs: list[tuple[Rates, Rates]], goal: float) -> Rates:
    """Print every round and the median ratios ours/baseline; the goal is judged on the wall-clock ratio."""
    print(title)
    for i, (a, b) in enumerate(pairs, 1):
        print("  round %d: ours %.2f %s, baseline %.2f %s, ratio %.3f (per CPU-second: %.3f)"
              % (i, a.wall, unit, b.wall, unit, a.wall / b.wall, a.cpu / b.cpu))
    ratio = Rates(statistics.median(a.wall / b.wall for a, b in pairs),
                  statistics.median(a.cpu / b.cpu for a, b in pairs))
    print("median ratio ours/baseline = %.3f (goal >= %.2f: %s); per CPU-second %.3f"
          % (ratio.wall, goal, "met" if ratio.wall >= goal else "MISSED", ratio.cpu))
    return ratio
