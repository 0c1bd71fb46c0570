"""What ``horovodrun`` and ``mpirun`` print about a training run's ranks: text in, values out (never run tools).

horovodrun prefixes every rank's line: ``[0]<stdout>:`` (Gloo) or ``[1,0]<stdout>:`` (MPI, ``--tag-output``):
``RANK_LINE``. The first rank to exit and its code (``Failures``): Gloo ``Process 1 exit with status code 139``;
mpirun ``Process name: [[j,1],1]`` / ``Exit code: 2`` (Open MPI's "mpirun detected that one or more processes
exited" help message) or ``process rank 1 with PID 42 on node n2 exited on signal 11``. A rank's own reason is its
last exception line (``OSError: Unable to open file ...``), never horovodrun's own RuntimeError summary nor an
exception a rank raises only because another one failed (``is_cause``). ``LOST_DAEMON``: Open MPI's report of a host
whose daemon stopped answering; ``MISSING_LIBRARY``: TensorFlow's warning for a CUDA library it cannot load (an
optional one, TensorRT's, is no reason for anything: ``is_optional_library``; ``GPU_NOT_REGISTERED``: it used no GPU).
The launch command line (``launch_network``): the hosts and network interfaces it gives the ranks, and a container
started without a network; a crashed rank's native stack trace (``crash_libraries``).
``CHECK_BUILD``: ``horovodrun --check-build`` (read by ``facts.parsers.horovod``, which images carry and which
therefore imports nothing of the project). ``LOCAL_RANKS``: how many ranks a recorded launch (``mpirun``,
``mpiexec``, ``horovodrun``, ``srun``: its command line, as typed) started on each node (``launch_ranks``).
``HOROVOD_IMPORT``: a recorded import of Horovod or a training launch, for what its output says of the TensorFlow
Horovod was built for (``facts.parsers.horovod.tf_mismatch``).
"""
from __future__ import annotations

import math
import os
import re
import signal
from dataclasses import dataclass

from facts.parsers.horovod import parse_check_build, tf_mismatch
from facts.parsers.observation import Observation, first_command, simple_commands

#: The lines chexstack's own supervision (``launch.stream``) writes into a run's log, which takes every run of an
#: output folder one after another: ``RUN_START`` and the launch command start a run; ``INTERRUPTED % "SIGINT"``
#: ends one a signal stopped (group 1 of ``INTERRUPTED_LINE``: the signal's name).
RUN_START = "$ "
#: A launch command after ``RUN_START``: what starts a run (``launch.stream`` logs the argv of horovodrun, mpirun,
#: srun/sbatch, kubectl, a container runtime's run/exec, ``python -m launch.slurmjob``/``trainer``), or a person's
#: transcript of one (``invoke train``); an environment assignment or a path may come before it. A transcript's other
#: shell lines (``$ nvidia-smi``, ``$ singularity --version``) are no run's start.
LAUNCH_COMMAND = re.compile(
    r"^(?:\w+=\S*\s+)*(?:\S*/)?(?:(?:horovodrun|mpirun|mpiexec|prterun|orterun|srun|sbatch|salloc|torchrun|"
    r"kubectl)\b|(?:docker|podman|singularity|apptainer|enroot)\s+(?:run|exec|start)\b|(?:invoke|chexstack)\s+"
    r"(?:train|prepare|evaluate|bench)\b|python[\d.]*\s+(?:-\S+\s+)*(?:-m\s+(?:trainer|launch\.\w+|"
    r"horovod\.runner\.launch)\b|\S*train\S*\.py\b))")


def run_starts(lines: list[str]) -> list[int]:
    """The 0-based indices of the lines of ``lines`` that start a run: ``RUN_START`` and a launch command
    (``LAUNCH_COMMAND``); empty when none does (the whole text is one run)."""
    return [i for i, line in enumerate(lines)
            if line.startswith(RUN_START) and LAUNCH_COMMAND.match(line[len(RUN_START):].lstrip())]
INTERRUPTED = "[chexstack] interrupted by %s"
INTERRUPTED_LINE = re.compile(r"^\[chexstack\] interrupted by (SIG[A-Z0-9]+)\s*$")
#: one rank's line as horovodrun/mpirun pass it on: group 1 the rank, 2 ``stdout``/``stderr``, 3 the rank's text
RANK_LINE = re.compile(r"^\[(?:\d+,)?(\d+)\]<(stdout|stderr)>:(.*)$")
_GLOO_EXIT = re.compile(r"Process (\d+) exit with status code (-?\d+)")
_MPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_PROCESS_NAME = re.compile(r"Process name:\s*(?:\[\[\d+,\d+\],)?(\d+)\]?")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
#: srun's report of a task that failed (``srun: error: node1: task 1: Exited with exit code 2``, ``...: tasks 0-3:
#: Killed``, ``... task 0: Segmentation fault (core dumped)``; Slurm's src/srun/srun_job.c): group 1 the node, 2 the
#: (first) task, 3 the exit code or 4 the signal's words
_SRUN_TASK = re.compile(r"^srun: error: (\S+): tasks? (\d+)(?:[-,][\d,-]*)?: (?:Exited with exit code (\d+)|"
                        r"(Killed|Segmentation fault|Aborted|Bus error|Terminated))")
#: the signal of srun's words for a task a signal ended
_SRUN_SIGNALS = {"Killed": 9, "Segmentation fault": 11, "Aborted": 6, "Bus error": 7, "Terminated": 15}
#: the last line of a Python traceback (``OSError: ...``, ``tensorflow.python.framework.errors_impl.XError: ...``),
#: CPython's fatal-error line, or an argparse-style ``prog: error: ...`` line
EXCEPTION_LINE = re.compile(r"^(?:(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)|"
                            r"KeyboardInterrupt|SystemExit)(?::\s.*)?|Fatal Python error: .*|\S[^:]*: error: .*)$")
_EXCEPTION_LINE = EXCEPTION_LINE
#: horovodrun's own summary exception, which only restates the first failing rank and its code
_HOROVODRUN_SUMMARY = "RuntimeError: Horovod detected that one or more processes exited"
#: exceptions a rank raises only because another rank failed first (Horovod stops every rank's collectives)
_CONSEQUENCES = (_HOROVODRUN_SUMMARY, "Horovod has been shut down", "HorovodInternalError", "closed by peer")
#: Open MPI's report of a daemon (a host) that stopped answering (ORTE "lost communication with a remote daemon"):
#: group 1 the host
LOST_DAEMON = re.compile(r"Remote daemon:\s*\[\[\d+,\d+\],\d+\] on node (\S+)")
#: TensorFlow's warning for a CUDA library it cannot load (then it registers no GPU:
#: https://github.com/tensorflow/tensorflow/issues/45930): group 1 the library's file name
MISSING_LIBRARY = re.compile(r"Could not load dynamic library '([^']+)'")
#: Libraries TensorFlow loads only for an optional feature, without which it registers its GPUs all the same: TensorRT
#: (TF-TRT's own warning after them: "Cannot dlopen some TensorRT libraries. If you would like to use Nvidia GPU with
#: TensorRT, ...", tensorflow/compiler/tf2tensorrt/utils/py_utils.cc; the GPU still opened in
#: https://github.com/tensorflow/tensorflow/issues/36088) and CUPTI (the profiler's GPU tracer, loaded only when a
#: profile is taken: https://github.com/aws/deep-learning-containers/pull/251). By the name before ``.so``.
OPTIONAL_LIBRARIES = ("libnvinfer", "libnvinfer_plugin", "libcupti")
#: TensorFlow's lines when a library it needs for the GPU is missing: it registers no GPU and runs on CPU
#: (gpu_device.cc: "Cannot dlopen some GPU libraries. ... Skipping registering GPU devices...";
#: https://github.com/tensorflow/tensorflow/issues/45930, NVIDIA/tensorflow#110)
GPU_NOT_REGISTERED = re.compile(r"Cannot dlopen some GPU libraries|Skipping registering GPU devices")


#: An older Horovod's form of "built for another TensorFlow": its library, compiled against one TensorFlow, does not
#: find a TensorFlow symbol in the one imported (``.../horovod/tensorflow/mpi_lib.cpython-36m-x86_64-linux-gnu.so:
#: undefined symbol: _ZN10tensorflow8OpKernel...``; https://github.com/horovod/horovod/issues/898, #656); group 1
#: the symbol. Newer releases say it as ``HorovodVersionMismatchError`` (``facts.parsers.horovod.version_mismatch``).
TF_SYMBOL_MISSING = re.compile(r"horovod/\S*\.so: undefined symbol: (_ZN\w*tensorflow\w*)")


#: TensorFlow's out-of-memory error, in a rank's exception (``tensorflow.python.framework.errors_impl.
#: ResourceExhaustedError: OOM when allocating tensor ...``) and the allocator's warning before it (``OP_REQUIRES failed
#: at conv_ops.cc:1068 : RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[64,256,56,56] and type float on
#: /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc``; TensorFlow's BFC allocator,
#: tensorflow/core/common_runtime/bfc_allocator.cc): the shape and the device where the line gives them.
_TF_OOM = re.compile(r"OOM when allocating tensor")
_TF_OOM_SHAPE = re.compile(r"OOM when allocating tensor with shape\s*\[([^\]]*)\]")
_TF_OOM_DEVICE = re.compile(r" on (?:/job:[^ ]*/)?device:([A-Z]+:\d+)|by allocator (\S+)")


@dataclass(frozen=True)
class TfOom:
    """TensorFlow ran out of memory: the ``line`` that says most (the allocator's, with the tensor's ``shape`` and the
    ``device``, ``GPU:0`` or ``CPU:0``, where given)."""

    line: str
    shape: str | None
    device: str | None


def tf_oom(lines: list[str]) -> TfOom | None:
    """TensorFlow's out-of-memory error in ``lines`` (a rank's or the launcher's, prefixes and all), else None."""
    found = []
    for line in lines:
        if not _TF_OOM.search(line):
            continue
        text = RANK_LINE.sub(r"\3", line).strip()
        shape = _TF_OOM_SHAPE.search(text)
        device = _TF_OOM_DEVICE.search(text)
        found.append(TfOom(text, shape.group(1) if shape else None,
                           (device.group(1) or device.group(2)) if device else None))
    return max(found, key=lambda o: (o.shape is not None) + (o.device is not None), default=None)


def is_optional_library(name: str) -> bool:
    """``libnvinfer.so.7``, ``libnvinfer_plugin.so.8``, ``libcupti.so.11.0``: a library of ``OPTIONAL_LIBRARIES``."""
    return name.split(".so", 1)[0] in OPTIONAL_LIBRARIES


class Failures:
    """Finds the first failing rank and its exit code in horovodrun/mpirun/srun output, fed one line at a time.

    ``first``: (rank, exit code) once seen, a signal ``N`` as ``128 + N``; ``host``: where that rank ran, when
    mpirun says (its signal report), else None.
    """

    def __init__(self) -> None:
        self.first: tuple[int, int] | None = None
        self._name: int | None = None
        self.host: str | None = None

    def feed(self, line: str) -> None:
        """Read one line of output (without its newline); lines after the first failure change nothing."""
        if self.first is not None:
            return
        if m := _GLOO_EXIT.search(line):
            if int(m.group(2)) != 0:
                self.first = (int(m.group(1)), int(m.group(2)))
        elif (m := _SRUN_TASK.match(line)) and m.group(3) != "0":
            self.first = (int(m.group(2)), int(m.group(3)) if m.group(3) else 128 + _SRUN_SIGNALS[m.group(4)])
            self.host = m.group(1)
        elif m := _MPI_SIGNAL.search(line):
            self.first = (int(m.group(1)), 128 + int(m.group(3)))
            self.host = m.group(2)
        elif m := _PROCESS_NAME.search(line):
            self._name = int(m.group(1))
        elif (m := _EXIT_CODE.search(line)) and self._name is not None:
            self.first = (self._name, int(m.group(1)))


def describe_code(code: int) -> str:
    """`` (SIGSEGV)`` for an exit code that is a signal (negative: Python's ``-N``; above 128: the shell's
    ``128 + N``), else ``""``."""
    number = -code if code < 0 else code - 128 if code > 128 else None
    try:
        return " (%s)" % signal.Signals(number).name if number else ""
    except ValueError:
        return ""


def is_cause(text: str) -> bool:
    """``text`` (a rank's line, prefix removed) is an exception line that is not the mere consequence of another
    rank's failure (``_CONSEQUENCES``)."""
    text = text.strip()
    return bool(_EXCEPTION_LINE.match(text)) and not any(c in text for c in _CONSEQUENCES)


def last_exception(lines: list[str]) -> str | None:
    """The last exception line in a rank's output (horovodrun's summary excepted), stripped, or None."""
    for line in reversed(lines):
        text = line.strip()
        if _EXCEPTION_LINE.match(text) and not text.startswith(_HOROVODRUN_SUMMARY):
            return text
    return None


def without_tracebacks(lines: list[str]) -> list[str]:
    """``lines`` with every Python traceback reduced to its exception line (frames and chaining text dropped) and
    horovodrun's summary exception left out."""
    out, inside = [], False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            inside = True
        elif inside and (line.startswith((" ", "\t")) or not line.strip() or line.startswith(
                ("During handling of the above exception", "The above exception was the direct cause"))):
            continue
        else:
            inside = False
            if not line.startswith(_HOROVODRUN_SUMMARY):
                out.append(line)
    return out


@dataclass(frozen=True)
class LaunchNetwork:
    """What a launch command line says of the ranks' network. ``hosts``: the hosts of horovodrun's ``-H``/``--hosts``
    or mpirun's ``-H``/``--host`` (slots cut, first-seen order); ``interfaces``: the interfaces named for the
    ranks' traffic (horovodrun ``--network-interface``/``--network-interfaces``, ``HOROVOD_GLOO_IFACE``,
    ``NCCL_SOCKET_IFNAME``, not its ``^`` exclusions); ``container_network``: a container engine's
    ``--network``/``--net`` value (``none``: the container has only loopback; docker/podman run, Apptainer's
    ``--net --network none``), None when not given."""

    hosts: tuple[str, ...] = ()
    interfaces: tuple[str, ...] = ()
    container_network: str | None = None


_HOSTS_OPTIONS = ("-H", "--hosts", "--host", "-host")
_INTERFACE_OPTIONS = ("--network-interface", "--network-interfaces")
_INTERFACE_ENV = ("HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME")
_NETWORK_OPTIONS = ("--network", "--net")
_LAUNCHERS = ("horovodrun", "mpirun", "mpiexec", "orterun")
_CONTAINER_ENGINES = ("docker", "podman", "apptainer", "singularity")


def _option_values(words: tuple[str, ...], names: tuple[str, ...]) -> list[str]:
    """The values of ``names`` in ``words``, as ``NAME VALUE`` or ``NAME=VALUE``."""
    values = []
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in names and eq:
            values.append(value)
        elif word in names and i + 1 < len(words) and not words[i + 1].startswith("-"):
            values.append(words[i + 1])
    return values


def launch_network(command: str | None) -> LaunchNetwork:
    """The hosts, interfaces and container network a launch command line gives its ranks (``LaunchNetwork``), read
    as the shell runs it (``facts.parsers.observation.simple_commands``): ``docker run --network none IMAGE
    horovodrun -np 2 -H localhost:2 --gloo ...`` -> hosts ``localhost``, container network ``none``. An empty
    ``LaunchNetwork`` for no command."""
    hosts: list[str] = []
    interfaces: list[str] = []
    network = None
    for simple in simple_commands((command,)) if command else []:
        words = simple.argv
        at = next((i for i, w in enumerate(words) if os.path.basename(w) in _LAUNCHERS), len(words))
        launcher, before = words[at:], words[:at]  # a container engine's own options come before the launcher
        for value in _option_values(launcher, _HOSTS_OPTIONS):
            hosts += [h.split(":")[0] for h in value.split(",") if h]
        for value in _option_values(launcher, _INTERFACE_OPTIONS) + [
                v for k, v in simple.env.items() if k in _INTERFACE_ENV] + [
                w.split("=", 1)[1] for w in words if "=" in w and w.split("=", 1)[0] in _INTERFACE_ENV]:
            if not value.startswith("^"):  # NCCL_SOCKET_IFNAME=^lo excludes; =eth0 is an exact name
                interfaces += [i for i in value.lstrip("=").split(",") if i]
        named = [v for v in _option_values(before, _NETWORK_OPTIONS) if v]
        if named and before and before[0] in _CONTAINER_ENGINES:
            network = named[0]
    return LaunchNetwork(tuple(dict.fromkeys(hosts)), tuple(dict.fromkeys(interfaces)), network)


#: a frame of a native stack trace (glibc ``backtrace_symbols``, TensorFlow's ``*** BEGIN MANGLED STACK TRACE ***``):
#: ``/path/libtensorflow_framework.so.2(+0x1a3b1c1)[0x7f1e0d5a11c1]``; group 1 the shared object's path
_FRAME = re.compile(r"^\s*(/\S+?\.so(?:\.\d+)*)\([^)]*\)\s*\[0x[0-9a-fA-F]+\]")


def crash_libraries(lines: list[str]) -> list[str]:
    """The shared objects (file names, first-seen order) of the native stack trace a crashed rank printed in
    ``lines`` (its text, prefix removed); empty when it printed none."""
    return list(dict.fromkeys(os.path.basename(m.group(1)) for line in lines if (m := _FRAME.match(line))))


def _check_build_run(argv: tuple, env: dict) -> bool:
    """``horovodrun --check-build`` in a bundle (fixtures 41-42), from any path."""
    first = first_command(argv, env)
    return first.name == "horovodrun" and "--check-build" in first.argv


#: ``horovodrun --check-build`` -> CheckBuild (its exit status means nothing: the marks are read from the output)
CHECK_BUILD = Observation(("horovodrun", "--check-build"), _check_build_run, lambda run: parse_check_build(run.output))


#: Launchers whose command line says how many ranks they start: Open MPI's (``mpirun``, ``mpiexec``, ``orterun``,
#: ``prterun``), MPICH/Intel MPI's ``mpiexec``/``mpiexec.hydra``, ``horovodrun`` and Slurm's ``srun``.
_MPI_LAUNCHERS = ("mpirun", "mpiexec", "mpiexec.hydra", "orterun", "prterun", "horovodrun")
#: options taking the world size: Open MPI ``-np``/``-n``/``-c``/``--np``/``--n``, horovodrun ``-np``, srun ``-n``
_NP_OPTIONS = ("-np", "-n", "-c", "--np", "--n", "--ntasks", "--num-proc")
#: options taking the ranks per node: Open MPI ``-npernode``/``-N``/``--npernode``, Intel MPI ``-ppn``/``-perhost``,
#: srun ``--ntasks-per-node``
_PER_NODE_OPTIONS = ("-npernode", "--npernode", "-N", "-ppn", "--ppn", "-perhost", "--ntasks-per-node")
_HOST_OPTIONS = ("-H", "-host", "--host", "-hosts", "--hosts")
_HOSTFILE_OPTIONS = ("-hostfile", "--hostfile", "-machinefile", "--machinefile", "-f", "--default-hostfile")
_PPR = re.compile(r"^ppr:(\d+):node\b")




def _validate_probe(words: tuple[str, ...]) -> bool:
    """A launch ``invoke validate`` makes itself, which says nothing of how a job lays its ranks out: ``mpi.launch``'s
    MPI test (``mpi_allreduce-<key>``, else ``hostname``), ``container.rank_limits``' probe (``chexstack-limits``),
    ``mpi.bandwidth``'s ``facts/transport.py``, ``nccl.busbw``'s ``all_reduce_perf`` (one rank per host or GPU by
    construction; a collected bundle holds them, and its replay must judge as the node did)."""
    return any(os.path.basename(w) in ("hostname", "all_reduce_perf") or os.path.basename(w).startswith(
        "mpi_allreduce") or w.endswith("transport.py") or "chexstack-limits" in w for w in words)


@dataclass(frozen=True)
class LaunchRanks:
    """Ranks a recorded launch started on each node (``per_node``; the most on any one), and its world size
    (``world``; None where the command line does not say)."""

    per_node: int
    world: int | None


def _options(words: tuple[str, ...]) -> dict[str, str]:
    """``-np 4``, ``-np=4``, ``--ntasks-per-node=4``: option -> value, the first one given (the launcher's options
    come before the program's, whose own ``-n`` must not count)."""
    out = {}
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if eq and name.startswith("-"):
            out.setdefault(name, value)
        elif word.startswith("-") and i + 1 < len(words):
            out.setdefault(word, words[i + 1])
    return out


def world_size_options(words: list[str] | tuple[str, ...]):
    """Each world-size option of an MPI launcher's arguments in order (``_NP_OPTIONS``: ``-np 8``, ``-np=8``, ``--np
    8``, ``-n 8``, ``-c 8``): (index of the word holding the value, the option's name, the value's text, which may not
    be a whole number: the caller judges it; a ``-c`` after the program may be the program's own)."""
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if eq and name in _NP_OPTIONS:
            yield i, name, value
        elif word in _NP_OPTIONS:
            yield i + 1, word, words[i + 1] if i + 1 < len(words) else ""


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() and int(value) > 0 else None


def _first(opts: dict[str, str], names: tuple[str, ...]) -> str | None:
    return next((opts[n] for n in names if n in opts), None)


def launch_ranks(argv, env: dict | None = None) -> LaunchRanks | None:
    """How many ranks the first launcher of a recorded command line (as typed: ``sudo``, ``sh -c``, ``NAME=value``
    in front, ``timeout``) started per node: its ranks-per-node option (``-npernode``/``-N``/``--map-by
    ppr:N:node``/``-ppn``/``srun --ntasks-per-node``); else the slots of its hosts (``-H a:4,b:4``: the most of
    one host); else its world size (``-np N``) over its hosts (``-H a,b``: shared evenly, rounded up; none: all on
    this node); None where it cannot say (a hostfile, ``srun -n`` without ``-N``), the line starts no launcher, or only
    validate's own probes (``_validate_probe``)."""
    for c in simple_commands(argv, env):
        if c.name not in _MPI_LAUNCHERS + ("srun",) or _validate_probe(c.argv):
            continue
        opts = _options(c.argv[1:])
        world = _int(_first(opts, _NP_OPTIONS if c.name != "srun" else ("-n", "--ntasks")))  # srun -c: CPUs
        per_node = _int(_first(opts, _PER_NODE_OPTIONS if c.name != "srun" else ("--ntasks-per-node",)))
        ppr = _PPR.match(opts.get("--map-by", opts.get("-map-by", "")))
        if per_node is None and ppr:
            per_node = int(ppr.group(1))
        if per_node is not None:
            return LaunchRanks(per_node, world)
        if world is None:
            return None
        if c.name == "srun":
            nodes = _int(_first(opts, ("-N", "--nodes")))
            return LaunchRanks(math.ceil(world / nodes), world) if nodes else None
        hosts = _first(opts, _HOST_OPTIONS)
        if hosts is None:
            return None if _first(opts, _HOSTFILE_OPTIONS) else LaunchRanks(world, world)
        entries = [h for h in hosts.split(",") if h]
        slots = [_int(h.rpartition(":")[2]) for h in entries if ":" in h]
        if slots and all(slots):
            return LaunchRanks(min(max(slots), world), world)
        return LaunchRanks(math.ceil(world / max(1, len(set(h.split(":")[0] for h in entries)))), world)
    return None


#: a recorded launch of ranks (``mpirun -np 4 …``, ``horovodrun -np 8 -H a:4,b:4 …``, ``srun -N 2 -n 8 …``, as
#: typed) whose command line says how many it started per node -> ``LaunchRanks``
LOCAL_RANKS = Observation(None, lambda argv, env: launch_ranks(argv, env) is not None,
                          lambda run: launch_ranks(run.argv))


def _horovod_import_run(argv: tuple, env: dict) -> bool:
    """A recorded run that imports Horovod (``python -c "import horovod.tensorflow as hvd; …"``, ``python -m
    facts.horovod_gate``) or launches training ranks, each of which imports it (``horovodrun``, ``mpirun``,
    ``srun``; every rank of https://github.com/horovod/horovod/issues/2619 died at import), as typed."""
    for c in simple_commands(argv, env):
        if c.name in _MPI_LAUNCHERS + ("srun",) and not _validate_probe(c.argv) and "--check-build" not in c.argv:
            return True
        if c.name.startswith("python") and any("horovod" in w for w in c.argv[1:]):
            return True
    return False


#: a recorded import of Horovod or launch of its ranks -> ``tf_mismatch`` of its output (None: it says nothing of
#: the TensorFlow Horovod was built for)
HOROVOD_IMPORT = Observation(None, _horovod_import_run, lambda run: tf_mismatch(run.output))


def rank_hosts(command: str | None) -> list[str] | None:
    """Each rank's host, by rank, as the first launcher of a launch command line places them (``mpirun -np 2 -H
    a:1,b:1 ...`` -> ``["a", "b"]``): Open MPI's and horovodrun's default mapping fills a host's slots before the
    next host's (Open MPI's mpirun(1), "--map-by slot", the default for up to 2 ranks and for -H with slots); a host
    without ``:slots`` has one slot under mpirun. None where the line does not say: no ``-H``, a hostfile, a mapping
    option (``--map-by``, ``-npernode``), srun, or fewer slots than ranks."""
    for c in simple_commands((command,)) if command else []:
        if c.name not in _MPI_LAUNCHERS:
            continue
        opts = _options(c.argv[1:])
        hosts = _first(opts, _HOST_OPTIONS)
        if hosts is None or any(o in opts for o in _PER_NODE_OPTIONS + ("--map-by", "-map-by", "-bynode",
                                                                         "--bynode", "--rank-by")):
            return None
        placed: list[str] = []
        for entry in (h for h in hosts.split(",") if h):
            name, colon, slots = entry.partition(":")
            count = _int(slots) if colon else (1 if c.name != "horovodrun" else None)
            if count is None:
                return None
            placed += [name] * count
        world = _int(_first(opts, _NP_OPTIONS)) or len(placed)
        return placed[:world] if world <= len(placed) else None
    return None
