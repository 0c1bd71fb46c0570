"""The Slurm schedulers (``launch.scheduler.Scheduler``), each a batch script rendered by ``launch.slurm`` and handed
to ``sbatch``; ``--submit`` follows the job from here (``follow_plan``) unless ``--detach``:

- ``BAREMETAL`` (no ``--stack``): the host's Open MPI ``mpirun`` inside the allocation starts ``python -m trainer``
  of this Python environment and checkout on every node (``launch.slurm.render_baremetal``); ``--requeue`` applies;
- ``PYXIS`` (``--stack``): ``srun --mpi=pmix`` and NVIDIA's pyxis run the stack's image (render-only here: pyxis and
  enroot are packaged nowhere this machine installs from);
- ``HYBRID`` (``--stack --hybrid --image SIF``): the host's ``mpirun`` around ``singularity exec`` of the SIF.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

from chexstack.errors import ChexstackError
from launch.scheduler import BareMetal, Scheduler


class SlurmBatch(Scheduler):
    """What every Slurm scheduler shares: the batch script, sbatch, following the job, a sweep as job steps."""

    launcher = "slurm"
    artifact = "batch script"
    tool = "sbatch"
    detaches = True
    follows = True
    no_stack_hint = ("; without --hybrid and --stack, Slurm runs this Python environment on the nodes "
                     "(bare metal)")
    image_hint = " or an enroot .sqsh on shared storage (enroot import dockerd://%s)"
    #: the model of ``launch.slurm.render``/``render_steps``
    script_model = "pyxis"
    #: how the followed job's ranks start (the follower plan's reason) and Horovod's controller there
    started_by = "the job script's launcher"
    #: the batch script as a followed job's output folder keeps it (a subject of its signed statement)
    script_file = "job.sbatch"
    controller = "mpi"

    def explain(self) -> str:
        return "a Slurm batch script (%s), handed to sbatch" % self.launch_model

    def render(self, spec, request, opts) -> str:
        from launch import slurm

        return slurm.render(spec, self.script_model, slurm_options(request, opts))

    def submit(self, text, request, opts) -> str:
        from launch.submit import submit_slurm

        try:  # sbatch opens --output before the script's mkdir: create the folder when this machine sees it
            os.makedirs(request.options.output, exist_ok=True)
        except OSError:
            pass
        return submit_slurm(text)

    @contextlib.contextmanager
    def follow(self, request, spec, text) -> Iterator:
        with follow_plan(request, spec, text, self.started_by, self.controller) as plan:
            yield plan

    def followed(self, output, log, text):
        """The job id from the follower's ``submitted Slurm job N`` line in ``log`` (the run's launch.log; the last
        such line: a resumed run's), ``text`` kept as ``OUTPUT/job.sbatch``, and the job's ``slurm-N.out``."""
        import re
        from pathlib import Path

        from facts.parsers.slurm import PREFIX

        log = Path(log)
        ids = re.findall(r"^%ssubmitted Slurm job (\d+)" % re.escape(PREFIX),
                         log.read_text(errors="replace") if log.is_file() else "", re.M)
        (Path(output) / self.script_file).write_text(text)
        job_id = ids[-1] if ids else None
        return job_id, (self.script_file,) + (("slurm-%s.out" % job_id,) if job_id else ())

    def sweep_results(self, results, tag):
        from launch.job import Mount

        root = "%s/%s" % (results.rstrip("/"), tag)
        return root, Mount(root)

    def check_results(self, results) -> None:
        from launch.job import cluster_path

        if not results:
            raise ChexstackError("--launcher slurm: give --results DIR, an absolute path on storage every node and "
                                 "this checkout see (e.g. --results /shared/chexstack/bench), for the counts' results")
        cluster_path(self.launcher, "--results", results)

    def compatibility(self, allocation, mpirun_version_output):
        """The hybrid model's MPI check on the rendering machine (None for the other models)."""
        return None

    def render_steps(self, allocation, steps, opts, *, header="", prologue="", log=None, nodelist=(),
                     mpirun_version_output=None, render_host=None) -> str:
        from launch import slurm

        options = slurm.SlurmOptions(time=opts.time, partition=opts.partition, account=opts.account,
                                     output=log or "%s-%%j.out" % allocation.name, nodelist=tuple(nodelist))
        return slurm.render_steps(allocation, steps, self.script_model, options, header=header, prologue=prologue,
                                  compat=self.compatibility(allocation, mpirun_version_output),
                                  render_host=render_host)

    def submit_steps(self, text, opts, results, collect) -> str:
        from pathlib import Path

        from chexstack.console import console
        from launch.submit import submit_slurm

        try:  # sbatch opens the job's log in --results before the script runs: create it where this sees it
            Path(results).mkdir(parents=True, exist_ok=True)
        except OSError:
            pass
        job_id = submit_slurm(text)
        console.print("submitted Slurm job [bold]%s[/]; when it has ended: invoke bench --collect %s"
                      % (job_id, collect))
        return job_id


class SlurmBareMetal(BareMetal, SlurmBatch):
    """Bare metal: this Python environment and checkout on every node, the host's Open MPI ``mpirun``."""

    requeues = True
    launch_model = "mpirun"
    started_by = "Open MPI's mpirun inside the Slurm allocation"

    def explain(self) -> str:
        return ("a Slurm batch script (bare metal): Open MPI's mpirun inside the allocation starts this Python "
                "environment's trainer on every node, handed to sbatch")


class SlurmPyxis(SlurmBatch):
    """``srun --mpi=pmix`` with pyxis' ``--container-image``: the stack's image (registry reference or .sqsh)."""

    launch_model = "pyxis"

    def explain(self) -> str:
        return "a Slurm batch script: srun --mpi=pmix with pyxis runs the stack's image, handed to sbatch"


class SlurmHybrid(SlurmBatch):
    """Apptainer's hybrid model: the host's ``mpirun`` around ``singularity exec`` of the SIF (``--image``)."""

    model = "hybrid"
    script_model = "hybrid"
    launch_model = "hybrid"

    def explain(self) -> str:
        return ("a Slurm batch script (hybrid model): the host's mpirun starts singularity exec of the SIF, "
                "handed to sbatch")

    def image(self, opts):
        stack, image, workdir = super().image(opts)
        if not opts.image:
            raise ChexstackError("--hybrid runs `singularity exec` on a SIF: give --image /shared/path/%s.sif (invoke "
                                 "build --stack %s --runtime singularity makes one)" % (stack.name, stack.name))
        return stack, image, workdir

    def job_env(self, request, stack):
        # the host mpirun gets the device settings whatever the stack (single copy off and run-as-root:
        # slurm.exports, the renderer's)
        return request.device_env()

    def compatibility(self, allocation, mpirun_version_output):
        from launch import slurm

        return slurm.render_host_compat(allocation.stack, mpirun_version_output)


def slurm_options(request, opts):
    """The ``launch.slurm.SlurmOptions`` of a training job (``opts``: ``launch.cluster.ClusterOptions``); its output
    goes to ``<output>/slurm-<job id>.out`` (shared storage), where ``--submit`` follows it."""
    from launch import slurm

    return slurm.SlurmOptions(time=opts.time, partition=opts.partition, account=opts.account,
                              output=os.path.join(request.options.output, "slurm-%j.out"), requeue=opts.requeue)


@contextlib.contextmanager
def follow_plan(request, spec, script: str, reason: str, controller: str = "mpi") -> Iterator:
    """The ``launch.plans.Plan`` that submits ``script`` and follows the job (``python -m launch.slurmjob SCRIPT
    PATTERN``) of ``request`` (a ``launch.request.TrainRequest``) and ``spec``, for the launcher to execute
    (``launch.local.execute``: the output lock, progress, failure explanation, results). The output folder must be
    visible here (the shared storage the nodes see: ``launch.run`` checks it); ``reason`` says how the ranks
    start, ``controller`` with which Horovod controller. ChexstackError without sbatch. The script is a temporary file
    while the context lasts."""
    from launch.plans import Plan
    from launch.submit import submit_slurm

    if not shutil.which("sbatch"):
        submit_slurm(script)  # the clear "sbatch not found" error
    fd, path = tempfile.mkstemp(prefix="chexstack-", suffix=".sbatch")
    with os.fdopen(fd, "w") as f:
        f.write(script)
    pattern = os.path.join(request.options.output, "slurm-%j.out")
    argv = [sys.executable, "-m", "launch.slurmjob", path, pattern]
    try:
        yield Plan(argv, {}, controller, reason, shown="sbatch (job %s) and follow %s" % (spec.name, pattern))
    finally:
        if os.path.exists(path):
            os.unlink(path)


BAREMETAL = SlurmBareMetal()
PYXIS = SlurmPyxis()
HYBRID = SlurmHybrid()
