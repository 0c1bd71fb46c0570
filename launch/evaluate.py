"""``invoke evaluate``: ``python -m trainer evaluate`` of a saved model on this machine, one process or ``np``
Horovod ranks through horovodrun (``trainer.evaluate``: per-pathology AUROC with patient-bootstrap intervals,
``evaluation.json`` and ``predictions.csv`` in the output folder).

The same for every ``np``: what the host can check is checked here before any process starts, by the trainer's own
rules (``trainer.preflight.check_evaluate``: the model, label and list files, the images folder, the output folder,
which must not hold a training run or another evaluation), each refusal one ``error:`` line, exit 2. Then the
run goes through the one executor of trainer commands (``launch.executor``): the output folder locked for it (the
ranks get its token), its output logged to ``OUTPUT/evaluate.log`` and shown as ``invoke train``'s is
(``launch.stream``: rank 0's ``trainer:`` lines). A rank's own refusal (its ``trainer: error:`` line and exit 2:
no labelled image among the names, a model file Keras cannot read) is one ``error:`` line and exit 2
(``launch.failure.refusal``), never horovodrun's traceback, and leaves nothing behind (the log's lines taken back,
the folder removed when this command made it); another failure is ``launch.failure.explain_failure``'s message,
exit 1; a signal stops every rank, exit 128 + signal.
"""
from __future__ import annotations

import os
import signal
import sys

from chexstack.console import console
from chexstack.errors import ChexstackError, ExitCode
from launch import executor, failure
from launch.controller import local_interfaces, pick_controller
from launch.failure import Outcome
from launch.horovodrun import horovodrun_argv
from launch.request import check_np, trainer_errors
from trainer import preflight

LOG = "evaluate.log"


def evaluate_args(model: str | None, images: str | None, labels: str | None, list_file: str | None,
                  output: str | None, split: str | None = None) -> list[str]:
    """``python -m trainer``'s arguments for an evaluation (``split``: one split of the model's run, ``--split``;
    ``output`` None: the trainer's default folder); ChexstackError naming each missing option."""
    missing = [name for name, value in (("--model", model), ("--images", images), ("--labels", labels)) if not value]
    if missing:
        raise ChexstackError("invoke evaluate needs %s (e.g. invoke evaluate --model runs/demo/model-best.h5 "
                             "--images DIR --labels FILE)" % ", ".join(missing))
    args = ["evaluate", "--model", model, "--images", images, "--labels", labels]
    return args + (["--output", output] if output else []) + (["--list", list_file] if list_file else []) + (
        ["--split", split] if split else [])


def evaluate_argv(args: list[str], np: int = 1, python: str = sys.executable,
                  controller: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The command and the environment it adds: ``python -m trainer ARGS`` for one process, else horovodrun of
    ``np`` local ranks with ``controller`` (None: the one ``launch.controller.pick_controller`` picks here)."""
    if np > 1:
        controller = controller or pick_controller(local_interfaces(), None)[0]
        return horovodrun_argv(np, args, controller=controller)
    return [python, "-m", "trainer", *args], {}


def evaluate(args: list[str], np: int = 1, *, python: str = sys.executable, cwd: str | None = None) -> None:
    """Run the evaluation ``args`` (``evaluate_args``) here with ``np`` ranks, its progress and results on this
    terminal, through the one executor (``launch.executor``). ChexstackError: exit 2 for ``np`` below 1, an input
    or output the trainer's checks refuse, a folder in use or a rank's refusal (its own words, one line); 128 +
    signal when interrupted; 1 when a rank fails otherwise (``launch.failure.explain_failure``, the log's path)."""
    check_np(np)
    with trainer_errors():
        options = preflight.check_evaluate(args[1:])
    controller = pick_controller(local_interfaces(), None)[0] if np > 1 else None
    argv, env = evaluate_argv(args, np, python, controller)

    def failed(outcome: Outcome) -> ChexstackError:
        return ChexstackError(failure.explain_failure(
            outcome, controller or "none", gpus=False, what="evaluation",
            origin=None if np > 1 else "exit status %d" % outcome.returncode), ExitCode.FAILED)

    def interrupted(signum: int, log: str) -> str:
        return "evaluation interrupted by %s: run the same command again (log: %s)" % (signal.Signals(signum).name,
                                                                                        log)

    executor.execute(executor.Command(LOG, failed, interrupted, executor.always), argv, env,
                     os.path.abspath(options.output), cwd=cwd or os.getcwd(),
                     announce=lambda: console.print("[dim]%s[/]" % " ".join(argv), soft_wrap=True))
