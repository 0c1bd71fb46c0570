"""``Scheduler``: one way a cluster runs a job, behind the seam (``launch.where`` -> ``launch.run``). Each scheduler
is one object, registered in the one table ``launch.schedulers.SCHEDULERS``; nothing else in ``launch/`` or
``bench/`` compares launcher or model names (``tests/test_launch_schedulers.py`` reads the code to say so).

A scheduler states what it is as data (``launcher``: the ``--launcher`` name; ``model``: the model the user names
to pick it among its launcher's, None for the launcher's default; ``runs_stack``: it runs a stack's image, else
this Python environment; ``artifact``/``tool``: what it renders and what takes it; ``requeues``, ``detaches``,
``follows``: which of ``--requeue``, ``--detach`` and waiting for the job apply) and does its work as methods:

- ``explain()``: one line saying what the job is, how its ranks start and what takes it;
- ``image(opts)``: (stack, what runs, working folder) from ``--stack``/``--image``, with its refusals;
- ``job_env(request, stack)``: the ranks' environment in its job (the rest of the ``launch.job.JobSpec`` of a
  training request is every scheduler's: ``launch.cluster.job_spec``);
- ``render(spec, request, opts)``: the artifact's text; ``submit(text, request, opts)``: hand it over, the job id;
- ``follow(request, spec, text)``: the ``launch.plans.Plan`` that submits and follows the job from here (a context
  manager; ``launch.run`` executes it under ``launch.local.execute``), for a scheduler that ``follows``;
- for a sweep of requests (``invoke bench``/``invoke study``): ``sweep_results(results, tag)`` (the results' root
  and mount), ``render_steps(allocation, steps, opts, ...)`` and ``submit_steps(text, opts, collect)``.

A new scheduler is a subclass in one new module plus one entry in ``launch.schedulers.SCHEDULERS``
(docs/launchers.md, "Adding a scheduler"; ``tests/test_launch_schedulers.py`` adds a toy one that way).
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from chexstack.errors import ChexstackError

if TYPE_CHECKING:  # annotations only: the scheduler modules stay light (launch.options reads the table)
    from envs.manifest import Stack
    from launch.job import JobSpec, Mount
    from launch.plans import Plan

#: What the methods take besides a job: ``opts`` a ``launch.cluster.ClusterOptions``, ``request`` a
#: ``launch.request.TrainRequest`` (not imported: both import the table, through ``launch.options``).
ClusterOptions = TrainRequest = object

#: The checkout holding ``trainer/`` (a bare-metal job's working folder).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Scheduler:
    """One scheduler (module docstring). Subclasses set the class attributes and ``render``/``submit``."""

    #: the ``--launcher`` name, and the model (``--hybrid``: ``hybrid``) that picks it among that launcher's; None:
    #: the launcher's default
    launcher: str = ""
    model: str | None = None
    #: it runs a stack's image (else: this Python environment, bare metal)
    runs_stack: bool = True
    #: what ``render`` makes and the tool ``submit`` hands it to (messages)
    artifact: str = "job"
    tool: str = ""
    #: which of ``--requeue`` and ``--detach`` apply, and whether ``--submit`` waits for the job here
    requeues: bool = False
    detaches: bool = False
    follows: bool = False
    #: said after "give --stack" when this launcher runs bare metal without a stack and this model
    no_stack_hint: str = ""
    #: said after the local-image warning's "push it to a registry": another image form this scheduler runs
    image_hint: str = ""
    #: the sweep header's word for how the ranks start
    launch_model: str = ""

    def __repr__(self) -> str:
        return "<scheduler %s%s>" % (self.launcher, "" if self.model is None else " " + self.model)

    def explain(self) -> str:
        """One line: what the job is and how its ranks start."""
        return "a %s %s, handed to %s" % (self.launcher, self.artifact, self.tool)

    # --- a training request -------------------------------------------------------------------------------------

    def image(self, opts: ClusterOptions) -> tuple[Stack | None, str, str | None]:
        """(stack, image, working folder) of the job: the stack's image (``--image``, else its verified tag) and the
        image's own folder (None); a bare-metal scheduler overrides it. ChexstackError without ``--stack``."""
        from envs.manifest import load_stack
        from images.naming import image_ref

        if opts.stack is None:
            raise ChexstackError("--launcher %s runs a stack's image: give --stack (e.g. --stack ngc)%s"
                                 % (self.launcher, self.no_stack_hint))
        stack = load_stack(opts.stack)
        return stack, opts.image or image_ref(stack), None

    def job_env(self, request: TrainRequest, stack: Stack | None) -> dict[str, str]:
        """The ranks' environment in the job: the device settings when they use GPUs (an image's CPU ranks need
        none)."""
        return request.device_env() if stack is None or (stack.gpu and request.gpus > 0) else {}

    def render(self, spec: JobSpec, request: TrainRequest, opts: ClusterOptions) -> str:
        """The artifact of ``spec`` (``request``: its output folder, for the job's log)."""
        raise NotImplementedError

    def mark_warning(self, text: str, warning: str) -> str:
        """``text`` with ``warning`` (the local-image warning) inside it where the artifact keeps one; as is."""
        return text

    def submit(self, text: str, request: TrainRequest, opts: ClusterOptions) -> str:
        """Hand ``text`` to the scheduler and return the job id (ChexstackError naming a missing tool)."""
        raise NotImplementedError

    @contextlib.contextmanager
    def follow(self, request: TrainRequest, spec: JobSpec, text: str) -> Iterator[Plan]:
        """The ``Plan`` that submits ``text`` and follows the job to its end from here (``follows``)."""
        raise ChexstackError("--launcher %s: this machine does not follow its jobs" % self.launcher)
        yield  # pragma: no cover

    def followed(self, output: str, log: str, text: str) -> tuple[str | None, tuple[str, ...]]:
        """After a followed job ended: (its job id as the follower's ``log`` says, None when it does not; the files
        of ``output`` that a signed statement names besides the run's results: ``text`` kept there, the job's own
        log)."""
        raise ChexstackError("--launcher %s: this machine does not follow its jobs" % self.launcher)

    # --- a sweep of requests (invoke bench, invoke study) --------------------------------------------------------

    def sweep_results(self, results: str, tag: str) -> tuple[str, Mount]:
        """(the sweep's result root as the ranks see it, the mount that holds it) for ``--results`` ``results``."""
        raise NotImplementedError

    def check_results(self, results: str | None) -> None:
        """Raise ChexstackError unless ``results`` (``--results``) is where this scheduler's sweep can write."""
        raise NotImplementedError

    def render_steps(self, allocation: JobSpec, steps: list[JobSpec], opts: ClusterOptions, *, header: str = "",
                     prologue: str = "", log: str | None = None, nodelist: tuple[str, ...] = (),
                     mpirun_version_output: str | None = None, render_host: str | None = None) -> str:
        """The artifact(s) that run ``steps`` one after another (``allocation``: the largest, what to reserve)."""
        raise NotImplementedError

    def submit_steps(self, text: str, opts: ClusterOptions, results: str, collect: str) -> str | None:
        """Hand the sweep's ``text`` over (``results``: the folder its log goes to; ``collect``: the folder
        ``invoke bench --collect`` then takes); the job's id where one job runs every step (Slurm), else None."""
        raise NotImplementedError


class BareMetal(Scheduler):
    """A scheduler that runs this Python environment and checkout on the nodes (no stack, no ``--image``)."""

    runs_stack = False

    def image(self, opts: ClusterOptions) -> tuple[None, str, str]:
        if opts.image:
            raise ChexstackError("--image applies to a stack's image; bare-metal %s runs this Python (%s)"
                                 % (self.launcher.capitalize(), sys.executable))
        return None, sys.executable, REPO_ROOT
