"""Fault-class lines of a training run's output: which line of which rank first shows a fault, of what kind.

A run's log interleaves every rank's lines in the order they arrived (each behind its launcher's prefix:
``split_rank``) with the launcher's own. A rank that fails first makes the others fail after it (Horovod shuts
down, Open MPI prints its banner), so the cause is the earliest fault-class line on any rank, and the lines that only
restate another rank's failure are its consequences (``CONSEQUENCES``), never the cause while a fault line precedes
them. ``classify_line`` reads one line (prefix removed) into a ``FaultLine`` of one ``KINDS`` kind; ``FaultScanner``
reads a run's lines in order and keeps the first fault, the first launcher summary, how many lines of each kind it
saw on which ranks, and Horovod's stall warnings (``facts.parsers.horovod_stall``).

The kinds are generic: a kind is what failed (a container's start, a GPU's initialisation, MPI's, memory, NCCL, a
Python exception, a process crash, a kill, a hang), not the text of one report; known sub-causes of a kind (an
Apptainer/Singularity ``FATAL:`` about loop devices) carry a code of ``validate/catalogue.py``. Each pattern cites
where the text comes from.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from facts.parsers.horovod_stall import StallReader
from facts.parsers.horovodrun import EXCEPTION_LINE

#: The prefixes a launcher puts before a rank's line, tried in order; group ``rank`` the rank:
#: Open MPI's ``--tag-output`` (``[1,0]<stderr>:``; Open MPI 5/PRRTE ``[prterun-n1-123@1,0]<stderr>:``), horovodrun's
#: Gloo ``[0]<stdout>:``, Intel MPI's ``-prepend-rank`` / a Gloo rank's bare ``[0] text`` (horovod/horovod#3950), and
#: Slurm's ``srun --label`` (``0: text``, right-aligned: `` 3: text``).
_RANK_PREFIXES = (
    re.compile(r"^\[(?:[^\]\[,]*@)?(?:\d+,)?(?P<rank>\d+)\]<(?:stdout|stderr)>:\s?"),
    re.compile(r"^\[(?P<rank>\d{1,5})\] "),
    re.compile(r"^ {0,4}(?P<rank>\d{1,5}): "),
)


def split_rank(line: str) -> tuple[int | None, str]:
    """``[1,2]<stderr>:text`` -> ``(2, "text")``; a line without a rank prefix (the launcher's own) -> ``(None,
    line)``."""
    for prefix in _RANK_PREFIXES:
        m = prefix.match(line)
        if m:
            return int(m.group("rank")), line[m.end():]
    return None, line


@dataclass(frozen=True)
class Kind:
    """A kind of fault: ``name`` (a short word the corpus and the tests use), ``what`` (in a message: "a container
    did not start"), ``patterns`` (a line of the kind matches one), ``source``."""

    name: str
    what: str
    patterns: tuple[re.Pattern, ...]
    source: str


def _rx(*texts: str, flags: int = 0) -> tuple[re.Pattern, ...]:
    return tuple(re.compile(t, flags) for t in texts)


#: TensorFlow/absl's and glog's level letter: ``2024-01-01 10:00:00.000000: W tensorflow/...`` or ``W0101 12:00:00``;
#: a warning (``W``) or an info line (``I``) is no fault by itself (TensorFlow 2.4-2.10 on a node without a driver
#: warns ``failed call to cuInit: UNKNOWN ERROR (303)`` and runs on its CPUs).
_LEVEL = re.compile(r"^\[?(?:\d{4}-\d\d-\d\d[ T][\d:.]+:?\s+([IWEF])\s|([IWEF])\d{4} [\d:.]+\s)")

#: The kinds, most specific first: a line is of the first kind whose pattern it matches.
KINDS: tuple[Kind, ...] = (
    Kind("container_start", "a container did not start", _rx(
        r"^FATAL:\s+\S", r"^ERROR\s+:\s.*(?:image|container|mount|namespace)", r"^docker: Error response from daemon:",
        r"^pyxis: (?:couldn't start container|failed to import docker image)", r"^\[ERROR\] .*enroot"),
        "Apptainer/Singularity print `FATAL:   <why>` and exit 255 when the container cannot be created or its "
        "command started (apptainer/apptainer pkg/sylog; sylabs/singularity#1499, #2144); Singularity 2's "
        "`ERROR  : Failed to mount image`; docker run's `docker: Error response from daemon:`; pyxis' own lines "
        "(NVIDIA/pyxis#127)"),
    Kind("out_of_memory", "a process ran out of memory", _rx(
        r"OOM when allocating tensor", r"CUDA out of memory", r"out of memory", r"oom[-_]kill", r"Out of memory: ",
        r"Killed process \d+", r"std::bad_alloc", r"^(?:\w+\.)*MemoryError\b", r"Cannot allocate memory",
        flags=re.I),
        "TensorFlow's BFC allocator (`OOM when allocating tensor`), CUDA's CUDA_ERROR_OUT_OF_MEMORY, the kernel's OOM "
        "killer (`Out of memory: Killed process N`, mm/oom_kill.c) and Slurm's cgroup (`slurmstepd: error: Detected "
        "1 oom-kill event(s)`, task/cgroup)"),
    Kind("gpu_init", "a GPU could not be initialised", _rx(
        r"failed call to cuInit", r"\bCUDA_ERROR_[A-Z_]+", r"\bcudaError[A-Z]\w+", r"CUDA error: ",
        r"CUDA driver version is insufficient", r"no CUDA-capable device is detected",
        r"CUDA-capable devices? (?:is|are) busy or unavailable", r"system not yet initialized",
        r"Failed to initialize NVML", r"NVML: Driver/library version mismatch", r"No CUDA GPUs are available",
        r"cudaGetDevice\(\) failed", r"CUDA driver initialization failed", r"CUDA initialization: ",
        r"cuda runtime error \(\d+\)"),
        "CUDA's error names (CUresult CUDA_ERROR_*, cudaError_t: https://docs.nvidia.com/cuda/cuda-driver-api/"
        "group__CUDA__TYPES.html), TensorFlow's `failed call to cuInit: CUDA_ERROR_...` (stream_executor "
        "cuda_driver.cc), PyTorch's `CUDA error: ...`, NVML's `Failed to initialize NVML`"),
    Kind("mpi_init", "MPI did not initialise", _rx(
        r"It looks like MPI_INIT failed", r"An error occurred in MPI_Init", r"MPI_Init(?:_thread)?(?:\(\))? failed",
        r"^\[[^\]]*\] PMIX ERROR:", r"PMIx_Init failed", r"ORTE_ERROR_LOG", r"orte_ess_init failed",
        r"ompi_mpi_init: ompi_rte_init failed"),
        "Open MPI's help texts of a failed MPI_Init (ompi/runtime/help-mpi-runtime.txt: \"It looks like MPI_INIT "
        "failed for some reason\"), PMIx's `PMIX ERROR:` lines"),
    Kind("nccl", "NCCL failed", _rx(
        r"NCCL WARN", r"NCCL error", r"\bnccl(?:System|Internal|UnhandledCuda|InvalidUsage|InvalidArgument|Remote)"
        r"Error\b", r"ncclCommInitRank failed", r"unhandled (?:system|cuda) error", r"NCCL failure"),
        "NCCL's `NCCL WARN` lines and its ncclResult_t names (https://docs.nvidia.com/deeplearning/nccl/user-guide/"
        "docs/api/types.html), a framework's `ncclCommInitRank failed: unhandled system error`"),
    Kind("crash", "a process crashed", _rx(
        r"^Fatal Python error: ", r"Segmentation fault", r"\bBus error\b", r"^Aborted\b", r"\(core dumped\)",
        r"^terminate called after throwing", r"^Illegal instruction\b", r"^Floating point exception\b",
        r"^\*\*\* (?:Error in|stack smashing|Process received signal)", r"exited on signal (?:4|6|7|8|11)\b",
        r"^\*\*\* SIG(?:SEGV|BUS|ABRT|ILL|FPE)"),
        "CPython's faulthandler (`Fatal Python error: Segmentation fault`/`Aborted`), the shell's report of a "
        "child killed by SIGSEGV/SIGBUS/SIGABRT/SIGILL/SIGFPE, glibc's `*** Error in`, libstdc++'s `terminate "
        "called after throwing`, Open MPI's `exited on signal 11`"),
    Kind("killed", "a process was killed", _rx(
        r"^Killed\b", r"exited on signal 9\b", r": task \d+: Killed", r"CANCELLED AT .* DUE TO TIME LIMIT"),
        "the shell's `Killed` (SIGKILL), Open MPI's `exited on signal 9 (Killed)`, srun's `task N: Killed`, "
        "slurmstepd's `*** JOB N ON node CANCELLED AT ... DUE TO TIME LIMIT ***`"),
    Kind("exception", "a Python exception", (), "the last line of a Python traceback (`OSError: ...`) or an "
                                                "argparse-style `prog: error: ...` line"),
    Kind("exit", "a rank ended with a failure status (the launcher's report of it)", (),
         "Open MPI's banner (`Primary job terminated normally, but 1 process returned a non-zero exit code`), "
         "horovodrun's `Process 1 exit with status code 1`, srun's `task 1: Exited with exit code 1`"),
    Kind("hang", "the ranks hung", (), "Horovod's stall check (facts.parsers.horovod_stall)"),
)
KIND = {k.name: k for k in KINDS}

_PYTHON_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b")

#: Lines that only restate another rank's failure, or the launcher's summary of it: never the cause while a fault
#: line comes before them. Horovod's shutdown of every rank once one failed ("Horovod has been shut down. This was
#: caused by an exception on one of the ranks", HorovodInternalError), Gloo's and MPI's peers gone (`Connection
#: closed by peer`, `Connection reset by peer`, MPI_ABORT), horovodrun's RuntimeError, Open MPI's banners and its
#: `mpirun noticed that process rank N ... exited on signal`, srun's `task N: Exited with exit code`.
CONSEQUENCES = re.compile(
    r"Horovod has been shut down|HorovodInternalError|HorovodShutdown|Horovod detected that one or more processes "
    r"exited|one or more processes exited|exited with non-zero status|Primary job +terminated normally|"
    r"closed by peer|reset by peer|Broken pipe|MPI_ABORT was invoked|mpirun noticed that process|"
    r"Process \d+ exit with status code|: task \d+: (?:Exited|Killed|Segmentation|Aborted|Bus error)|"
    r"Job step aborted|Per user-direction, the job has been aborted|STEP \d+(?:\.\d+)? ON \S+ CANCELLED|"
    r"^\*\*\* (?:JOB|STEP) .*CANCELLED", re.I)


@dataclass(frozen=True)
class FaultLine:
    """One fault-class line: its ``kind`` (a ``KINDS`` name), the ``rank`` that printed it (None: the launcher's
    own line, or a rank's line without a prefix), its ``text`` (prefix removed, stripped) and its 1-based ``number``
    in what was read; ``consequence``: it only restates another rank's failure or summarises the run's
    (``CONSEQUENCES``)."""

    kind: str
    rank: int | None
    text: str
    number: int
    consequence: bool = False


def classify_line(text: str) -> tuple[str, bool] | None:
    """The fault kind of one line (prefix removed) and whether it is a consequence (``CONSEQUENCES``), or None for a
    line of no fault kind (a TensorFlow/glog warning or info line is none: ``_LEVEL``)."""
    text = text.strip()
    if not text:
        return None
    level = _LEVEL.match(text)
    if level and (level.group(1) or level.group(2)) in "IW":
        return None
    consequence = bool(CONSEQUENCES.search(text))
    for kind in KINDS:
        if any(p.search(text) for p in kind.patterns):
            return kind.name, consequence
    if consequence:  # a rank's exception raised because another failed, else the launcher's summary
        return ("exception" if _PYTHON_EXCEPTION.match(text) else "exit"), True
    return ("exception", False) if EXCEPTION_LINE.match(text) else None


#: How many fault lines a scanner keeps (the first ones; counts go on): a long run's repeated warnings must not be
#: kept all.
KEEP = 200


@dataclass
class FaultScanner:
    """Reads a run's lines in order (``feed``, prefixes and all) and keeps: ``first`` the first fault line that is
    no consequence, ``first_summary`` the first consequence line, ``lines`` the first ``KEEP`` fault lines,
    ``counts`` lines per kind, ``stall`` Horovod's stall warnings (``facts.parsers.horovod_stall.StallReader``)."""

    first: FaultLine | None = None
    first_summary: FaultLine | None = None
    lines: list[FaultLine] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    stall: StallReader = field(default_factory=StallReader)
    read: int = 0

    def feed(self, line: str) -> FaultLine | None:
        """Read one line; the ``FaultLine`` it is, else None."""
        self.read += 1
        if self.stall.feed(line, self.read):
            return None
        rank, text = split_rank(line)
        found = classify_line(text)
        if found is None:
            return None
        fault = FaultLine(found[0], rank, text.strip(), self.read, found[1])
        self.counts[fault.kind] = self.counts.get(fault.kind, 0) + 1
        if len(self.lines) < KEEP:
            self.lines.append(fault)
        if fault.consequence:
            self.first_summary = self.first_summary or fault
        elif self.first is None:
            self.first = fault
        return fault
