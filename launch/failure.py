"""Why a training run failed, in one message, from what its launcher (horovodrun, mpirun, ``launch.slurmjob``)
printed: the first rank to exit and its code, then that rank's own reason — its ``trainer: error:`` line, else the
first exception in time that is not a consequence of another rank's failure, else the last exception line of its
output, never horovodrun's own RuntimeError traceback — a host mpirun or Slurm lost (with the ranks the trainer
placed there), the cause of a NCCL failure in the ranks' NCCL_DEBUG lines (``nccl_diagnosis``: the classifier and
remedies of validate's NCCL checks), a fault validate's checks name too (Horovod built for another TensorFlow, a
driver older than the ranks' CUDA: ``runtime_diagnosis``, ``RUNTIME_REMEDY``), the CUDA libraries TensorFlow could
not load, and for exit 139 under Gloo the loopback cause (``launch.controller.GLOO_ON_LOOPBACK``) where the ranks
were on loopback, else a segfault of the rank (``gloo_segfault``). The output itself is read by
``facts.parsers.horovodrun``; the full output stays in the log.

The first anomaly comes first (``first_fault_diagnosis``): the earliest fault-class line on any rank, read in time
order behind every launcher's prefix (``facts.parsers.faults``: a container that did not start, a GPU, MPI, memory,
NCCL, an exception, a crash, a kill), or Horovod's stall warnings, a hang of their own (``stall_diagnosis``,
``facts.parsers.horovod_stall``), with its known cause's code and remedy (``facts.parsers.faults.CAUSES``; a crash
with its signal, the library of its first native frame and an uncaught C++ exception's message: ``crash_detail``);
what only follows from it (Horovod's shutdown on the other ranks, Open MPI's
banner, the first rank to exit) is said after it. A log with a fault-class line is never "no failure found": a
first fault no part explains is an "unclassified failure", the line quoted with its kind's next step.

A launch that failed before the ranks ran (ssh, the remote daemon, slots, PMI) is named by the launcher's own line
that tells the causes apart and its cause (``facts.parsers.mpi.classify_launch``, the classifier validate's
``mpi.launch`` uses too) with that cause's remedy (``LAUNCH_REMEDY``, ``launch_diagnosis``), never by the last lines
of Open MPI's generic banner. ``OutputReader`` reads a run's output line by line into its ``Outcome``, for a run
(``launch.stream``) and for a saved log (``explain_log``: ``invoke train --explain LOG``).
"""
from __future__ import annotations

import collections
import dataclasses
import re
import signal

from facts.faults_table import CODES, remedies, remedy
from facts.parsers import horovodrun as hr
from facts.parsers.container import classify_container_fatal, classify_runtime_error
from facts.parsers.faults import CAUSE, CONSEQUENCES, KIND, FaultLine, FaultScanner, crash_owner, split_rank
from facts.parsers.horovod import version_mismatch
from facts.parsers.horovod_stall import Stall
from facts.parsers.mpi import LaunchFailure, classify_launch
from facts.parsers.nccl import classify_nccl_failure, parse_nccl_log, strip_prefixes
from facts.parsers.pyxis import classify_pyxis
from facts.parsers.slurm import LOST_NODE_LINE
from launch.controller import GLOO_FIXES, GLOO_ON_LOOPBACK, is_loopback
from launch.k8s import LAUNCHER_CREATION_POLICY, is_worker_host
from trainer.preflight import parse_event

_ERROR = "trainer: error: "
#: mpirun's rank prefix (``--tag-output``: ``[jobid,rank]<stdout>:``); Gloo's is ``[rank]<stdout>:``
_MPI_PREFIX = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:")
TAIL_LINES = 25
RANK_TAIL_LINES = 60
#: the launcher's own lines (no rank prefix) an Outcome keeps: Open MPI's help messages and ssh's lines of a
#: failed launch are a few dozen; a long run's launcher lines (Slurm's, horovodrun's) are few
LAUNCHER_LINES = 300
#: a line of NCCL's own (``host:pid:tid [dev] NCCL INFO|WARN ...``) or about NCCL (a rank's ``ncclCommInitRank
#: failed: unhandled system error``): an Outcome keeps every one, wherever it falls in the log, for the NCCL
#: classifier (``nccl_diagnosis``). They are few: NCCL prints its INFO lines when a communicator is set up and its
#: WARN lines when something fails (per-operation lines only with ``NCCL_DEBUG_SUBSYS=COLL``).
_NCCL_LINE = re.compile(r"nccl", re.I)
#: NCCL lines kept from a run's output: its first ones (the transport and the communicators' setup come first) and,
#: as many again, its warnings and errors wherever they are. NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=COLL logs a
#: line per collective: a long run must not keep them all.
NCCL_KEEP = 2000
_NCCL_WARN = re.compile(r"NCCL (WARN|ERROR)|error", re.I)


@dataclasses.dataclass
class Outcome:
    """What a run left: horovodrun's return code, the first failing (rank, exit code), the ranks' ``trainer:
    error:`` lines, the last lines of output, the log path, the last lines of each rank (by rank), the signal
    that interrupted the run (None if none did), the first exception in time that is a cause (rank, line), the host
    whose mpirun daemon was lost, the host of the first failing rank (when mpirun says), each rank's host and the
    first node Slurm held lost."""
    returncode: int | None  # None: not known (a saved log)
    first_failure: tuple[int, int] | None
    errors: list[str]
    tail: list[str]
    log_path: str
    rank_tails: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    interrupted: int | None = None
    first_exception: tuple[int, str] | None = None
    lost_host: str | None = None
    failure_host: str | None = None
    hosts: list[str] | None = None  # each rank's host (rank order), from the trainer's ``run`` event
    slurm_lost: tuple[str, str] | None = None  # the first node Slurm held lost: (name, "STATE (reason: ...)")
    launcher_lines: list[str] = dataclasses.field(default_factory=list)  # the last lines without a rank prefix
    command: str | None = None  # the launch command, as the log's ``$ argv`` line gives it
    nccl_lines: list[str] = dataclasses.field(default_factory=list)  # every NCCL line of the output (``_NCCL_LINE``)
    last_epoch: int | None = None  # the last epoch the trainer's ``epoch_end`` event says ended
    #: the first fault-class line on any rank that is no consequence of another's, else the first summary of one
    #: (Open MPI's banner, srun's ``task 1: Exited``: ``facts.parsers.faults``)
    first_fault: FaultLine | None = None
    fault_lines: list[FaultLine] = dataclasses.field(default_factory=list)  # the first fault-class lines, in order
    stall: Stall | None = None  # Horovod's stall warnings (``facts.parsers.horovod_stall``)
    world_size: int | None = None  # the trainer's ``run`` event's world size
    #: the first fault's rank's lines after it (``facts.parsers.faults.FaultScanner.context``): a crash's backtrace
    fault_context: list[str] = dataclasses.field(default_factory=list)


class OutputReader:
    """Reads a run's output (horovodrun's, mpirun's, a Slurm job's, ``launch.slurmjob``'s), one line at a time, into
    what its ``Outcome`` records; ``feed`` returns (rank or None, the rank's text, the trainer's progress event or
    None) for a display."""

    def __init__(self) -> None:
        self.failures, self.errors = hr.Failures(), []
        self.tail: collections.deque = collections.deque(maxlen=TAIL_LINES)
        self.launcher: collections.deque = collections.deque(maxlen=LAUNCHER_LINES)
        self.rank_tails: dict[int, collections.deque] = {}
        self.first_exception, self.lost_host, self.hosts, self.slurm_lost = None, None, None, None
        self.command: str | None = None
        self.nccl: list[str] = []
        self.interrupted: int | None = None  # the signal chexstack's supervision says stopped the run (its log line)
        self.last_epoch: int | None = None
        self.world_size: int | None = None
        #: every line's fault class, in the order read; its line numbers count the ``$ argv`` line too
        self.faults = FaultScanner()

    def feed(self, line: str) -> tuple[int | None, str, dict | None]:
        """Read one line (without its newline); the first ``$ argv`` line (``launch.stream`` logs the command so)
        is the launch command."""
        if self.command is None and line.startswith(hr.RUN_START):
            self.command = line[2:]
            self.faults.read += 1
            return None, line, None
        self.tail.append(line)
        self.faults.feed(line)
        self.failures.feed(line)
        if _NCCL_LINE.search(line) and (len(self.nccl) < NCCL_KEEP or _NCCL_WARN.search(line)
                                        and len(self.nccl) < 2 * NCCL_KEEP):
            self.nccl.append(line)
        rank, text = split_rank(line)  # every launcher's prefix: mpirun's, horovodrun's, srun --label's
        if rank is not None:
            self.rank_tails.setdefault(rank, collections.deque(maxlen=RANK_TAIL_LINES)).append(text)
            if self.first_exception is None and hr.is_cause(text):
                self.first_exception = (rank, text.strip())
        else:
            self.launcher.append(line)
            if self.lost_host is None and (m := hr.LOST_DAEMON.search(line)):
                self.lost_host = m.group(1)
            elif self.slurm_lost is None and (m := LOST_NODE_LINE.match(line)):
                self.slurm_lost = (m.group(1), m.group(2))
            elif (m := hr.INTERRUPTED_LINE.match(line)) and m.group(1) in signal.Signals.__members__:
                self.interrupted = signal.Signals[m.group(1)].value
        event = parse_event(text)
        if event is not None:
            if event["event"] == "run" and isinstance(event.get("hosts"), list):
                self.hosts = [str(h) for h in event["hosts"]]
            if event["event"] == "run" and isinstance(event.get("world_size"), int):
                self.world_size = event["world_size"]
            elif event["event"] == "epoch_end" and isinstance(event.get("epoch"), int):
                self.last_epoch = event["epoch"]
        elif text.startswith(_ERROR):  # shown once, in the failure message
            self.errors.append("rank %s: %s" % (rank, text[len(_ERROR):]) if rank is not None else text)
        return rank, text, event

    def outcome(self, returncode: int | None, log_path: str, interrupted: int | None = None) -> Outcome:
        """The run's ``Outcome``; ``interrupted``: the signal that stopped it, else the one its log names."""
        return Outcome(returncode, self.failures.first, self.errors, list(self.tail), log_path,
                       {r: list(lines) for r, lines in self.rank_tails.items()},
                       interrupted if interrupted is not None else self.interrupted, self.first_exception,
                       self.lost_host, self.failures.host, self.hosts, self.slurm_lost, list(self.launcher),
                       self.command, list(self.nccl), self.last_epoch, self.faults.first or self.faults.first_summary,
                       list(self.faults.lines), self.faults.stall.stall, self.world_size,
                       list(self.faults.context))


#: The fix for each cause of a failed launch (``facts.parsers.mpi.LAUNCH_CAUSES``, and validate's ``MPI_HANG``):
#: ``%(hosts)s`` the hosts the distinguishing lines name (else the run's), ``%(command)s`` the launch command. The
#: texts are the table's (``facts.faults_table``).
LAUNCH_REMEDY = remedies((
    "MPI_RUN_AS_ROOT", "MPI_ORTED_MISSING", "MPI_SSH_AUTH", "MPI_HOST_UNKNOWN", "MPI_HOST_UNREACHABLE",
    "MPI_PMI_MISMATCH", "MPI_NOT_ENOUGH_SLOTS", "MPI_EXECUTABLE_MISSING", "MPI_TCP_UNREACHABLE", "MPI_RANK_FAILED",
    "MPI_DAEMON_START_FAILED", "MPI_HANG"))


#: An MPIJob's launcher that ran mpirun before its Workers' DNS names existed (ssh: "Could not resolve hostname
#: <job>-worker-0.<job>-worker", ``launch.k8s.is_worker_host``): the operator's default launcherCreationPolicy,
#: AtStartup, creates the launcher with the Workers, not after them (https://github.com/kubeflow/mpi-operator/issues/481).
#: One cause and one fix, which ``invoke train --explain`` of the launcher's log (``launch_remedy``) and ``invoke
#: validate --job`` of the manifest (``job.launcher_policy``) both give.
MPIJOB_EARLY_LAUNCHER = ("the MPIJob's launcher started before its workers' DNS names existed "
                         "(launcherCreationPolicy AtStartup, the operator's default)")
MPIJOB_EARLY_LAUNCHER_REMEDY = (
    "set launcherCreationPolicy: %s in the MPIJob's spec: the operator then creates the launcher only once every "
    "worker is Ready, its DNS name resolving and its sshd up (invoke train --launcher k8s renders it)"
    % LAUNCHER_CREATION_POLICY)


#: The fix of a cause for GPU ranks, where it differs (the table's ``gpu_remedy``): one rank per GPU (``launch.job``,
#: validate's ``job.rank_per_gpu``) leaves no room for more ranks than slots, and ``--oversubscribe`` would put two
#: ranks on one GPU, which NCCL refuses ("Duplicate GPU detected": ``NCCL_DUPLICATE_GPU``).
GPU_LAUNCH_REMEDY = {code: CODES[code].gpu_remedy for code in LAUNCH_REMEDY if CODES[code].gpu_remedy}


#: /dev/shm too small or full for NCCL's shared-memory segments (the table's ``NCCL_SHM_EXHAUSTED``).
SHM_REMEDY = remedy("NCCL_SHM_EXHAUSTED")
#: Two ranks on one GPU (the table's ``NCCL_DUPLICATE_GPU``).
DUPLICATE_GPU_REMEDY = remedy("NCCL_DUPLICATE_GPU")
#: The remedy of each NCCL failure cause ``facts.parsers.nccl.classify_nccl_failure`` names: validate's NCCL checks
#: and a failed training run's explanation (``nccl_diagnosis``) give the same one, the table's.
NCCL_REMEDY = remedies(("NCCL_SHM_EXHAUSTED", "NCCL_DUPLICATE_GPU", "NCCL_IB_MEMREG_FAILED", "NCCL_IB_COMPLETION_ERROR",
                        "NCCL_UNROUTABLE_ADDRESS", "NCCL_NO_LIBIBVERBS", "NCCL_IB_DEVICE_NOT_VISIBLE"))


#: The fix of a rank's failure that validate's checks diagnose too, by code (the table's): Horovod built for another
#: TensorFlow (horovod.env and horovod.image) and a driver older than the CUDA runtime the ranks load (container.gpus,
#: gpu.driver_cuda); and a rank's own out-of-memory error (``TF_OUT_OF_MEMORY``), which only a failed run's
#: explanation names.
RUNTIME_REMEDY = remedies(("HOROVOD_TF_MISMATCH", "CUDA_DRIVER_TOO_OLD", "TF_OUT_OF_MEMORY"))


#: The fix of each image pyxis mis-reads (``facts.pyxis.image_problem``), for a failed job's log
#: (``pyxis_diagnosis``) and a batch script's ``--container-image`` (``invoke validate --job``): ``%(image)s`` the
#: image as given, ``%(name)s`` its file name, ``%(stem)s`` without the suffix (the table's texts).
PYXIS_REMEDY = remedies(("PYXIS_SQUASHFS_AS_REGISTRY", "PYXIS_SIF_IMAGE"))


def pyxis_remedy(cause: str, image: str) -> str:
    """``PYXIS_REMEDY[cause]`` for ``image``."""
    name = image.rstrip("/").rsplit("/", 1)[-1]
    return PYXIS_REMEDY[cause] % {"image": image, "name": name, "stem": name.rsplit(".", 1)[0]}


def launch_remedy(found: LaunchFailure, hosts: list[str] | tuple[str, ...] = (),
                  command: str = "the launch command", gpus: bool | None = False) -> str:
    """The fix for ``found``'s cause (``LAUNCH_REMEDY``), naming the hosts its lines name, else ``hosts``
    (``host:slots`` entries are cut to the host), else "the hosts"; an unknown cause: run ``command`` by hand; an
    MPIJob's workers' names that do not resolve: that cause (``MPIJOB_EARLY_LAUNCHER``) and its fix.
    ``gpus``: the ranks are GPU ranks (True: ``GPU_LAUNCH_REMEDY`` where the cause has one), CPU ranks (False), or
    not known (None: both fixes, each said for whom)."""
    named = list(found.hosts) or [h.split(":")[0] for h in hosts]
    if found.cause == "MPI_HOST_UNKNOWN" and found.hosts and all(is_worker_host(h) for h in found.hosts):
        return "%s: %s" % (MPIJOB_EARLY_LAUNCHER, MPIJOB_EARLY_LAUNCHER_REMEDY)
    cpu = LAUNCH_REMEDY.get(found.cause, "run `%(command)s` by hand")
    gpu = GPU_LAUNCH_REMEDY.get(found.cause)
    text = cpu if gpu is None or gpus is False else gpu if gpus else "GPU ranks: %s; CPU ranks: %s" % (gpu, cpu)
    remedy = text % {"hosts": ",".join(named) or "the hosts", "command": command}
    slots = [h for h in found.hosts if found.cause == "MPI_HOST_UNKNOWN" and ":" in h]
    if slots:  # https://github.com/horovod/horovod/issues/951: `-H localhost:4` reached ssh as a host name
        remedy += ("; `%s` is a HOST:SLOTS entry this mpirun took for a host name: its -H does not read slots, "
                   "give them in a hostfile (`HOST slots=N`) instead" % slots[0])
    return remedy


#: causes that say the ranks never ran: the launch itself failed
_NOT_LAUNCHED = frozenset(LAUNCH_REMEDY) - {"MPI_RANK_FAILED", "MPI_HANG"}


def rank_reason(outcome: Outcome) -> str | None:
    """Why the run failed, in the failing rank's own words: its ``trainer: error:`` line (else any rank's), else
    the first exception in time across all ranks that is not a consequence of another rank's failure (rank 0's
    "Horovod has been shut down" when rank 2 failed first), else the last exception line of a rank's output."""
    failing = outcome.first_failure[0] if outcome.first_failure else None
    prefix = "rank %d:" % failing if failing is not None else None
    mine = [e for e in outcome.errors if prefix and e.startswith(prefix)]
    if mine or outcome.errors:
        return (mine or outcome.errors)[0]
    if outcome.first_exception is not None:  # first in time across ranks, not the first rank to exit
        return "rank %d: %s" % outcome.first_exception
    order = ([failing] if failing in outcome.rank_tails else []) + sorted(r for r in outcome.rank_tails
                                                                          if r != failing)
    for rank in order:
        found = hr.last_exception(outcome.rank_tails[rank])
        if found:
            return "rank %d: %s" % (rank, found)
    return None


_RANK_OR_TRAINER = re.compile(r"^(?:rank \d+: |%s)" % re.escape(_ERROR))


def refusal(outcome: Outcome) -> str | None:
    """The trainer's refusal of its input, when that is how the run ended: the message of the failing rank's
    ``trainer: error:`` line (else the first rank's) when that rank exited with the trainer's status 2 (bad input,
    refused: ``trainer.errors.TrainerError``) — under horovodrun, whose own status is then 1 with its RuntimeError
    traceback, or a lone ``python -m trainer`` process exiting 2 itself. None for any other end (a crash, a
    signal, success). The message is the trainer's own words, without the rank: every rank refuses alike."""
    if outcome.interrupted is not None or not outcome.errors:
        return None
    code = outcome.first_failure[1] if outcome.first_failure else outcome.returncode
    if code != 2:
        return None
    return _RANK_OR_TRAINER.sub("", rank_reason(outcome) or outcome.errors[0], count=1)


def missing_libraries(outcome: Outcome) -> list[str]:
    """The libraries TensorFlow said it could not load (``Could not load dynamic library 'libcudnn.so.8'``), in
    the order first seen across the ranks' last lines. A library TensorFlow loads only for an optional feature
    (TensorRT's ``libnvinfer``, ``facts.parsers.horovodrun.is_optional_library``) is named only where the log shows
    that TensorFlow registered no GPU (``GPU_NOT_REGISTERED``): TF-TRT's warning is harmless where the GPU was used."""
    lines = [line for rank in sorted(outcome.rank_tails) for line in outcome.rank_tails[rank]] + outcome.tail
    found = dict.fromkeys(m.group(1) for line in lines for m in hr.MISSING_LIBRARY.finditer(line))
    no_gpu = any(hr.GPU_NOT_REGISTERED.search(line) for line in lines)
    return [name for name in found if no_gpu or not hr.is_optional_library(name)]


def runtime_diagnosis(outcome: Outcome, said: str | None = None) -> str | None:
    """``WHAT [CODE]; REMEDY`` (``RUNTIME_REMEDY``) when the ranks' output shows a fault validate's checks diagnose
    too: Horovod built for another TensorFlow (``HorovodVersionMismatchError``, read by
    ``facts.parsers.horovod.version_mismatch``, or an older Horovod's undefined TensorFlow symbol,
    ``facts.parsers.horovodrun.TF_SYMBOL_MISSING``): ``HOROVOD_TF_MISMATCH``; a driver older than the CUDA runtime
    (``CUDA driver version is insufficient for CUDA runtime version``, nvidia-container-cli's ``unsatisfied
    condition: cuda >= X``, read by ``facts.parsers.container.classify_runtime_error``): ``CUDA_DRIVER_TOO_OLD``,
    quoting the line unless it is in ``said`` (the rank's reason the message gives already); TensorFlow out of memory
    (``facts.parsers.horovodrun.tf_oom``): ``TF_OUT_OF_MEMORY``, with the device and the tensor's shape where the log
    gives them; None otherwise."""
    lines = ([outcome.first_exception[1]] if outcome.first_exception else []) + outcome.errors + [
        line for rank in sorted(outcome.rank_tails) for line in outcome.rank_tails[rank]] + outcome.tail
    text = "\n".join(lines)
    mismatch = version_mismatch(text)
    if mismatch and mismatch[0].lower() == "tensorflow":
        return "Horovod was built for tensorflow %s, the ranks import tensorflow %s [HOROVOD_TF_MISMATCH]; %s" % (
            mismatch[1], mismatch[2], RUNTIME_REMEDY["HOROVOD_TF_MISMATCH"])
    if symbol := next((m.group(1) for line in lines if (m := hr.TF_SYMBOL_MISSING.search(line))), None):
        return ("Horovod's library misses TensorFlow's symbol %s: it was built for another TensorFlow "
                "[HOROVOD_TF_MISMATCH]; %s" % (symbol, RUNTIME_REMEDY["HOROVOD_TF_MISMATCH"]))
    if "CUDA_DRIVER_TOO_OLD" in classify_runtime_error(text):
        line = next(line.strip() for line in lines if "CUDA_DRIVER_TOO_OLD" in classify_runtime_error(line))
        return "the NVIDIA driver is older than the CUDA the ranks need%s [CUDA_DRIVER_TOO_OLD]; %s" % (
            "" if said and line in said else " (%s)" % line, RUNTIME_REMEDY["CUDA_DRIVER_TOO_OLD"])
    oom = hr.tf_oom(lines)
    if oom is not None:
        return "TensorFlow ran out of memory%s%s [TF_OUT_OF_MEMORY]; %s" % (
            " on %s" % oom.device if oom.device else "",
            " allocating a tensor of shape [%s]" % oom.shape if oom.shape else "", RUNTIME_REMEDY["TF_OUT_OF_MEMORY"])
    return None


def pyxis_diagnosis(outcome: Outcome) -> str | None:
    """``the step's container did not start: LINE … ERROR [CAUSE]; REMEDY`` when pyxis imported an image it
    mis-reads (``facts.parsers.pyxis.classify_pyxis``: a squashfs file named without a leading / or ., pulled from a
    registry; a SIF), from the launcher's own lines; None otherwise."""
    found = classify_pyxis("\n".join(outcome.launcher_lines))
    if found is None:
        return None
    return "the step's container did not start: %s%s [%s]; %s" % (
        found.line, " … %s" % found.error if found.error else "", found.cause, pyxis_remedy(found.cause, found.image))


def _ranks_on(outcome: Outcome, host: str) -> str:
    """`` (ranks 2, 3)``: the ranks the trainer's ``run`` event placed on ``host`` (short names compared: Slurm's
    node name against a rank's FQDN); empty when unknown."""
    short = host.split(".")[0]
    ranks = [str(r) for r, h in enumerate(outcome.hosts or ()) if h.split(".")[0] == short]
    return " (rank%s %s)" % ("s" if len(ranks) > 1 else "", ", ".join(ranks)) if ranks else ""


def nccl_diagnosis(outcome: Outcome) -> str | None:
    """``NCCL: LINE [CAUSE]; REMEDY`` when the ranks' NCCL_DEBUG lines name a failure cause
    (``facts.parsers.nccl.classify_nccl_failure``, the classifier of validate's NCCL checks, with the same remedy,
    ``NCCL_REMEDY``): two ranks on one GPU, /dev/shm full, libibverbs missing, an HCA not visible, memory not
    registered, an IB completion error, a container-bridge address; None otherwise. The classifier reads every NCCL
    line of the output (``Outcome.nccl_lines``: a rank's traceback and Open MPI's banner after NCCL's WARN lines
    do not push them out), and ``LINE`` is the one that tells the cause apart (``nccl_cause_line``), not the
    framework's generic ``unhandled system error``."""
    lines = outcome.nccl_lines or [line for rank in sorted(outcome.rank_tails)
                                   for line in outcome.rank_tails[rank]] + outcome.tail
    log = parse_nccl_log("\n".join(lines))
    cause = classify_nccl_failure(log)
    if cause is None:
        return None
    line = nccl_cause_line(lines, cause) or log.failure_after_selection or (log.errors[0][1] if log.errors
                                                                             else cause)
    return "NCCL: %s [%s]; %s" % (line, cause, NCCL_REMEDY[cause])


def nccl_cause_line(lines: list[str], cause: str) -> str | None:
    """The first of ``lines`` (launcher prefixes removed) that alone makes ``facts.parsers.nccl`` name ``cause``:
    ``Call to posix_fallocate failed : No space left on device`` for ``NCCL_SHM_EXHAUSTED``, ``Duplicate GPU
    detected`` for ``NCCL_DUPLICATE_GPU``, ``Call to ibv_reg_mr failed`` for ``NCCL_IB_MEMREG_FAILED``; None when
    the cause takes several lines together (a bootstrap interface on a bridge and a failed connect)."""
    return next((line.strip() for line in strip_prefixes("\n".join(lines))
                 if classify_nccl_failure(parse_nccl_log(line)) == cause), None)


def loopback_evidence(outcome: Outcome) -> tuple[bool | None, str]:
    """Whether the ranks had only the loopback interface, by the run's own evidence (the launch command,
    ``facts.parsers.horovodrun.launch_network``, and the hosts the trainer's ``run`` event names): True for a
    container started without a network (``--network none``) or ranks pointed at ``lo`` only; False for ranks on
    several hosts (Gloo between hosts runs over a routed interface) or pointed at another interface, or a container
    given a network; None when the log does not say (one host, or nothing known). With the evidence, in words."""
    net = hr.launch_network(outcome.command)
    hosts = list(dict.fromkeys(h.split(".")[0] for h in list(net.hosts) + list(outcome.hosts or ())))
    others = [i for i in net.interfaces if not is_loopback(i)]
    if net.container_network == "none":
        return True, "the container was started with --network none"
    if net.interfaces and not others:
        return True, "the ranks were pointed at %s" % ", ".join(net.interfaces)
    if len(hosts) > 1:
        return False, "the ranks ran on %d hosts, %s%s" % (len(hosts), ", ".join(hosts), ", over %s" % ", ".join(
            others) if others else "")
    if others:
        return False, "the ranks were pointed at %s" % ", ".join(others)
    if net.container_network is not None:
        return False, "the container had the %s network" % net.container_network
    return None, ("the ranks ran on one host, %s" % hosts[0] if hosts
                  else "the log names neither the hosts nor the interfaces")


def gloo_segfault(outcome: Outcome) -> str:
    """What a Gloo run's exit 139 (SIGSEGV) is: Horovod's Gloo crash on a loopback-only network
    (``launch.controller.GLOO_ON_LOOPBACK``) only where the evidence puts the ranks on loopback
    (``loopback_evidence``), said as a possibility where the log does not say, and where it cannot be (several
    hosts, a real interface) a crash in the rank's own process, with the libraries of its native stack trace."""
    loopback, why = loopback_evidence(outcome)
    if loopback:
        return "exit 139 is a segmentation fault; %s: %s: %s" % (why, GLOO_ON_LOOPBACK, GLOO_FIXES)
    if loopback is None:
        return ("exit 139 is a segmentation fault; if the ranks' host had no network interface but loopback (%s; "
                "a --network none container), it is Gloo's crash: %s: %s" % (why, GLOO_ON_LOOPBACK, GLOO_FIXES))
    rank = outcome.first_failure[0] if outcome.first_failure else None
    libraries = hr.crash_libraries(outcome.rank_tails.get(rank, []))
    return ("exit 139 is a segmentation fault in rank %s's own process, not Gloo's loopback crash (%s)%s: rerun "
            "with PYTHONFAULTHANDLER=1 for the Python stack of the crash, and check that every host runs the same "
            "TensorFlow and a Horovod built against it (horovodrun --check-build)" % (
                rank, why, "; its stack trace is in %s" % ", ".join(libraries) if libraries else ""))


# --- the first anomaly: the earliest fault-class line on any rank, before what followed from it -------------------

#: The loop-device fault of setuid Apptainer/Singularity, why it happens and its fixes, each with its source.
LOOP_DEVICE_CAUSE = (
    "Apptainer/Singularity in setuid mode mounts the SIF through one loop device per container, and a kernel that "
    "creates loop devices on demand when max_loop is unset (Ubuntu's updated 5.15 kernels, CONFIG_BLK_DEV_LOOP_"
    "MIN_COUNT=8: https://github.com/sylabs/singularity/issues/2144, https://bugs.launchpad.net/ubuntu/+source/"
    "linux-hwe-5.15/+bug/2013086) gives several containers started at once none; it hits runs with several "
    "ranks per node (https://github.com/sylabs/singularity/issues/1824, https://github.com/apptainer/singularity/"
    "issues/6141)")
#: The fix of each cause of a run's first fault that has no other part of the message to say it
#: (``first_fault_diagnosis``), by the table's code.
FAULT_REMEDY = remedies(("APPTAINER_NO_LOOP_DEVICE", "CONTAINER_IMAGE_MISSING", "APPTAINER_NO_USERNS",
                         "CONTAINER_START_FAILED", "HOST_OUT_OF_MEMORY", "HOROVOD_STALL_MISMATCH", "HOROVOD_STALL"))
#: The fix of a CUDA initialisation failure, by the CUDA error its line names (CUresult/cudaError_t:
#: https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html); first match wins.
CUDA_INIT_REMEDY = (
    (re.compile(r"SYSTEM_NOT_READY|SystemNotReady|system not yet initialized|\b802\b"),
     "error 802: on an NVSwitch system (HGX/DGX) the GPUs are not registered with the NVLink fabric: start "
     "nvidia-fabricmanager at the driver's exact version (systemctl status nvidia-fabricmanager; nvidia-smi -q | grep "
     "-A 2 Fabric must say Completed; https://github.com/pytorch/pytorch/issues/35710)"),
    (re.compile(r"NO_DEVICE|NoDevice|no CUDA-capable device|No CUDA GPUs are available|(?i:no supported devices found)|"
                r"\b100\b"),
     "the rank sees no GPU: CUDA_VISIBLE_DEVICES empty or wrong for the ranks started there, a container started "
     "without --gpus/--nv, or a node of the allocation given no GPU (--gres=gpu:N / --gpus-per-node=N for every "
     "node); nvidia-smi inside the rank's environment must list one"),
    (re.compile(r"INVALID_DEVICE|invalid device ordinal|cudaErrorInvalidDevice|\b101\b"),
     "the rank asked for a GPU its process does not see: several ranks per node with one GPU visible to each "
     "(srun --gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank) while the trainer pins local rank N to GPU N, so local "
     "rank 1 finds no GPU 1: keep every GPU of the node visible to its ranks (--gpus-per-node=N "
     "--ntasks-per-node=N, --gpu-bind=none; invoke validate --job names it: job.gpu_binding), or fewer ranks per "
     "node than its GPUs (https://slurm.schedmd.com/srun.html#OPT_gpu-bind)"),
    (re.compile(r"DEVICES_UNAVAILABLE|DevicesUnavailable|busy or unavailable|\b46\b"),
     "the GPU is busy: its compute mode is exclusive and another process holds it, or two ranks share it "
     "(nvidia-smi -q -d COMPUTE; one rank per GPU)"),
    (re.compile(r"Driver/library version mismatch|Failed to initialize NVML"),
     "the driver's user-space library differs from the loaded kernel module (an upgrade without a reboot): reload "
     "the nvidia module or reboot the node [NVML_DRIVER_LIBRARY_MISMATCH]"),
)
CUDA_INIT_DEFAULT = "run invoke validate on that node (its GPU checks make a CUDA context on every GPU)"
#: The out-of-memory killer's lines: the kernel's (``Out of memory: Killed process N``, mm/oom_kill.c), a memory
#: cgroup's, Slurm's (``Detected 1 oom-kill event(s)``; srun's ``task 1: Out Of Memory``)
_OOM_KILLER = re.compile(r"oom[-_]kill|Out of memory: |Killed process|: task \d+: Out Of Memory", re.I)
#: What to do next for a first fault of a kind the message names no cause for (an unclassified failure).
KIND_NEXT_STEP = {
    "crash": "rerun with PYTHONFAULTHANDLER=1 for the Python stack of the crash and read the rank's lines before it; "
             "check that every host runs the same TensorFlow and a Horovod built against it (horovodrun "
             "--check-build)",
    "killed": "something outside the process killed it (SIGKILL): the kernel's out-of-memory killer (dmesg on that "
              "host), the batch system's memory or time limit, or a person",
    "exception": "the rank's traceback before that line says where it was raised",
    "exit": "the launcher reports that a rank failed, and no line of the ranks says why: rerun with the ranks' "
            "output tagged (mpirun --tag-output, horovodrun's prefixes, srun --label) and read the failing rank's "
            "last lines",
    "mpi_init": "the rank's MPI could not start under this launcher: run the ranks with the mpirun of the MPI "
                "Horovod was built against (horovodrun --check-build, ompi_info), or srun --mpi=pmix with an MPI "
                "built for Slurm's PMIx",
    "nccl": "rerun with NCCL_DEBUG=INFO for NCCL's own reason, and run invoke validate on the nodes (its NCCL checks)",
    "out_of_memory": "lower --batch-size (per rank) or --image-size; one rank per GPU",
    "gpu_init": CUDA_INIT_DEFAULT,
    "fatal": "the program that printed that line says why it stopped there: read the lines before it; what failed "
             "after it (an exception, an exit, a kill) followed from it",
    "container_start": FAULT_REMEDY["CONTAINER_START_FAILED"],
    "image_pull": "the engine's error after the image's reference says why it could not pull it: pull the same "
                  "reference by hand on that node (docker pull REGISTRY/REPO@sha256:..., skopeo inspect "
                  "docker://...) and check the registry answers (curl https://REGISTRY/v2/)",
}


def _world(outcome: Outcome) -> int | None:
    """The world size: the trainer's ``run`` event's, else the launch command's (``-np N``)."""
    if outcome.world_size:
        return outcome.world_size
    ranks = hr.launch_ranks((outcome.command,)) if outcome.command else None
    return ranks.world if ranks else None


def _rank_names(outcome: Outcome, ranks) -> str:
    """``rank 0 (192.168.12.50)``, ``ranks 0, 1 (n1, n2)``: with each rank's host where the log says
    (the trainer's ``run`` event, else the launch command's -H: ``facts.parsers.horovodrun.rank_hosts``)."""
    ranks = sorted(ranks)
    hosts = outcome.hosts or hr.rank_hosts(outcome.command) or []
    named = [h for r in ranks for h in hosts[r:r + 1]]
    where = " (%s)" % ", ".join(dict.fromkeys(named)) if len(named) == len(ranks) and len(named) <= 8 else ""
    runs: list[list[int]] = []
    for r in ranks:  # 0, 1, 2, 3, 5 -> 0-3, 5
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    spans = ["%d-%d" % (run[0], run[-1]) if len(run) > 2 else ", ".join(map(str, run)) for run in runs]
    return "rank%s %s%s" % ("s" if len(ranks) > 1 else "", ", ".join(spans), where)


def _where(outcome: Outcome, fault: FaultLine) -> str:
    """``rank 2, line 14`` / ``the launcher's line 26`` (a line without a rank prefix)."""
    if fault.rank is None:
        return "line %d" % fault.number
    return "%s, line %d" % (_rank_names(outcome, [fault.rank]), fault.number)


def _names(tensors: list[str], most: int = 3) -> str:
    return ", ".join(tensors[:most]) + (" and %d more" % (len(tensors) - most) if len(tensors) > most else "")


def stall_diagnosis(outcome: Outcome) -> str | None:
    """The hang Horovod's stall warnings show (``facts.parsers.horovod_stall``): the warning quoted, the stalled
    tensors with the ranks ready for each, and the cause: tensors of different names on different ranks
    (``HOROVOD_STALL_MISMATCH``: different code or framework versions on those hosts) or ranks that never reached
    the collective (``HOROVOD_STALL``); None without a warning."""
    stall = outcome.stall
    if stall is None:
        return None
    world = _world(outcome)
    groups = stall.by_ready(world)
    where = ("a broadcast (Horovod broadcasts the initial variables before the first step: the first collective)"
             if outcome.last_epoch is None and all("broadcast" in t.lower() for t in stall.tensors())
             else "a collective")
    head = "the ranks hung in %s: Horovod's stall check warned %d time%s, first at line %d: %s" % (
        where, stall.count, "s" if stall.count > 1 else "", stall.number, stall.line)
    if stall.mismatch(world):
        submitted = "; ".join("%s submitted %s" % (_rank_names(outcome, ready), _names(tensors))
                              for ready, tensors in groups if ready)
        hosts = [h for h in dict.fromkeys(outcome.hosts or hr.rank_hosts(outcome.command) or [])]
        return ("%s; %s: each rank waits on a tensor another rank never submits, so the ranks built different "
                "graphs: different code or different TensorFlow/Keras versions on those hosts, not a slow rank "
                "[HOROVOD_STALL_MISMATCH]; %s" % (head, submitted, FAULT_REMEDY["HOROVOD_STALL_MISMATCH"] % {
                    "hosts": ",".join(hosts) or "HOST_A,HOST_B"}))
    idle = stall.idle(world)
    missing = "; ".join("%s submitted %s" % (_rank_names(outcome, ready), _names(tensors))
                        for ready, tensors in groups if ready)
    return "%s; %s%s [HOROVOD_STALL]; %s" % (
        head, missing or "stalled: %s" % _names(stall.tensors()),
        "; %s submitted none of them" % _rank_names(outcome, idle) if idle else "", FAULT_REMEDY["HOROVOD_STALL"])


def _container_part(outcome: Outcome, fault: FaultLine) -> tuple[str, str]:
    """(text, code) of a first fault of kind ``container_start``: the FATAL line quoted, how many ranks it hit."""
    per_rank = fault.text.startswith(("FATAL", "ERROR"))  # Apptainer/Singularity: one container per rank
    code = classify_container_fatal(fault.text) if per_rank else next(
        iter(classify_runtime_error("\n".join([fault.text] + outcome.launcher_lines))), "CONTAINER_START_FAILED")
    same = [f for f in outcome.fault_lines if f.kind == "container_start" and not f.consequence and (
        classify_container_fatal(f.text) == code if per_rank else f.text == fault.text)]  # paths differ per rank
    ranks = {f.rank for f in same if f.rank is not None}
    hit = len(ranks) if ranks else len(same)
    world = _world(outcome)
    text = "the ranks' containers never started (a container start failure on the node, before any training): " \
        "`%s` (%s)" % (fault.text, _where(outcome, fault))
    if per_rank or ranks:
        text += " on %d%s rank%s" % (hit, " of %d" % world if world else "", "s" if hit != 1 or world else "")
    if code == "APPTAINER_NO_LOOP_DEVICE":
        text += "; %s" % LOOP_DEVICE_CAUSE
    return text, code


@dataclasses.dataclass(frozen=True)
class FirstFault:
    """The first anomaly's part of a message: ``text`` (the line quoted, where, its kind, and its cause and fix
    where ``classified``), ``next_step`` (for an unclassified one: what to look at), ``said`` (the cause is said:
    no last lines needed)."""

    text: str
    classified: bool
    said: bool
    next_step: str = ""


def first_fault_diagnosis(outcome: Outcome) -> FirstFault | None:
    """The first anomaly, named before what followed from it: Horovod's stall warnings where they come first
    (``stall_diagnosis``), else the earliest fault-class line on any rank (``Outcome.first_fault``), its kind
    (``facts.parsers.faults.KINDS``), its cause and fix where known (``FAULT_REMEDY``, ``CUDA_INIT_REMEDY``), else
    the kind and its next step (``KIND_NEXT_STEP``: an unclassified failure unless another part names the cause);
    None when the output holds no fault-class line."""
    fault, stall = outcome.first_fault, outcome.stall
    if stall is not None and (fault is None or stall.number < fault.number):
        return FirstFault(stall_diagnosis(outcome), True, True)
    if fault is None:
        return None
    if fault.kind == "container_start":
        text, code = _container_part(outcome, fault)
        if code == "CUDA_DRIVER_TOO_OLD":  # runtime_diagnosis gives its fix
            return FirstFault("%s [%s]" % (text, code), True, True)
        remedy = FAULT_REMEDY.get(code) or ("invoke validate's container.gpus check names this fault's fix"
                                            if code.startswith("NVIDIA_") else FAULT_REMEDY["CONTAINER_START_FAILED"])
        return FirstFault("%s [%s]; %s" % (text, code, remedy), True, code != "CONTAINER_START_FAILED")
    fault = _thrown(outcome, fault)
    first = "the first fault (%s): `%s`, %s" % (_where(outcome, fault), fault.text, KIND[fault.kind].what)
    if fault.code in CAUSE:  # a known cause (facts.parsers.faults.CAUSES): its words, its code, its fix
        cause = CAUSE[fault.code]
        return FirstFault("%s: %s%s%s [%s]; %s" % (
            first, cause.describe(fault.text), crash_detail(outcome) if cause.kind == "crash" else "",
            _also_on(outcome, fault), cause.code, FAULT_REMEDY.get(cause.code, cause.remedy)), True,
            cause.kind != "crash")  # a crash's last lines (its backtrace) are shown
    if fault.kind == "gpu_init":
        if "CUDA_DRIVER_TOO_OLD" in classify_runtime_error(fault.text):
            return FirstFault("%s [CUDA_DRIVER_TOO_OLD]" % first, True, True)  # runtime_diagnosis gives the fix
        remedy = next((fix for rx, fix in CUDA_INIT_REMEDY if rx.search(fault.text)), None)
        return FirstFault("%s [CUDA_INIT_FAILED]; %s" % (first, remedy or CUDA_INIT_DEFAULT), True, remedy is not None)
    if fault.kind == "out_of_memory" and _OOM_KILLER.search(fault.text):
        return FirstFault("%s: the out-of-memory killer [HOST_OUT_OF_MEMORY]; %s" % (
            first, FAULT_REMEDY["HOST_OUT_OF_MEMORY"]), True, True)
    return FirstFault(first, False, False, KIND_NEXT_STEP[fault.kind])


def _thrown(outcome: Outcome, fault: FaultLine) -> FaultLine:
    """An abort on an uncaught C++ exception (``terminate called after throwing``) whose ``what():`` message is a
    known cause of a GPU's, memory's or NCCL's fault (``CAUSES``) or a CUDA initialisation's error (``INIT_ONLY``):
    that fault, the message joined to the line; else ``fault``."""
    from facts.parsers.faults import INIT_ONLY, classify_cause, classify_line

    if fault.kind != "crash" or not fault.text.startswith("terminate called"):
        return fault
    what = next((m.group(1).strip() for line in outcome.fault_context[:2]
                 if (m := _WHAT.match(_FRAME_MARKS.sub("", line)))), None)
    found = classify_line(what) if what else None
    cause = classify_cause(what) if what else None
    if found is None or found[0] not in ("gpu_init", "gpu_fault", "out_of_memory", "nccl") or (
            cause is None and not (found[0] == "gpu_init" and INIT_ONLY.search(what))):
        return fault  # a CUDA error of no known cause (600 not ready) stays the crash it ended in
    return dataclasses.replace(fault, kind=found[0], text="%s; what(): %s" % (fault.text, what),
                               code=cause.code if cause else None)


#: A frame line of a native backtrace behind its printer's marks: Open MPI's ``[host:pid] [ 3] ``, a rank's prefix
#: repeated inside the line (``[1,2]<stderr>:``).
_FRAME_MARKS = re.compile(r"^\[[^\]]*\] \[ ?\d+\] |\[\d+,\d+\]<(?:stdout|stderr)>:")
#: libstdc++'s line after ``terminate called after throwing ...``: the exception's message
_WHAT = re.compile(r"^\s*what\(\):\s*(.+)")


def crash_detail(outcome: Outcome) -> str:
    """`` in libX (whose), on an uncaught C++ exception: MESSAGE`` for a crash: the first native frame of the
    crashed rank's backtrace that is not the C library's, the loader's or the interpreter's
    (``facts.parsers.faults.crash_owner``), and libstdc++'s ``what():`` line, from the lines after the first fault
    (``Outcome.fault_context``); empty when they show neither."""
    lines = [_FRAME_MARKS.sub("", line) for line in outcome.fault_context]
    text = ""
    for library in hr.crash_libraries(lines):
        who = crash_owner(library)
        if who is not None:
            text += " in %s%s" % (library, "" if who == library else " (%s)" % who)
            break
    message = next((m.group(1).strip() for line in lines if (m := _WHAT.match(line))), None)
    if message:
        text += ", on an uncaught C++ exception: %s" % message
    return text


def _also_on(outcome: Outcome, fault: FaultLine) -> str:
    """`` (ranks 0-3)``: the ranks whose lines show the first fault's cause too, where they are more than its own
    rank (a launcher's line that names no rank: srun's ``task 4: Out Of Memory`` names it)."""
    ranks = sorted({f.rank for f in outcome.fault_lines if f.code == fault.code and f.rank is not None})
    return " (%s)" % _rank_names(outcome, ranks) if ranks and ranks != [fault.rank] else ""


#: the first-fault part's words when no other part names a cause either
UNCLASSIFIED = "unclassified failure: "


def _said_in(line: str, reason: str) -> bool:
    """The fault ``line`` is what ``reason`` (``rank_reason``) says: the line, or its ``trainer: error:`` message."""
    return line in reason or line.startswith(_ERROR) and line[len(_ERROR):] in reason


def _diagnoses(outcome: Outcome, controller: str, gpus: bool | None) -> tuple[list[str], str | None, bool]:
    """The parts of a failure's message (each a cause found in the output), the failing rank's own reason, and
    whether a part already says why (no last lines needed). The first anomaly comes first
    (``first_fault_diagnosis``) where it is not the launch's own failure nor the rank's reason, and what followed from
    it after it ("then rank 1 exited first ..."); a first fault no part names a cause for is an "unclassified
    failure"."""
    parts: list[str] = []
    code = None
    live = outcome.interrupted is None
    launch = classify_launch("\n".join(outcome.launcher_lines)) if live else None
    not_launched = launch is not None and launch.cause in _NOT_LAUNCHED
    if not_launched:
        parts.append("the launch failed before the ranks ran: %s [%s]; %s" % (
            launch.line, launch.cause, launch_remedy(launch, command=outcome.command or "the launch command",
                                                     gpus=gpus)))
    pyxis = pyxis_diagnosis(outcome) if live else None
    if pyxis:
        parts.append(pyxis)
    reason = rank_reason(outcome) if live else None
    first = first_fault_diagnosis(outcome) if live and not not_launched and not pyxis else None
    fault = outcome.first_fault
    causes = [p for p in (nccl_diagnosis(outcome), runtime_diagnosis(outcome, reason)) if p] if live else []
    gloo_crash = controller == "gloo" and (outcome.first_failure or (0, 0))[1] in (139, -11)
    named = first is not None and (first.classified or bool(causes) or gloo_crash)  # a part names the cause
    shown_reason = reason
    if first is not None and fault is not None and outcome.stall is None:
        if fault.consequence and (outcome.first_failure or reason):
            first = None  # the launcher's summary is said as the first rank's exit
        elif reason and _said_in(fault.text, reason):
            if fault.kind == "exception":
                first = None  # the rank's reason (its exception, the trainer's error) is the first fault
            else:
                shown_reason = None  # the first fault's part quotes it, with its kind
    if first is not None and shown_reason and CONSEQUENCES.search(shown_reason):
        shown_reason = None  # another rank's failure restated: what followed is said by the first rank's exit
    said_first = first is not None and first.said
    if first is not None:
        parts.append(first.text if named else "%s%s; %s" % (UNCLASSIFIED, first.text, first.next_step))
    then = "what followed from it: " if first is not None else ""
    if outcome.interrupted is not None:
        parts.append("interrupted by %s" % signal.Signals(outcome.interrupted).name)
    elif outcome.first_failure:
        rank, code = outcome.first_failure
        parts.append("%srank %d%s exited first, with code %d%s" % (
            then, rank, " on host %s" % outcome.failure_host if outcome.failure_host else "", code,
            hr.describe_code(code)))
    if live:
        parts += [p for p in (shown_reason,) + tuple(causes) if p]
    if outcome.lost_host and live:
        parts.append("host %s%s was lost: mpirun's daemon there stopped answering (the host or its network went "
                     "down, or its processes were killed), so every rank on it ended" % (
                         outcome.lost_host, _ranks_on(outcome, outcome.lost_host)))
    if outcome.slurm_lost and live:
        node, how = outcome.slurm_lost
        parts.append("Slurm lost node %s%s, which is %s: every rank on it ended with the job" % (
            node, _ranks_on(outcome, node), how))
    missing = missing_libraries(outcome)
    if missing and (parts or outcome.returncode is not None):  # TensorFlow's warning alone is no failure
        parts.append("TensorFlow could not load %s" % ", ".join(missing))
    if controller == "gloo" and code in (139, -11):
        parts.append(gloo_segfault(outcome))
    return parts, reason, not_launched or bool(pyxis) or said_first


def explain_failure(outcome: Outcome, controller: str, gpus: bool | None = None, origin: str | None = None,
                    what: str = "training") -> str:
    """One message: which rank failed with which code, that rank's own error, the loopback hint, the log; a
    launch that failed before the ranks ran: the launcher's distinguishing line, its cause and remedy (for GPU ranks
    where ``gpus``, for CPU ranks where not, both where it is not known: ``launch_remedy``). ``origin``: where the
    outcome comes from, said in the first line (the launcher's exit status; "from its log" for a saved log);
    ``what``: the work that failed, its first words ("training", "evaluation")."""
    parts, reason, said = _diagnoses(outcome, controller, gpus)
    header = origin or ("horovodrun exit status %d" % outcome.returncode if outcome.returncode is not None
                        else "from its log")
    fault = outcome.first_fault
    how = "hung" if hung(outcome) else "did not start" if fault is not None and fault.kind == "container_start" and \
        outcome.stall is None else "failed"
    ended = "the trainer refused its input" if refusal(outcome) is not None else "%s %s" % (what, how)
    message = "; ".join(["%s (%s)" % (ended, header)] + parts) + "\nfull log: %s" % outcome.log_path
    if not reason and outcome.interrupted is None and not said:
        failing = outcome.first_failure[0] if outcome.first_failure else None
        lines = outcome.rank_tails.get(failing) or outcome.tail
        shown = hr.without_tracebacks(lines)[-10:]
        if shown:
            message += "\nlast lines%s:\n" % (" of rank %d" % failing if failing in outcome.rank_tails else "") \
                + "\n".join(shown)
    return message


def hung(outcome: Outcome) -> bool:
    """The run hung rather than failed: Horovod's stall warnings are its first anomaly and no rank exited."""
    stall, fault = outcome.stall, outcome.first_fault
    return (stall is not None and outcome.first_failure is None
            and (fault is None or stall.number < fault.number))


#: What stops a run by each signal chexstack's supervision stops a run on (``launch.stream``).
_STOPPED_BY = {"SIGINT": "Ctrl-C, or kill -INT", "SIGTERM": "kill, scancel or a shutdown",
               "SIGHUP": "its terminal closed"}


def interrupted_explanation(outcome: Outcome, where: str) -> str:
    """A run a signal stopped (``Outcome.interrupted``, from the log's own line), ``where`` the log and which run in
    it: a stop, not a failure; the ranks' exit codes that follow are the stop's; how to continue, by the last epoch
    the log shows ended. A run that hung before it was stopped (Horovod's stall warnings, ``stall_diagnosis``) is
    said so first: the stop ended a hang."""
    name = signal.Signals(outcome.interrupted).name
    if hung(outcome):
        text = "interrupted by %s in %s: the run was stopped (%s) after it hung; %s" % (
            name, where, _STOPPED_BY.get(name, "a signal"), stall_diagnosis(outcome))
    else:
        text = "interrupted by %s in %s: the run was stopped (%s), not a failure" % (
            name, where, _STOPPED_BY.get(name, "a signal"))
    if outcome.first_failure:
        rank, code = outcome.first_failure
        text += "; rank %d's exit code %d%s follows from it (the ranks were stopped)" % (
            rank, code, hr.describe_code(code))
    if outcome.last_epoch is None:
        text += "; the log shows no epoch ended: start the run again (--resume needs a committed checkpoint)"
    else:
        text += ("; the last epoch the log shows ended is %d: continue with --resume (it starts after the last "
                 "committed checkpoint)" % outcome.last_epoch)
    return text + "\nfull log: %s" % outcome.log_path


@dataclasses.dataclass(frozen=True)
class Explained:
    """A saved log's explanation: ``text`` (``explain_log``) and ``failed``: the log shows a failure (an explained
    or an unclassified failure, a hang, a refused input); False only for a run the trainer reported done, a log
    without any fault-class line ("no failure ...") and a run a signal stopped that had not hung (a stop, not a
    failure)."""

    text: str
    failed: bool


def _read_run(path: str, lines: list[str], start: int, end: int) -> tuple[Outcome, bool, bool]:
    """The ``Outcome`` of the run of ``lines[start:end]`` (its fault lines numbered as the file's), whether its ranks
    carry mpirun's prefix, and whether its trainer reported it done."""
    reader = OutputReader()
    reader.faults.read = start
    mpi, done = False, False
    for line in lines[start:end]:
        mpi = mpi or bool(_MPI_PREFIX.match(line))
        _, _, event = reader.feed(line)
        done = done or bool(event and event["event"] == "done")
    return reader.outcome(None, path), mpi, done


def _earlier_fault(path: str, lines: list[str], starts: list[int]) -> str:
    """``; but an earlier run failed: run K of N (from line L): FIRST FAULT`` for the latest run before the last of
    a log's runs (``starts``: ``hr.run_starts``) whose lines hold a fault (``first_fault_diagnosis``); empty for
    none."""
    for k in range(len(starts) - 2, -1, -1):
        found = first_fault_diagnosis(_read_run(path, lines, starts[k], starts[k + 1])[0])
        if found is not None:
            return "; but an earlier run failed: run %d of %d (from line %d): %s" % (
                k + 1, len(starts), starts[k] + 1, found.text)
    return ""


def explain_log(path: str) -> str:
    """The explanation of a saved launcher log (``explain_saved_log``'s text)."""
    return explain_saved_log(path).text


def explain_saved_log(path: str) -> Explained:
    """The explanation of a saved launcher log: a run's ``launch.log``, horovodrun's or mpirun's output, a Slurm job's
    ``slurm-N.out``, an MPIJob launcher pod's log. A ``launch.log`` holds every run of its output folder, each
    starting with its ``$ command`` line (``facts.parsers.horovodrun.RUN_START``): the last run is explained. The
    exit status is not in a log; the controller is MPI when the ranks' prefix is mpirun's (``[1,0]<stdout>:``).
    A run a signal stopped is said so (``interrupted_explanation``), a run the trainer reported done or a log without
    a failure and without any fault-class line (``facts.parsers.faults``) says so ("no failure ..."), else the
    failure message (``explain_failure``; a hang for Horovod's stall warnings). ChexstackError when
    the file cannot be read or is not text (a NUL byte)."""
    import io

    from chexstack.inputs import read_text

    what = "a launcher log (horovodrun, mpirun, slurm-N.out, an MPIJob launcher's log)"
    text = read_text(path, "--explain %s" % path, what, replace=True)
    lines = [raw.rstrip("\n") for raw in io.StringIO(text, newline=None)]
    starts = hr.run_starts(lines)
    run = lines[starts[-1]:] if starts else lines
    which = " (the last of its %d runs, from line %d)" % (len(starts), starts[-1] + 1) if len(starts) > 1 else ""
    outcome, mpi, done = _read_run(path, lines, starts[-1] if starts else 0, len(lines))
    controller = "mpi" if mpi else "gloo"
    if outcome.interrupted is not None:
        return Explained(interrupted_explanation(outcome, path + which), hung(outcome))
    if done and not (outcome.first_failure or outcome.errors or outcome.first_exception):
        return Explained("no failure in %s%s: the run's trainer reported it done%s" % (
            path, which, _earlier_fault(path, lines, starts)), False)
    if not _diagnoses(outcome, controller, None)[0]:
        if not run:
            return Explained("no failure found in %s%s: it is empty" % (path, which), False)
        shown = [line for line in hr.without_tracebacks(outcome.tail) if parse_event(line) is None][-10:]
        earlier = _earlier_fault(path, lines, starts)
        if earlier:  # a fault-class line in the log: never "no failure found" over it, and a failure's status
            return Explained("an earlier run failed in %s%s (the last run shows no failure: no rank's exit code, "
                             "error or exception in its %d line(s))" % (path, earlier.split("failed", 1)[1],
                                                                        len(run)), True)
        return Explained(
            "no failure found in %s%s: no rank's exit code, error or exception and no launcher failure in its %d "
            "line(s)%s%s" % (path, which, len(run), "" if outcome.last_epoch is None else
                             "; the last epoch it shows ended is %d" % outcome.last_epoch,
                             "; last lines:\n" + "\n".join(shown) if shown else ""), False)
    return Explained(explain_failure(outcome, controller, origin="from its log%s" % (
        "; the last of its %d runs, from line %d" % (len(starts), starts[-1] + 1) if which else "")), True)
