"""The caption's lines on each point's cores and load (``bench.results.HostLoad``): where each rank ran and on which
CPUs, images per CPU-second of the ranks, the load and steal seen, and every repeat taken under foreign load
(``facts.procstat``), flagged. A sweep whose trainer recorded no ``host_load`` gets no line.
"""
from __future__ import annotations

import statistics

from bench.results import Point, Sweep
from facts.procstat import FOREIGN_CORES, STEAL_PCT, cpu_list

#: The first words of a flagged repeat's line.
FOREIGN = "FOREIGN LOAD"


def ranks_text(point: Point) -> str:
    """"chex1 cpu 0 | chex2 cpu 1": each rank's host and allowed CPUs, rank order, as the repeats agree (each
    repeat's, ``;``-separated, where they do not); "cpus unknown" where a rank could not say."""
    shown = []
    for h in point.host_load:
        text = " | ".join("%s cpu %s" % (host or "?", cpu_list(cpus) if cpus else "unknown")
                          for host, cpus in zip(h.hosts_by_rank or [""] * len(h.cpus_by_rank), h.cpus_by_rank))
        if text not in shown:
            shown.append(text)
    return "; ".join(shown)


def point_lines(label: str, unit: str, point: Point) -> list[str]:
    """One line for ``label``'s point (medians over repeats; load, steal and foreign work their highest), then one
    ``FOREIGN LOAD`` line per repeat taken under it."""
    loads = point.host_load
    if not loads:
        return []
    where = "%s, %d %s" % (label, point.count, unit)
    parts = ["ranks on %s" % ranks_text(point)]
    per_cpu = [h.images_per_cpu_s for h in loads if h.images_per_cpu_s is not None]
    if per_cpu:
        parts.append("%.2f images per CPU-second of the ranks" % statistics.median(per_cpu))
    load1 = [h.load1 for h in loads if h.load1 is not None]
    steal = [h.steal_pct for h in loads if h.steal_pct is not None]
    foreign = [h.foreign_cores for h in loads if h.foreign_cores is not None]
    if load1:
        parts.append("load %.1f" % max(load1))
    if steal:
        parts.append("steal %.1f %%" % max(steal))
    if foreign:
        parts.append("foreign work %.2f cores" % max(foreign))
    lines = ["cores: %s: %s" % (where, ", ".join(parts))]
    for repeat, h in enumerate(loads, 1):
        if h.foreign:
            lines.append("%s: %s, repeat %d: %s" % (FOREIGN, where, repeat, "; ".join(h.foreign)))
    return lines


def caption_lines(sweeps: list[Sweep]) -> list[str]:
    """Every point's lines (``point_lines``), sweep by sweep, then how a run is flagged (when any line was
    made)."""
    lines = [line for s in sweeps for p in s.points for line in point_lines(s.label, s.unit, p)]
    if lines:
        lines.append("a run is flagged %s for foreign work above %.1f cores on the ranks' CPUs or steal above "
                     "%.1f %% over the timed steps (/proc/stat; the ranks' own CPU time is not foreign)"
                     % (FOREIGN, FOREIGN_CORES, STEAL_PCT))
    return lines
