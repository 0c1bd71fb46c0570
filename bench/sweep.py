"""The scaling sweep behind ``invoke bench``: the trainer's throughput mode at each rank count, one JSON per sweep.

The sweep is a list of requests (``throughput_requests``: one ``launch.request.TrainRequest`` per count N, its
trainer command line ``throughput_argv``). Each runs through the launcher seam as ``invoke train`` runs
(``launch.run``); rank 0 writes ``throughput.json`` (its fields: ``trainer.outputs``), which becomes a ``Point``; then
the ``Sweep`` with its run record is written to ``<output>/<label>-<UTC time>.json``. Per-count run folders
(trainer output + launch log) stay under ``runs/bench/<label>-<UTC time>/np-<N>/``.

Launchers that run here and wait: ``local`` (horovodrun on this host) and ``mpirun`` (horovodrun's MPI controller
across ``--hosts``). ``slurm`` and ``k8s`` go through a scheduler instead: ``bench.batch`` renders the jobs and
``collect`` turns their output folder into the same JSON.

Counts are GPUs where the host has GPUs, else CPU ranks (the record's ``count_unit`` says which). A count larger
than the slots available is an error before anything runs — a sweep with a silently missing point would draw a
misleading figure; run the counts that fit (``--gpus 1,2``) or add hosts.
"""
from __future__ import annotations

import argparse
import functools
import json
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import launch
from bench import attribution, sysinfo
from bench.results import (
    Point,
    Reading,
    RunRecord,
    Sweep,
    merge_repeats,
    point_from_throughput,
    save_sweep,
    with_reading,
)
from chexstack.console import console, warn
from chexstack.errors import ChexstackError, ExitCode
from chexstack.outputs import output_folder
from envs.manifest import load_stack
from facts import host
from launch.cluster import cluster_path
from launch.options import LAUNCHERS, SCHEDULED, SWEEP_DEFAULTS, SWEEP_OPTIONS, check_launcher, flag, trainer_options
from launch.request import TrainRequest, trainer_errors
from trainer import preflight

THROUGHPUT_FILE = "throughput.json"
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class SweepRequest:
    """What ``invoke bench`` asked for. ``counts``: rank counts, GPUs with ``gpus`` (``--gpus``, one rank per GPU,
    as ``invoke train --gpus N``) or else CPU ranks (``--np``, as ``invoke train --gpus 0 --np N``); ``hosts``:
    ``host:slots``; ``repeats``: runs of each count, round-robin (``repeated_requests``); ``argv``: the trainer's
    own options of every count (``launch.options.SWEEP_OPTIONS``: ``--model``, ``--batch-size`` per rank,
    ``--steps`` timed after ``--warmup-steps``, ``--amp``, ``--horovod-timeline``, ...), read through the
    trainer's parser (``options``, and a property for each) as ``TrainRequest``'s are, the trainer's defaults for
    the rest; ``timeline``: each run also records Horovod's timeline and its input waits, and its point gets a
    ``step_split`` (``bench.attribution``)."""

    counts: tuple[int, ...]
    label: str
    gpus: bool = True
    launcher: str = "local"
    hosts: tuple[str, ...] = ()
    stack: str | None = None
    image: str | None = None
    repeats: int = 1
    argv: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "argv", tuple(self.argv))

    @functools.cached_property
    def options(self) -> argparse.Namespace:
        """The trainer's values of every count: ``argv`` in the throughput mode, ``SWEEP_DEFAULTS`` where the
        trainer has no default (``--data synthetic``), the trainer's defaults for the rest. ChexstackError for an
        unknown option or a value of the wrong type."""
        defaults = [word for name, value in SWEEP_DEFAULTS.items() for word in (flag(name), value)]
        with trainer_errors():
            return preflight.parse_options(defaults + ["--throughput", *self.argv])

    model = property(lambda self: self.options.model, doc="``--model``")
    batch_size = property(lambda self: self.options.batch_size, doc="``--batch-size``: images per rank per step")
    image_size = property(lambda self: self.options.image_size, doc="``--image-size``")
    steps = property(lambda self: self.options.steps, doc="``--steps``: timed steps")
    warmup_steps = property(lambda self: self.options.warmup_steps, doc="``--warmup-steps``")
    data = property(lambda self: self.options.data, doc="``--data``: a folder or 'synthetic'")
    amp = property(lambda self: self.options.amp, doc="``--amp``")
    timeline = property(lambda self: self.options.horovod_timeline, doc="``--horovod-timeline``")

    @property
    def count_option(self) -> str:
        """The option the counts came from: ``--gpus`` or ``--np``."""
        return "--gpus" if self.gpus else "--np"

    def check(self) -> "SweepRequest":
        """Raise ChexstackError naming the option that cannot work."""
        if not self.counts or any(n < 1 for n in self.counts) or len(set(self.counts)) != len(self.counts):
            raise ChexstackError("%s %s: expected distinct counts >= 1, e.g. 1,2,3,4,8"
                                 % (self.count_option, ",".join(map(str, self.counts))))
        if not _LABEL.match(self.label):
            raise ChexstackError("--label %r: expected letters, digits, '.', '_' or '-' (it names the result file)"
                                 % self.label)
        check_launcher(self.launcher, LAUNCHERS)
        if self.repeats < 1:
            raise ChexstackError("--repeats %d: expected 1 or more runs of each count" % self.repeats)
        # model, sizes and steps are judged by the trainer's own parser, as for invoke train (trainer.preflight)
        throughput_requests(self, "bench-check")[0].check()
        if self.launcher in SCHEDULED:  # the data are the cluster's: absolute, not checked here
            cluster_path(self.launcher, "--data", self.data)
        elif self.data != "synthetic" and not Path(self.data).is_dir():
            raise ChexstackError("--data %s: expected 'synthetic' or a ChestX-ray14 folder" % self.data)
        place(self)  # where the counts run: the seam's rules (launch.where: --hosts, --stack, the scheduler)
        return self


def throughput_argv(req: SweepRequest, output: str) -> tuple[str, ...]:
    """The ``python -m trainer`` command line of one count writing into ``output``: the trainer's throughput mode
    (trainer/cli.py, "throughput mode") with every sweep option (``SWEEP_OPTIONS``, in the trainer's order) and
    its value, given or the trainer's default, so that a job states what it times."""
    argv: list[str] = []
    for option in trainer_options(only=SWEEP_OPTIONS + ("throughput",)):
        value = getattr(req.options, option.name)
        argv += ([option.flag] if value else []) if option.is_switch else [option.flag, str(value)]
    return tuple(argv) + ("--output", output)


def throughput_requests(req: SweepRequest, root: str) -> list[TrainRequest]:
    """The sweep as a list of requests, one per count, smallest first: ``count`` GPUs (one rank each) or CPU ranks
    (``req.gpus``), each writing into ``<root>/np-<count>``; every ``invoke train`` launcher runs one unchanged
    (``launch.run`` here, ``bench.batch`` for a scheduler). Its count is ``request.ranks()``."""
    return [TrainRequest(gpus=n if req.gpus else 0, np=None if req.gpus else n,
                         argv=throughput_argv(req, "%s/np-%d" % (root, n))) for n in sorted(req.counts)]


def repeated_requests(req: SweepRequest, root: str) -> list[tuple[int, TrainRequest]]:
    """(repeat, request) in run order: round-robin, every count of repeat 1 (smallest first), then of repeat 2, …
    (counts 1,2,1,2,…), so that drift on the machine (another job, a warming node) hits every count alike. One
    repeat writes ``<root>/np-<N>`` (``throughput_requests``); more write ``<root>/repeat-<r>/np-<N>``."""
    if req.repeats == 1:
        return [(1, request) for request in throughput_requests(req, root)]
    return [(r, request) for r in range(1, req.repeats + 1)
            for request in throughput_requests(req, "%s/repeat-%d" % (root, r))]


#: The seed's Figure 1 counts: what a sweep that fits is built from when none of the requested counts fit.
FIGURE1_COUNTS = (1, 2, 3, 4, 8)


def check_slots(counts: tuple[int, ...], slots: int, where: str, option: str = "--gpus") -> None:
    """Raise ChexstackError when a count needs more slots than ``where`` has, naming the counts that fit (for
    ``option``, ``--gpus`` or ``--np``): the requested ones that do, else Figure 1's counts up to ``slots`` (and
    ``slots`` itself)."""
    too_big = [n for n in counts if n > slots]
    if too_big:
        fits = [n for n in counts if n <= slots] or sorted({n for n in FIGURE1_COUNTS if n <= slots} | {slots})
        raise ChexstackError("count(s) %s exceed the %d slot(s) of %s; counts up to %d fit: run %s %s, or add "
                             "hosts (--launcher mpirun --hosts)" % (",".join(map(str, too_big)), slots, where, slots,
                                                                     option, ",".join(map(str, fits))))


def stamp(now: datetime | None = None) -> str:
    """UTC time for file names: 20240131T120501Z."""
    return (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")


def request_record(req: SweepRequest, repo: Path, now: datetime) -> RunRecord:
    """The record fields that do not depend on where the ranks run: time, git state, the request."""
    rev, dirty = host.git_state(repo)
    return RunRecord(time=now.isoformat(timespec="seconds"), git_revision=rev, git_dirty=dirty, stack=req.stack,
                     launcher=req.launcher, hosts=list(req.hosts), model=req.model,
                     batch_size_per_rank=req.batch_size, image_size=req.image_size, steps=req.steps,
                     warmup_steps=req.warmup_steps, amp=req.amp, data=req.data)


def with_gpus(record: RunRecord, gpus: list[tuple[str, str]], where: str) -> RunRecord:
    """``record`` with device, count unit, GPU model, count and driver from ``gpus`` [(model, driver)]."""
    notes = record.notes if gpus else record.notes + ["no GPU on %s: counts are CPU ranks" % where]
    return record.model_copy(update={
        "device": "gpu" if gpus else "cpu", "count_unit": "GPUs" if gpus else "CPU ranks",
        "gpu_model": gpus[0][0] if gpus else None, "gpu_count": len(gpus), "driver": gpus[0][1] if gpus else None,
        "notes": notes})


def host_record(req: SweepRequest, repo: Path, now: datetime) -> RunRecord:
    """The record of a sweep that runs from this host: the request plus this host's GPUs, interconnect, cores."""
    link = host.interconnect()
    gpus = host.gpus()
    record = request_record(req, repo, now)
    record = (with_gpus(record, gpus, sysinfo.hostname()) if req.gpus else
              record.model_copy(update={"device": "cpu", "count_unit": "CPU ranks"}))
    if req.stack:
        from images.naming import image_ref

        ref = req.image or image_ref(load_stack(req.stack))
        image_id, digests = sysinfo.image_identity(ref)
        record = record.model_copy(update={"image": ref, "image_id": image_id, "image_repo_digests": digests})
    return record.model_copy(update={
        "hosts": list(req.hosts) or ["%s:%d" % (sysinfo.hostname(), len(gpus) or host.cpu_cores())],
        "interconnect": link.summary, "interconnect_ports": link.ports, "hostname": sysinfo.hostname(),
        "cpu_count": host.cpu_cores()})


def settle_device(record: RunRecord, devices: set) -> RunRecord:
    """The trainer's own device ("GPU"/"CPU" in throughput.json) decides what the counts are; a disagreement with
    the GPUs the host listed is kept as a note."""
    if devices == {"CPU"} and record.device != "cpu":
        notes = record.notes + (["%d GPU(s) listed, but the trainer ran on CPU (a CPU-only TensorFlow?)"
                                 % (record.gpu_count or 0)] if record.device == "gpu" else [])
        return record.model_copy(update={"device": "cpu", "count_unit": "CPU ranks", "notes": notes})
    if devices == {"GPU"} and record.device != "gpu":
        return record.model_copy(update={"device": "gpu", "count_unit": "GPUs", "notes": [
            n for n in record.notes if not n.startswith("no GPU")] + ["GPU model and driver not recorded"]})
    return record


def keep_sweep(sweep: Sweep, path: Path, fallback: Path) -> Path:
    """Write ``sweep`` to ``path``, or — when that fails (a folder that became unwritable while the sweep ran) — to
    ``fallback`` beside the run's own files, saying so: a finished sweep is never lost to its last write. Returns
    where it went; raises ChexstackError when neither can be written."""
    try:
        return save_sweep(sweep, path)
    except OSError as e:
        first = e.strerror or str(e)
    try:
        written = save_sweep(sweep, fallback)
    except OSError as e:
        raise ChexstackError("cannot write the sweep to %s (%s) nor to %s (%s); the per-count results stay in %s"
                             % (path, first, fallback, e.strerror or e, fallback.parent)) from None
    warn("cannot write %s (%s); the sweep went to %s instead" % (path, first, written))
    return written


def read_point(count: int, run_dir: Path) -> Reading:
    """The ``Reading`` of ``run_dir/throughput.json``, its point split (``bench.attribution.split_run``) when the
    run recorded a Horovod timeline. Raises ChexstackError when it is missing or wrong."""
    path = run_dir / THROUGHPUT_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ChexstackError("%s: expected the trainer's throughput result (%s)" % (path, e)) from None
    reading = point_from_throughput(count, data, str(path))
    found = attribution.split_run(run_dir, data)
    return reading._replace(point=reading.point.model_copy(update={"step_split": found})) if found else reading


def available_slots(req: SweepRequest, record: RunRecord) -> tuple[int, str]:
    """(slots, where) for the synchronous launchers: this host's GPUs (else CPU cores), or the ``--hosts``."""
    if req.hosts:  # Horovod's MPI across them (--hosts goes with --launcher mpirun only: launch.where)
        from launch.horovodrun import slots
        return sum(slots(h) for h in req.hosts), "hosts %s" % ",".join(req.hosts)
    if not req.gpus:
        return host.cpu_cores(), "this host (%d CPU cores for CPU ranks)" % host.cpu_cores()
    if not record.gpu_count:
        raise ChexstackError("--gpus %s: this host has no GPU (nvidia-smi); sweep CPU ranks with --np %s (as "
                             "invoke train --gpus 0 --np N)" % (",".join(map(str, req.counts)),
                                                                 ",".join(map(str, req.counts))))
    return record.gpu_count, "this host (%d GPUs)" % record.gpu_count


def place(req: SweepRequest) -> launch.Where:
    """Where the sweep's counts run (``launch.where``): in the stack's image with ``--stack`` (as ``invoke train
    --stack``), else horovodrun here (``local``, as ``invoke train``) or Horovod's MPI across ``--hosts``
    (``mpirun``)."""
    return launch.where(req.launcher, known=LAUNCHERS, stack=req.stack, image=req.image, hosts=req.hosts)


def input_capacity(record: RunRecord, points: list[Point], measure=None, data: str | None = None) -> dict | None:
    """The cores' PNG decode bound (``facts.decoderate`` on up to 8 PNGs of the sweep's ``--data`` folder when it
    is a folder of PNGs, else on the shipped 1024² sample; one core, a few seconds)
    against the sweep's largest GPU count at the node's own measured 1-GPU rate (else the published rate of the
    GPU's kind, ``facts.gpu_rates``): ``{"decode": the measurement, "gpus", "per_gpu", "per_gpu_source", "supply",
    "need", "fed", "ok", "line"}``, or None for a CPU sweep, without a sample, a measured decode rate or a per-GPU
    rate. ``measure(argv) -> ToolRun``: how the measurement runs (``chexstack.tools.run``)."""
    from chexstack import tools
    from facts import decoderate, gpu_rates

    paths = (data and decoderate.sample_paths(data)) or decoderate.sample_paths()
    if record.device != "gpu" or not points or not paths:
        return None
    result = decoderate.parse((measure or tools.run)(decoderate.command(paths), timeout=120).stdout)
    if not result or "per_core" not in result:
        return None
    one, kind = next((p for p in points if p.count == 1), None), record.gpu_model or "GPU"
    published = gpu_rates.published(kind)
    if one is not None:
        per_gpu, source = one.images_per_sec, "measured here, 1 GPU"
    elif published is not None:
        per_gpu, source = published.at(record.image_size or gpu_rates.IMAGE_SIZE, bool(record.amp)), published.source
    else:
        return None
    gpus = max(p.count for p in points)
    verdict = gpu_rates.capacity(result["per_core"], result["cores"], gpus, kind, per_gpu,
                                 record.image_size or gpu_rates.IMAGE_SIZE,
                                 "%s img/s each, %s" % (gpu_rates.count_text(per_gpu), source))
    return {"decode": result, "gpus": gpus, "per_gpu": per_gpu, "per_gpu_source": source, "supply": verdict.supply,
            "need": verdict.need, "fed": verdict.fed, "ok": verdict.ok, "line": verdict.line}


def run_sweep(req: SweepRequest, repo: Path, output: Path, runs: Path) -> tuple[Sweep, Path]:
    """Run every count (smallest first; with repeats round-robin, ``repeated_requests``: each count's readings become
    one point, ``merge_repeats``) through the launcher seam (``launch.run`` at ``place(req)``: the same
    ``launch.local.execute`` as ``invoke train``'s run, under each count's output lock), then write the sweep
    JSON (``keep_sweep``: into ``runs/<tag>/`` when ``output`` has become unwritable); returns it and its path.
    Raises ChexstackError before anything runs when a count does not fit or ``output`` cannot be written, and
    (exit 1) with the log's end when a run fails."""
    req.check()
    if req.launcher in SCHEDULED:
        raise ChexstackError("--launcher %s runs through its scheduler: use --render/--submit, then --collect"
                             % req.launcher)
    output_folder(output, "--output")
    now = datetime.now(timezone.utc)
    tag = "%s-%s" % (req.label, stamp(now))
    record = host_record(req, repo, now)
    slots, where = available_slots(req, record)
    check_slots(req.counts, slots, where, req.count_option)
    readings: dict[int, list[Point]] = {}
    devices, placed = set(), place(req)
    for repeat, request in repeated_requests(req, str((runs / tag).resolve())):
        n = request.ranks()
        of = ", repeat %d/%d" % (repeat, req.repeats) if req.repeats > 1 else ""
        heading = "%d %s%s" % (n, record.count_unit, of)
        start = time.monotonic()
        try:
            launch.run(request, placed, heading=heading)
        except ChexstackError as e:
            raise ChexstackError("throughput run with %d ranks%s: %s" % (n, of, e), exit_code=ExitCode.FAILED) from None
        wall = time.monotonic() - start
        reading = read_point(n, Path(request.options.output))
        point = reading.point
        readings.setdefault(n, []).append(point)
        devices.add(reading.device)
        record = with_reading(record, reading)
        console.print("  %2d %s%s: [bold]%.1f images/s[/] (%.1f per rank), median step %.3f s, run %.0f s" % (
            n, record.count_unit, of, point.images_per_sec, point.images_per_sec_per_rank, point.median_step_time_s,
            wall))
    points = [merge_repeats(readings[n]) for n in sorted(readings)]
    record = settle_device(record, devices)
    capacity = input_capacity(record, points, data=None if req.data == "synthetic" else req.data)
    if capacity is not None:
        (console.print if capacity["ok"] else warn)("input capacity: " + capacity["line"])
        record = record.model_copy(update={"input_capacity": capacity})
    sweep = Sweep(label=req.label, record=record, points=points)
    return sweep, keep_sweep(sweep, output / (tag + ".json"), runs / tag / (tag + ".json"))
