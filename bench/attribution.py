"""The gap explained: where a step's time goes, and which part grew between 1 and N ranks or between two systems.

A ``--horovod-timeline`` throughput run (``invoke bench --timeline``) leaves, beside ``throughput.json``, Horovod's own
timeline (``horovod-timeline.json``, ``facts.parsers.horovod_timeline``). For the timed steps (after the warm-up),
each step of rank 0 splits into (``split``):

* **input wait**: ``throughput.json``'s ``input_wait_s``, the time from the step's start to its batch leaving the
  input pipeline (``trainer.callbacks.InputWait``);
* **exposed allreduce**: from the timeline, the allreduce that runs after every rank has handed over its last
  gradient (``StepComm.exposed_s``): communication the backward pass did not hide;
* **compute**: the rest of the median step (forward, backward, optimizer, framework).

Each is the median over the timed steps (compute: the median step minus the other two medians), in seconds. The
timeline's k-th step is the trainer's k-th step (the timed ones are the last ``timed_steps``).

Beside the measurement, ``predicted_allreduce_s`` is what a measured allreduce bus bandwidth (``invoke validate
--hosts``'s ``mpi.bandwidth``, ``facts.transport``: busbw = bytes / time × 2(n−1)/n, nccl-tests' convention)
predicts for the model's float32 gradients (trainable parameters × 4 bytes): a ring allreduce moves 2(n−1)/n of
them per rank, so t = bytes × 2(n−1)/n / busbw. ``explain`` names, between 1 and N ranks of one system and between
two systems at one count, the part of the step that grew most.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from bench import guard, stats
from bench.results import StepSplit, Sweep
from chexstack.errors import ChexstackError
from facts.parsers import horovod_timeline
from facts.transport import busbw_from_measured

#: The parts of a step, in the order sentences name them: (StepSplit field, name in messages).
PARTS = (("compute_s", "compute"), ("input_wait_s", "input wait"), ("exposed_allreduce_s", "exposed allreduce"))


def split(throughput: dict, timeline: horovod_timeline.Timeline, source: str) -> StepSplit:
    """The ``StepSplit`` of one run: ``throughput`` the trainer's ``throughput.json`` content (``step_times_s`` of
    every step, ``warmup_steps``, ``input_wait_s``, ``trainable_parameters``), ``timeline`` its parsed Horovod
    timeline (at world size 1 no gradient is allreduced: nothing is exposed). Raises ChexstackError naming
    ``source`` when the run recorded no input waits, or the timeline has fewer steps than the run's timed ones."""
    times = [float(t) for t in throughput.get("step_times_s") or []]
    warmup = int(throughput.get("warmup_steps") or 0)
    waits = throughput.get("input_wait_s")
    if waits is None or len(waits) < len(times):
        raise ChexstackError("%s: expected input_wait_s for each of the %d steps (a --horovod-timeline "
                             "throughput run), got %s" % (source, len(times), "none" if waits is None else len(waits)))
    timed = len(times) - warmup
    if timed < 1:
        raise ChexstackError("%s: no timed steps after %d warm-up steps" % (source, warmup))
    step = statistics.median(times[warmup:])
    wait = statistics.median(float(w) for w in waits[warmup:len(times)])
    params = throughput.get("trainable_parameters")
    size = None if params is None else int(params) * 4
    if throughput.get("world_size") == 1:
        # Horovod allreduces no gradient at world size 1 (horovod/tensorflow/__init__.py, ``_allreduce_cond``: only
        # when the process set's size is above 1; the timeline shows none): nothing is exposed
        return StepSplit(steps=timed, step_s=step, compute_s=step - wait, input_wait_s=wait, exposed_allreduce_s=0.0,
                         negotiation_s=0.0, allreduce_s=0.0, gradients=0, gradient_bytes=size)
    comm = horovod_timeline.steps(timeline)
    if len(comm) < timed:
        raise ChexstackError("%s: the Horovod timeline shows %d steps' allreduces, the run timed %d%s"
                             % (source, len(comm), timed, "; %s" % "; ".join(timeline.problems)
                                if timeline.problems else ""))
    comm = comm[-timed:]
    exposed = statistics.median(c.exposed_s for c in comm)
    return StepSplit(steps=timed, step_s=step, compute_s=step - wait - exposed, input_wait_s=wait,
                     exposed_allreduce_s=exposed, negotiation_s=statistics.median(c.negotiation_s for c in comm),
                     allreduce_s=statistics.median(c.allreduce_s for c in comm), gradients=comm[0].tensors,
                     gradient_bytes=size)


def split_run(run_dir: Path, throughput: dict) -> StepSplit | None:
    """The ``StepSplit`` of the run in ``run_dir`` when its ``throughput.json`` (``throughput``) names a timeline;
    None for a run without one. Raises ChexstackError when the named timeline cannot be read or split."""
    name = throughput.get("timeline")
    if not name:
        return None
    path = run_dir / name
    try:
        text = path.read_text()
    except OSError as e:
        raise ChexstackError("%s: cannot read the run's Horovod timeline: %s" % (path, e.strerror)) from None
    return split(throughput, horovod_timeline.parse(text), str(path))


def predicted_allreduce_s(gradient_bytes: int, ranks: int, busbw_gbits: float) -> float:
    """Seconds a ring allreduce of ``gradient_bytes`` over ``ranks`` ranks takes at a bus bandwidth of
    ``busbw_gbits`` (Gbit/s): ``bytes × 2(n−1)/n × 8 / busbw``; 0 for one rank."""
    return gradient_bytes * 8.0 * 2.0 * (ranks - 1) / ranks / (busbw_gbits * 1e9)


def bandwidth(value: str) -> tuple[float, str]:
    """(busbw Gbit/s, where it came from) of ``--bandwidth``: a number (Gbit/s), or the JSON report of ``invoke
    validate --hosts A,B --json FILE`` whose ``mpi.bandwidth`` result measured it. Raises ChexstackError naming
    the file when it holds no such measurement."""
    try:
        return float(value), "--bandwidth %s Gbit/s" % value
    except ValueError:
        pass
    path = Path(value)
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ChexstackError("--bandwidth %s: expected Gbit/s or an `invoke validate --json` report (%s)"
                             % (value, getattr(e, "strerror", None) or e)) from None
    result = next((r for r in report.get("results") or [] if r.get("id") == "mpi.bandwidth"), None)
    busbw = busbw_from_measured((result or {}).get("measured") or "")
    if busbw is None:
        raise ChexstackError("%s: no mpi.bandwidth measurement in it (run `invoke validate --hosts A,B --only "
                             "mpi.bandwidth --json FILE`)" % path)
    return busbw, "mpi.bandwidth of %s" % path


def _ms(seconds: float) -> str:
    return "%+.1f ms" % (seconds * 1e3)


def _parts(now: StepSplit, then: StepSplit) -> tuple[str, float, str]:
    """(the part that grew most from ``then`` to ``now``, its growth in seconds, "compute +x ms, input wait +y ms,
    ...")."""
    deltas = [(getattr(now, f) - getattr(then, f), name) for f, name in PARTS]
    grew, largest = max(deltas)
    return largest, grew, ", ".join("%s %s" % (name, _ms(d)) for d, name in deltas)


def scaling_line(sweep: Sweep, count: int) -> str | None:
    """Between 1 and ``count`` ranks of ``sweep``: the step's growth, the per-rank images/s it costs, each part's
    change and the largest; None without both points' splits."""
    one, many = sweep.point(1), sweep.point(count)
    if not (one and many and one.step_split and many.step_split):
        return None
    a, b = one.step_split, many.step_split
    largest, _, parts = _parts(b, a)
    return ("%s, 1 → %d %s: step %.1f → %.1f ms (%s/step, per-rank images/s %+.1f %%), of which %s; the largest "
            "share: %s" % (sweep.label, count, sweep.unit, a.step_s * 1e3, b.step_s * 1e3, _ms(b.step_s - a.step_s),
                           100.0 * (a.step_s / b.step_s - 1.0), parts, largest))


def system_line(sweep: Sweep, base: Sweep, count: int) -> str | None:
    """``sweep`` against ``base`` at ``count``: the images/s difference with its 95 % interval (``bench.stats``)
    and each part's change per step, the largest named; None without both splits or when the guard finds them not
    comparable."""
    mine, theirs = sweep.point(count), base.point(count)
    if not (mine and theirs and mine.step_split and theirs.step_split) or not guard.comparable(sweep, base):
        return None
    d = stats.gap(sweep, base, count)
    interval = ("no interval" if d.interval is None else "95 %% interval [%+.1f, %+.1f] %%%s"
                % (d.interval.low, d.interval.high, "" if d.distinguishable else ", not distinguishable"))
    interval += ", %s" % d.design
    largest, grew, parts = _parts(mine.step_split, theirs.step_split)
    path = guard.path_difference(sweep, base)
    return ("%s vs %s at %d %s: %+.1f %% images/s (%s), of which %s %s/step (the largest; %s)%s"
            % (sweep.label, base.label, count, sweep.unit, d.pct, interval, largest, _ms(grew), parts,
               "; %s: %s" % (path, guard.effect(sweep, base)) if path else ""))


def predicted_line(sweep: Sweep, count: int, busbw_gbits: float, where: str) -> str | None:
    """What ``busbw_gbits`` predicts for ``sweep``'s gradients at ``count`` ranks beside the timeline's allreduce
    and its exposed part; None without a split that knows the gradient bytes, or for one rank."""
    point = sweep.point(count)
    s = point.step_split if point else None
    if s is None or not s.gradient_bytes or count < 2:
        return None
    return ("%s at %d %s: %.1f MB of float32 gradients at busbw %.2f Gbit/s (%s) predict %.1f ms/step of ring "
            "allreduce; the timeline shows %.1f ms/step of allreduce (summed over %d tensors, overlapping), %.1f "
            "ms/step exposed" % (sweep.label, count, sweep.unit, s.gradient_bytes / 1e6, busbw_gbits, where,
                                 predicted_allreduce_s(s.gradient_bytes, count, busbw_gbits) * 1e3,
                                 s.allreduce_s * 1e3, s.gradients, s.exposed_allreduce_s * 1e3))


def explain(sweeps: list[Sweep], busbw: tuple[float, str] | None = None) -> list[str]:
    """The report's sentences on the gap: per system, 1 → each larger count (``scaling_line``) and the bandwidth's
    prediction (``predicted_line``); per other system, against the first at each count (``system_line``). Empty
    when no point has a split."""
    lines = []
    for sweep in sweeps:
        for p in sweep.points:
            if p.count > 1:
                lines.append(scaling_line(sweep, p.count))
                lines.append(predicted_line(sweep, p.count, *busbw) if busbw else None)
    for sweep in sweeps[1:]:
        lines += [system_line(sweep, sweeps[0], p.count) for p in sweep.points]
    return [line for line in lines if line]

