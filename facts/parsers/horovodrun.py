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
therefore imports nothing of the project).
"""
from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass

from facts.parsers.horovod import parse_check_build
from facts.parsers.observation import Observation, first_command, simple_commands

#: one rank's line as horovodrun/mpirun pass it on: group 1 the rank, 2 ``stdout``/``stderr``, 3 the rank's text
RANK_LINE = re.compile(r"^\[(?:\d+,)?(\d+)\]<(stdout|stderr)>:(.*)$")
_GLOO_EXIT = re.compile(r"Process (\d+) exit with status code (-?\d+)")
_MPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_PROCESS_NAME = re.compile(r"Process name:\s*(?:\[\[\d+,\d+\],)?(\d+)\]?")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
#: the last line of a Python traceback (``OSError: ...``, ``tensorflow.python.framework.errors_impl.XError: ...``),
#: CPython's fatal-error line, or an argparse-style ``prog: error: ...`` line
_EXCEPTION_LINE = re.compile(r"^(?:(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)|"
                             r"KeyboardInterrupt|SystemExit)(?::\s.*)?|Fatal Python error: .*|\S[^:]*: error: .*)$")
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


def is_optional_library(name: str) -> bool:
    """``libnvinfer.so.7``, ``libnvinfer_plugin.so.8``, ``libcupti.so.11.0``: a library of ``OPTIONAL_LIBRARIES``."""
    return name.split(".so", 1)[0] in OPTIONAL_LIBRARIES


class Failures:
    """Finds the first failing rank and its exit code in horovodrun/mpirun output, fed one line at a time.

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
