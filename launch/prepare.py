"""``invoke prepare``: ``python -m trainer prepare`` on this machine (``trainer.prepare``: one pass over the
ChestX-ray14 folder into a prepared copy that ``invoke train --data PREP`` reads), its progress drawn by rich from
the trainer's events (``launch.stream``), its output logged to ``PREP/prepare.log``.

The trainer's rules decide (``trainer.preflight.check_prepare``): the options and inputs are checked here before
TensorFlow starts, and the same refusals (another source or size in PREP, a folder that is not a copy) come from
the trainer as one ``error:`` line.
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

#: the environment of the trainer's process (added to this one): lines as they come, no TensorFlow start-up chatter
ENV = {"PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
_ERROR = "trainer: error: "


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


def prepare(argv: list[str], *, python: str = sys.executable, cwd: str | None = None) -> None:
    """Run ``python -m trainer prepare ARGV`` here; ChexstackError (the trainer's own message, the log's path)
    when its options, inputs or output folder are refused or the prepare fails."""
    with trainer_errors():
        options = preflight.check_prepare(argv)
    output_folder(options.output, "--output")
    command = [python, "-m", "trainer", "prepare", *argv]
    console.print("[dim]%s[/]" % " ".join(command), soft_wrap=True)
    log = os.path.join(options.output, preflight.PREPARE_LOG)
    outcome = stream.run(command, ENV, log, console, cwd or os.getcwd())
    if outcome.interrupted is not None:
        name = signal.Signals(outcome.interrupted).name
        raise ChexstackError("prepare interrupted by %s: run the same command again to resume (log: %s)"
                             % (name, log), ExitCode.interrupted(outcome.interrupted))
    if outcome.returncode:
        why = outcome.errors[0].split(_ERROR, 1)[-1] if outcome.errors else "exit status %s" % outcome.returncode
        raise ChexstackError("prepare failed: %s (log: %s)" % (why, log),
                             outcome.returncode if outcome.returncode > 0 else ExitCode.FAILED)
