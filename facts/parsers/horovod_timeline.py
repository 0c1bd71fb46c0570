"""Parse a Horovod timeline (``HOROVOD_TIMELINE=FILE``): each tensor's negotiation and allreduce, per run and per step.

The format is Chrome's trace-event JSON as Horovod's ``TimelineWriter`` writes it (horovod/common/timeline.cc;
Horovod docs, "Horovod Timeline"); only the coordinator (rank 0) writes it, but its negotiation events see every
rank:

* each tensor is a "process": ``{"name": "process_name", "ph": "M", "pid": N, "args": {"name": TENSOR}}``; pid 0's
  metadata carries ``start_time_since_epoch_in_micros`` (Horovod >= 0.20; 0.16 writes none);
* ``"ph": "B"`` / ``"E"`` on a tensor's pid open and close spans, ``ts`` in microseconds since Horovod's start
  (steady clock). Top-level spans are ``NEGOTIATE_<OP>`` (from the first rank's request to the moment every rank
  has requested the tensor: ``ph: X`` ticks inside name each rank as it reports ready; a cached tensor's
  negotiation has no ticks) and then the operation itself (``ALLREDUCE``, ``BROADCAST``, ``ALLGATHER``, ...), with
  nested activities (``QUEUE``, ``MEMCPY_IN_FUSION_BUFFER``, ``MPI_ALLREDUCE`` / ``GLOO_ALLREDUCE`` /
  ``NCCL_ALLREDUCE``, ``MEMCPY_OUT_FUSION_BUFFER``, ...); the operation's ``E`` carries ``dtype`` and ``shape``;
* ``"ph": "i"`` markers (``CYCLE_START`` with ``HOROVOD_TIMELINE_MARK_CYCLES``) belong to no tensor.

Horovod 0.28 closes the array after every event (``...}]``); 0.16 never closes it (``...},``); a run killed while
writing leaves a cut-off last event. ``parse`` reads all three, keeping what is complete; a span left open (the
file ends inside it) or an ``E`` without its ``B`` is noted in ``Timeline.problems``, never raised.

Steps: every training step allreduces every gradient once, so a gradient's k-th allreduce belongs to step k
(``steps``). The gradients are the allreduced tensors seen most often (``gradients``); a tensor allreduced
once (Keras' metric averaging at an epoch's end) is not a step's. A step's communication (``StepComm``) runs
from the first gradient's negotiation start to the last gradient's allreduce end; ``ready_us``, the end of its
last negotiation,
is when every rank has handed over every gradient (their backward passes are done), so what allreduce runs after
it is the part the step did not hide behind computation (``exposed_s``).
"""
from __future__ import annotations

import json
import statistics
from collections import Counter
from dataclasses import dataclass, field

NEGOTIATE = "NEGOTIATE_"
ALLREDUCE = "ALLREDUCE"


@dataclass(frozen=True)
class Span:
    """One top-level span of one tensor: ``op`` (``NEGOTIATE_ALLREDUCE``, ``ALLREDUCE``, ...), start and end in
    microseconds since Horovod's start, ``activities`` ((name, start_us, end_us), in order), ``ranks`` (the ranks'
    ready ticks of a negotiation, in the order they came) and ``args`` of its end (``dtype``, ``shape``)."""

    tensor: str
    op: str
    start_us: int
    end_us: int
    activities: tuple[tuple[str, int, int], ...] = ()
    ranks: tuple[int, ...] = ()
    args: dict = field(default_factory=dict, compare=False)

    @property
    def seconds(self) -> float:
        return (self.end_us - self.start_us) / 1e6


@dataclass
class Timeline:
    """The complete spans of a timeline in the order they ended, the wall-clock start (µs since the epoch, None
    before Horovod 0.20) and what could not be read."""

    spans: list[Span] = field(default_factory=list)
    start_unix_us: int | None = None
    problems: list[str] = field(default_factory=list)

    def occurrences(self, op: str) -> dict[str, list[Span]]:
        """tensor -> its spans of ``op``, in time order."""
        found: dict[str, list[Span]] = {}
        for span in sorted((s for s in self.spans if s.op == op), key=lambda s: s.start_us):
            found.setdefault(span.tensor, []).append(span)
        return found


@dataclass(frozen=True)
class TensorTimes:
    """One tensor over the run: ``count`` allreduces, the seconds spent in negotiation and in allreduce (sums over
    its occurrences)."""

    tensor: str
    count: int
    negotiation_s: float
    allreduce_s: float


@dataclass(frozen=True)
class StepComm:
    """Step ``index`` (0-based, in the timeline's order) as its gradients' negotiations and allreduces show it
    (µs since Horovod's start): ``start_us`` (first negotiation start), ``ready_us`` (last negotiation end: every
    rank has handed over every gradient), ``end_us`` (last allreduce end); ``negotiation_s`` and ``allreduce_s``
    the sums over its ``tensors`` gradients (they overlap one another and the computation)."""

    index: int
    start_us: int
    ready_us: int
    end_us: int
    negotiation_s: float
    allreduce_s: float
    tensors: int

    @property
    def exposed_s(self) -> float:
        """Seconds of allreduce after every rank's last gradient: the part of the step's allreduce that the
        computation did not hide (0 when the last allreduce ended before the last negotiation did)."""
        return max(0, self.end_us - self.ready_us) / 1e6


def _events(text: str) -> tuple[list[dict], list[str]]:
    """The trace's event objects; a missing ``]``, a trailing comma and a cut-off last event are tolerated."""
    body = text.strip()
    problems: list[str] = []
    if not body.startswith("["):
        return [], ["not a Horovod timeline: it does not start with '[' (%r)" % body[:40]]
    for attempt in range(2):
        candidate = body.rstrip().rstrip(",")
        if not candidate.endswith("]"):
            candidate += "]"
        try:
            events = json.loads(candidate)
        except ValueError as e:
            if attempt:
                return [], problems + ["not valid trace JSON: %s" % e]
            cut = body.rfind("}")
            body = body[:cut + 1] if cut > 0 else "["
            problems.append("the file ends inside an event (cut off while Horovod wrote it); read up to the last "
                            "complete one")
            continue
        return [e for e in events if isinstance(e, dict)], problems
    return [], problems


def _closed(tensor: str, stack: list[dict], event: dict) -> Span | None:
    """Pop the innermost open span of ``tensor`` at ``event`` (an ``E``); the top-level Span when it closes."""
    top = stack.pop()
    if stack:
        stack[0]["activities"].append((top["op"], top["start"], int(event["ts"])))
        return None
    return Span(tensor, top["op"], top["start"], int(event["ts"]), tuple(top["activities"]), tuple(top["ranks"]),
                dict(event.get("args") or {}))


def parse(text: str) -> Timeline:
    """The ``Timeline`` of a timeline file's content."""
    events, problems = _events(text)
    timeline = Timeline(problems=problems)
    names: dict[int, str] = {}
    open_spans: dict[int, list[dict]] = {}
    for event in events:
        phase, pid = event.get("ph"), event.get("pid")
        if phase == "M":
            args = event.get("args") or {}
            if event.get("name") == "process_name" and "name" in args:
                names[pid] = str(args["name"])
            if "start_time_since_epoch_in_micros" in args:
                timeline.start_unix_us = int(args["start_time_since_epoch_in_micros"])
            continue
        if phase not in ("B", "E", "X") or pid not in names or "ts" not in event:
            continue
        stack = open_spans.setdefault(pid, [])
        if phase == "B":
            stack.append({"op": str(event.get("name")), "start": int(event["ts"]), "activities": [], "ranks": []})
        elif phase == "X" and stack and str(event.get("name", "")).isdigit():
            stack[0]["ranks"].append(int(event["name"]))
        elif phase == "E" and not stack:
            timeline.problems.append("%s: an end at %d µs without its start" % (names[pid], event["ts"]))
        elif phase == "E":
            span = _closed(names[pid], stack, event)
            if span is not None:
                timeline.spans.append(span)
    for pid, stack in open_spans.items():
        if stack:
            timeline.problems.append("%s: %s from %d µs never ended (the file ends inside it)"
                                     % (names[pid], stack[0]["op"], stack[0]["start"]))
    return timeline


def per_tensor(timeline: Timeline, op: str = ALLREDUCE) -> list[TensorTimes]:
    """Each tensor ``op`` reduced (allreduce by default): how often, and the seconds in its negotiations
    (``NEGOTIATE_<op>``) and in the operation, summed over the run; in the order the tensors first appeared."""
    ops, talks = timeline.occurrences(op), timeline.occurrences(NEGOTIATE + op)
    return [TensorTimes(t, len(spans), sum(s.seconds for s in talks.get(t, [])), sum(s.seconds for s in spans))
            for t, spans in sorted(ops.items(), key=lambda kv: kv[1][0].start_us)]


def gradients(timeline: Timeline) -> list[str]:
    """The tensors allreduced in every step: those allreduced most often, or one time less (a file cut off in
    the last step's allreduces lacks some of that step's) once the most is 3 or more; a tensor allreduced once
    at an epoch's end (metric averaging) is then never one of them."""
    counts = Counter({t: len(s) for t, s in timeline.occurrences(ALLREDUCE).items()})
    if not counts:
        return []
    most = max(counts.values())
    least = most - 1 if most >= 3 else most
    return [t for t, n in counts.items() if n >= least]


def steps(timeline: Timeline) -> list[StepComm]:
    """One ``StepComm`` per step: the k-th negotiation and allreduce of every gradient (``gradients``). Steps run
    as far as every gradient has both (a cut-off file's last step is left out)."""
    names = gradients(timeline)
    ops, talks = timeline.occurrences(ALLREDUCE), timeline.occurrences(NEGOTIATE + ALLREDUCE)
    if not names:
        return []
    count = min(min(len(ops[t]), len(talks.get(t, []))) for t in names)
    found = []
    for k in range(count):
        done, asked = [ops[t][k] for t in names], [talks[t][k] for t in names]
        found.append(StepComm(k, min(s.start_us for s in asked), max(s.end_us for s in asked),
                              max(s.end_us for s in done), sum(s.seconds for s in asked),
                              sum(s.seconds for s in done), len(names)))
    return found


def median_exposed_s(found: list[StepComm]) -> float | None:
    """The median ``exposed_s`` of ``found``; None for none."""
    return statistics.median(s.exposed_s for s in found) if found else None
