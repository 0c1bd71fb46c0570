"""``invoke evaluate``: ``python -m trainer evaluate`` of a saved model on this machine, one process or ``np``
Horovod ranks through horovodrun (``trainer.evaluate``: per-pathology AUROC with patient-bootstrap intervals,
``evaluation.json`` and ``predictions.csv`` in the output folder, which must not hold a training run:
``trainer.preflight.check_evaluate_output``, checked here before anything starts)."""
from __future__ import annotations

import os
import subprocess
import sys

from chexstack.console import console
from chexstack.errors import ChexstackError
from launch.controller import local_interfaces, pick_controller
from launch.horovodrun import horovodrun_argv
from launch.request import check_np, trainer_errors
from trainer import preflight


def evaluate_args(model: str | None, images: str | None, labels: str | None, list_file: str | None,
                  output: str) -> list[str]:
    """``python -m trainer``'s arguments for an evaluation; ChexstackError naming each missing option, or the
    training run's file, or the other model's evaluation, an ``output`` that holds one would lose."""
    missing = [name for name, value in (("--model", model), ("--images", images), ("--labels", labels)) if not value]
    if missing:
        raise ChexstackError("invoke evaluate needs %s (e.g. invoke evaluate --model runs/demo/model-best.h5 "
                             "--images DIR --labels FILE)" % ", ".join(missing))
    with trainer_errors():
        preflight.check_evaluate_output(output, model, labels, list_file)
    args = ["evaluate", "--model", model, "--images", images, "--labels", labels, "--output", output]
    return args + (["--list", list_file] if list_file else [])


def evaluate_argv(args: list[str], np: int = 1, python: str = sys.executable) -> tuple[list[str], dict[str, str]]:
    """The command and the environment it adds: ``python -m trainer ARGS`` for one process, else horovodrun of
    ``np`` local ranks with the controller ``launch.controller.pick_controller`` picks for this machine."""
    if np > 1:
        controller, _ = pick_controller(local_interfaces(), None)
        return horovodrun_argv(np, args, controller=controller)
    return [python, "-m", "trainer", *args], {}


def evaluate(args: list[str], np: int = 1) -> int:
    """Run the evaluation here, its output to this terminal; the exit status of the trainer (or horovodrun).
    ChexstackError for ``np`` below 1."""
    check_np(np)
    argv, env = evaluate_argv(args, np)
    console.print("[dim]%s[/]" % " ".join(argv), soft_wrap=True)
    return subprocess.run(argv, env={**os.environ, **env}).returncode
