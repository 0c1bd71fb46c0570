"""Scaling-sweep results: one JSON file per sweep (``invoke bench``) or per published series (``bench/reference``).

A ``Sweep`` is a label (the system's name in the figure), a run record (what ran where) and one ``Point`` per
rank count: total images/s, images/s per rank (per GPU), scaling efficiency against one rank. Throughput is the
trainer's (throughput mode): per rank ``batch size / median step time`` over the timed steps after warm-up, summed
over ranks; the median ignores the odd slow step (a straggler, a GC pause) that a mean would smear over the run.

A point may carry several repeat readings (``repeats``: total images/s of each run of that count, in the order
run; ``invoke bench --repeats N``); its ``images_per_sec`` is then their median (``bench.stats`` gives the interval).
A file without ``repeats`` is one reading (``Point.readings``), as every sweep written before repeats existed.

Scaling efficiency at n ranks: ``E(n) = X(n) / (n · X(1))`` (X: total images/s, the median over repeats); undefined
without a 1-rank point.

Errors: ``load_sweep`` raises ChexstackError naming the file and field (or saying the file is not a sweep at all).
"""
from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError, model_validator

from chexstack.errors import ChexstackError

SCHEMA = "chexstack.bench.sweep/1"
REFERENCE_DIR = Path(__file__).resolve().parent / "reference"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepSplit(_Model):
    """Where a step's time went (``bench.attribution``, from a ``--timeline`` run): medians over the timed steps
    of rank 0's ``step_s``, its ``input_wait_s`` and the ``exposed_allreduce_s`` Horovod's timeline shows after
    every rank's last gradient; ``compute_s`` the rest (``step_s`` minus both: forward, backward, optimizer,
    framework). ``negotiation_s`` and ``allreduce_s``: a step's sums over its ``gradients`` tensors (overlapping);
    ``gradient_bytes``: trainable parameters × 4 (float32); seconds."""

    steps: int = Field(ge=1)
    step_s: float = Field(gt=0)
    compute_s: float
    input_wait_s: float = Field(ge=0)
    exposed_allreduce_s: float = Field(ge=0)
    negotiation_s: float = Field(ge=0)
    allreduce_s: float = Field(ge=0)
    gradients: int = Field(ge=0)
    gradient_bytes: int | None = None


class HostLoad(_Model):
    """One run's cores and their load over its timed steps (``throughput.json``'s ``host_load``, read by
    ``facts.procstat``). ``cpus_by_rank``: the CPUs each rank could use (``sched_getaffinity``; None where it could
    not say); ``hosts_by_rank``: each rank's host; ``cpu_s``: the ranks' CPU seconds summed; ``window_s``: the
    longest rank's window (wall seconds); ``images_per_cpu_s``: images of the timed steps (all ranks) per CPU second
    of the ranks; ``load1``: the highest 1-minute load average at the end, ``running``: the most runnable tasks at
    the end, ``steal_pct``: the highest steal (% of the ranks' CPUs' time) and ``foreign_cores``: foreign work on the
    ranks' CPUs (cores, summed over kernels), over the kernels the ranks ran on; ``foreign``: why the run counts as
    taken under foreign load (``facts.procstat.RunLoad.foreign``), empty when it does not."""

    cpus_by_rank: list[list[int] | None] = Field(default_factory=list)
    hosts_by_rank: list[str] = Field(default_factory=list)
    cpu_s: float | None = None
    window_s: float | None = None
    images_per_cpu_s: float | None = None
    load1: float | None = None
    running: int | None = None
    steal_pct: float | None = None
    foreign_cores: float | None = None
    foreign: list[str] = Field(default_factory=list)


class Point(_Model):
    """One rank count. ``images_per_sec``: total (the median of ``repeats`` where given, filled in from them when
    absent); ``repeats``: total images/s of each repeat in run order (empty: one reading); ``images_per_sec_per_rank``:
    total / count (per GPU); ``images_per_sec_by_rank``: each rank's own figure (with repeats: each rank's median);
    ``step_times_s``: rank 0's timed steps (seconds; with repeats: all repeats' in run order); ``step_split``:
    where a step's time went, from a ``--timeline`` run (with repeats: each field's median over them);
    ``host_load``: each repeat's cores and load (``HostLoad``)."""

    count: int = Field(ge=1)
    images_per_sec: float | None = Field(default=None, gt=0)
    repeats: list[PositiveFloat] = Field(default_factory=list)
    images_per_sec_per_rank: float | None = None
    images_per_sec_by_rank: list[float] = Field(default_factory=list)
    scaling_efficiency: float | None = None
    median_step_time_s: float | None = None
    step_times_s: list[float] = Field(default_factory=list)
    step_split: StepSplit | None = None
    #: one per repeat, in run order (empty: the trainer recorded none)
    host_load: list[HostLoad] = Field(default_factory=list)

    @model_validator(mode="after")
    def _median(self) -> "Point":
        if not self.repeats:
            if self.images_per_sec is None:
                raise ValueError("expected images_per_sec or repeats")
            return self
        median = statistics.median(self.repeats)
        if self.images_per_sec is None:
            self.images_per_sec = median
        elif not math.isclose(self.images_per_sec, median, rel_tol=1e-9):
            raise ValueError("images_per_sec %r is not the median %r of repeats %s"
                             % (self.images_per_sec, median, self.repeats))
        return self

    @property
    def readings(self) -> list[float]:
        """Total images/s of each repeat: ``repeats``, or the one reading ``[images_per_sec]``."""
        return list(self.repeats) or [self.images_per_sec]


def merge_repeats(readings: list[Point]) -> Point:
    """One count's repeat readings (same count, in run order) as one ``Point``: ``repeats`` each reading's total
    images/s, ``images_per_sec`` their median, per rank the median of each rank's figures, ``step_times_s`` all
    repeats' timed steps in run order and their median. One reading is returned as it is (no ``repeats`` list, as
    a sweep of one repeat was always written). Raises ValueError for no readings or mixed counts."""
    if not readings or len({p.count for p in readings}) != 1:
        raise ValueError("expected the readings of one count, got %s" % [p.count for p in readings])
    if len(readings) == 1:
        return readings[0]
    by_rank = [p.images_per_sec_by_rank for p in readings]
    steps = [t for p in readings for t in p.step_times_s]
    splits = [p.step_split for p in readings if p.step_split is not None]
    return Point(count=readings[0].count, repeats=[p.images_per_sec for p in readings],
                 host_load=[h for p in readings for h in p.host_load],
                 images_per_sec_by_rank=[statistics.median(r) for r in zip(*by_rank)] if all(by_rank) else [],
                 median_step_time_s=statistics.median(steps) if steps else None, step_times_s=steps,
                 step_split=merge_splits(splits) if len(splits) == len(readings) else None)


def merge_splits(splits: list[StepSplit]) -> StepSplit:
    """Repeats' splits as one: each field's median (``steps`` their sum); the parts then need not add up exactly."""
    fields = {name: statistics.median(getattr(s, name) for s in splits)
              for name in ("step_s", "compute_s", "input_wait_s", "exposed_allreduce_s", "negotiation_s",
                           "allreduce_s")}
    return StepSplit(steps=sum(s.steps for s in splits), gradients=splits[0].gradients,
                     gradient_bytes=splits[0].gradient_bytes, **fields)


class RunRecord(_Model):
    """What ran where. All fields optional: a published series knows less than a sweep run here."""

    time: str | None = None
    git_revision: str | None = None
    git_dirty: bool | None = None
    stack: str | None = None
    image: str | None = None
    image_id: str | None = None
    image_repo_digests: list[str] = Field(default_factory=list)
    launcher: str | None = None
    hosts: list[str] = Field(default_factory=list)
    device: Literal["gpu", "cpu"] | None = None
    count_unit: Literal["GPUs", "CPU ranks"] | None = None
    gpu_model: str | None = None
    gpu_count: int | None = None
    driver: str | None = None
    interconnect: str | None = None
    interconnect_ports: list[dict] = Field(default_factory=list)
    model: str | None = None
    batch_size_per_rank: int | None = None
    image_size: int | None = None
    steps: int | None = None
    warmup_steps: int | None = None
    amp: bool | None = None
    data: str | None = None
    label_sha256: str | None = None
    train_split_sha256: str | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)
    #: what drifted at run time (``launch.drift``: ranks that disagree, the stack's manifest), "N ranks: ..." per
    #: count; empty when nothing drifted or the trainer recorded no as-run facts
    drift: list[str] = Field(default_factory=list)
    hostname: str | None = None
    cpu_count: int | None = None
    input_capacity: dict | None = None
    #: the paired rounds these repeats were read in (``bench.study``: "<study> seed <N>"): two sweeps with the same
    #: value ran round by round, repeat i of every point in round i, so their difference is paired
    #: (``bench.stats.paired_difference``); None: a sweep of its own (unpaired)
    paired_rounds: str | None = None
    #: the network path the series declared (``bench.netpath.PATHS``: host, overlay, bridge); None: not declared
    network_path: str | None = None
    #: what its ranks' namespaces showed (``bench.netpath.observe``, "observed": one per rank namespace) and the
    #: controller's transport in their log (``bench.netpath.transport``, "transport")
    network: dict | None = None
    notes: list[str] = Field(default_factory=list)


class Sweep(_Model):
    """One labelled series of points, sorted by count; scaling efficiencies filled in on load."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_id: Literal["chexstack.bench.sweep/1"] = Field(default=SCHEMA, alias="schema")
    label: str = Field(min_length=1)
    source: str | None = None
    record: RunRecord = Field(default_factory=RunRecord)
    points: list[Point] = Field(min_length=1)

    @model_validator(mode="after")
    def _derive(self) -> "Sweep":
        counts = [p.count for p in self.points]
        if len(set(counts)) != len(counts):
            raise ValueError("each count may appear once, got %s" % counts)
        self.points.sort(key=lambda p: p.count)
        base = self.point(1)
        for p in self.points:
            if p.images_per_sec_per_rank is None:
                p.images_per_sec_per_rank = p.images_per_sec / p.count
            if p.scaling_efficiency is None and base is not None:
                p.scaling_efficiency = p.images_per_sec / (p.count * base.images_per_sec)
        return self

    def point(self, count: int) -> Point | None:
        return next((p for p in self.points if p.count == count), None)

    @property
    def unit(self) -> str:
        return self.record.count_unit or "GPUs"


class Reading(NamedTuple):
    """One count's result as the trainer reported it: the point, its device ("GPU"/"CPU"), software versions
    (Python, TensorFlow, Horovod, and the MPI library the ranks mapped: ``openmpi`` or ``mpi``), and the data's
    identity (``label_sha256``: the label file's content; ``train_split_sha256``: the training split's sorted image
    names; None for synthetic data or a trainer that did not record them), and its drift (``reading_drift``)."""

    point: Point
    device: str | None
    versions: dict
    dataset: dict
    drift: tuple = ()


def with_reading(record: RunRecord, reading: Reading) -> RunRecord:
    """``record`` with what the trainer reported and the record does not say yet: versions and the data's
    hashes; and every count's drift, added."""
    updates = {"versions": record.versions or reading.versions,
               "drift": record.drift + ["%d ranks: %s" % (reading.point.count, line) for line in reading.drift
                                        if "%d ranks: %s" % (reading.point.count, line) not in record.drift]}
    updates.update({k: v for k, v in reading.dataset.items() if v and not getattr(record, k)})
    return record.model_copy(update=updates)


def point_from_throughput(count: int, data: dict, source: str) -> Reading:
    """The ``Reading`` of the trainer's ``throughput.json`` content (``trainer.outputs``: ``images_per_sec {total,
    per_rank}``, ``step_times_s`` of all steps, ``warmup_steps``, ``world_size``, ``device``, ``versions``,
    ``label_sha256``, ``splits.train.sha256``). The
    trainer's total is the sum over ranks of batch / median timed step time. Raises ChexstackError naming
    ``source`` when the data does not describe ``count`` ranks or lacks timed steps."""
    if data.get("world_size") != count:
        raise ChexstackError("%s: world_size %r, expected %d" % (source, data.get("world_size"), count))
    warmup = int(data.get("warmup_steps") or 0)
    timed = [float(t) for t in (data.get("step_times_s") or [])[warmup:]]
    ips = data.get("images_per_sec") or {}
    if not timed or min(timed) <= 0 or not ips.get("total"):
        raise ChexstackError("%s: expected images_per_sec.total and positive step_times_s after %d warm-up steps"
                             % (source, warmup))
    total = float(ips["total"])
    load = host_load(data, source)
    point = Point(count=count, images_per_sec=total, images_per_sec_per_rank=total / count,
                 images_per_sec_by_rank=[float(v) for v in ips.get("per_rank") or []],
                 median_step_time_s=statistics.median(timed), step_times_s=timed, host_load=[load] if load else [])
    train = ((data.get("splits") or {}).get("train") or {}).get("sha256")
    return Reading(point, data.get("device"), {k: None if v is None else str(v)
                                               for k, v in (data.get("versions") or {}).items()},
                   {"label_sha256": data.get("label_sha256"), "train_split_sha256": train}, reading_drift(data))


def host_load(data: dict, source: str) -> HostLoad | None:
    """The ``HostLoad`` of a throughput.json's ``host_load`` (``trainer.hostload``, one entry per rank); None for a
    trainer that recorded none. Ranks are grouped by kernel (``boot_id``, else host): each kernel's window is its
    lowest rank's readings, on the union of its ranks' CPUs, against the sum of their CPU time. Raises
    ChexstackError naming ``source`` for readings that are not /proc text."""
    from facts import procstat

    ranks = data.get("host_load") or []
    if not ranks:
        return None
    found = HostLoad(cpus_by_rank=[r.get("cpus") for r in ranks], hosts_by_rank=[r.get("host") or "" for r in ranks])
    timed = [r for r in ranks if r.get("window_s") and r.get("stat") and r.get("cpu_s") is not None]
    if len(timed) != len(ranks):
        return found  # a rank without its window: nothing is judged from part of the run
    kernels: dict[str, list[dict]] = {}
    for r in timed:
        kernels.setdefault(r.get("boot_id") or r.get("host") or "", []).append(r)
    try:
        loads = [procstat.window(first["stat"][0], first["stat"][1],
                                 sorted({c for r in group for c in (r.get("cpus") or [])}),
                                 sum(float(r["cpu_s"]) for r in group), float(first["window_s"]),
                                 float(first.get("ticks_per_s") or 100), (first.get("loadavg") or [None, None])[1])
                 for group in kernels.values() for first in group[:1]]
    except ValueError as e:
        raise ChexstackError("%s: host_load: %s" % (source, e)) from None
    cpu_s = sum(float(r["cpu_s"]) for r in timed)
    images = int(data.get("timed_steps") or 0) * int(data.get("batch_size") or 0) * len(ranks)
    return found.model_copy(update={
        "cpu_s": cpu_s, "window_s": max(float(r["window_s"]) for r in timed),
        "images_per_cpu_s": images / cpu_s if images and cpu_s > 0 else None,
        "load1": max((x.load1 for x in loads if x.load1 is not None), default=None),
        "running": max((x.running for x in loads if x.running is not None), default=None),
        "steal_pct": max(x.steal_pct for x in loads), "foreign_cores": sum(x.foreign_cores for x in loads),
        "foreign": [why for x in loads for why in x.foreign]})


def reading_drift(data: dict) -> tuple[str, ...]:
    """A throughput.json's drift: its ``drift`` (the launcher's, ``launch.drift``, against the stack too), else
    its ranks compared with each other (a count run by a scheduler); () without as-run facts (a trainer from
    before it recorded them: not judged)."""
    from launch.drift import between_ranks

    if "drift" in data:
        return tuple(data["drift"] or ())
    return tuple(between_ranks(data["as_run"])) if data.get("as_run") else ()


def load_sweep(path: str | Path) -> Sweep:
    """Read one sweep or reference JSON file. Raises ChexstackError naming the file and the bad field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ChexstackError("%s: cannot read: %s" % (path, e.strerror)) from None
    except ValueError as e:
        raise ChexstackError("%s: not valid JSON: %s" % (path, e)) from None
    if not isinstance(data, dict) or not {"schema", "label", "points"} & set(data):
        raise ChexstackError("%s is not a %s result (no 'schema', 'label' or 'points'); expected a sweep JSON of "
                             "`invoke bench` or bench/reference/*.json" % (path, SCHEMA))
    if data.get("schema", SCHEMA) != SCHEMA:
        raise ChexstackError("%s: schema %r, expected %s" % (path, data["schema"], SCHEMA))
    try:
        return Sweep.model_validate(data)
    except ValidationError as e:
        raise ChexstackError("\n".join("%s: field %s: %s" % (path, ".".join(str(p) for p in err["loc"]) or
                                                              "(top level)", err["msg"])
                                       for err in e.errors())) from None


def save_sweep(sweep: Sweep, path: str | Path) -> Path:
    """Write ``sweep`` as indented JSON, atomically (a temporary file in the same folder, then rename; none is left
    behind on failure), readable as any file this process writes (mode 0666 less the umask). Raises OSError when
    the folder cannot be written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".%s." % path.name)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # a result file's mode as open() gives it, not mkstemp's 0600
        with os.fdopen(fd, "w") as f:
            f.write(sweep.model_dump_json(by_alias=True, indent=2) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
