"""Run a horovodrun command: show rank 0's progress with rich, keep the full log, explain a failure.

horovodrun prefixes every rank's line: ``[0]<stdout>:`` (Gloo) or ``[1,0]<stdout>:`` (MPI, ``--tag-output``). The
trainer's rank 0 prints progress events (``trainer.events``); they drive a progress bar. ``trainer:`` lines (rank
0's info and warnings, any rank's errors) are shown; everything goes to the log file.

A failed run is explained from what horovodrun and mpirun print: the first rank to exit and its code (Gloo:
``Process 1 exit with status code 139``; mpirun: ``Process name: [[j,1],1]`` / ``Exit code: 2`` or ``process rank
1 ... exited on signal 11``), the trainer's own error line, and for exit 139 under Gloo the loopback hint of
../shared/cases/23.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import re
import signal
import subprocess

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from trainer import events

RANK_LINE = re.compile(r"^\[(?:\d+,)?(\d+)\]<(stdout|stderr)>:(.*)$")
_GLOO_EXIT = re.compile(r"Process (\d+) exit with status code (-?\d+)")
_MPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")
_PROCESS_NAME = re.compile(r"Process name:\s*(?:\[\[\d+,\d+\],)?(\d+)\]?")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
_TRAINER = "trainer: "
_ERROR = "trainer: error: "
TAIL_LINES = 25


@dataclasses.dataclass
class Outcome:
    """What a run left: horovodrun's return code, the first failing (rank, exit code), the ranks' error lines,
    the last lines of output and the log path."""
    returncode: int
    first_failure: tuple[int, int] | None
    errors: list[str]
    tail: list[str]
    log_path: str


class _Failures:
    """Finds the first failing rank and its exit code in horovodrun/mpirun output."""

    def __init__(self) -> None:
        self.first: tuple[int, int] | None = None
        self._name: int | None = None

    def feed(self, line: str) -> None:
        if self.first is not None:
            return
        if m := _GLOO_EXIT.search(line):
            if int(m.group(2)) != 0:
                self.first = (int(m.group(1)), int(m.group(2)))
        elif m := _MPI_SIGNAL.search(line):
            self.first = (int(m.group(1)), 128 + int(m.group(2)))
        elif m := _PROCESS_NAME.search(line):
            self._name = int(m.group(1))
        elif (m := _EXIT_CODE.search(line)) and self._name is not None:
            self.first = (self._name, int(m.group(1)))


class _Display:
    """rich progress bar driven by the trainer's events."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = None

    def event(self, e: dict) -> None:
        kind, out = e["event"], self.progress.console
        if kind == "run":
            out.print("world size %d (%s), %s: %d training / %d validation images, %d steps per epoch, epochs "
                      "%d..%d" % (e["world_size"], e["device"], e["model"], e["n_train"], e["n_val"],
                                  e["steps_per_epoch"], e["initial_epoch"] + 1, e["epochs"]))
            self.epochs = e["epochs"]
        elif kind == "epoch_begin":
            if self.task is not None:
                self.progress.remove_task(self.task)
            self.task = self.progress.add_task("epoch %d/%s" % (e["epoch"], getattr(self, "epochs", "?")),
                                               total=e["steps"], loss="")
        elif kind == "step" and self.task is not None:
            loss = "" if e.get("loss") is None else "loss %.4f" % e["loss"]
            self.progress.update(self.task, completed=e["step"], loss=loss)
        elif kind == "epoch_end":
            mean = e.get("mean_auroc")
            out.print("epoch %d: loss %.4f, mean AUROC %s, %.1f images/s" % (
                e["epoch"], e["loss"] if e.get("loss") is not None else float("nan"),
                "undefined" if mean is None else "%.4f" % mean, e["images_per_sec"]))


def run(argv: list[str], env: dict[str, str], log_path: str, console: Console, cwd: str) -> Outcome:
    """Run ``argv`` with ``env`` added to this environment; stream, display, log (appended) and summarise."""
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    failures, errors, tail = _Failures(), [], collections.deque(maxlen=TAIL_LINES)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[loss]}"),
               TimeElapsedColumn())
    with open(log_path, "a") as log, Progress(*columns, console=console, transient=True) as progress:
        log.write("$ %s\n" % " ".join(argv))
        display = _Display(progress)
        proc = subprocess.Popen(argv, env={**os.environ, **env}, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            log.write(raw)
            tail.append(line)
            failures.feed(line)
            m = RANK_LINE.match(line)
            rank, text = (int(m.group(1)), m.group(3)) if m else (None, line)
            if (event := events.parse(text)) is not None:
                display.event(event)
            elif text.startswith(_ERROR):
                if not any(e.endswith(text[len(_ERROR):]) for e in errors):  # each rank says it: show it once
                    progress.console.print(text, style="red", markup=False, highlight=False, soft_wrap=True)
                errors.append("rank %s: %s" % (rank, text[len(_ERROR):]) if rank is not None else text)
            elif text.startswith(_TRAINER) and rank in (0, None):
                progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
        returncode = proc.wait()
    return Outcome(returncode, failures.first, errors, list(tail), log_path)


def _describe_code(code: int) -> str:
    number = -code if code < 0 else code - 128 if code > 128 else None
    try:
        return " (%s)" % signal.Signals(number).name if number else ""
    except ValueError:
        return ""


def explain_failure(outcome: Outcome, controller: str) -> str:
    """One message: which rank failed with which code, the trainer's error, the loopback hint, the log."""
    parts = ["training failed (horovodrun exit status %d)" % outcome.returncode]
    code = None
    if outcome.first_failure:
        rank, code = outcome.first_failure
        parts.append("rank %d exited first, with code %d%s" % (rank, code, _describe_code(code)))
    if outcome.errors:
        failing = [e for e in outcome.errors if outcome.first_failure and e.startswith("rank %d:" % rank)]
        parts.append((failing or outcome.errors)[0])
    if controller == "gloo" and code in (139, -11):
        parts.append("exit 139 is a segmentation fault; Horovod's Gloo controller crashes this way when the only "
                     "network interface is loopback (../shared/cases/23): use --controller mpi, or give the "
                     "host/container a network interface")
    message = "; ".join(parts) + "\nfull log: %s" % outcome.log_path
    if not outcome.errors:
        message += "\nlast lines:\n" + "\n".join(outcome.tail)
    return message
