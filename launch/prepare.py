"""``invoke prepare``: ``python -m trainer prepare`` on this machine (``trainer.prepare``: one pass over the
ChestX-ray14 folder into a prepared copy that ``invoke train --data PREP`` reads), its progress drawn by rich from
the trainer's events (``launch.stream``), its output logged to ``PREP/prepare.log``.

The trainer's rules decide (``trainer.preflight.check_prepare``): the options, inputs and output folder (not a folder
of other files, not in use) are checked here before TensorFlow starts and before anything is written, and the
trainer's own refusals (another source or size in PREP, no labelled image) come as one ``error:`` line. It runs
through the one executor of trainer commands (``launch.executor``): the folder locked for it (the trainer's own
lock lets its token in), its output logged to ``PREP/prepare.log``. A refused prepare writes nothing: not
``prepare.log``, not the folder, not the lock file.
"""
from __future__ import annotations

import os
import signal
import sys

from chexstack.console import console
from chexstack.errors import ChexstackError, ExitCode
from launch import executor
from launch.failure import Outcome
from launch.request import trainer_errors
from trainer import preflight

_ERROR = "trainer: error: "
#: what the first Ctrl-C (or SIGTERM) stops, in the line it prints: one process, no ranks; the shards written so far
#: stay (``trainer.prepare`` resumes from them)
STOPPING = "the prepare (again to kill it at once; the same command resumes it)"


def prepare_argv(data: str | None, images: str | None, labels: str | None, image_size: int | None, output: str,
                 shard_images: int | None = None) -> list[str]:
    """``python -m trainer prepare``'s arguments (without ``prepare``), paths made absolute; a None is not given
    (the trainer's default applies)."""
    argv: list[str] = []
    for flag, value in (("--data", data), ("--images", images), ("--labels", labels), ("--output", output)):
        if value is not None:
            argv += [flag, os.path.abspath(value)]
    if image_size is not None:
        argv += ["--image-size", str(image_size)]
    if shard_images is not None:
        argv += ["--shard-images", str(shard_images)]
    return argv


def _started(log: str, offset: int) -> bool:
    """Whether the trainer's output in ``log`` after ``offset`` holds its ``prepare`` event: it accepted the folder
    and started (or resumed) the work."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            return any((preflight.parse_event(line.decode("utf-8", "replace")) or {}).get("event") == "prepare"
                       for line in f)
    except OSError:
        return True  # cannot tell: keep what is there


def prepare(argv: list[str], *, python: str = sys.executable, cwd: str | None = None) -> None:
    """Run ``python -m trainer prepare ARGV`` here through the one executor (``launch.executor``); ChexstackError
    (the trainer's own message, the log's path) when its options, inputs or output folder are refused or the
    prepare fails. A refused prepare writes nothing: the host's checks come before the folder is locked and the
    log opened, and for a refusal only the trainer can make (a copy prepared from other sources or settings, no
    labelled image) the log's new lines are taken back and the lock's release removes the folder it made."""
    with trainer_errors():
        options = preflight.check_prepare(argv)
    command = [python, "-m", "trainer", "prepare", *argv]

    def failed(outcome: Outcome) -> ChexstackError:
        why = outcome.errors[0].split(_ERROR, 1)[-1] if outcome.errors else "exit status %s" % outcome.returncode
        return ChexstackError("prepare failed: %s (log: %s)" % (why, outcome.log_path),
                              outcome.returncode if outcome.returncode > 0 else ExitCode.FAILED)

    def interrupted(signum: int, log: str) -> str:
        return "prepare interrupted by %s: run the same command again to resume (log: %s)" % (
            signal.Signals(signum).name, log)

    executor.execute(executor.Command(preflight.PREPARE_LOG, failed, interrupted, lambda log, at: not _started(log, at),
                                      STOPPING), command, {}, os.path.abspath(options.output), cwd=cwd or os.getcwd(),
                     announce=lambda: console.print("[dim]%s[/]" % " ".join(command), soft_wrap=True))
