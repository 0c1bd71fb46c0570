"""The launcher seam, above its targets: where a run goes (``Where``, built once by ``where``), the plan that starts
it there (``plan``), and the run itself (``run``). ``invoke train`` and ``invoke bench`` come through here and never
decide how a run starts themselves.

A target is a function ``(request, **options) -> launch.plans.Plan`` (``TARGETS``, plain imports): ``local``
(horovodrun here, or on ``hosts`` over ssh), ``mpirun`` (Horovod's MPI controller across ``hosts``), ``docker`` and
``singularity`` (the same ranks in a stack's image or SIF). Targets return plans and never import this module or the
package face; ``launch.local.execute`` runs any plan under the output lock. A launcher of the scheduler table
(``launch.schedulers.SCHEDULERS``: ``slurm``, ``k8s``; ``launch.options.SCHEDULED``) renders and submits its job
instead (``Where.cluster.scheduler``, through ``launch.cluster.prepare``), and a submission this machine waits for
is executed here like any other plan (the scheduler's ``follow``).

The request is checked once, here (``run``, ``plan``): its values (``TrainRequest.check``), and where its ranks
start from this machine (a plan, a followed job) its data and output here (``check_paths``); no target checks it
again.
"""
from __future__ import annotations

import dataclasses
import os
import shutil

from chexstack.console import console, warn
from chexstack.errors import ChexstackError
from launch import attest, cluster, container, local, schedulers
from launch.options import HERE, TRAIN_LAUNCHERS, check_applicable, check_launcher
from launch.options import LAUNCHERS as LAUNCHERS  # the face's (launch.LAUNCHERS)
from launch.options import SCHEDULED as SCHEDULED
from launch.plans import Plan
from launch.request import TrainRequest

#: target -> function ``(request, **options) -> Plan``.
TARGETS = {
    "local": local.plan,
    "mpirun": local.mpirun_plan,
    "docker": container.docker_plan,
    "singularity": container.singularity_plan,
}


@dataclasses.dataclass(frozen=True)
class Where:
    """Where a run goes. ``launcher``: one of ``launch.options.LAUNCHERS``; ``stack``: run in this stack's image
    (``runtime`` docker or singularity; ``image``: a reference, .sqsh or SIF path instead of the stack's verified
    tag; ``network``: docker's, host or none; ``as_root``: root in the container); ``hosts``: ``host:slots`` for
    horovodrun over ssh (``local``) or Horovod's MPI (``mpirun``), ``ssh_key`` their private key; ``cluster``: the
    scheduler's options (``launch.cluster.ClusterOptions``), for a launcher of the scheduler table only."""

    launcher: str = "local"
    stack: str | None = None
    runtime: str = "docker"
    image: str | None = None
    network: str = "host"
    as_root: bool = False
    hosts: tuple[str, ...] = ()
    ssh_key: str | None = None
    cluster: cluster.ClusterOptions | None = None

    def __post_init__(self):
        check_launcher(self.launcher, HERE + schedulers.launchers())
        if (self.cluster is not None) != schedulers.scheduled(self.launcher):
            raise ChexstackError("cluster options go with --launcher %s, and only there"
                                 % " or ".join(schedulers.launchers()))


def check_hosts(launcher: str, stack: str | None, hosts: tuple[str, ...] | list[str], ssh_key: str | None) -> None:
    """The ``--hosts`` rule: hosts (and ``--ssh-key``, which needs them) go with ``--launcher local`` without a stack
    (this Python environment on the hosts, over ssh), or with ``mpirun``, which needs them and runs no stack's
    image. Raises ChexstackError otherwise."""
    if launcher == "mpirun":
        if not hosts:
            raise ChexstackError("--launcher mpirun: give the hosts, e.g. --hosts node1:4,node2:4")
        if stack:
            raise ChexstackError("--stack with --launcher mpirun: containers across hosts run through a scheduler "
                                 "(--launcher %s); --stack with --launcher local runs one host's image"
                                 % " or ".join(schedulers.launchers()))
        return
    if not (hosts or ssh_key):
        return
    if launcher != "local" or stack or not hosts:
        raise ChexstackError("--ssh-key applies with --hosts" if not hosts else
                             "--hosts applies to --launcher local without --stack (this Python environment on "
                             "the hosts, over ssh)")


def where(launcher: str = "local", given: dict | None = None, *, known: tuple[str, ...] = TRAIN_LAUNCHERS,
          stack: str | None = None, runtime: str = "docker", image: str | None = None, network: str = "host",
          as_root: bool = False, hosts: tuple[str, ...] | list[str] = (), ssh_key: str | None = None,
          **scheduler) -> Where:
    """The ``Where`` of a run, checked once: ``launcher`` one of ``known`` (default ``invoke train``'s), each option
    in ``given`` (name -> value, the ones the user set) one that applies there (``launch.options.check_applicable``),
    ``hosts`` as ``check_hosts`` says; ``scheduler``: the ``launch.cluster.ClusterOptions`` fields, taken for a
    launcher of the scheduler table (and checked there: ``ClusterOptions.scheduler``) and ignored otherwise.
    Raises ChexstackError naming the option."""
    check_applicable(launcher, stack, given or {}, known)
    check_hosts(launcher, stack, hosts, ssh_key)
    opts = (cluster.ClusterOptions(launcher=launcher, stack=stack, image=image, **scheduler)
            if schedulers.scheduled(launcher) else None)
    return Where(launcher=launcher, stack=stack, runtime=runtime, image=image, network=network, as_root=as_root,
                 hosts=tuple(hosts), ssh_key=ssh_key, cluster=opts)


def _in_image(request: TrainRequest, where: Where) -> Plan:
    """The plan of ``request`` in the stack's image: ``docker`` (with the warning when the image holds other code
    than this checkout, ``launch.container.trainer_drift``) or ``singularity`` (the stack's SIF from ``invoke
    build --runtime singularity`` unless ``image``)."""
    from envs.manifest import load_stack
    from images.naming import image_ref

    ref = where.image or image_ref(load_stack(where.stack))
    if where.runtime == "docker":
        if shutil.which("docker") is None:
            raise ChexstackError("the docker command is not on PATH (scripts/setup --docker installs it)")
        plan = TARGETS["docker"](request, image=ref, network=where.network, stack=where.stack, as_root=where.as_root)
        drift = container.trainer_drift(ref, where.stack)
        return plan.with_warning(drift) if drift else plan
    if where.runtime == "singularity":
        return TARGETS["singularity"](request, sif=_sif(where), as_root=where.as_root)
    raise ChexstackError("--runtime %r: expected one of %s" % (where.runtime, ", ".join(container.RUNTIMES)))


def _sif(where: Where) -> str:
    """The SIF a singularity run of ``where`` executes: ``image``, else the stack's from ``invoke build --runtime
    singularity``."""
    from envs.manifest import load_stack
    from images.build import SIF_DIR
    from images.naming import image_ref
    from images.sif import sif_path

    return where.image or str(sif_path(image_ref(load_stack(where.stack)), SIF_DIR))


def image_of(where: Where) -> dict | None:
    """The statement's ``image`` block of a run ``where`` says (``launch.attest``): None without a stack; a SIF's
    path, SHA-256 and signing key fingerprint; a Docker reference, its image ID (None when Docker cannot say) and
    ``pinned``, the ``repo@sha256:…`` a push or a pull fixed for it (``invoke build --push``'s record, else the
    engine's first ``RepoDigests`` entry; None when neither did)."""
    if not where.stack:
        return None
    if where.runtime == "singularity":
        return attest.sif_block(_sif(where))
    from chexstack import engine
    from envs.manifest import load_stack
    from images.build import pushed_reference
    from images.naming import image_ref

    ref = where.image or image_ref(load_stack(where.stack))
    image_id, pinned = None, pushed_reference(ref)
    try:
        client = engine.optional_client()
        image = client.images.get(ref) if client is not None else None
        if image is not None:
            image_id = image.id
            pinned = pinned or next(iter(image.attrs.get("RepoDigests") or []), None)
    except Exception:  # noqa: BLE001 - an image Docker no longer has: its ID is unknown, said as None
        pass
    return {"runtime": "docker", "ref": ref, "image_id": image_id, "pinned": pinned}


def plan(request: TrainRequest, where: Where) -> Plan:
    """The ``launch.plans.Plan`` that starts ``request`` (a ``launch.request.TrainRequest``) ``where`` says: in the
    stack's image with a stack, else horovodrun here or on the hosts (``local``), or Horovod's MPI across them
    (``mpirun``). The request is checked here, once (``TrainRequest.check``, ``check_paths``), not by the
    target. Raises ChexstackError for a scheduled launcher (it renders, ``run``) or a request that cannot run."""
    if where.cluster is not None:
        raise ChexstackError("--launcher %s goes through its scheduler: render or submit it (launch.cluster)"
                             % where.launcher)
    request.check().check_paths()
    if where.stack:
        return _in_image(request, where)
    if where.launcher == "mpirun":
        return TARGETS["mpirun"](request, hosts=list(where.hosts), ssh_identity_file=where.ssh_key)
    return TARGETS["local"](request, hosts=list(where.hosts) or None, ssh_identity_file=where.ssh_key)


def _job_image(spec, opts: cluster.ClusterOptions) -> dict | None:
    """The statement's ``image`` block of a scheduled job: None on bare metal; the SIF's block (hybrid); else the
    reference the job runs (a registry reference or .sqsh: this machine cannot say its digest)."""
    if spec.stack is None:
        return None
    if spec.image.endswith(".sif"):
        return attest.sif_block(spec.image)
    return {"runtime": opts.scheduler.launch_model, "ref": spec.image}


def _scheduled(request: TrainRequest, opts: cluster.ClusterOptions,
               validation: list[dict] = ()) -> dict | str | None:
    """Render the job of ``opts.scheduler`` (printed with ``--render``); with ``--submit`` submit it and return
    the job id, or, for a job this machine waits for, execute its follower and return metrics.json (its output
    checked here first: ``check_paths``), its run record's drift and its signed statement written when the job has
    ended (``launch.attest.finish_run``: the batch script and the job's log among its subjects, the job in its
    ``jobs``). A job not followed gets no statement, said in one line."""
    spec, text = cluster.prepare(request.check(), opts)
    if not opts.submit:
        return None
    cluster.announce(spec)
    if not cluster.follows(opts):
        job = cluster.submit_job(request, text, opts)
        console.print(attest.unsigned_note("%s (%s)" % (
            "the %s is not followed from here" % opts.scheduler.artifact,
            "--detach" if opts.detach else "this machine does not follow %s jobs" % opts.launcher)), markup=False)
        return job
    request.check_paths()
    started = attest.now()
    with opts.scheduler.follow(request, spec, text) as follower:
        result = local.execute(request, follower, cwd=local.REPO_ROOT)
        line = follower.command_line()
    output = request.with_absolute_paths().options.output
    job_id, also = opts.scheduler.followed(output, os.path.join(output, local.LOG), text)
    job = attest.job_block(schedulers.name_of(opts.scheduler), opts.scheduler.artifact, text, job_id)
    _signed(attest.finish_run(output, throughput=bool(request.options.throughput), stack=opts.stack,
                              image=_job_image(spec, opts), plan_line=line, started=started, jobs=[job],
                              validation=validation, also=also))
    return result


def _signed(finished: tuple[list[str], object]) -> None:
    """Say a finished run's drift (warnings) and where its statement is."""
    found, statement = finished
    for line in found:
        warn("drift: %s" % line)
    console.print("signed statement: %s (invoke verify-run %s)" % (statement, statement.parent), markup=False)


def run(request: TrainRequest, where: Where, *, heading: str | None = None,
        validation: list[dict] = ()) -> dict | str | None:
    """Run ``request`` ``where`` says and return what the run gives: metrics.json (a dict) for a run from here
    (``plan``, executed by ``launch.local.execute``: in the checkout, or in the current folder for a stack's
    image; ``heading`` said before its launch line) and for a followed Slurm job; None for a ``--throughput`` run
    (its throughput.json is in its output folder) or when only rendered; the job id of a detached or Kubernetes
    submission. A run from here, and a Slurm job followed from here, ends with its drift in its run record and its
    signed statement beside it (``launch.attest.finish_run``; ``validation``: the judged hosts' verdicts,
    ``launch.attest.validation_block``). ChexstackError (with its exit code) when it cannot start, fails or is
    interrupted."""
    if where.cluster is not None:
        return _scheduled(request, where.cluster, validation)
    started = attest.now()
    planned = plan(request, where)
    result = local.execute(request, planned, cwd=os.getcwd() if where.stack else local.REPO_ROOT, heading=heading)
    _signed(attest.finish_run(request.with_absolute_paths().options.output,
                              throughput=bool(request.options.throughput), stack=where.stack, image=image_of(where),
                              plan_line=planned.command_line(), started=started, validation=validation))
    return result
