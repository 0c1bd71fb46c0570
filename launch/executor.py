"""The one executor of ``python -m trainer`` commands run from here: ``invoke train`` and each count of ``invoke
bench`` (``launch.local.execute``: horovodrun here or on hosts, a stack's container, a followed Slurm job),
``invoke evaluate`` (``launch.evaluate``) and ``invoke prepare`` (``launch.prepare``).

``execute(command, argv, env, output, ...)`` does for each, in this order:

- takes the output folder's lock (``trainer.runlock``: creates the folder when needed; the command's processes get
  its token in ``CHEXSTACK_OUTPUT_LOCK``, so the trainer's own lock lets them in); a folder in use is one
  ``error:`` line, exit 2;
- says what starts (the caller's ``announce``, under the lock: the launch line, and a train run's ``--resume``
  check);
- runs the command with the trainer's process environment (``trainer_env``, stated here only) under
  ``launch.stream.run``'s supervision, its output appended to ``OUTPUT/<command.log>``;
- ends it: a signal is ``command.interrupted``'s line and exit 128 + signal; the trainer's refusal of its input
  (``launch.failure.refusal``: its ``trainer: error:`` line, exit 2) that ``command.takes_back`` says left nothing
  worth keeping is that one line, exit 2, with the log's new lines taken back (and the folder removed when the lock
  made it and nothing else is in it: a refused command leaves no trace); any other failure is ``command.failed``'s
  error.

What stays per command is its ``Command`` (log name, messages) and what it prints of its results.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable

from chexstack.console import console, warn
from chexstack.errors import ChexstackError, ExitCode
from launch import failure, stream
from launch.failure import Outcome
from launch.request import trainer_errors
from trainer import preflight

#: The process environment of every trainer command started from here (added to this one): lines as they come
#: (``PYTHONUNBUFFERED``), and TensorFlow's start-up INFO lines left out of the log but its warnings kept
#: (``TF_CPP_MIN_LOG_LEVEL`` 1: a missing CUDA library is a warning that ``launch.failure`` reads). A
#: ``TF_CPP_MIN_LOG_LEVEL`` of this process's environment wins.
TRAINER_ENV = {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "1"}


def trainer_env() -> dict[str, str]:
    """``TRAINER_ENV`` without the variables this process's environment sets already (they reach the command)."""
    return {name: value for name, value in TRAINER_ENV.items() if name not in os.environ}


def never(log: str, offset: int) -> bool:
    """``Command.takes_back`` of a command whose refusals keep their log (a training run's)."""
    return False


def always(log: str, offset: int) -> bool:
    """``Command.takes_back`` of a command that writes nothing before it can refuse (an evaluation)."""
    return True


@dataclasses.dataclass(frozen=True)
class Command:
    """What differs between the trainer's commands. ``log``: the log's file name in the output folder;
    ``failed(outcome)``: the error of a run that failed otherwise (not interrupted, not a refusal taken back);
    ``interrupted(signum, log_path)``: the one line of a run a signal stopped (None: such a run is a failure
    like any other, ``failed``'s); ``takes_back(log_path, offset)``: whether a refusal left nothing to keep, so the
    log's lines after ``offset`` are taken back and the refusal is its own line (exit 2); ``stopping``: what the
    line at the first signal says is stopped (``launch.stream.run``)."""

    log: str
    failed: Callable[[Outcome], ChexstackError]
    interrupted: Callable[[int, str], str] | None = None
    takes_back: Callable[[str, int], bool] = never
    stopping: str = stream.STOPPING


def execute(command: Command, argv: list[str], env: dict[str, str], output: str, *, cwd: str,
            announce: Callable[[], None] = lambda: None,
            force_stop: Callable[[], None] | None = None) -> Outcome:
    """Run ``argv`` (with ``env`` added to ``trainer_env()``) in ``cwd`` under ``output``'s lock (``output``:
    absolute), ``announce()`` first; return its Outcome when it ended with status 0. ChexstackError: exit 2 for a
    folder in use or a refusal ``command`` takes back (and the trainer's checks of the lock), 128 + signal when
    interrupted (``command.interrupted``), else ``command.failed``'s."""
    with trainer_errors():
        lock = preflight.acquire(output, " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]))
    refused = None
    with lock:
        if lock.problem:
            warn(lock.problem)
        announce()
        log = os.path.join(output, command.log)
        logged = os.path.getsize(log) if os.path.isfile(log) else None
        token = {preflight.TOKEN_ENV: lock.token} if lock.token else {}
        outcome = stream.run(argv, {**trainer_env(), **env, **token}, log, console, cwd, force_stop=force_stop,
                             stopping=command.stopping)
        if outcome.returncode != 0:
            refused = failure.refusal(outcome)
            if refused is not None and command.takes_back(log, logged or 0):
                take_back(log, logged)  # then the lock's release leaves the folder as it was
            else:
                refused = None
    if outcome.interrupted is not None and outcome.returncode != 0 and command.interrupted is not None:
        hang = "\n" + failure.stall_diagnosis(outcome) if failure.hung(outcome) else ""  # a hang was stopped
        raise ChexstackError(command.interrupted(outcome.interrupted, log) + hang,
                             exit_code=ExitCode.interrupted(outcome.interrupted))
    if refused is not None:
        raise ChexstackError(refused)
    if outcome.returncode != 0:
        raise command.failed(outcome)
    return outcome


def take_back(log: str, logged: int | None) -> None:
    """Remove the lines this run added to ``log`` (``logged``: its size before; None: it was not there)."""
    try:
        if logged is None:
            os.remove(log)
        else:
            os.truncate(log, logged)
    except OSError:
        pass
