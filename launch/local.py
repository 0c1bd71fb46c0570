"""``invoke train`` on this machine: check the GPUs, pick the controller, launch horovodrun, show the results.

``--gpus N`` runs N ranks with one GPU each (``--np`` defaults to N); ``--gpus 0 --np K`` runs K CPU ranks (the
ranks see no GPU: ``CUDA_VISIBLE_DEVICES=""``; more ranks than cores is allowed — tests do it — with a warning).
GPUs are counted by ``facts.host.gpu_count`` (``nvidia-smi --query-gpu``; none without the NVIDIA driver).

``execute`` is what every run from here shares (this module's plans, ``launch.container``'s, a followed Slurm
job's, each count of ``invoke bench``): the one executor of trainer commands (``launch.executor``: the output
folder's lock, whose token the ranks get, the process environment, the progress display), with ``--resume``
checked against the folder under the lock, ending with the results table (a training run), the interruption line
(exit 128 + signal) or the failing rank's error (exit 1).
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sys

from rich.text import Text

from chexstack.console import console, warn
from chexstack.errors import ChexstackError, ExitCode
from facts import host
from launch import executor, failure, report
from launch.controller import local_interfaces, pick_controller
from launch.horovodrun import horovodrun_argv, slots
from launch.plans import Plan
from launch.request import TrainRequest
from trainer import preflight
from trainer.errors import TrainerError
from trainer.preflight import SKIPPED_IMAGES

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOG = "launch.log"


def oversubscription(request: TrainRequest, cores: int | None = None) -> list[str]:
    """A warning when CPU ranks outnumber the cores: allowed (tests run more ranks than cores), but slow."""
    cores = host.cpu_cores() if cores is None else cores
    if request.gpus == 0 and request.ranks() > cores:
        return ["%d CPU ranks on %d core%s: ranks will share cores, so images/s will be lower than with %d ranks "
                "(fine for tests, not for measurements)" % (request.ranks(), cores, "" if cores == 1 else "s",
                                                              cores)]
    return []


def plan(request: TrainRequest, *, gpus_here: int | None = None, interfaces: list[str] | None = None,
         python: str = sys.executable, hosts: list[str] | None = None, ssh_identity_file: str | None = None) -> Plan:
    """The horovodrun command for ``request`` on this machine, or a ChexstackError saying why it cannot run.

    ``hosts``: ``["node1:2", "node2:2"]`` — horovodrun starts the ranks there over ssh (run from one of them, so
    the network interface it finds common to all hosts is also this machine's: Horovod picks the Gloo rendezvous
    address and MPI's ``btl_tcp_if_include`` by interface name); the Python, the checkout and the data must be at
    the same paths on every host (shared storage). The GPU count is then not this machine's to check. ``request``
    is checked already, once, at the seam (``launch.plan``)."""
    if hosts and request.np is None and request.gpus == 0:  # CPU ranks: one per slot of the hosts
        request = dataclasses.replace(request, np=sum(slots(h) for h in hosts))
    have = host.gpu_count() if gpus_here is None else gpus_here
    if hosts:
        have = request.gpus
    if request.gpus > have:
        raise ChexstackError("--gpus %d: this machine has %d GPU%s (nvidia-smi); use %s--gpus 0 --np N for CPU "
                             "ranks" % (request.gpus, have, "" if have == 1 else "s",
                                        "--gpus %d, or " % have if have else ""))
    controller, reason = pick_controller(local_interfaces() if interfaces is None else interfaces,
                                         request.controller)
    if controller == "mpi" and shutil.which("mpirun") is None:
        raise ChexstackError("the MPI controller (%s) needs Open MPI's mpirun on PATH; install Open MPI "
                             "(scripts/setup does) or give the host a network interface for Gloo" % reason)
    argv, env = horovodrun_argv(request.ranks(), list(request.with_absolute_paths().argv), hosts=hosts,
                                controller=controller, python=python, ssh_identity_file=ssh_identity_file)
    env.update(request.device_env())
    return Plan(argv, env, controller, reason, tuple(oversubscription(request)))


def mpirun_plan(request: TrainRequest, *, hosts: list[str], python: str = sys.executable,
                ssh_identity_file: str | None = None) -> Plan:
    """``plan`` with Horovod's MPI controller across ``hosts`` (``["node1:4", "node2:4"]``, required): what
    ``invoke bench --launcher mpirun`` runs. ChexstackError without hosts, or as ``plan``."""
    if not hosts:
        raise ChexstackError("the mpirun target needs hosts (host:slots,...)")
    return plan(dataclasses.replace(request, controller="mpi"), hosts=hosts, python=python,
                ssh_identity_file=ssh_identity_file)


def read_metrics(output: str) -> dict:
    path = os.path.join(output, "metrics.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ChexstackError("the run ended but %s cannot be read: %s" % (path, e)) from None


def interrupted_message(signum: int, output: str, epochs: int | None = None) -> str:
    """The one line after an interrupted run: the last complete checkpoint and how to continue. ``epochs``: the
    run's ``--epochs``; with it, a run stopped after its last epoch (training ended, the test split and the results
    not yet written: ``preflight.resume_step``) is told that ``--resume`` finishes it without training."""
    name = signal.Signals(signum).name
    try:
        state, step = preflight.recorded_step(output, epochs if epochs is not None else float("inf"))
    except TrainerError as e:  # a state.json or metrics.json we cannot read: say so rather than guess
        return "interrupted by %s; the checkpoint state in %s cannot be read (%s)" % (
            name, preflight.checkpoint_folder(output), e)
    if state is None:
        return ("interrupted by %s before the first epoch was complete: no checkpoint in %s; start again without "
                "--resume" % (name, output))
    where = "the last complete checkpoint is epoch %d (%s)" % (state["epoch"], preflight.checkpoint_folder(output))
    if step == preflight.FINISH:
        return ("interrupted by %s after training ended (epoch %d), before the run's end: the test split, the "
                "baseline and metrics.json's run.end were not written; %s: --resume finishes the run without "
                "training" % (name, state["epoch"], where))
    if step == preflight.DONE:
        return "interrupted by %s after the run had ended (epoch %d; metrics.json holds its end): nothing is missing" \
            % (name, state["epoch"])
    return "interrupted by %s after epoch %d; %s: continue with --resume" % (name, state["epoch"], where)


def execute(request: TrainRequest, plan: Plan, *, cwd: str, heading: str | None = None) -> dict | None:
    """Run ``plan`` (any target's, ``launch.plan``) here through the one executor (``launch.executor``: the output
    lock, the trainer's process environment, supervision, ``OUTPUT/launch.log``), in ``cwd``; print the results;
    return metrics.json (None for a ``--throughput`` run, whose result is its ``throughput.json``, read by the
    caller: ``bench.sweep``). ``heading``: said in bold before the launch line (a sweep's count).

    ChexstackError: exit 2 when the output is in use, ``--resume`` does not fit the folder or the trainer refused
    its input (a rank's ``trainer: error:`` and exit 2), 128 + signal when interrupted (SIGINT 130, SIGTERM 143),
    1 when a rank fails otherwise.
    """
    output = request.with_absolute_paths().options.output

    def announce() -> None:
        request.check_checkpoint()
        for warning in plan.warnings:
            warn(warning)
        console.print(Text.assemble(*(((heading, "bold"), " — ") if heading else ()), ("launch: ", "bold"),
                                    plan.command_line()), soft_wrap=True)
        console.print("controller: %s (%s)" % (plan.controller, plan.reason), markup=False)

    executor.execute(train_command(request, plan.controller), plan.argv, plan.env, output, cwd=cwd,
                     announce=announce, force_stop=plan.force_stop if plan.container else None)
    if request.options.throughput:
        return None
    metrics = read_metrics(output)
    console.print(report.results_table(metrics))
    written = ["metrics.json", "predictions.csv", "model.h5", "checkpoint/", LOG]
    if os.path.exists(os.path.join(output, SKIPPED_IMAGES)):
        written.append(SKIPPED_IMAGES)
    console.print("outputs in %s (%s)" % (output, ", ".join(written)), markup=False)
    return metrics


def train_command(request: TrainRequest, controller: str) -> executor.Command:
    """A training or throughput run as ``launch.executor`` runs it: logged to ``OUTPUT/launch.log``; a refusal keeps
    its log and is ``explain_failure``'s message with exit 2, another failure exit 1; a training run stopped by a
    signal says where to continue (``interrupted_message``), a throughput count's is a failure."""
    output = request.with_absolute_paths().options.output

    def failed(outcome: failure.Outcome) -> ChexstackError:
        refused = failure.refusal(outcome) is not None
        return ChexstackError(failure.explain_failure(outcome, controller, gpus=request.gpus > 0),
                              exit_code=ExitCode.USAGE if refused else ExitCode.FAILED)

    def interrupted(signum: int, log: str) -> str:
        return interrupted_message(signum, output, request.options.epochs)

    return executor.Command(LOG, failed, None if request.options.throughput else interrupted)
