"""Container checks: the docker engine and its NVIDIA runtime, GPUs inside a container, Singularity ``--nv`` library
binding, /dev/shm size, the memlock limit.

/dev/shm: NCCL's intra-node SHM transport allocates its segments there; Docker's default is 64 MiB, which fails
``ncclCommInitRank`` with "unhandled system error" as soon as several ranks share a node (NVIDIA/nccl#290, #342,
#525; https://github.com/NVIDIA/nccl/issues/290). The floor is the 1 GiB the remedy asks for.

memlock: RDMA registers (pins) memory; with a limit below unlimited ``ibv_reg_mr`` fails or NCCL falls back
(NCCL and Mellanox docs: ``--ulimit memlock=-1`` / ``ulimited memlock`` in limits.conf).
"""
from __future__ import annotations

import os
import pwd
import re
import resource
import stat

from chexstack.errors import ChexstackError
from chexstack.tools import ToolRun
from facts.faults_table import remedy as table_remedy
from facts.parsers import versions
from facts.parsers.container import (
    DOCKER_GPUS,
    DOCKER_INFO,
    HOST_LIBCUDA,
    NV_EXEC,
    SHM_DF,
    SINGULARITY_LIBS,
    NvExec,
    buildcfg,
    classify_runtime_error,
    conf_setting,
    library_not_loaded,
    nv_libs,
    release,
    subid_count,
)
from facts.parsers.horovodrun import LOCAL_RANKS
from facts.parsers.observation import Observed
from validate.checks.gpu import gpu_count, no_gpu_reason, snapshot
from validate.checks.infiniband import hcas
from validate.checks.readings import docker_client
from validate.checks.registry import Context, check
from validate.evidence import MissingEvidence
from validate.result import CheckResult, Reason, failed, passed, skipped, warned

SHM_FLOOR_BYTES = 1 << 30
MiB = 1 << 20


def in_container() -> bool:
    return os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv") or \
        os.environ.get("container") is not None or os.path.exists("/.singularity.d")


def judge_shm(size_bytes: int | None, local_ranks: int, container: bool | None, ranks_from: str = "") -> CheckResult:
    """``shm too small for NCCL (64MiB); start the container with ipc_mode="host" or shm_size>=1g``
    (NVIDIA/nccl#290). ``container``: whether /dev/shm is a container's (None: not recorded — both remedies, the
    container's first); ``ranks_from``: where ``local_ranks`` comes from ("assumed: …" when nothing recorded it)."""
    cid = "container.shm"
    if size_bytes is None:
        return failed(cid, "/dev/shm missing or unreadable", "a tmpfs /dev/shm >= 1 GiB",
                      "mount a tmpfs at /dev/shm", "SHM_MISSING")
    size = "%dMiB" % (size_bytes // MiB) if size_bytes < 10 * 1024 * MiB else "%.0fGiB" % (size_bytes / (1024 * MiB))
    expected = ">= 1GiB for %d local ranks" % local_ranks + (
        " (%s)" % ranks_from if ranks_from.startswith("assumed") else "")
    notes = ["%d local ranks: %s" % (local_ranks, ranks_from)] if ranks_from else []
    if local_ranks > 1 and size_bytes < SHM_FLOOR_BYTES:
        host = "mount -o remount,size=1g /dev/shm (and in /etc/fstab)"
        remedy = ('start the container with ipc_mode="host" or shm_size>=1g' if container
                  else host if container is False
                  else 'start the container with ipc_mode="host" or shm_size>=1g; if this /dev/shm is the host\'s '
                       "(the bundle does not record whether it ran in a container): " + host)
        return failed(cid, "shm too small for NCCL (%s)" % size, expected, remedy, "NCCL_SHM_TOO_SMALL",
                      ['docker SDK: containers.run(..., ipc_mode="host") or shm_size="1g"; Kubernetes/MPIJob: an '
                       "emptyDir {medium: Memory} volume at /dev/shm; NCCL_SHM_DISABLE=1 only as a slower "
                       "workaround"] + notes)
    return passed(cid, "/dev/shm %s" % size, expected, notes)


def _statvfs_size(path: str) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_frsize * st.f_blocks


#: the smallest node NCCL's shared memory is shared on, where nothing recorded how many ranks a node runs
ASSUMED_LOCAL_RANKS = 2


def local_ranks(ctx: Context) -> tuple[int, str]:
    """(ranks on this node, where that comes from): a recorded launch's ranks per node (``mpirun -np 4`` on one
    node; ``facts.parsers.horovodrun.LOCAL_RANKS``), else one rank per GPU nvidia-smi lists, else
    ``ASSUMED_LOCAL_RANKS``, said to be assumed."""
    launch = ctx.first(LOCAL_RANKS)
    if launch is not None:
        return launch.value.per_node, "from the bundle's `%s`" % launch.command
    gpus = gpu_count(ctx)
    if gpus:
        return gpus, "one rank per GPU nvidia-smi lists"
    return ASSUMED_LOCAL_RANKS, ("assumed: no GPU count nor launch recorded, the smallest node NCCL shares memory "
                                "on")


@check("container.shm", "/dev/shm large enough for NCCL's shared-memory transport", fast=True)
def shm(ctx: Context) -> CheckResult:
    try:
        df = ctx.observe(SHM_DF)
    except MissingEvidence as missing:  # a bundle without df: the size statvfs gave, if it was recorded
        df = None
        try:
            size = ctx.fact("statvfs /dev/shm bytes", lambda: _statvfs_size("/dev/shm"))
        except MissingEvidence:
            raise missing from None
    else:
        size = df.value.size
        if size is None:
            size = ctx.fact("statvfs /dev/shm bytes", lambda: _statvfs_size("/dev/shm"))
    container = df.value.in_container if df is not None else None
    if container is None:
        try:
            container = ctx.fact("in container", in_container)
        except MissingEvidence:  # the size was observed: only the remedy's wording depends on it
            container = None
    n, ranks_from = local_ranks(ctx)
    result = judge_shm(size, n, container, ranks_from)
    if df is not None and df.value.size is not None:
        result.details.append("/dev/shm's size from `%s`" % df.command)
    return result


def judge_memlock(soft: int, rdma: bool) -> CheckResult:
    cid = "container.memlock"
    shown = "unlimited" if soft == resource.RLIM_INFINITY else "%d KiB" % (soft // 1024)
    if soft == resource.RLIM_INFINITY:
        return passed(cid, "memlock %s" % shown, "unlimited for RDMA")
    if rdma:
        return failed(cid, "memlock %s with an RDMA device present" % shown, "unlimited for RDMA (memory pinning)",
                      "docker run --ulimit memlock=-1; bare metal: '* - memlock unlimited' in "
                      "/etc/security/limits.conf (and the batch system's limits)", "MEMLOCK_LIMITED")
    return passed(cid, "memlock %s (no RDMA device here: not used)" % shown, "unlimited where RDMA is used")


@check("container.memlock", "locked-memory limit for RDMA", fast=True)
def memlock(ctx: Context) -> CheckResult:
    soft, _hard = ctx.fact("RLIMIT_MEMLOCK", lambda: resource.getrlimit(resource.RLIMIT_MEMLOCK))
    return judge_memlock(soft, bool(hcas(ctx)))


def judge_docker(info: dict | None, error: str | None, gpu_node: bool) -> CheckResult:
    """The engine answers; on a GPU node the ``nvidia`` runtime is registered (only ``--runtime=nvidia`` needs it:
    ``--gpus`` goes through the toolkit hook/CDI, fixture 61)."""
    cid = "container.docker"
    if info is None:
        return failed(cid, "docker engine not reachable: %s" % error, "a running dockerd",
                      "start it (scripts/start-dockerd) or check DOCKER_HOST", "DOCKER_ENGINE_UNREACHABLE")
    runtimes = sorted(info.get("Runtimes") or {})
    measured = "Docker %s, runtimes %s (default %s)" % (info.get("ServerVersion", "?"), ", ".join(runtimes) or "?",
                                                         info.get("DefaultRuntime", "?"))
    if gpu_node and "nvidia" not in runtimes:
        return warned(cid, measured + "; no nvidia runtime", "the nvidia runtime for --runtime=nvidia",
                      "--gpus still works through the toolkit hook; for --runtime=nvidia: nvidia-ctk runtime "
                      "configure --runtime=docker && systemctl restart docker", "NVIDIA_RUNTIME_NOT_REGISTERED")
    return passed(cid, measured + ("" if gpu_node else "; not a GPU node: NVIDIA runtime not needed"),
                  "a running dockerd")


def _docker_info() -> dict:
    """What ``judge_docker`` reads of ``docker info`` (only that: a bundle must not carry the engine's proxies,
    registry settings or IDs)."""
    try:
        info = docker_client().info()
        return {"info": {"ServerVersion": info.get("ServerVersion"), "DefaultRuntime": info.get("DefaultRuntime"),
                         "Runtimes": {name: {} for name in info.get("Runtimes") or {}}}, "error": None}
    except Exception as e:  # the SDK raises DockerException, requests' errors, PermissionError, …
        return {"info": None, "error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")}


@check("container.docker", "docker engine and its NVIDIA runtime", fast=True)
def docker_engine(ctx: Context) -> CheckResult:
    info = ctx.first(DOCKER_INFO)
    if info is not None:  # a bundle's `docker info` text (captured by hand) instead of the engine's answer
        runtimes, default = info.value
        result = judge_docker({"ServerVersion": "?", "DefaultRuntime": default,
                               "Runtimes": dict.fromkeys(runtimes, {})} if info.run.ok else None,
                              None if info.run.ok else info.run.why_not(), no_gpu_reason(ctx) is None)
        result.details.append("from the bundle's `%s`" % info.command)
        return result
    socket = ctx.fact("docker socket or DOCKER_HOST", lambda: os.path.exists("/var/run/docker.sock")
                      or bool(os.environ.get("DOCKER_HOST")))
    if not socket and ctx.tool("docker", "--version").missing:
        return skipped("container.docker", "docker not installed (no CLI, no /var/run/docker.sock)",
                       code="TOOL_MISSING")
    got = ctx.fact("docker info", _docker_info)
    return judge_docker(got["info"], got["error"], no_gpu_reason(ctx) is None)


#: The engine that runs the NVIDIA hook does not see the host's driver libraries although the host's driver works:
#: Docker from snap (https://github.com/NVIDIA/nvidia-docker/issues/1711, the maintainer's question) or Docker
#: Desktop, whose engine runs in a VM without the driver (https://github.com/NVIDIA/nvidia-container-toolkit/issues/154).
ENGINE_SEES_NO_HOST_LIBRARIES = (
    "Docker from snap, or Docker Desktop (its engine runs in a VM without the NVIDIA driver): use Docker Engine on "
    "the host (docker-ce, or the distribution's docker.io) with the NVIDIA Container Toolkit (nvidia-ctk runtime "
    "configure --runtime=docker, then restart docker); otherwise check `ldconfig -p | grep %s` on the host and the "
    "ldconfig setting in /etc/nvidia-container-runtime/config.toml")


def library_remedy(library: str, host_driver: str | None) -> str:
    """What to do when nvidia-container-cli cannot load ``library``, given the host driver nvidia-smi showed
    (None: not observed): never "install the driver" — the hook's failure says nothing of the host's driver."""
    if host_driver:
        return ("the host's driver works (nvidia-smi: driver %s), so the engine that runs the NVIDIA hook does not "
                "see the host's libraries: " % host_driver) + ENGINE_SEES_NO_HOST_LIBRARIES % library
    return ("nvidia-container-cli could not load %s where the engine runs the hook: run nvidia-smi on the host; if it "
            "answers, the engine does not see the host's libraries: " % library) \
        + ENGINE_SEES_NO_HOST_LIBRARIES % library


def judge_container_gpus(output: str, ok: bool, host_gpus: int | None, toolkit: str | None,
                         command: str = "docker run --gpus all", host_driver: str | None = None) -> CheckResult:
    """``docker run --gpus all <image> nvidia-smi -L``: refused (toolkit missing, runtime not registered, driver
    too old: fixtures 59, 62, https://github.com/NVIDIA/nvidia-docker/issues/745; nvidia-container-cli unable to load
    a driver library while the host's driver (``host_driver``, nvidia-smi's version; None: not observed) works,
    https://github.com/NVIDIA/nvidia-docker/issues/1711) is FAIL; fewer GPUs than ``host_gpus`` (None: unknown) too.
    The failure is quoted by the last output line that shows its diagnosis."""
    cid = "container.gpus"
    codes = classify_runtime_error(output)
    seen = sum(1 for line in output.splitlines() if line.startswith("GPU "))
    tk = " (NVIDIA Container Toolkit %s)" % toolkit if toolkit else ""
    if not ok or codes:
        library = library_not_loaded(output)
        library_fix = library_remedy(library, host_driver) if library else None
        code = codes[0] if codes else ""
        if code in ("NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND", "NVIDIA_CONTAINER_CLI_LIBRARY_NOT_FOUND"):
            remedy = library_fix
        elif code in ("NVIDIA_CONTAINER_TOOLKIT_MISSING", "NVIDIA_RUNTIME_NOT_REGISTERED", "CUDA_DRIVER_TOO_OLD"):
            remedy = table_remedy(code)  # the table of faults' fix of the code
        else:
            remedy = "run the docker command by hand"
        lines = [l.strip() for l in output.strip().splitlines() if l.strip()]
        shown = [l for l in lines if codes and codes[0] in classify_runtime_error(l)] or lines
        return failed(cid, "%s failed%s: %s" % (command, tk, shown[-1] if shown else "no output"),
                      "nvidia-smi -L inside a container lists %s GPUs" % (host_gpus if host_gpus is not None
                                                                           else "the host's"), remedy,
                      codes[0] if codes else "CONTAINER_GPU_FAILED")
    if host_gpus is None:
        return warned(cid, "%d GPUs visible in the container%s; the host's count was not recorded" % (seen, tk),
                      "all the host's GPUs", "record nvidia-smi with the bundle to compare", "EVIDENCE_INCOMPLETE")
    if seen != host_gpus:
        return failed(cid, "%d of %d GPUs visible in the container%s" % (seen, host_gpus, tk), "all GPUs",
                      "check NVIDIA_VISIBLE_DEVICES and the toolkit's configuration", "CONTAINER_GPU_FAILED")
    return passed(cid, "%d GPUs visible in the container%s" % (seen, tk), "all GPUs")


def no_stack_image(ctx: Context) -> Reason | None:
    """Why the stack's image is not there, for ``requires``: no --stack (``NOT_APPLICABLE``), not built
    (``TOOL_MISSING``), no engine to ask (``TOOL_FAILED``)."""
    why = stack_image(ctx)[1]
    if why is None:
        return None
    return Reason(why, "NOT_APPLICABLE" if ctx.stack is None else "TOOL_MISSING" if why.startswith("image ")
                  else "TOOL_FAILED")


def stack_image(ctx: Context) -> tuple[str | None, str | None]:
    """(image tag, None) for the stack's built image, or (None, why not) — names the command that builds it."""

    def find():
        from images.naming import image_ref

        ref = image_ref(ctx.stack)
        try:
            return [docker_client().images.get(ref).tags[0], None]
        except Exception as e:
            if type(e).__name__ == "ImageNotFound":
                return [None, "image %s not built: invoke build --stack %s" % (ref, ctx.stack.name)]
            return [None, "docker engine not reachable (%s)" % type(e).__name__]

    if ctx.stack is None:
        return None, "no --stack given"
    return tuple(ctx.fact("stack image %s" % ctx.stack.name, find))


def _no_image_nor_recorded_run(ctx: Context) -> str | None:
    why = no_stack_image(ctx)
    return None if why is None or ctx.first(DOCKER_GPUS) is not None else why


@check("container.gpus", "GPUs inside a container (docker run --gpus all … nvidia-smi -L)",
       requires=(no_gpu_reason, _no_image_nor_recorded_run), fast=False)
def container_gpus(ctx: Context) -> CheckResult:
    image = stack_image(ctx)[0] if ctx.stack is not None else None
    try:
        tk = ctx.tool("nvidia-container-runtime", "--version")
    except MissingEvidence:  # a bundle without it: the toolkit's version is not shown
        tk = None
    if image is None:  # a bundle's docker run of another image (outputs captured by hand)
        seen = ctx.first(DOCKER_GPUS)
        res, how = seen.run, seen.value
    else:
        res = ctx.tool("docker", "run", "--rm", "--gpus", "all", "--network", "host", image, "nvidia-smi", "-L",
                       timeout=60)
        how = "docker run --gpus all"
    result = judge_container_gpus(res.output, res.ok, gpu_count(ctx),
                                  versions.nvidia_container_runtime(tk.stdout) if tk is not None and tk.ok else None,
                                  how, _host_driver(ctx))
    if image is None:
        result.details.append("from the bundle's `%s`" % res.command)
    return result


def _host_driver(ctx: Context) -> str | None:
    """The driver version nvidia-smi printed on this node (also the head of its table in a bundle); None when it
    was not recorded or nvidia-smi failed."""
    try:
        report = snapshot(ctx).report
    except MissingEvidence:
        return None
    return report.driver_version if report.error is None else None


#: where the host's libcuda.so.1 usually is (RHEL/CentOS), for the ``--bind`` workaround when its path is unknown
HOST_LIBCUDA_DEFAULT = "/usr/lib64/libcuda.so.1"


def judge_nv_libs(inside: dict, host_has_libcuda: bool | None, host_path: str | None = None,
                  seen: str = "in /.singularity.d/libs") -> CheckResult:
    """``singularity exec --nv``: libcuda.so.1 bound into /.singularity.d/libs and on LD_LIBRARY_PATH
    (https://github.com/apptainer/singularity/issues/4783). Missing while the host has it: ``NV_LIBS_NOT_BOUND`` —
    TensorFlow would list no GPU and train on the CPU; missing while the host's loader cache has none:
    ``NV_HOST_LIBCUDA_MISSING``; the host not recorded (``None``): a WARN that says what to look at. A
    LD_LIBRARY_PATH without /.singularity.d/libs (an activation script or ``env -i``, EESSI/software-layer#231) is
    ``NV_LD_PATH_RESET`` whatever is known of the host. ``seen``: where libcuda was missed."""
    cid = "container.singularity_nv"
    ld = inside.get("ld_library_path")
    reset = ld is not None and "/.singularity.d/libs" not in ld.split(":")
    reset_finding = "LD_LIBRARY_PATH lacks /.singularity.d/libs: %s" % (ld or "(empty)")
    expected = "--nv binds the host driver libraries (libcuda, libnvidia-ml)"
    bind = "--bind %s:/.singularity.d/libs/libcuda.so.1" % (host_path or HOST_LIBCUDA_DEFAULT)
    also = [reset_finding] if reset else []
    if not inside.get("libcuda"):
        if host_has_libcuda:
            return failed(cid, "no libcuda.so.1 %s although the host has it%s" % (
                seen, " (%s)" % host_path if host_path else ""), expected,
                "upgrade Singularity/Apptainer or check nvliblist.conf / nvidia-container-cli; workaround: " + bind,
                "NV_LIBS_NOT_BOUND", also)
        if host_has_libcuda is False:
            return failed(cid, "no libcuda.so.1 %s, and the host has none either" % seen, expected,
                          "install the NVIDIA driver's user-space libraries on the host (ldconfig -p | grep "
                          "libcuda.so.1 must list it; see gpu.inventory): --nv binds what the host has",
                          "NV_HOST_LIBCUDA_MISSING", also)
        if not reset:
            return warned(cid, "no libcuda.so.1 %s; whether the host has it was not recorded" % seen, expected,
                          "look on the host (ldconfig -p | grep libcuda.so.1): if it is there, --nv did not bind it "
                          "(upgrade Singularity/Apptainer or check nvliblist.conf; workaround: %s)" % bind,
                          "NV_LIBS_NOT_BOUND")
    if reset:
        return failed(cid, reset_finding, "/.singularity.d/libs on LD_LIBRARY_PATH",
                      "an activation script or env -i reset LD_LIBRARY_PATH: append /.singularity.d/libs",
                      "NV_LD_PATH_RESET", [] if inside.get("libcuda") else [
                          "no libcuda.so.1 %s either; whether the host has it was not recorded" % seen])
    return passed(cid, "libcuda bound (%d file(s)), LD_LIBRARY_PATH has /.singularity.d/libs" % inside["libcuda"],
                  "--nv binds the host driver libraries")


def judge_nv_failure(failure: NvExec, command: str, host_driver: str | None) -> CheckResult:
    """A ``--nv`` run of any command whose output says the GPU is unusable in it (``facts.parsers.container.NV_EXEC``).
    cudaError 35, "CUDA driver version is insufficient for CUDA runtime version", is ``CUDA_DRIVER_TOO_OLD`` as
    nvidia-container-cli's ``unsatisfied condition: cuda >= X`` is for docker: ``--nv`` checks no requirement, so the
    image's CUDA runtime fails only when it starts (https://github.com/NVIDIA/nvidia-docker/issues/745, #781)."""
    from envs import rules  # part of this tree: an ImportError is a checker bug (ERROR), never a SKIP

    cid = "container.singularity_nv"
    if failure.code == "CUDA_DRIVER_TOO_OLD":
        try:
            ceiling = rules.max_cuda_for_driver(host_driver).cuda if host_driver else None
        except ChexstackError:
            ceiling = None
        remedy = ("upgrade the driver (the host's %s runs CUDA <= %s), or use an image with CUDA <= %s; "
                  "gpu.driver_cuda names the driver a given CUDA needs" % (host_driver, ceiling, ceiling)
                  if ceiling else "upgrade the driver, or use an image with an older CUDA (gpu.driver_cuda names "
                  "the driver a given CUDA needs)")
        expected = "a driver that runs the image's CUDA runtime"
    else:
        library = library_not_loaded(failure.line)
        remedy = library_remedy(library, host_driver) if library else "run it by hand"
        expected = "--nv gives the container the host's GPUs"
    return failed(cid, "`%s` failed: %s" % (command, failure.line), expected, remedy, failure.code)


def _nv_failure(ctx: Context) -> Observed | None:
    """A bundle's first ``--nv`` run (``NV_EXEC``) whose output names why the GPU is unusable in it, or None."""
    attempt = 1
    while (run := ctx.first(NV_EXEC, attempt=attempt)) is not None:
        if run.value.code:
            return run
        attempt += 1
    return None


def _no_singularity(ctx: Context) -> str | None:
    if ctx.first(SINGULARITY_LIBS) is not None or ctx.first(NV_EXEC) is not None:
        return None
    return Reason("neither apptainer nor singularity on PATH", "TOOL_MISSING") if runtime_version(ctx) is None \
        else None


def _no_image_nor_recorded_exec(ctx: Context) -> str | None:
    why = no_stack_image(ctx)
    return None if why is None or ctx.first(SINGULARITY_LIBS) is not None or ctx.first(NV_EXEC) is not None else why


def _host_libcuda() -> bool:
    return any(os.path.exists(os.path.join(d, "libcuda.so.1")) for d in ("/usr/lib64", "/usr/lib/x86_64-linux-gnu",
                                                                        "/usr/lib"))


def _runtime_shown(ctx: Context) -> list[str]:
    """``["runtime: singularity 3.4.2"]`` where the bundle recorded the runtime's ``version`` (what to upgrade when
    --nv binds too little), else nothing."""
    try:
        found = runtime_version(ctx)
    except MissingEvidence:
        return []
    return ["runtime: %s %s" % (found[0], versions.singularity(found[1].stdout) or "?")] if found else []


def host_libcuda(ctx: Context) -> tuple[bool | None, str | None, list[str]]:
    """(whether the host has libcuda.so.1, its path where known, where that comes from): a bundle's listing of it
    (``facts.parsers.container.HOST_LIBCUDA``: ``ls /usr/lib64/libcuda.so*``, ``ldconfig -p | grep libcuda``), else
    the fact (live: the usual folders); None when neither was recorded — a finding that does not need it still
    stands."""
    listed = ctx.first(HOST_LIBCUDA)
    if listed is not None and listed.value.present is not None:
        return listed.value.present, listed.value.path, ["the host's libcuda from the bundle's `%s`" % listed.command]
    try:  # the usual folders: finding none there proves no absence (an unusual libdir)
        return (True if ctx.fact("host libcuda.so.1", _host_libcuda) else None), None, []
    except MissingEvidence:
        return None, None, ["the host's libcuda.so.1 is not in the bundle (record `ldconfig -p | grep libcuda`)"]


@check("container.singularity_nv", "Singularity/Apptainer --nv binds the driver libraries",
       requires=(_no_singularity, no_gpu_reason, _no_image_nor_recorded_exec), fast=False)
def singularity_nv(ctx: Context) -> CheckResult:
    cid = "container.singularity_nv"
    recorded = ctx.first(SINGULARITY_LIBS) if no_stack_image(ctx) else None
    failure = _nv_failure(ctx) if no_stack_image(ctx) else None
    if recorded is not None:  # a bundle's exec --nv of another image (outputs captured by hand)
        if not recorded.run.ok:
            return failed(cid, recorded.run.why_not(), "%s exec --nv works" % recorded.tool, "run it by hand",
                          "TOOL_FAILED")
        host, path, whence = host_libcuda(ctx)
        result = judge_nv_libs(recorded.value, host, path)
        result.details += ["from the bundle's `%s`" % recorded.command] + whence + _runtime_shown(ctx)
        if result.status.value == "PASS" and failure is not None:  # bound, and yet the GPU failed in a run
            result = judge_nv_failure(failure.value, failure.command, _host_driver(ctx))
            result.details.append("the libraries are bound: from the bundle's `%s`" % recorded.command)
        return result
    if failure is not None:  # a bundle's --nv run of any command whose output says why the GPU is unusable
        if failure.value.code == "NV_LIBS_NOT_BOUND":
            host, path, whence = host_libcuda(ctx)
            result = judge_nv_libs({"libcuda": 0}, host, path, "loadable in `%s` (%s)" % (
                failure.command, failure.value.line))
            result.details += whence + _runtime_shown(ctx)
        else:
            result = judge_nv_failure(failure.value, failure.command, _host_driver(ctx))
        result.details.append("from the bundle's `%s`" % failure.command)
        return result
    if no_stack_image(ctx):  # only a bundle's --nv runs, none of which says anything this check reads
        return skipped(cid, "the bundle's `%s` neither lists /.singularity.d/libs nor names a GPU failure; record "
                       "`singularity exec --nv IMAGE sh -c 'ls /.singularity.d/libs; echo LD=$LD_LIBRARY_PATH'`"
                       % ctx.first(NV_EXEC).command, code="EVIDENCE_MISSING")
    tool = runtime_version(ctx)[0]
    image = stack_image(ctx)[0]
    from images.build import SIF_DIR
    from images.sif import sif_path

    sif = str(sif_path(image, SIF_DIR))
    if not ctx.fact("exists %s" % sif, lambda: os.path.exists(sif)):
        return skipped(cid, "no %s: build it with invoke build --stack %s --runtime singularity"
                       % (sif, ctx.stack.name), code="TOOL_MISSING")
    res = ctx.tool(tool, "exec", "--nv", sif, "sh", "-c", "ls /.singularity.d/libs; echo LD=$LD_LIBRARY_PATH",
                   timeout=60)
    if not res.ok:
        return failed(cid, res.why_not(), "%s exec --nv works" % tool, "run it by hand", "TOOL_FAILED")
    host, path, whence = host_libcuda(ctx)
    result = judge_nv_libs(nv_libs(res.stdout), host, path)
    result.details += whence
    return result


def runtime_version(ctx: Context) -> tuple[str, ToolRun] | None:
    """(tool, its ``version`` run) of the first of apptainer, singularity on PATH, or None when neither is there. A
    bundle holding neither run raises ``MissingEvidence`` (a SKIP)."""
    lacking = None
    for tool in ("apptainer", "singularity"):
        try:
            res = ctx.tool(tool, "version")
        except MissingEvidence as e:  # a bundle recorded by hand may hold only the other one (case 21)
            lacking = lacking or e
            continue
        if not res.missing:
            return tool, res
    if lacking is not None:
        raise lacking
    return None


#: The oldest release of each flavour (``buildcfg``'s PACKAGE_NAME) judged current, and what an older one lacks.
#: Apptainer 1.1.0 made the unprivileged user-namespace mode the default installation and let ``--fakeroot`` work
#: without /etc/subuid (https://github.com/apptainer/apptainer/releases/tag/v1.1.0,
#: https://rootlesscontaine.rs/getting-started/apptainer/); SingularityCE 3.9.0 brought ``--nvccli`` (GPU setup by
#: nvidia-container-cli) and ``--mount`` (https://github.com/sylabs/singularity/releases/tag/v3.9.0).
RUNTIME_FLOORS = {
    "apptainer": ((1, 1), "Apptainer before 1.1 installs setuid-root by default (no user-namespace mode unless "
                          "configured) and --fakeroot needs /etc/subuid mappings "
                          "(https://github.com/apptainer/apptainer/releases/tag/v1.1.0)"),
    "singularity-ce": ((3, 9), "SingularityCE before 3.9 has no --nvccli and no --mount "
                               "(https://github.com/sylabs/singularity/releases/tag/v3.9.0)"),
    "singularity": ((3, 9), "Singularity from before the SingularityCE/Apptainer split gets no fixes; it has no "
                            "--nvccli (https://github.com/sylabs/singularity/releases/tag/v3.9.0)"),
}


def runtime_flavour(tool: str, version: str | None, cfg: dict) -> str:
    """``apptainer``, ``singularity-ce`` or ``singularity``: buildcfg's PACKAGE_NAME, else from the version (the
    ``singularity`` link of Apptainer prints 1.x; Singularity and SingularityCE are 2.x/3.x and later)."""
    name = cfg.get("PACKAGE_NAME")
    if name in RUNTIME_FLOORS:
        return name
    return "apptainer" if tool == "apptainer" or release(version or "")[:1] == (1,) else "singularity"


def starter_suid_path(flavour: str, cfg: dict) -> str | None:
    """Where ``buildcfg``'s LIBEXECDIR puts the setuid starter (``$LIBEXECDIR/apptainer/bin/starter-suid``,
    ``…/singularity/bin/starter-suid``); None when buildcfg named no LIBEXECDIR."""
    libexec = cfg.get("LIBEXECDIR")
    if not libexec:
        return None
    return os.path.join(libexec, "apptainer" if flavour == "apptainer" else "singularity", "bin", "starter-suid")


def userns_mode(max_userns: str | None, clone: str | None, apparmor: str | None, profile: str | None,
                probe) -> tuple[bool, str]:
    """Whether this user can create the user namespace Apptainer's unprivileged mode needs, and why, from
    /proc/sys/user/max_user_namespaces (0: off), kernel.unprivileged_userns_clone (Debian kernels; None: absent),
    Ubuntu's kernel.apparmor_restrict_unprivileged_userns (1: only programs whose AppArmor profile says ``userns``,
    https://ubuntu.com/blog/ubuntu-23-10-restricted-unprivileged-user-namespaces) with /etc/apparmor.d/apptainer
    (``profile``), and ``probe``: the ``ToolRun`` of ``unshare --user --map-root-user true`` (None: unshare not on
    PATH). A probe that ran is the observation; the settings alone are said to be settings."""
    if max_userns is not None and max_userns.strip() == "0":
        return False, "user namespaces are off: /proc/sys/user/max_user_namespaces is 0"
    if probe is not None and probe.ok:
        return True, "`unshare --user --map-root-user true` ran: this user can create user namespaces"
    if apparmor is not None and apparmor.strip() == "1":
        if profile and re.search(r"^\s*userns\b", profile, re.M):
            return True, ("kernel.apparmor_restrict_unprivileged_userns is 1 and /etc/apparmor.d/apptainer allows "
                          "userns (judged from settings, no container run)")
        return False, ("kernel.apparmor_restrict_unprivileged_userns is 1 and no /etc/apparmor.d/apptainer profile "
                       "allows userns")
    if clone is not None and clone.strip() == "0":
        return False, "kernel.unprivileged_userns_clone is 0: unprivileged user namespaces are off"
    if probe is not None:
        return False, "`unshare --user --map-root-user true` failed: %s" % probe.why_not()
    if max_userns is not None:
        return True, ("max_user_namespaces is %s (judged from settings: unshare not on PATH, no container run)"
                      % max_userns.strip())
    return False, "not observed: /proc/sys/user/max_user_namespaces unreadable and unshare not on PATH"


def setuid_mode(flavour: str, cfg: dict, path: str | None, starter: dict | None,
                allow: str | None) -> tuple[bool, str]:
    """Whether the setuid starter can start containers: ``starter`` is ``{"mode", "uid"}`` of ``path`` (None:
    absent), ``allow`` the conf file's ``allow setuid`` (None: not read). Judged from the file and the setting."""
    if path is None:
        return False, "buildcfg named no LIBEXECDIR: the setuid starter was not looked for"
    suid_key = "APPTAINER_SUID_INSTALL" if flavour == "apptainer" else "SINGULARITY_SUID_INSTALL"
    if starter is None:
        return False, "no setuid starter at %s (%s=%s)" % (path, suid_key, cfg.get(suid_key, "?"))
    if starter["uid"] != 0 or not starter["mode"] & stat.S_ISUID:
        return False, "%s is not setuid root (mode %o, owner uid %d)" % (path, stat.S_IMODE(starter["mode"]),
                                                                          starter["uid"])
    if allow == "no":
        return False, "%s is setuid root but the configuration says allow setuid = no" % path
    return True, "%s is setuid root%s (judged from the file, no container run)" % (
        path, "" if allow is not None else "; the configuration file was not read")


def judge_apptainer(tool: str, version_run, cfg: dict, userns: tuple[bool, str], setuid: tuple[bool, str],
                    subuids: int, user: str) -> CheckResult:
    """The container runtime answers ``version``, is not older than ``RUNTIME_FLOORS`` (else WARN naming the
    release's limits), and this user has a way to run containers: user namespaces or the setuid starter (else FAIL
    ``APPTAINER_NO_USERNS`` with each mode's reason). ``subuids``: this user's /etc/subuid IDs (``--fakeroot``
    maps them, and needs user namespaces too)."""
    cid = "container.apptainer"
    if not version_run.ok:
        return failed(cid, "`%s version` failed: %s" % (tool, version_run.why_not()), "%s version answers" % tool,
                      "run `%s version` by hand; reinstall Apptainer if it does not answer" % tool, "TOOL_FAILED")
    version = versions.singularity(version_run.stdout)
    flavour = runtime_flavour(tool, version, cfg)
    shown = "%s %s" % (flavour, version or "(unparsed: %r)" % version_run.stdout.strip()[:60])
    fakeroot = ("--fakeroot: %d subordinate uids for %s in /etc/subuid" % (subuids, user) if subuids else
                "--fakeroot: no /etc/subuid entry for %s (Apptainer >= 1.1 falls back to a root-mapped user "
                "namespace)" % user) + ("" if userns[0] else "; needs user namespaces, which do not work here")
    modes = ["user namespaces: " + userns[1], "setuid: " + setuid[1], fakeroot,
             "no container was run (a bare node has no image to exec): the modes are judged from their mechanism"]
    expected = "Apptainer >= 1.1 or SingularityCE >= 3.9, and user namespaces or the setuid starter for %s" % user
    if not (userns[0] or setuid[0]):
        return failed(cid, "%s: %s cannot run containers (no user namespaces, no setuid starter)" % (shown, user),
                      expected, "enable user namespaces (sysctl user.max_user_namespaces=15000; on Ubuntu an "
                      "AppArmor profile for apptainer or kernel.apparmor_restrict_unprivileged_userns=0) or install "
                      "the setuid starter (apptainer-suid)", "APPTAINER_NO_USERNS", modes)
    how = "user namespaces" if userns[0] else "the setuid starter"
    floor, limits = RUNTIME_FLOORS[flavour]
    if version is None or release(version)[:2] < floor:
        return warned(cid, "%s is older than %s; runs containers through %s" % (
            shown, ".".join(map(str, floor)), how), expected, "upgrade: " + limits, "APPTAINER_TOO_OLD", modes)
    return passed(cid, "%s; %s runs containers through %s" % (shown, user, how), expected, modes)


def _owner_mode(path: str) -> dict | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"mode": st.st_mode, "uid": st.st_uid}


def _user() -> dict:
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    return {"uid": uid, "name": name}


@check("container.apptainer", "Apptainer/Singularity version, and a way for this user to run containers",
       fast=True)
def apptainer(ctx: Context) -> CheckResult:
    cid = "container.apptainer"
    found = runtime_version(ctx)
    if found is None:
        return skipped(cid, "neither apptainer nor singularity on PATH", code="TOOL_MISSING")
    tool, res = found
    cfg_run = ctx.tool(tool, "buildcfg")
    cfg = buildcfg(cfg_run.stdout) if cfg_run.ok else {}
    flavour = runtime_flavour(tool, versions.singularity(res.stdout), cfg)
    apparmor = ctx.read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    probe = ctx.tool("unshare", "--user", "--map-root-user", "true", timeout=10)
    userns = userns_mode(ctx.read("/proc/sys/user/max_user_namespaces"),
                         ctx.read("/proc/sys/kernel/unprivileged_userns_clone"), apparmor,
                         ctx.read("/etc/apparmor.d/apptainer") if (apparmor or "").strip() == "1" else None,
                         None if probe.missing else probe)
    path = starter_suid_path(flavour, cfg)
    conf = cfg.get("APPTAINER_CONF_FILE") or cfg.get("SINGULARITY_CONF_FILE")
    setuid = setuid_mode(flavour, cfg, path, ctx.fact("stat %s" % path, lambda: _owner_mode(path)) if path else None,
                         conf_setting(ctx.read(conf), "allow setuid") if conf else None)
    user = ctx.fact("user", _user)
    result = judge_apptainer(tool, res, cfg, userns, setuid, subid_count(ctx.read("/etc/subuid"), user["name"],
                                                                          user["uid"]), user["name"])
    if not cfg_run.ok:
        result.details.append("`%s buildcfg` failed (%s): the flavour is judged from the version" % (
            tool, cfg_run.why_not()))
    return result


#: Printed by every probe rank: the limits a rank really gets (``ulimit`` in KiB, /dev/shm in 1K blocks, the
#: cgroup v2 / v1 memory limit in bytes or "max").
RANK_PROBE = ('echo "chexstack-limits host=$(hostname) memlock=$(ulimit -l) stack=$(ulimit -s) nofile=$(ulimit -n) '
              'shm_kb=$(df -k /dev/shm 2>/dev/null | awk \'NR==2{print $2}\') cgroup_mem=$(cat '
              '/sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null '
              '|| echo unknown)"')


def parse_rank_limits(text: str) -> list[dict[str, str]]:
    """The ``chexstack-limits key=value …`` lines of the probe ranks, one dict per rank."""
    out = []
    for line in (text or "").splitlines():
        if "chexstack-limits " in line:
            out.append(dict(kv.split("=", 1) for kv in line.split("chexstack-limits ", 1)[1].split() if "=" in kv))
    return out


def _cgroup_text(value: str) -> str:
    """cgroup memory limit in bytes -> ``12.0 GiB``; ``max`` and cgroup v1's "unlimited" (≥ 2^60) -> ``max``."""
    if not value.isdigit():
        return value
    return "max" if int(value) >= 1 << 60 else "%.1f GiB" % (int(value) / (1 << 30))


def judge_rank_limits(ranks: list[dict[str, str]], how: str, expected_ranks: int, rdma: bool,
                      local_ranks: int) -> CheckResult:
    """The limits measured inside ranks started ``how`` (mpirun as horovodrun --mpi does, or ``docker run`` with
    invoke train --stack's flags) — not the validate process's, which a launcher (sshd's PAM limits, the docker
    engine's defaults) may not pass on: memlock must be unlimited where RDMA is used, /dev/shm >= 1 GiB for
    several local ranks; stack, open files and the cgroup memory limit are shown."""
    cid = "container.rank_limits"
    if len(ranks) < expected_ranks:
        return failed(cid, "%d of %d probe ranks reported their limits (%s)" % (len(ranks), expected_ranks, how),
                      "every rank reports", "run the probe by hand: %s" % how, "RANK_PROBE_FAILED")
    fail, shown = [], []
    for r in ranks:
        host, memlock = r.get("host", "?"), r.get("memlock", "?")
        shm_kb = int(r["shm_kb"]) if r.get("shm_kb", "").isdigit() else None
        shown.append("%s: memlock %s, stack %s, nofile %s, /dev/shm %s, cgroup memory %s" % (
            host, memlock if memlock == "unlimited" else memlock + " KiB", r.get("stack", "?") + (
                "" if r.get("stack") == "unlimited" else " KiB"), r.get("nofile", "?"),
            "%d MiB" % (shm_kb // 1024) if shm_kb is not None else "?", _cgroup_text(r.get("cgroup_mem", "?"))))
        if rdma and memlock != "unlimited":
            fail.append(("%s: memlock %s KiB in a rank with an RDMA device present" % (host, memlock),
                         "MEMLOCK_LIMITED", "raise it where ranks start: '* - memlock unlimited' in "
                         "/etc/security/limits.conf (ssh sessions through PAM), LimitMEMLOCK=infinity for "
                         "slurmd/dockerd, docker run --ulimit memlock=-1"))
        if local_ranks > 1 and (shm_kb is None or shm_kb * 1024 < SHM_FLOOR_BYTES):
            fail.append(("%s: /dev/shm %s in a rank, %d local ranks" % (
                host, "%d MiB" % (shm_kb // 1024) if shm_kb is not None else "unreadable", local_ranks),
                "NCCL_SHM_TOO_SMALL", 'start the container with ipc_mode="host" or shm_size>=1g'))
    expected = "in the ranks: memlock unlimited where RDMA is used, /dev/shm >= 1GiB for %d local ranks" % local_ranks
    if fail:
        return failed(cid, fail[0][0], expected, fail[0][2], fail[0][1], [f[0] for f in fail[1:]] + shown)
    return passed(cid, "ranks started by %s: %s" % (how, "; ".join(shown)), expected)


def rank_probe_argv(ctx: Context) -> tuple[list[str] | None, str, int]:
    """(argv, how, ranks) starting the limits probe as the launcher starts ranks: ``docker run`` with invoke train
    --stack's flags (``launch.container``) when the stack's image is built, ``srun`` inside a Slurm job (one task
    per node), else mpirun (horovodrun --mpi's launcher; ssh to each of --hosts); (None, why, 0) when none can
    run."""
    from validate.checks.mpi import mpirun_argv

    tag = stack_image(ctx)[0] if ctx.stack is not None else None
    if tag:
        from launch.container import ulimits

        flags = ctx.fact("docker --ulimit flags of invoke train", ulimits)
        return (["docker", "run", "--rm", "--network", "host", "--ipc=host", *flags, "--init", tag, "sh", "-c",
                 RANK_PROBE], "docker run --ipc=host %s (invoke train --stack)" % " ".join(flags), 1)
    job = ctx.fact("SLURM_JOB_ID", lambda: os.environ.get("SLURM_JOB_ID"))
    if job and not ctx.tool("srun", "--version").missing:
        nodes = ctx.fact("SLURM_JOB_NUM_NODES", lambda: os.environ.get("SLURM_JOB_NUM_NODES")) or "1"
        return (["srun", "--ntasks-per-node=1", "sh", "-c", RANK_PROBE],
                "srun (Slurm job %s, one task on each of its %s node(s))" % (job, nodes), int(nodes))
    if ctx.tool("mpirun", "--version").missing:
        return None, "mpirun not on PATH (and no --stack image): no launcher to start a probe rank", 0
    n = max(1, len(ctx.hosts))
    argv = mpirun_argv(ctx, n, ctx.hosts, 1)
    return argv + ["sh", "-c", RANK_PROBE], "mpirun (as horovodrun --mpi)%s" % (
        " on %s" % ",".join(ctx.hosts) if ctx.hosts else ""), n


@check("container.rank_limits", "memlock, stack, open files, /dev/shm, cgroup memory as the ranks see them",
       fast=False)
def rank_limits(ctx: Context) -> CheckResult:
    argv, how, n = rank_probe_argv(ctx)
    if argv is None:
        return skipped("container.rank_limits", how, code="TOOL_MISSING")
    res = ctx.tool(*argv, timeout=60)
    if not res.ok and not parse_rank_limits(res.stdout):
        return failed("container.rank_limits", "the probe rank did not start: %s" % res.why_not(),
                      "a rank started by %s" % how, "see mpi.launch", "RANK_PROBE_FAILED")
    return judge_rank_limits(parse_rank_limits(res.stdout), how, n, bool(hcas(ctx)), local_ranks(ctx)[0])
