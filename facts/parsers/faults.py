"""Fault-class lines of a training run's output: which line of which rank first shows a fault, of what kind.

A run's log interleaves every rank's lines in the order they arrived (each behind its launcher's prefix:
``split_rank``) with the launcher's own. A rank that fails first makes the others fail after it (Horovod shuts
down, Open MPI prints its banner), so the cause is the earliest fault-class line on any rank, and the lines that only
restate another rank's failure are its consequences (``CONSEQUENCES``), never the cause while a fault line precedes
them. ``classify_line`` reads one line (prefix removed) into a ``FaultLine`` of one ``KINDS`` kind; ``FaultScanner``
reads a run's lines in order and keeps the first fault, the first launcher summary, how many lines of each kind it
saw on which ranks, and Horovod's stall warnings (``facts.parsers.horovod_stall``).

The kinds are generic: a kind is what failed (a container's start, a GPU at runtime (a CUDA kernel's fault, the
driver's Xid) or its initialisation, an HCA, MPI's, memory, NCCL, a program's own ``fatal:`` line, a Python exception,
a process crash, a kill, a hang), not the text of one report; a CUDA error of no initialisation cause after the first
training-progress line is a runtime fault (``FaultScanner.training``, ``INIT_ONLY``); known sub-causes of a kind (an
Apptainer/Singularity ``FATAL:`` about loop devices) carry a code of ``validate/catalogue.py``. Each pattern cites
where the text comes from.

``CAUSES`` is the table of known causes, matched before the kinds: each a code, its kind, the tools' own messages
that show it, the cause in words and the source of its text; its remedy is the table's (``facts.faults_table``,
where every code's fix is kept once) (Horovod built against another framework or
MPI or without an extension, a native crash by its signal, RDMA memory refused by the locked-memory limit, MPI_Init,
NCCL's socket connects and link-local addresses, the GPU's memory and the host's, Slurm's time limit and refusals, the
NVIDIA driver's library and kernel module at different versions). ``launch.failure`` says a first fault of a known
cause with its code and remedy; ``crash_owner`` names whose a crashed frame's library is.
"""
from __future__ import annotations

import collections
import re
from dataclasses import dataclass, field

from facts.faults_table import run_fix
from facts.parsers.horovod_stall import StallReader
from facts.parsers.horovodrun import EXCEPTION_LINE
from facts.signals import run_log_patterns

#: The prefixes a launcher puts before a rank's line, tried in order; group ``rank`` the rank:
#: Open MPI's ``--tag-output`` (``[1,0]<stderr>:``; Open MPI 5/PRRTE ``[prterun-n1-123@1,0]<stderr>:``), horovodrun's
#: Gloo ``[0]<stdout>:``, Intel MPI's ``-prepend-rank`` / a Gloo rank's bare ``[0] text`` (horovod/horovod#3950), and
#: Slurm's ``srun --label`` (``0: text``, right-aligned: `` 3: text``).
#: horovodrun's ``--timestamp-output`` puts ``time.asctime()`` before its Gloo prefix (``Fri Sep 25 16:52:35
#: 2020[3]<stderr>:``, horovod/runner/common/util/safe_shell_exec.py).
_RANK_PREFIXES = (
    re.compile(r"^(?:[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d [\d:]{8} \d{4})?"
               r"\[(?:[^\]\[,]*@)?(?:\d+,)?(?P<rank>\d+)\]<(?:stdout|stderr)>:\s?"),
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

#: The kinds, most specific first: a line is of the first kind whose pattern it matches. The generic lines (FATAL,
#: Aborted, Segmentation fault and the other crashes, out of memory) are the fault-signal lexicon's entries' run-log
#: patterns (``facts/signals.yaml``, ``facts.signals.run_log_patterns``): one file holds a node's and a run's reading.
KINDS: tuple[Kind, ...] = (
    Kind("image_pull", "a container's image could not be pulled from its registry", _rx(
        r"Failed to pull image \"", r"^Error: (?:ErrImagePull|ImagePullBackOff|ErrImageNeverPull)\b",
        r"Back-off pulling image \"", r"is not present with pull policy of Never",
        r"^(?:docker: )?Error response from daemon: (?:manifest for \S+ not found|pull access denied|Get \"https://)",
        r"^time=\S+ level=fatal msg=\"Error (?:parsing image name|initializing source) \\?\"docker://"),
        "the kubelet's image events (`Failed to pull image \"REF\": ...`, then `Error: ErrImagePull`, `Back-off "
        "pulling image`, `Error: ImagePullBackOff`: kubernetes/kubernetes pkg/kubelet/images/image_manager.go; "
        "https://kubernetes.io/docs/concepts/containers/images/#imagepullbackoff), dockerd's pull errors (`Error "
        "response from daemon: manifest for REF not found`) and skopeo's (`level=fatal msg=\"Error parsing image "
        "name \"docker://...`)"),
    Kind("container_start", "a container did not start", run_log_patterns("container_start") + _rx(
        r"^ERROR\s+:\s.*(?:image|container|mount|namespace)", r"^docker: Error response from daemon:",
        r"^pyxis: (?:couldn't start container|failed to import docker image)", r"^\[ERROR\] .*enroot"),
        "Apptainer/Singularity print `FATAL:   <why>` and exit 255 when the container cannot be created or its "
        "command started (apptainer/apptainer pkg/sylog; sylabs/singularity#1499, #2144); Singularity 2's "
        "`ERROR  : Failed to mount image`; docker run's `docker: Error response from daemon:`; pyxis' own lines "
        "(NVIDIA/pyxis#127)"),
    Kind("out_of_memory", "a process ran out of memory", run_log_patterns("out_of_memory"),
        "TensorFlow's BFC allocator (`OOM when allocating tensor`), CUDA's CUDA_ERROR_OUT_OF_MEMORY, the kernel's OOM "
        "killer (`Out of memory: Killed process N`, mm/oom_kill.c) and Slurm's cgroup (`slurmstepd: error: Detected "
        "1 oom-kill event(s)`, task/cgroup)"),
    Kind("gpu_fault", "a GPU failed while it ran (a runtime GPU fault, not its initialisation)", (),
         "the CUDA runtime's errors of a running kernel (700 illegal address, 710 device-side assert, 719 launch "
         "failure, 214 uncorrectable ECC: https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html) "
         "and the driver's Xid events (`NVRM: Xid (PCI:...): 79`: https://docs.nvidia.com/deploy/xid-errors/) "
         "(``CAUSES``)"),
    Kind("hca", "an HCA (InfiniBand/RoCE adapter) failed", (),
         "mlx5_core's health lines in the kernel log (`mlx5_core 0000:5e:00.0: ... health compromised`, its "
         "syndrome and internal-error reports: https://enterprise-support.nvidia.com/s/article/understanding-mlx5-"
         "linux-counters-and-status-parameters) (``CAUSES``)"),
    Kind("gpu_init", "a GPU could not be initialised", _rx(
        r"failed call to cuInit", r"\bCUDA_ERROR_[A-Z_]+", r"\bcudaError[A-Z]\w+", r"CUDA error: ",
        r"CUDA driver version is insufficient", r"no CUDA-capable device is detected",
        r"CUDA-capable devices? (?:is|are) busy or unavailable", r"system not yet initialized",
        r"Failed to initialize NVML", r"NVML: Driver/library version mismatch", r"No CUDA GPUs are available",
        r"cudaGetDevice\(\) failed", r"CUDA driver initialization failed", r"CUDA initialization: ",
        r"cuda runtime error \(\d+\)", r"(?i:no supported devices found for platform CUDA)", r"invalid device ordinal"),
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
    Kind("crash", "a process crashed", run_log_patterns("crash"),
        "CPython's faulthandler (`Fatal Python error: Segmentation fault`/`Aborted`), the shell's report of a "
        "child killed by SIGSEGV/SIGBUS/SIGABRT/SIGILL/SIGFPE, glibc's `*** Error in`, libstdc++'s `terminate "
        "called after throwing`, Open MPI's `exited on signal 11` and its handler's `Signal: Segmentation fault (11)`, "
        "glibc's heap checks (`free(): invalid pointer`, `munmap_chunk(): invalid pointer`, malloc/malloc.c), UCX's "
        "`Caught signal 11 (Segmentation fault`"),
    Kind("killed", "a process was killed", _rx(
        r"^Killed\b", r"exited on signal 9\b", r": task \d+: Killed", r"CANCELLED AT .* DUE TO TIME LIMIT"),
        "the shell's `Killed` (SIGKILL), Open MPI's `exited on signal 9 (Killed)`, srun's `task N: Killed`, "
        "slurmstepd's `*** JOB N ON node CANCELLED AT ... DUE TO TIME LIMIT ***`"),
    Kind("build", "a framework extension did not load", (),
         "Horovod's extension loaded against libraries it was not built for, or never built (``CAUSES``)"),
    Kind("memlock", "RDMA memory could not be pinned", (),
         "the verbs calls that pin memory refused by the locked-memory limit (``CAUSES``)"),
    Kind("scheduler", "the scheduler refused the job's request", (),
         "srun/sbatch/salloc's refusals of a request (``CAUSES``)"),
    Kind("time_limit", "the scheduler's time limit ended the job", (),
         "slurmstepd's ``CANCELLED AT ... DUE TO TIME LIMIT`` (``CAUSES``)"),
    Kind("fatal", "a program reported a fatal error", _rx(
        r"^(?:[\w.\[\]/-]+:\s*)?(?:fatal(?: error)?|FATAL(?: ERROR)?|Fatal error):\s*\S"),
        "the `prog: fatal: why` / `FATAL ERROR: why` convention of C tools (git, glibc's error(3) callers, "
        "gcc): a line of no known cause that says it is fatal"),
    Kind("exception", "a Python exception", (), "the last line of a Python traceback (`OSError: ...`) or an "
                                                "argparse-style `prog: error: ...` line"),
    Kind("exit", "a rank ended with a failure status (the launcher's report of it)", (),
         "Open MPI's banner (`Primary job terminated normally, but 1 process returned a non-zero exit code`), "
         "horovodrun's `Process 1 exit with status code 1`, srun's `task 1: Exited with exit code 1`"),
    Kind("hang", "the ranks hung", (), "Horovod's stall check (facts.parsers.horovod_stall)"),
)
KIND = {k.name: k for k in KINDS}


@dataclass(frozen=True)
class Cause:
    """A known cause of a fault line: ``code`` (a code of the table of faults, ``facts.faults_table``), ``kind`` (a
    ``KINDS`` name), ``patterns`` (a line of the cause matches one; named groups fill ``what``), ``what`` (the cause,
    in words, with ``%(group)s`` of the match), ``remedy`` (the fix, with its public source: the table's), ``source``
    (where the line's text comes from); ``primary``: a line of this cause is the cause even where it reads as a
    summary (``CONSEQUENCES``: the scheduler's cancellation of a step at its time limit is no consequence of a rank's
    failure)."""

    code: str
    kind: str
    patterns: tuple[re.Pattern, ...]
    what: str
    remedy: str
    source: str
    primary: bool = False

    def describe(self, text: str) -> str:
        """``what`` filled from the first pattern that matches ``text`` (missing groups read ``?``)."""
        m = next((m for p in self.patterns if (m := p.search(text))), None)
        groups = collections.defaultdict(lambda: "?", {k: v for k, v in (m.groupdict() if m else {}).items() if v})
        return self.what % groups


#: Whose a native crash's frame is, by its shared object's file name (first match wins): what a crash report names
#: as "in ...". The C library, the loader and the interpreter are nobody's (their frames are the signal's way).
CRASH_OWNERS: tuple[tuple[re.Pattern, str | None], ...] = (
    (re.compile(r"^(?:libc|libpthread|ld-linux|libpython|python|libgcc_s|libstdc\+\+)\b"), None),
    (re.compile(r"^(?:mpi_lib|libhorovod|gloo_lib)|horovod"), "Horovod's extension"),
    (re.compile(r"^(?:libmpi|libopen-(?:pal|rte)|libpmix|libucs|libucp|libuct|mca_|libfabric|libpsm)"), "MPI"),
    (re.compile(r"^libnccl"), "NCCL"),
    (re.compile(r"^libcuda\.so"), "the CUDA driver"),
    (re.compile(r"^(?:libcudart|libcublas|libcudnn|libcufft|libcurand|libcusolver|libcusparse)"), "CUDA's libraries"),
    (re.compile(r"xla|_pywrap_tensorflow|libtensorflow"), "TensorFlow/XLA"),
    (re.compile(r"^(?:libtorch|libc10|_C\.)"), "PyTorch"),
)


def crash_owner(library: str) -> str | None:
    """Whose the frame of ``library`` (a file name) is (``CRASH_OWNERS``): None for the C library's, the loader's,
    the interpreter's; the file name itself for one no entry names."""
    return next((who for rx, who in CRASH_OWNERS if rx.search(library)), library)


def _cause(code, kind, patterns, what, source, primary=False, flags=0) -> Cause:
    """A ``Cause`` whose remedy is the table's (``facts.faults_table.run_fix``) for ``code``."""
    return Cause(code, kind, _rx(*patterns, flags=flags), what, run_fix(code), source, primary)


#: The known causes of fault lines, most specific first: a line is of the first cause whose pattern it matches, and
#: then of that cause's kind. Generic by construction: each pattern is a library's or tool's own message, never one
#: report's text.
CAUSES: tuple[Cause, ...] = (
    # The registry's answers to a pull, as dockerd, containerd and skopeo (containers/image) quote them: the
    # distribution spec's error codes (MANIFEST_UNKNOWN, NAME_UNKNOWN, UNAUTHORIZED, DENIED:
    # https://github.com/opencontainers/distribution-spec/blob/main/spec.md#error-codes), Go's net and crypto/x509
    # errors for a registry that cannot be reached or trusted. Observed on the test cluster (dockerd 20.10, skopeo
    # 1.9): `manifest for R@sha256:... not found: manifest unknown: manifest unknown`, `dial tcp H:P: connect:
    # connection refused`, `x509: certificate signed by unknown authority`, `no basic auth credentials` (dockerd),
    # `unauthorized: authentication required` (skopeo).
    _cause("IMAGE_MANIFEST_UNKNOWN", "image_pull", (
        r"(?P<why>manifest unknown|MANIFEST_UNKNOWN|name unknown|NAME_UNKNOWN|repository name not known to registry)",
        r"(?P<why>manifest for \S+ not found)", r"(?P<why>failed to resolve reference \S+: \S+: not found)"),
        "the registry holds no image at that reference (%(why)s): a wrong digest or tag, a repository never pushed, "
        "or an image pushed to another registry or repository",
        "the distribution spec's MANIFEST_UNKNOWN and NAME_UNKNOWN "
        "(https://github.com/opencontainers/distribution-spec/blob/main/spec.md#error-codes) as dockerd and skopeo "
        "quote them", primary=True),
    _cause("REGISTRY_UNAUTHORIZED", "image_pull", (
        r"(?P<why>no basic auth credentials|unauthorized: [^\"]*|UNAUTHORIZED|denied: [^\"]*|pull access denied"
        r"|401 Unauthorized|403 Forbidden)",),
        "the registry wants credentials the puller did not give, or refused the ones it gave (%(why)s)",
        "the distribution spec's UNAUTHORIZED and DENIED (https://github.com/opencontainers/distribution-spec/blob/"
        "main/spec.md#error-codes); dockerd's `no basic auth credentials`", primary=True),
    _cause("REGISTRY_CERT_UNTRUSTED", "image_pull", (
        r"(?P<why>x509: [^\"]+|tls: failed to verify certificate: [^\"]+)",),
        "the registry's TLS certificate is not trusted by the engine that pulled (%(why)s): its CA is not where "
        "that engine reads CAs for this registry",
        "Go's crypto/x509 errors (https://pkg.go.dev/crypto/x509#UnknownAuthorityError) as dockerd, containerd, "
        "skopeo and Apptainer quote them", primary=True),
    _cause("REGISTRY_UNREACHABLE", "image_pull", (
        r"(?:Failed to pull image|pinging container registry|Error response from daemon: Get \"https://|"
        r"dial tcp).*?(?P<why>connect: connection refused|no such host|i/o timeout|network is unreachable|"
        r"no route to host|TLS handshake timeout|server misbehaving)",),
        "the registry did not answer (%(why)s): nothing listens at that host and port, the name does not resolve, "
        "or the network between the node and the registry drops the connection",
        "Go's net errors (`dial tcp HOST:PORT: connect: connection refused`, `no such host`, `i/o timeout`: "
        "https://pkg.go.dev/net) as dockerd and skopeo quote them", primary=True),
    _cause("HOROVOD_IMPORT", "build", (
        r"(?P<lib>(?:horovod|mpi_lib)\S*\.so\S*): undefined symbol: (?P<symbol>\S+)",),
        "Horovod's extension %(lib)s does not load: it needs the symbol %(symbol)s, which the libraries this process "
        "loads do not define: Horovod was built against another MPI or framework (TensorFlow, PyTorch) than the one "
        "loaded here",
        "the dynamic loader's `undefined symbol:` raised by ctypes/import (horovod/horovod#1190, #2619)"),
    _cause("HOROVOD_BUILD_INCOMPLETE", "build", (
        r"Extension (?P<ext>horovod\.\w+) has not been built", r"Horovod has not been built with (?P<ext>\w+) support",
        r"(?P<ext>horovod\.\w+) (?:was|has) not (?:been )?built",
        r"(?P<ext>Neither MPI nor Gloo) support has been built",
        r"(?P<ext>\w+) support (?:has|was) not (?:been )?built"),
        "Horovod was installed without a part this run needs (%(ext)s: the framework was not importable when Horovod "
        "was built, or that part's build failed)",
        "horovod/common/util.py check_extension: `Extension horovod.tensorflow has not been built`"),
    _cause("GPU_LOST", "gpu_fault", (
        r"NVRM: Xid \([^)]*\):\s*79\b", r"GPU has fallen off the bus", r"\bGPU is lost\b",
        r"Unable to determine the device handle for GPU\S*: \S+: Unknown Error"),
        "the GPU fell off the bus (Xid 79): the driver lost it while the run used it, and what ended the ranks "
        "after it (a kill, an exit) followed from it",
        "the driver's Xid 79 (`NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.`), NVIDIA's Xid "
        "catalogue (https://docs.nvidia.com/deploy/xid-errors/)"),
    _cause("GPU_MEMORY_ERRORS", "gpu_fault", (
        r"NVRM: (?P<what>Xid \([^)]*\):\s*(?:48|63|64|92|94|95))\b",
        r"(?P<what>uncorrectable ECC error|cudaErrorECCUncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE)",
        r"CUDA (?:runtime )?error.*?(?P<what>\b214\b)"),
        "the GPU's memory failed (%(what)s; Xid 48 is a double-bit ECC error, 63/64 a row remapping or its failure, "
        "92 a high single-bit ECC rate, 94 a contained and 95 an uncontained ECC error, CUDA's 214 an uncorrectable "
        "ECC error)",
        "the driver's Xid 48/63/64/92/94/95 and CUDA's cudaErrorECCUncorrectable (214) "
        "(https://docs.nvidia.com/deploy/xid-errors/, https://docs.nvidia.com/cuda/cuda-runtime-api/"
        "group__CUDART__TYPES.html)"),
    _cause("GPU_XID", "gpu_fault", (r"NVRM: (?P<event>Xid) \((?P<pci>[^)]*)\):\s*(?P<n>\d+)",
                                    r"nvidia-nvswitch\d*: (?P<event>SXid) \((?P<pci>PCI:[^)]*)\):\s*(?P<n>\d+)"),
           "the driver reported %(event)s %(n)s on the device at %(pci)s (Xid 74 an NVLink error, 13/31/43 a "
           "program's fault on the GPU, 45 a preempted context, 119/120 the GSP firmware; an SXid an NVSwitch's: "
           "NVIDIA's Xid catalogue and the Fabric Manager guide say which)",
           "the kernel log's `NVRM: Xid (PCI:...): N` and `nvidia-nvswitchN: SXid (PCI:...): N` "
           "(https://docs.nvidia.com/deploy/xid-errors/, "
           "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html)"),
    _cause("IB_PORT_EVENTS", "hca", (
        r"mlx5_core.*(?:health|internal error|fatal|syndrome|catastrophic|pci error)",),
        "the HCA reported a fault of its own (mlx5_core's health/internal-error report): its ports and the ranks' "
        "RDMA traffic through it fail with it",
        "mlx5_core's health reporter in the kernel log (https://enterprise-support.nvidia.com/s/article/"
        "understanding-mlx5-linux-counters-and-status-parameters)", flags=re.I),
    _cause("CUDA_RUNTIME_ERROR", "gpu_fault", (
        r"(?P<why>an illegal memory access was encountered|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS|"
        r"unspecified launch failure|cudaErrorLaunchFailure|CUDA_ERROR_LAUNCH_FAILED|device-side assert triggered|"
        r"cudaErrorAssert|CUDA_ERROR_ASSERT|misaligned address|cudaErrorMisalignedAddress|an illegal instruction "
        r"was encountered|cudaErrorIllegalInstruction|hardware stack error|cudaErrorHardwareStackError|"
        r"the launch timed out and was terminated|cudaErrorLaunchTimeout|CUDA_ERROR_LAUNCH_TIMEOUT)",
        r"(?:CUDA|cuda) (?:runtime )?error[:\s(]*(?P<why>(?:700|710|714|715|716|719|702))\b"),
        "a CUDA kernel failed while the run trained: a runtime GPU fault, not an initialisation failure; the CUDA "
        "context is lost, and every later CUDA call of the process fails",
        "the CUDA runtime's cudaError_t (700 cudaErrorIllegalAddress, 710 cudaErrorAssert, 719 "
        "cudaErrorLaunchFailure: https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html), "
        "PyTorch's `CUDA error: an illegal memory access was encountered`"),
    _cause("NVML_DRIVER_LIBRARY_MISMATCH", "gpu_init", (
        r"Driver/library version mismatch", r"NVML_ERROR_LIB_RM_VERSION_MISMATCH", r"NVRM: API mismatch",
        r"API mismatch: the NVIDIA kernel module has version"),
           "the driver's version mismatch: its user-space library is not the loaded kernel module's version",
           "NVML's NVML_ERROR_LIB_RM_VERSION_MISMATCH message (nvidia-smi exits 18; "
           "nvidia-container-cli writes it in lower case), the kernel's `NVRM: API mismatch`", flags=re.I),
    _cause("NCCL_IB_MEMREG_FAILED", "memlock", (r"NCCL WARN.*ibv_reg_mr\w* failed",),
           "NCCL could not register (pin) its buffers with the HCA: the locked-memory limit (memlock) of the ranks is "
           "too low", "NCCL's ibvwrap.cc `Call to ibv_reg_mr failed` (NCCL troubleshooting guide)"),
    _cause("MEMLOCK_LIMITED", "memlock", (
        r"ibv_(?:create_cq|create_qp|reg_mr|create_srq)\w*(?:\([^)]*\))? failed: Cannot allocate memory",
        r"(?:max )?locked[- ]memory.*(?:limit|too (?:low|small))", r"RLIMIT_MEMLOCK.*(?:limit|too|low)",
        r"registered memory.*(?:limit|ulimit)", r"allocate some locked memory", r"couldn't (?:lock|pin) memory"),
        "RDMA queues and buffers need pinned memory, and the ranks' locked-memory limit (memlock, ulimit -l) is too "
        "low for them",
        "UCX's ib_iface.c `ibv_create_cq(...) failed: Cannot allocate memory`, Open MPI's openib warning about "
        "locked memory limits (https://www.open-mpi.org/faq/?category=openfabrics#ib-locked-pages)"),
    _cause("NCCL_LINK_LOCAL_ADDRESS", "nccl", (r"NCCL WARN.*\b(?P<addr>fe80::[0-9a-f:]*(?:%\w+)?)",),
           "NCCL's bootstrap connected to a link-local IPv6 address (%(addr)s), which is valid only on its own link: "
           "the interface NCCL picked for its socket (NCCL_SOCKET_IFNAME) is not one the hosts route between",
           "NCCL's socket.cc `socketStartConnect: Connect to fe80::...%ib1 failed`"),
    _cause("NCCL_CONNECT_FAILED", "nccl", (
        r"NCCL WARN.*(?:[Cc]onnect|bootstrap)\w*.*(?P<why>timed out|Connection refused|No route to host|connection "
        r"abort|Network is unreachable|Connection reset)", r"NCCL WARN (?:socketStartConnect|bootstrap\w*):",
        r"NCCL WARN (?P<why>Bootstrap : no socket interface found)"),
        "NCCL could not connect to another rank's socket (%(why)s): the interface it picked does not reach the other "
        "host, or a firewall drops the connection",
        "NCCL's socket.cc/bootstrap.cc `Call to connect failed : Connection timed out`"),
    _cause("MPI_INIT_FAILED", "mpi_init", (
        r"ompi_rte_init failed", r"orte_init failed", r"ORTE was unable to reliably start", r"orte_ess_init failed",
        r"It looks like MPI_INIT failed", r"An error occurred in MPI_Init", r"MPI_Init(?:_thread)?(?:\(\))? failed",
        r"PMIx_Init failed", r"PMIX ERROR:", r"ORTE_ERROR_LOG", r"PMIx? (?:version|library) mismatch"),
        "the ranks could not join the runtime of the mpirun that started them (MPI_Init failed): another Open MPI "
        "(or PMIx) is loaded by the ranks than the launcher's on some host, or Horovod was built against another MPI",
        "Open MPI's help-mpi-runtime.txt (`It looks like MPI_INIT failed`, `ompi_rte_init failed`)"),
    _cause("GPU_OUT_OF_MEMORY", "out_of_memory", (
        r"CUDA_ERROR_OUT_OF_MEMORY", r"CUDA out of memory", r"cudaErrorMemoryAllocation",
        r"OOM when allocating tensor(?!.*device:CPU)", r"ResourceExhaustedError(?!.*device:CPU)",
        r"out of memory.*\b(?:GPU|gpu|device:GPU)"),
        "the GPU's memory ran out (a rank's allocation on its device failed)",
        "TensorFlow's BFC allocator (`OOM when allocating tensor`, `failed to allocate ... CUDA_ERROR_OUT_OF_MEMORY`), "
        "PyTorch's `CUDA out of memory`"),
    _cause("HOST_OUT_OF_MEMORY", "out_of_memory", (
        r"oom[-_]kill", r"Out of memory: Kill", r"Killed process \d+", r": task \d+: Out Of Memory",
        r"Memory cgroup out of memory", r"exceeded (?:job )?memory limit"),
        "the out-of-memory killer",
        "the kernel's OOM killer (mm/oom_kill.c), Slurm's `Detected 1 oom-kill event(s)` (task/cgroup), srun's `task "
        "N: Out Of Memory`", flags=re.I),
    _cause("SLURM_TIME_LIMIT", "time_limit", (r"DUE TO TIME LIMIT", r"\bJOB \S+ .*TIME LIMIT"),
           "Slurm ended the job at its time limit (--time), not a fault of the program",
           "slurmstepd's `*** JOB N ON node CANCELLED AT ... DUE TO TIME LIMIT ***`", primary=True),
    _cause("SLURM_GRES_INVALID", "scheduler", (r"Invalid generic resource \(gres\) specification",),
           "Slurm refused the step's GPU request (gres): no node of the partition or the allocation has the generic "
           "resources asked for",
           "Slurm's ESLURM_INVALID_GRES message"),
    _cause("SLURM_NODE_CONFIG_UNAVAILABLE", "scheduler", (
        r"Requested node configuration is not available", r"(?P<why>Requested partition configuration not available"
        r"|Node count specification invalid|More processors requested than permitted|Memory required by task is not "
        r"available)"),
        "Slurm refused the request: no node of the partition has the configuration asked for (GPUs, CPUs, memory, "
        "features)",
        "Slurm's ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE message"),
    _cause("SLURM_REQUEST_REFUSED", "scheduler", (
        r"^(?:srun|sbatch|salloc): error: (?:Unable to allocate resources|Unable to create step for job \S+|Batch job "
        r"submission failed): (?P<why>.+)",),
        "Slurm refused the job's request (%(why)s)",
        "srun/sbatch/salloc's refusals"),
    _cause("CRASH_SEGFAULT", "crash", (
        r"Segmentation fault", r"\bSIGSEGV\b", r"signal 11\b", r"Caught signal 11\b"),
        "SIGSEGV (a segmentation fault)",
        "the kernel's SIGSEGV as the shell, Open MPI's handler, faulthandler or UCX report it"),
    _cause("CRASH_ABORT", "crash", (
        r"^Aborted\b", r"Signal: Aborted", r"\bSIGABRT\b", r"signal 6\b", r"^terminate called after throwing",
        r"^\*\*\* Error in", r"^(?:free|munmap_chunk|realloc|malloc|malloc_consolidate)\(\): ",
        r"^double free or corruption", r"^corrupted (?:size vs|double-linked)", r"^Fatal Python error: Aborted",
        r"^\*\*\* stack smashing"),
        "SIGABRT (it aborted)",
        "abort(3): glibc's heap checks (malloc/malloc.c), libstdc++'s terminate on an uncaught exception"),
    _cause("CRASH_SIGNAL", "crash", (
        r"(?P<sig>Bus error|Illegal instruction|Floating point exception|SIGBUS|SIGILL|SIGFPE)",
        r"^Fatal Python error: (?P<sig>.+)"),
        "%(sig)s",
        "the kernel's fatal signals, CPython's faulthandler"),
)
CAUSE = {c.code: c for c in CAUSES}


def classify_cause(text: str, kind: str | None = None) -> Cause | None:
    """The first ``CAUSES`` entry whose pattern matches the line ``text`` (prefix removed), of ``kind`` where given;
    None for none."""
    return next((c for c in CAUSES if (kind is None or c.kind == kind) and any(p.search(text) for p in c.patterns)),
                None)

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
    (``CONSEQUENCES``); ``code``: its cause's code (``CAUSES``), None where no known cause matches."""

    kind: str
    rank: int | None
    text: str
    number: int
    consequence: bool = False
    code: str | None = None  # its known cause (``CAUSES``), else None


def classify_line(text: str) -> tuple[str, bool] | None:
    """The fault kind of one line (prefix removed) and whether it is a consequence (``CONSEQUENCES``), or None for a
    line of no fault kind (a TensorFlow/glog warning or info line is none: ``_LEVEL``). A line of a known cause
    (``CAUSES``) is of that cause's kind (``classify_cause`` names the cause)."""
    text = text.strip()
    if not text:
        return None
    level = _LEVEL.match(text)
    if level and (level.group(1) or level.group(2)) in "IW":
        return None
    consequence = bool(CONSEQUENCES.search(text))
    cause = classify_cause(text)
    if cause is not None:
        return cause.kind, consequence and not cause.primary
    for kind in KINDS:
        if any(p.search(text) for p in kind.patterns):
            return kind.name, consequence
    if consequence:  # a rank's exception raised because another failed, else the launcher's summary
        return ("exception" if _PYTHON_EXCEPTION.match(text) else "exit"), True
    return ("exception", False) if EXCEPTION_LINE.match(text) else None


#: How many fault lines a scanner keeps (the first ones; counts go on): a long run's repeated warnings must not be
#: kept all.
KEEP = 200
#: How many of the first fault's rank's lines after it a scanner keeps (``FaultScanner.context``): a native crash's
#: backtrace, an uncaught C++ exception's ``what():``.
CONTEXT = 40
#: srun's report of a task (``srun: error: node: task 4: Out Of Memory``): under srun the task is the rank.
_SRUN_TASK = re.compile(r"^srun: error: \S+: tasks? (?P<rank>\d+)(?:-\d+)?: ")
#: A terminal or a log collector that wraps long lines at a fixed column breaks a rank's line in two, the second
#: part without the rank's prefix (``...handling error Interna`` / ``l: no supported devices ...``): such a part
#: follows a rank's line at least this long that is the longest line read so far, and starts with neither space
#: nor a launcher's mark.
_WRAP_MIN = 80
_NOT_CONTINUATION = re.compile(r"^(?:\s|[-=*\[<$]|(?:srun|sbatch|salloc|slurmstepd|mpirun|horovodrun|prterun)\b)")


#: A training-progress line: the trainer's ``@chexstack {"event": "epoch_begin"|"step"|"epoch_end"}``
#: (trainer/events.py), Keras' ``Epoch 1/10`` and its progress bar (``12/345 [>....]``). A CUDA error after one is a
#: runtime fault of the GPU or a kernel (``CUDA_RUNTIME_ERROR``), unless its text says initialisation
#: (``INIT_ONLY``).
_PROGRESS = re.compile(r'^@chexstack \{.*"event":\s*"(?:epoch_begin|step|epoch_end)"|^Epoch \d+/\d+\s*$|'
                       r"^\s*\d+/\d+ \[[=>.]*\]")
#: The CUDA errors only an initialisation gives (CUresult/cudaError_t: 100 no device, 35 driver too old, 802 system
#: not ready, 101 invalid ordinal, 46 devices unavailable; cuInit's own failure; NVML's init), wherever they come.
INIT_ONLY = re.compile(
    r"cuInit|no CUDA-capable device|NO_DEVICE|NoDevice|No CUDA GPUs are available|driver version is insufficient|"
    r"INSUFFICIENT_DRIVER|InsufficientDriver|system not yet initialized|SYSTEM_NOT_READY|SystemNotReady|\b802\b|"
    r"invalid device ordinal|INVALID_DEVICE|InvalidDevice|busy or unavailable|DEVICES_UNAVAILABLE|"
    r"DevicesUnavailable|CUDA driver initialization failed|CUDA initialization: |Failed to initialize NVML|"
    r"no supported devices found|cudaGetDevice\(\) failed|\b(?:35|100|101)\b", re.I)


@dataclass
class FaultScanner:
    """Reads a run's lines in order (``feed``, prefixes and all) and keeps: ``first`` the first fault line that is
    no consequence, ``first_summary`` the first consequence line, ``lines`` the first ``KEEP`` fault lines,
    ``counts`` lines per kind, ``stall`` Horovod's stall warnings (``facts.parsers.horovod_stall.StallReader``),
    ``context`` the lines (prefix removed) of the first fault's rank (or of no rank, for a launcher's line) that
    follow it, up to ``CONTEXT``. A rank's line a fixed-column wrap broke in two is read as one (``_WRAP_MIN``);
    srun's ``task N:`` report is rank N's."""

    first: FaultLine | None = None
    first_summary: FaultLine | None = None
    lines: list[FaultLine] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    stall: StallReader = field(default_factory=StallReader)
    read: int = 0
    context: list[str] = field(default_factory=list)
    #: the number of the first training-progress line (``_PROGRESS``), None before one
    training: int | None = None
    #: the last line, where it was a rank's: (rank, text, raw length, its fault, its number)
    _previous: tuple[int | None, str, int, FaultLine | None, int] | None = None
    _longest: int = 0

    def feed(self, line: str) -> FaultLine | None:
        """Read one line; the ``FaultLine`` it is, else None."""
        self.read += 1
        if self.stall.feed(line, self.read):
            return None
        rank, text = split_rank(line)
        previous, self._previous = self._previous, None
        longest, self._longest = self._longest, max(self._longest, len(line))
        wrapped, joined, number = False, None, self.read  # a wrapped line's second part; its first part's fault
        if (rank is None and previous is not None and previous[0] is not None and previous[2] >= _WRAP_MIN
                and previous[2] >= longest and text.strip() and not _NOT_CONTINUATION.match(text)):
            rank, text, joined, number, wrapped = previous[0], previous[1] + text, previous[3], previous[4], True
        if (self.first is not None and len(self.context) < CONTEXT and rank == self.first.rank
                and self.first.number < self.read):
            self.context.append(text.strip())
        if self.training is None and _PROGRESS.search(text.strip()):
            self.training = number
        found = classify_line(text)
        if found is None:
            self._previous = None if wrapped or rank is None else (rank, text, len(line), None, self.read)
            return None
        if joined is not None:  # the wrapped line, read whole: it replaces its first part's reading
            self._forget(joined)
        if rank is None and (task := _SRUN_TASK.match(text)):
            rank = int(task.group("rank"))
        cause = classify_cause(text)
        if found[0] == "gpu_init" and cause is None and self.training is not None and not INIT_ONLY.search(text):
            found, cause = ("gpu_fault", found[1]), CAUSE["CUDA_RUNTIME_ERROR"]  # after training began: at runtime
        fault = FaultLine(found[0], rank, text.strip(), number, found[1],
                          cause.code if cause else None)
        self._previous = None if wrapped or rank is None else (rank, text, len(line), fault, self.read)
        self.counts[fault.kind] = self.counts.get(fault.kind, 0) + 1
        if len(self.lines) < KEEP:
            self.lines.append(fault)
        if fault.consequence:
            self.first_summary = self.first_summary or fault
        elif self.first is None:
            self.first = fault
            self.context = []
        return fault

    def _forget(self, fault: FaultLine) -> None:
        """Undo ``fault``'s reading (the first part of a wrapped line)."""
        self.counts[fault.kind] -= 1
        if fault in self.lines:
            self.lines.remove(fault)
        if self.first is fault:
            self.first = None
        if self.first_summary is fault:
            self.first_summary = None
