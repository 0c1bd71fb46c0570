"""``invoke prepare``: ``python -m trainer prepare`` on this machine (``trainer.prepare``: one pass over the
ChestX-ray14 folder into a prepared copy that ``invoke train --data PREP`` reads), its progress drawn by rich from
the trainer's events (``launch.stream``), its output logged to ``PREP/prepare.log``.

The trainer's rules decide (``trainer.preflight.check_prepare``): the options, inputs and output folder (not a folder
of other files, not in use) are checked here before TensorFlow starts and before anything is written, and the
trainer's own refusals (another source or size in PREP, no labelled image) come as one ``error:`` line. A refused
prepare writes nothing: not ``prepare.log``, not the folder, not the lock file.
"""
from __future__ import annotations

import os
import signal
import sys

from chexstack.console import console
from chexstack.errors import ChexstackError, ExitCode
from chexstack.outputs import output_folder
from launch import stream
from launch.request import trainer_errors
from trainer import preflight
from trainer.errors import TrainerError

#: the environment of the trainer's process (added to this one): lines as they come, no TensorFlow start-up chatter
ENV = {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
_ERROR = "trainer: error: "
#: what the first Ctrl-C (or SIGTERM) stops, in the line it prints: one process, no ranks; the shards written so far
#: stay (``trainer.prepare`` resumes from them)
STOPPING = "the prepare (again to kill it at once; the same command resumes it)"


def prepare_argv(data: str | None, images: str | None, labels: str | None, image_size: int, output: str,
                 shard_images: int | None = None) -> list[str]:
    """``python -m trainer prepare``'s arguments (without ``prepare``), paths made absolute."""
    argv: list[str] = []
    for flag, value in (("--data", data), ("--images", images), ("--labels", labels), ("--output", output)):
        if value is not None:
            argv += [flag, os.path.abspath(value)]
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


def _take_back(folder: str, log: str, logged: int | None, made: bool) -> None:
    """Undo what this command wrote for a prepare the trainer refused before it started: the lines it added to
    ``log`` (``logged``: its size before, None: it was not there) and the folder when this command ``made`` it.
    Not while another run holds the folder (its lines may follow ours)."""
    try:
        preflight.check_free(folder)
        if logged is None:
            os.remove(log)
        else:
            os.truncate(log, logged)
        if made:
            os.rmdir(folder)  # only if empty
    except (OSError, TrainerError):
        pass


def prepare(argv: list[str], *, python: str = sys.executable, cwd: str | None = None) -> None:
    """Run ``python -m trainer prepare ARGV`` here; ChexstackError (the trainer's own message, the log's path)
    when its options, inputs or output folder are refused or the prepare fails. A refused prepare writes nothing:
    the host's checks come before the log is opened, and for a refusal only the trainer can make (a copy
    prepared from other sources or settings, no labelled image) the log's new lines and a folder made for it are
    taken back."""
    with trainer_errors():
        options = preflight.check_prepare(argv)
    made = not os.path.exists(options.output)
    output_folder(options.output, "--output")
    command = [python, "-m", "trainer", "prepare", *argv]
    console.print("[dim]%s[/]" % " ".join(command), soft_wrap=True)
    log = os.path.join(options.output, preflight.PREPARE_LOG)
    logged = os.path.getsize(log) if os.path.isfile(log) else None
    outcome = stream.run(command, ENV, log, console, cwd or os.getcwd(), stopping=STOPPING)
    if outcome.interrupted is not None:
        name = signal.Signals(outcome.interrupted).name
        raise ChexstackError("prepare interrupted by %s: run the same command again to resume (log: %s)"
                             % (name, log), ExitCode.interrupted(outcome.interrupted))
    if outcome.returncode:
        why = outcome.errors[0].split(_ERROR, 1)[-1] if outcome.errors else "exit status %s" % outcome.returncode
        if outcome.returncode == TrainerError.exit_code and outcome.errors and not _started(log, logged or 0):
            _take_back(options.output, log, logged, made)
            raise ChexstackError(why)
        raise ChexstackError("prepare failed: %s (log: %s)" % (why, log),
                             outcome.returncode if outcome.returncode > 0 else ExitCode.FAILED)
