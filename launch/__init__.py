"""Turning a run request into a launch (host side, Python >= 3.10).

One seam (``launch.dispatch``, re-exported here): ``launch.where(launcher, given, **options) -> Where`` says where a
run goes, checked once; ``launch.plan(request, where) -> launch.plans.Plan`` picks the target from ``TARGETS``, as
Horovod's runner picks ``gloo_run``/``mpi_run`` and spython ``get_writer(name)``; ``launch.run(request, where)``
executes the plan under the output lock (``launch.local.execute``) or, for a launcher of the scheduler table
(``launch.schedulers.SCHEDULERS``: Slurm bare metal, pyxis, hybrid and OCI containers, Kubernetes' MPIJob;
``SCHEDULED``), renders
and submits its job through that scheduler's object (``launch.cluster``). The request is checked once, there.
``invoke train``, ``invoke bench`` and ``invoke study`` call it and never decide how a run starts themselves;
``LAUNCHERS`` are the names of where a run goes.

- ``request``    ``TrainRequest``: ranks, controller and the trainer's own command line, read by its parser
- ``controller`` Gloo or MPI for this host's network interfaces (observed here: Horovod 0.28.1 + TensorFlow 2.15.1 in a
container whose only interface is loopback)
- ``horovodrun`` the exact ``horovodrun`` argv and extra environment for a run
- ``stream``     run it, show rank 0's progress (rich), keep the full log
- ``failure``    the run's ``Outcome`` and the one message that explains a failed run
- ``plans``      ``Plan``: the one plan type of every target
- ``local``      targets ``local`` (horovodrun here, or on ``hosts`` over ssh) and ``mpirun`` (MPI across hosts);
                 ``execute``: run a plan, results table
- ``container``  targets ``docker`` and ``singularity``: the same ranks inside a stack's image
- ``job``        ``JobSpec``: a multi-node run of a stack's image, shared by the cluster launchers
- ``mpirun``     Open MPI ``mpirun`` argv with Horovod's flags (Slurm hybrid model, MPIJob launcher)
- ``mpi_compat`` host MPI vs image MPI for Singularity's hybrid model
- ``slurm``      batch scripts: ``srun --mpi=pmix`` + pyxis, or host ``mpirun`` + ``singularity exec``
- ``k8s``        Kubeflow MPIJob (``kubeflow.org/v2beta1``)
- ``submit``     sbatch / kubectl submission
- ``scheduler``  ``Scheduler``: one way a cluster runs a job (explain, image, job, render, submit, follow, a sweep's
                 steps); ``slurm_schedulers`` (bare metal, pyxis, hybrid), ``slurm_oci`` (``srun --container``) and
                 ``k8s_scheduler`` (MPIJob) are its objects
- ``schedulers`` ``SCHEDULERS``, the one table of them, and ``select``, the one place that picks one
- ``cluster``    ``invoke train --launcher slurm|k8s --render|--submit``: ``ClusterOptions`` and the parts every
                 scheduler shares (the job spec, paths, layout, job names, the local-image warning)
- ``options``    the launchers (``LAUNCHERS``), which option applies to which, the trainer's own options
- ``dispatch``   the seam above the targets: ``Where``, ``where``, ``plan``, ``run``
- ``executor``   the one executor of ``python -m trainer`` commands (train, throughput, evaluate, prepare)
- ``drift``      the ranks' as-run facts against each other and the stack's manifest
- ``attest``     a result's signed statement (in-toto, DSSE) at the end of a run, and ``invoke verify-run``'s check

What other areas may rely on (each module's docstring has the detail):

- A run is a ``launch.request.TrainRequest(gpus, np, controller, argv)``; ``argv`` is the trainer's own command line,
  and what the host needs of it is read through the trainer's parser (``TrainRequest.options``). Tasks take the
  trainer's options from that parser (``launch.options.with_trainer_options``, ``launch.options.trainer_argv``;
  ``invoke bench``/``invoke study`` the sweep's, ``launch.options.SWEEP_OPTIONS``) and never state a default.
- ``launch.where(...)`` owns the checks of where (an unknown launcher, an option with no effect there:
  ``launch.options.check_applicable``, the ``--hosts`` rule: ``launch.dispatch.check_hosts``, the cluster options:
  ``launch.cluster.ClusterOptions``); ``launch.run`` checks the request once, and no target re-checks it. No module
  of ``launch/`` or ``bench/`` compares launcher names: a scheduler is one object of ``launch.schedulers.SCHEDULERS``
  (``tests/test_launch_schedulers.py``; docs/launchers.md, "The scheduler seam").
- Every plan from here runs through ``launch.local.execute`` and so ``launch.executor.execute`` (output lock,
  process environment ``launch.executor.TRAINER_ENV``, supervision by ``launch.stream.run``, exit 2 refused /
  128 + signal interrupted / 1 failed); a submitted Slurm job is followed as such a plan
  (``launch.slurm_schedulers.follow_plan`` running ``python -m launch.slurmjob``).
- Resuming is the trainer's ``--resume`` in every case (a resubmitted request, or bare-metal Slurm's ``--requeue``:
  ``launch.slurm.requeue_lines``); no launcher replays or skips epochs. Open MPI's run-as-root rule is
  ``facts.openmpi``'s, and ``launch.mpirun.mpirun_argv`` is the ``mpirun`` argv of every rendered job; every Slurm
  script, a sweep's multi-step one too (``launch.slurm.render_steps``), is rendered by ``launch.slurm``.
- A failed run is explained in one message by ``launch.failure.explain_failure`` (a saved log by
  ``launch.failure.explain_log``: ``invoke train --explain LOG``); its remedies are the table of faults' by code
  (``facts.faults_table``; views ``launch.failure.LAUNCH_REMEDY``, ``NCCL_REMEDY``, ``RUNTIME_REMEDY``), which
  validate names too. ``launch/``
  supervises and explains; the launchers' output is parsed in ``facts.parsers`` (``facts.parsers.horovodrun``,
  ``facts.parsers.slurm``, ``facts.parsers.mpi.classify_launch``).
- A job's paths are the cluster's (``launch.job.cluster_path`` refuses a relative one), its ranks' device
  environment is ``launch.request.TrainRequest.device_env`` (``CHEXSTACK_REQUIRE_GPU=1`` with ``--gpus``), and
  what its image must hold is ``images``' contract (``images.mpijob``).
"""
from __future__ import annotations

#: The public names of the face, each from ``launch.dispatch`` (imported on first use: ``launch.options`` or
#: ``launch.slurmjob`` alone, as a task's option table or a job's follower needs, do not load every target).
PUBLIC = ("LAUNCHERS", "SCHEDULED", "TARGETS", "Where", "where", "plan", "run")


def __getattr__(name: str):
    if name not in PUBLIC:
        raise AttributeError("module 'launch' has no attribute %r" % name)
    from launch import dispatch

    return getattr(dispatch, name)
