"""What ``horovodrun`` and ``mpirun`` print about a training run's ranks: text in, values out (never run tools).

horovodrun prefixes every rank's line: ``[0]<stdout>:`` (Gloo) or ``[1,0]<stdout>:`` (MPI, ``--tag-output``):
``RANK_LINE``. The first rank to exit and its code (``Failures``): Gloo ``Process 1 exit with status code 139``;
mpirun ``Process name: [[j,1],1]`` / ``Exit code: 2`` (Open MPI's "mpirun detected that one or more processes
exited" help message) or ``process rank 1 with PID 42 on node n2 exited on signal 11``. A rank's own reason is its
last exception line (``OSError: Unable to open file ...``), never horovodrun's own RuntimeError summary nor an
exception a rank raises only because another one failed (``is_cause``). ``LOST_DAEMON``: Open MPI's report of a host
whose daemon stopped answering; ``MISSING_LIBRARY``: TensorFlow's warning for a CUDA library it cannot load.
``CHECK_BUILD``: ``horovodrun --check-build`` (read by ``facts.parsers.horovod``, which images carry and which
therefore imports nothing of the project).
"""
from __future__ import annotations

import re
import signal

from facts.parsers.horovod import parse_check_build
from facts.parsers.observation import Observation, first_command

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


def _check_build_run(argv: tuple, env: dict) -> bool:
    """``horovodrun --check-build`` in a bundle (fixtures 41-42), from any path."""
    first = first_command(argv, env)
    return first.name == "horovodrun" and "--check-build" in first.argv


#: ``horovodrun --check-build`` -> CheckBuild (its exit status means nothing: the marks are read from the output)
CHECK_BUILD = Observation(("horovodrun", "--check-build"), _check_build_run, lambda run: parse_check_build(run.output))
