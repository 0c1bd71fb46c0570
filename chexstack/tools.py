"""The one way chexstack runs a tool to completion: argv in, a ``ToolRun`` out, never an exception.

A missing tool, a timeout or a permission error is recorded in the ``ToolRun`` (``missing``, ``timed_out``,
``error``) so that the caller turns it into a SKIP, a FAIL or a ``ChexstackError`` with the reason
(``ToolRun.why_not()``). Every area uses it (validate's checks, conda-lock, git, scontrol/sbatch/kubectl, mpirun
--version, nvidia-smi -L). Not here: commands whose output is streamed while they run (horovodrun/mpirun in
``launch.stream``, docker builds through the SDK) and the in-image probe (``facts/probe.py``, Python 3.5, stdlib).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

from chexstack.errors import ChexstackError

#: Default seconds a tool may run; node-local tools answer in well under a second when the node is healthy.
DEFAULT_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class ToolRun:
    """What one tool run gave: ``rc`` (None if it did not finish), ``stdout``, ``stderr`` (decoded, errors
    replaced), ``missing`` (not on PATH), ``timed_out``, ``error`` (why it did not run, one line), ``seconds`` (how
    long it ran, as measured or recorded; None when not known: not part of a run's equality)."""

    argv: tuple[str, ...]
    rc: int | None
    stdout: str = ""
    stderr: str = ""
    missing: bool = False
    timed_out: bool = False
    error: str | None = None
    seconds: float | None = field(default=None, compare=False)

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def output(self) -> str:
        """stdout then stderr: tools such as nvidia-smi print their errors on stdout, others on stderr."""
        return self.stdout + (("\n" if self.stdout and not self.stdout.endswith("\n") else "") + self.stderr
                              if self.stderr else "")

    @property
    def command(self) -> str:
        """The command line as run, its words joined by spaces (for messages: ``nvidia-smi -q -x``)."""
        return " ".join(self.argv)

    def why_not(self) -> str:
        """One line saying why the run gave no usable output: missing, timed out, exit status + last line."""
        if self.missing:
            return "%s not found on PATH" % self.argv[0]
        if self.timed_out:
            return "`%s` timed out" % self.command
        if self.error:
            return "`%s` could not run: %s" % (self.command, self.error)
        last = [line for line in self.output.strip().splitlines() if line.strip()]
        return "`%s` exited %s%s" % (self.command, self.rc, (": " + last[-1].strip()) if last else "")


def which(name: str) -> str | None:
    """``name`` next to this interpreter (a venv's horovodrun, invoke) first, then on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    return local if os.access(local, os.X_OK) else shutil.which(name)


def run(argv: list[str], timeout: float | None = DEFAULT_TIMEOUT_S, env: dict[str, str] | None = None,
        cwd: str | None = None, input: str | None = None) -> ToolRun:
    """Run ``argv`` (``argv[0]`` looked up by ``which``) with a ``timeout`` in seconds (None: none); ``env`` entries
    are added to the current environment; ``input`` is given on stdin (else stdin is /dev/null)."""
    exe = which(argv[0])
    if exe is None:
        return ToolRun(tuple(argv), None, missing=True)
    full_env = dict(os.environ, **(env or {}))
    started = time.monotonic()
    try:
        p = subprocess.run([exe] + list(argv[1:]), capture_output=True, timeout=timeout, env=full_env, cwd=cwd,
                           **({"input": input.encode()} if input is not None else {"stdin": subprocess.DEVNULL}))
    except subprocess.TimeoutExpired as e:
        return ToolRun(tuple(argv), None, _text(e.stdout), _text(e.stderr), timed_out=True,
                       seconds=round(time.monotonic() - started, 3))
    except OSError as e:
        return ToolRun(tuple(argv), None, error="%s: %s" % (type(e).__name__, e.strerror or e))
    return ToolRun(tuple(argv), p.returncode, _text(p.stdout), _text(p.stderr),
                   seconds=round(time.monotonic() - started, 3))


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def run_checked(argv: list[str], what: str, *, timeout: float | None = DEFAULT_TIMEOUT_S,
                env: dict[str, str] | None = None, cwd: str | None = None, input: str | None = None,
                missing: str | None = None, tail_lines: int = 15) -> ToolRun:
    """``run`` for a tool the work cannot go on without: the ``ToolRun`` when it exits 0, else a
    ``ChexstackError`` naming ``what`` the tool was doing, the command, and why (exit status and the last
    ``tail_lines`` lines of its output, or: not found on PATH — then ``missing`` is the message when given —, timed
    out, could not start)."""
    result = run(argv, timeout=timeout, env=env, cwd=cwd, input=input)
    if result.ok:
        return result
    if result.missing and missing:
        raise ChexstackError(missing)
    if result.rc is None:
        raise ChexstackError("%s: %s" % (what, result.why_not()))
    tail = "\n".join(result.output.strip().splitlines()[-tail_lines:])
    raise ChexstackError("%s failed: `%s` exited %d%s" % (what, " ".join(argv), result.rc,
                                                         (":\n" + tail) if tail else ""))
