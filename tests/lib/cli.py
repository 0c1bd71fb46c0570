"""The command line as a test runs it, two ways:

- ``run(*args)``: ``invoke ARGS`` in this process, for option parsing, refusals and error messages. It is the
  installed command's own code path (``invoke.main.program``: ``tasks.py`` loaded afresh from ``cwd``, as each
  process loads it) with what a process would have: ``sys.argv``, the environment, the folder, and the file
  descriptors 1 and 2 (a tool the task starts writes into the same capture), the rich consoles
  (``chexstack.console``) rebuilt for the captured streams so width and colour follow ``COLUMNS``/``NO_COLOR`` as
  in a process whose output is a pipe; the exit status of ``sys.exit``, and 1 with the traceback on stderr for an
  exception that would escape the process.
- ``invoke(*args)``: the installed ``invoke`` command as a real process, for the tests of the entry point itself
  (what a shell sees: its exit status and stderr), and for what needs a process: signals, another user, a mount or
  network namespace, a copied checkout, a run in the background (``Launcher``).

Both return ``returncode``, ``stdout`` and ``stderr`` (text), and both run with ``COLUMNS=120`` unless ``env``
says otherwise (``env``: variables added to this environment, a value of None removes one; with ``inherit=False``
the environment is ``env`` alone).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import locale
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from tests.lib.paths import REPO

#: The installed ``invoke`` command of this venv.
INVOKE = str(Path(sys.executable).with_name("invoke"))
#: The ``chexstack`` command of this venv's Python (``python -m chexstack``; its console script is the same).
CHEXSTACK = (sys.executable, "-m", "chexstack")
#: What every run gets unless ``env`` overrides it: the width of a log (``chexstack.console.LOG_WIDTH``).
DEFAULTS = {"COLUMNS": "120"}


@dataclasses.dataclass(frozen=True)
class Ran:
    """The outcome of ``run``: as ``subprocess.CompletedProcess`` names it."""
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def _environment(env: dict | None, inherit: bool = True) -> dict[str, str]:
    merged = {**os.environ, **DEFAULTS, **(env or {})} if inherit else dict(env or {})
    return {k: v for k, v in merged.items() if v is not None}


def expected(ran, expect: int | None):
    """``ran`` (a ``Ran`` or ``CompletedProcess``) when its exit status is ``expect`` (None: the caller states it);
    AssertionError naming the command, the status and its stderr otherwise. Apptainer's e2e suite's rule: every
    command a test runs states its exit status (``ExpectExit``), and ``tests/test_test_rules.py`` holds every test
    to it."""
    assert expect is None or ran.returncode == expect, "%s: exit %s, expected %s\n%s" % (
        " ".join(str(a) for a in ran.args), ran.returncode, expect, ran.stderr)
    return ran


def invoke(*args: str, env: dict | None = None, inherit: bool = True, cwd: Path | str = REPO,
           timeout: float = 300, command: tuple[str, ...] = (INVOKE,),
           expect: int | None = None) -> subprocess.CompletedProcess:
    """``invoke ARGS`` as a process (``command``: another one, e.g. ``CHEXSTACK``); ``expect``: its exit status
    (``expected``)."""
    return expected(subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                                   env=_environment(env, inherit)), expect)


@contextlib.contextmanager
def _environ(env: dict[str, str]):
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _descriptors():
    """Descriptors 1 and 2 (and ``sys.stdout``/``sys.stderr`` over them) into two files; yields a function that
    returns their text so far."""
    encoding = locale.getpreferredencoding(False)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved_fds = os.dup(1), os.dup(2)
        saved_streams = sys.stdout, sys.stderr
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.stdout = open(1, "w", encoding=encoding, closefd=False)
        sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace", closefd=False)

        def read() -> tuple[str, str]:
            sys.stdout.flush()
            sys.stderr.flush()
            return tuple(os.pread(f.fileno(), os.fstat(f.fileno()).st_size, 0).decode(encoding, "replace")
                         for f in (out, err))

        try:
            yield read
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            os.close(saved_fds[0])
            os.close(saved_fds[1])


@contextlib.contextmanager
def _fresh_consoles():
    """``chexstack.console``'s consoles as a process would build them now (for the current ``sys.stdout``/``stderr``
    and environment), in place: the modules that imported them keep the same objects."""
    from chexstack import console

    saved = [(c, dict(vars(c))) for c in (console.console, console.err_console)]
    vars(console.console).update(vars(console.make()))
    vars(console.err_console).update(vars(console.make(stderr=True)))
    try:
        yield
    finally:
        for c, state in saved:
            vars(c).clear()
            vars(c).update(state)


@contextlib.contextmanager
def _process(argv0: str, args: tuple[str, ...], cwd: Path | str):
    """``sys.argv``, the working folder and the loaded ``tasks`` module (invoke's loader replaces it) as they were
    afterwards."""
    saved = sys.argv, os.getcwd(), sys.modules.get("tasks"), list(sys.path)
    sys.argv = [argv0, *args]
    os.chdir(cwd)
    try:
        yield
    finally:
        sys.argv = saved[0]
        os.chdir(saved[1])
        if saved[2] is not None:
            sys.modules["tasks"] = saved[2]
        sys.path[:] = saved[3]


def run(*args: str, env: dict | None = None, inherit: bool = True, cwd: Path | str = REPO,
        expect: int | None = None) -> Ran:
    """``invoke ARGS`` in this process; see the module's docstring for what it shares with a process. ``expect``:
    its exit status (``expected``: an AssertionError with its stderr when it is another)."""
    import invoke.main

    program = copy.copy(invoke.main.program)  # the console script's Program, unused: a fresh one per run
    with _environ(_environment(env, inherit)), _process(INVOKE, args, cwd), _descriptors() as read, _fresh_consoles():
        try:
            program.run([INVOKE, *args])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except KeyboardInterrupt:
            raise
        except BaseException:  # what would escape the process: Python prints it and exits 1
            traceback.print_exc()
            code = 1
        stdout, stderr = read()
    return expected(Ran([INVOKE, *args], code, stdout, stderr), expect)


class Launcher:
    """``invoke train ARGS`` (or ``task``) started in its own process group (as a shell starts a foreground job),
    its stdout and stderr read line by line."""

    def __init__(self, *args: str, env: dict | None = None, task: str = "train") -> None:
        self.proc = subprocess.Popen([INVOKE, task, *args], cwd=REPO, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=_environment(env),
                                     start_new_session=True)
        self.lines: list[str] = []

    def wait_for(self, text: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            self.lines.append(line)
            if text in line:
                return
            assert time.monotonic() < deadline, "".join(self.lines)
        raise AssertionError("ended before %r:\n%s" % (text, "".join(self.lines)))

    def finish(self) -> tuple[int, str]:
        self.lines += self.proc.stdout.readlines()
        return self.proc.wait(timeout=120), "".join(self.lines)

