"""``invoke train --stack S``: the trainer inside the stack's built image (Docker) or SIF (Singularity/Apptainer).

Docker: ``docker run --rm --network host --ipc=host --ulimit memlock=-1 --ulimit stack=67108864 --init --name
chexstack-train-XXXXXXXX [--gpus all] [--device /dev/infiniband] -v DATA:/data:ro -v OUTPUT:/output -e ...
-e CHEXSTACK_OUTPUT_LOCK IMAGE horovodrun ... python -m trainer ...``.
``--ipc=host``: NCCL's shared-memory transport needs more than Docker's 64 MiB /dev/shm
(https://github.com/NVIDIA/nccl/issues/290);
``memlock=-1``: InfiniBand verbs pin memory; ``stack``: NVIDIA's recommended ulimit for its TF containers; both
capped at the host's hard limits (``ulimits``). ``--init``: Docker's init (tini) is PID 1 and passes SIGTERM on to
horovodrun — a PID 1 without a handler ignores it, so Ctrl-C would wait for ``docker stop``'s 10 s and SIGKILL;
``--name``: an interrupted run whose ``docker run`` client had to be killed still has its container removed
(``Plan.force_stop``). ``CHEXSTACK_OUTPUT_LOCK`` (value from the launcher's environment) tells rank 0 that
the launcher holds the output folder's lock (``trainer.runlock``).
``--user UID:GID`` (the calling user's) with ``HOME`` on a tmpfs of that user: every file the run writes into
``--output`` belongs to whoever started it, not to root (who alone could delete it from shared storage); the
image's root is used only when asked for (``as_root``), and always when the caller is root.
Singularity: ``apptainer exec [--nv] --bind DATA:/data:ro --bind OUTPUT:/output SIF horovodrun ...``: it runs as
the calling user already (``as_root``: ``--fakeroot``, root in a user namespace; files still the user's).

The controller (Gloo or MPI) is picked from the interfaces the container really has (``ls /sys/class/net`` in
a throw-away container on the same network): with loopback only, Gloo segfaults every rank (exit 139,
observed here: Horovod 0.28.1 + TensorFlow 2.15.1 in a container whose only interface is loopback), so MPI is used, or a
request for Gloo stops before launching with the cause and the fixes.
"""
from __future__ import annotations

import os
import uuid

from chexstack import engine
from chexstack.console import warn
from chexstack.errors import ChexstackError
from facts import host
from facts.openmpi import SINGLE_COPY_OFF
from launch import executor
from launch.controller import local_interfaces, pick_controller
from launch.horovodrun import horovodrun_argv
from launch.local import oversubscription
from launch.options import path_values
from launch.plans import Plan
from launch.request import TrainRequest
from trainer.preflight import SIF_SHA256_ENV, SYNTHETIC, TOKEN_ENV

DATA, OUTPUT = "/data", "/output"
#: the trainer options whose paths ``mounts`` moves to ``DATA`` and ``OUTPUT`` inside the container
MOVED = ("--output", "--data", "--images", "--labels")
RUNTIMES = ("docker", "singularity")
NETWORKS = ("host", "none")
#: HOME inside a container run as the calling user: an image has no home for an arbitrary UID (Docker sets HOME=/,
#: not writable), while Keras, Horovod and Open MPI write below HOME. A tmpfs owned by that user, gone with the run.
CONTAINER_HOME = "/home/chexstack"


def user_options(as_root: bool = False, uid: int | None = None, gid: int | None = None) -> list[str]:
    """``docker run`` options that run the container as ``uid:gid`` (default: this process's real IDs) with a
    writable ``HOME`` (``CONTAINER_HOME``, a tmpfs of that user). None for ``as_root`` or a caller that is root
    (the image's own user, root, with its HOME)."""
    uid = os.getuid() if uid is None else uid
    gid = os.getgid() if gid is None else gid
    if as_root or uid == 0:
        return []
    return ["--user", "%d:%d" % (uid, gid), "--tmpfs", "%s:rw,exec,uid=%d,gid=%d,mode=700" % (CONTAINER_HOME, uid, gid),
            "-e", "HOME=%s" % CONTAINER_HOME]


def mounts(request: TrainRequest) -> tuple[list[tuple[str, str, bool]], TrainRequest]:
    """(host path, container path, read-only) of the data and output, and the request with container paths: the
    output at ``/output``, ``--data DIR`` at ``/data``, or ``--images DIR`` at ``/data/images`` and ``--labels
    FILE`` at ``/data/labels/``; every other path of the trainer's command line (``--weights PATH``,
    ``--test-list FILE``, ...: ``launch.options.path_values``) read-only at the same path inside."""
    req = request.with_absolute_paths()
    options = req.options
    binds = [(options.output, OUTPUT, False)]
    inside = req.with_option("--output", OUTPUT)
    if options.data and options.data != SYNTHETIC:
        binds.append((options.data, DATA, True))
        inside = inside.with_option("--data", DATA)
    elif options.images:
        labels = "%s/labels/%s" % (DATA, os.path.basename(options.labels))
        binds += [(options.images, "%s/images" % DATA, True), (options.labels, labels, True)]
        inside = inside.with_option("--images", "%s/images" % DATA).with_option("--labels", labels)
    binds += [(req.argv[i], req.argv[i], True) for i in path_values(req.argv) if req.argv[i - 1] not in MOVED]
    return binds, inside


def docker_interfaces(image: str, network: str, stack: str | None = None) -> list[str]:
    """Network interfaces a container of ``image`` on ``network`` has (``ls /sys/class/net`` inside it).
    ChexstackError when the image is not in this Docker engine (never a pull: chexstack's tags are local)."""
    import docker.errors

    client = engine.client()
    try:
        client.images.get(image)  # containers.run would try to pull a missing tag from Docker Hub
        out = client.containers.run(image, ["ls", "/sys/class/net"], network_mode=network, remove=True)
    except docker.errors.ImageNotFound:
        raise ChexstackError("image %s is not in this Docker engine: build it (invoke build --stack %s) or give "
                             "--image" % (image, stack or "S")) from None
    except docker.errors.DockerException as e:
        raise ChexstackError("cannot start a container of %s: %s" % (image, e)) from None
    return out.decode().split()


def ulimits() -> list[str]:
    """``--ulimit`` options: memlock unlimited and stack 64 MiB, each capped at this host's hard limit (a
    container cannot get more than the engine may grant; here, e.g., memlock is capped at 8 MiB), with a warning
    when InfiniBand is present and memlock cannot be unlimited."""
    import resource

    out = []
    for name, rlimit, wanted in (("memlock", resource.RLIMIT_MEMLOCK, -1), ("stack", resource.RLIMIT_STACK, 64 << 20)):
        hard = resource.getrlimit(rlimit)[1]
        if hard != resource.RLIM_INFINITY and (wanted == -1 or wanted > hard):
            wanted = hard
            if name == "memlock" and os.path.exists("/dev/infiniband"):
                warn("memlock is limited to %d bytes here (hard limit); InfiniBand "
                     "verbs need it unlimited (raise it for the Docker engine: LimitMEMLOCK=infinity)" % hard)
        out += ["--ulimit", "%s=%d" % (name, wanted)]
    return out


def _trainer_command(request: TrainRequest, interfaces: list[str]) -> tuple[list[str], dict[str, str], str, str]:
    controller, reason = pick_controller(interfaces, request.controller)
    argv, env = horovodrun_argv(request.ranks(), list(request.argv), controller=controller, python="python")
    env.update(request.device_env())
    if controller == "mpi":
        env.update(SINGLE_COPY_OFF)  # ranks in a container: shared memory, not CMA
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", executor.TRAINER_ENV["TF_CPP_MIN_LOG_LEVEL"])  # the ranks' own environment
    return argv, env, controller, reason


def docker_plan(request: TrainRequest, image: str, *, network: str = "host", gpus_here: int | None = None,
                interfaces: list[str] | None = None, stack: str | None = None, as_root: bool = False) -> Plan:
    """The ``docker run`` command of ``request`` in ``image`` (ChexstackError when it cannot run), as the calling
    user (``user_options``) unless ``as_root``. ``request`` is checked already, once, at the seam (``launch.plan``)."""
    if network not in NETWORKS:
        raise ChexstackError("--network %r: expected one of %s" % (network, ", ".join(NETWORKS)))
    have = host.gpu_count() if gpus_here is None else gpus_here
    if request.gpus > have:
        raise ChexstackError("--gpus %d: this machine has %d GPU(s) (nvidia-smi)" % (request.gpus, have))
    binds, inside = mounts(request)
    argv, env, controller, reason = _trainer_command(
        inside, docker_interfaces(image, network, stack) if interfaces is None else interfaces)
    name = "chexstack-train-%s" % uuid.uuid4().hex[:8]
    run = ["docker", "run", "--rm", "--network", network, "--ipc=host", *ulimits(), "--init", "--name", name,
           *user_options(as_root), "-w", OUTPUT]
    if request.gpus > 0:
        run += ["--gpus", "all"]
    if os.path.exists("/dev/infiniband"):
        run += ["--device", "/dev/infiniband"]
    for source, path, ro in binds:
        run += ["-v", "%s:%s%s" % (source, path, ":ro" if ro else "")]
    for k, v in sorted(env.items()):
        run += ["-e", "%s=%s" % (k, v)]
    run += ["-e", TOKEN_ENV]
    return Plan(run + [image] + argv, {}, controller, reason, tuple(oversubscription(request)), container=name)


def trainer_drift(image: str, stack_name: str) -> str | None:
    """A warning when the chexstack image ``image`` holds other code (trainer/, probe) than this checkout (its label
    ``images.labels.CODE`` differs from ``code_digest()``, or is missing): the run would silently use the
    image's copy. None when they match, and for images chexstack did not build or that do not exist (the launch
    itself reports those)."""
    import docker.errors

    from images.labels import CODE, STACK, code_digest

    client = engine.optional_client()
    try:
        labels = (client.images.get(image).labels or {}) if client is not None else {}
    except docker.errors.DockerException:
        return None
    if STACK not in labels:
        return None
    built, here = labels.get(CODE), code_digest()
    if built == here:
        return None
    what = ("does not record which code it holds" if built is None
            else "holds other code (trainer/, probe: %s) than this checkout (%s)" % (built[:12], here[:12]))
    return ("image %s %s: this run uses the image's copy; to run this checkout's code: invoke build --stack %s"
            % (image, what, stack_name))


def singularity_plan(request: TrainRequest, sif: str, as_root: bool = False) -> Plan:
    """The ``apptainer exec`` command of ``request`` in ``sif`` (host network: the host's interfaces), as the
    calling user, or with ``--fakeroot`` for ``as_root`` (root is root already); ``--nv`` (the host's NVIDIA
    driver libraries and devices) only for a run with ``--gpus``: without GPUs it only warns that none are there.
    Ranks under Open MPI copy through shared memory (``facts.openmpi.SINGLE_COPY_OFF``); each gets the SIF
    file's SHA-256 (``preflight.SIF_SHA256_ENV``) for its run record. ``request`` is checked already, at the seam."""
    from images.sif import file_sha256, require_tool

    exe = require_tool()
    if not os.path.isfile(sif):
        raise ChexstackError("%s does not exist; make it with: invoke build --stack <stack> --runtime singularity"
                             % sif)
    binds, inside = mounts(request)
    argv, env, controller, reason = _trainer_command(inside, local_interfaces())
    env[SIF_SHA256_ENV] = file_sha256(sif)
    run = [exe, "exec", *(["--nv"] if request.gpus > 0 else []),
           *(["--fakeroot"] if as_root and os.getuid() != 0 else []), "--pwd", OUTPUT]
    for source, path, ro in binds:
        run += ["--bind", "%s:%s%s" % (source, path, ":ro" if ro else "")]
    for k, v in sorted(env.items()):
        run += ["--env", "%s=%s" % (k, v)]
    return Plan(run + [sif] + argv, {}, controller, reason, tuple(oversubscription(request)))
