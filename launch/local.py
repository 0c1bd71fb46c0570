"""``invoke train`` on this machine: check the GPUs, pick the controller, launch horovodrun, show the results.

``--gpus N`` runs N ranks with one GPU each (``--np`` defaults to N); ``--gpus 0 --np K`` runs K CPU ranks (the
ranks see no GPU: ``CUDA_VISIBLE_DEVICES=""``). GPUs are counted with ``nvidia-smi -L`` (one ``GPU i: ...`` line
each; none without the NVIDIA driver).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import subprocess
import sys

from rich.text import Text

from chexstack.console import console
from chexstack.errors import ChexstackError
from launch import report, stream
from launch.controller import local_interfaces, pick_controller
from launch.horovodrun import horovodrun_argv
from launch.request import TrainRequest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG = "launch.log"


@dataclasses.dataclass(frozen=True)
class Plan:
    argv: list[str]
    env: dict[str, str]
    controller: str
    reason: str

    def command_line(self) -> str:
        """The exact command, environment first, as a shell would take it."""
        return " ".join(["%s=%s" % (k, shlex.quote(v)) for k, v in sorted(self.env.items())] +
                        [shlex.join(self.argv)])


def gpu_count() -> int:
    """GPUs on this machine according to ``nvidia-smi -L`` (0 without nvidia-smi or when it fails)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


def plan(request: TrainRequest, *, gpus_here: int | None = None, interfaces: list[str] | None = None,
         python: str = sys.executable) -> Plan:
    """The horovodrun command for ``request`` on this machine, or a ChexstackError saying why it cannot run."""
    request.check()
    have = gpu_count() if gpus_here is None else gpus_here
    if request.gpus > have:
        raise ChexstackError("--gpus %d: this machine has %d GPU%s (nvidia-smi -L); use %s--gpus 0 --np N for CPU "
                             "ranks" % (request.gpus, have, "" if have == 1 else "s",
                                        "--gpus %d, or " % have if have else ""))
    controller, reason = pick_controller(local_interfaces() if interfaces is None else interfaces,
                                         request.controller)
    if controller == "mpi" and shutil.which("mpirun") is None:
        raise ChexstackError("the MPI controller (%s) needs Open MPI's mpirun on PATH; install Open MPI "
                             "(scripts/setup does) or give the host a network interface for Gloo" % reason)
    argv, env = horovodrun_argv(request.ranks(), request.with_absolute_paths().trainer_args(),
                                controller=controller, python=python)
    if request.gpus == 0:
        env["CUDA_VISIBLE_DEVICES"] = ""
    if "TF_CPP_MIN_LOG_LEVEL" not in os.environ:
        env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    return Plan(argv, env, controller, reason)


def read_metrics(output: str) -> dict:
    path = os.path.join(output, "metrics.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ChexstackError("the run ended but %s cannot be read: %s" % (path, e)) from None


def train(request: TrainRequest) -> dict:
    """Launch ``request`` here and return its metrics.json; ChexstackError (exit code 1) if the run fails."""
    p = plan(request)
    output = request.with_absolute_paths().output
    console.print(Text.assemble(("launch: ", "bold"), p.command_line()), soft_wrap=True)
    console.print("controller: %s (%s)" % (p.controller, p.reason), markup=False)
    outcome = stream.run(p.argv, p.env, os.path.join(output, LOG), console, cwd=REPO_ROOT)
    if outcome.returncode != 0:
        raise ChexstackError(stream.explain_failure(outcome, p.controller), exit_code=1)
    metrics = read_metrics(output)
    console.print(report.results_table(metrics))
    console.print("outputs in %s (metrics.json, predictions.csv, model.h5, checkpoint/, %s)" % (output, LOG),
                  markup=False)
    return metrics
