"""Container runtime output: docker's GPU errors and runtimes, ``df`` of /dev/shm, what ``singularity exec --nv``
shows inside the container, ``apptainer buildcfg``, apptainer.conf settings and /etc/subuid.

Error codes (one per diagnosis, several spellings each):

* ``NVIDIA_CONTAINER_TOOLKIT_MISSING``: ``could not select device driver "" with capabilities: [[gpu]]`` (docker
  ``--gpus``, fixture 59) or ``… "nvidia" …`` (compose, fixture 60): the NVIDIA Container Toolkit is not
  installed/registered (nvidia-docker#1352).
* ``NVIDIA_RUNTIME_NOT_REGISTERED``: ``unknown or invalid runtime name: nvidia`` (fixture 62): daemon.json lost
  the runtime (nvidia-container-toolkit#653); fix ``nvidia-ctk runtime configure --runtime=docker``.
* ``CUDA_DRIVER_TOO_OLD``: ``unsatisfied condition: cuda >= X`` (nvidia-container-cli) and ``CUDA driver version
  is insufficient for CUDA runtime version`` / ``cudaErrorInsufficientDriver`` (cudaError 35: the runtime, e.g. under
  ``singularity exec --nv``, which has no requirement check) (https://github.com/NVIDIA/nvidia-docker/issues/745,
  #781, #700); PyTorch's ``The NVIDIA driver on your system is too old (found version …)``.
* ``NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND``: ``nvidia-container-cli: initialization error: load library failed:
  libnvidia-ml.so.1: cannot open shared object file`` — the hook's nvidia-container-cli cannot dlopen NVML where
  the engine runs it (https://github.com/NVIDIA/nvidia-docker/issues/1711); another driver library it cannot load
  (``libcuda.so.1`` of older libnvidia-container releases) is ``NVIDIA_CONTAINER_CLI_LIBRARY_NOT_FOUND``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from facts.parsers.observation import Observation, first_command, simple_commands

_ERRORS = (
    ("NVIDIA_CONTAINER_TOOLKIT_MISSING", re.compile(r'could not select device driver "[^"]*" with capabilities')),
    ("NVIDIA_RUNTIME_NOT_REGISTERED", re.compile(r"unknown or invalid runtime name: nvidia")),
    ("CUDA_DRIVER_TOO_OLD", re.compile(r"unsatisfied condition: cuda ?>= ?[\d.]+|CUDA driver version is "
                                       r"insufficient for CUDA runtime version|cudaErrorInsufficientDriver|"
                                       r"The NVIDIA driver on your system is too old")),
)


#: libnvidia-container's ``xdlopen``: ``load library failed: <dlerror()>``, dlerror naming the library (or its path).
_LOAD_LIBRARY = re.compile(r"load library failed: (?:[^\s:]*/)?(lib[\w.+-]*?\.so(?:\.\d+)*)")


def library_not_loaded(text: str) -> str | None:
    """The library nvidia-container-cli failed to load (``libnvidia-ml.so.1``), or None."""
    m = _LOAD_LIBRARY.search(text or "")
    return m.group(1) if m else None


def classify_runtime_error(text: str) -> list[str]:
    """Diagnosis codes found in a docker/nvidia-container-cli/CUDA error text, in the order above."""
    codes = [code for code, rx in _ERRORS if rx.search(text or "")]
    library = library_not_loaded(text)
    if library:
        codes.append("NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND" if library.startswith("libnvidia-ml.")
                     else "NVIDIA_CONTAINER_CLI_LIBRARY_NOT_FOUND")
    return codes


#: Why an Apptainer/Singularity container did not start, by its ``FATAL:`` line (the starter's own words), most
#: specific first; an unknown one is ``CONTAINER_START_FAILED``, its FATAL text the reason.
#: ``APPTAINER_NO_LOOP_DEVICE``: setuid mode mounts a SIF through one loop device per container; a kernel that creates
#: them on demand when ``max_loop`` is unset leaves simultaneous starts without one ("failed to find loop device:
#: could not attach image file to loop device: no loop devices available": https://github.com/sylabs/singularity/
#: issues/1499, #2144, #1824, https://github.com/apptainer/singularity/issues/6141).
#: ``CONTAINER_IMAGE_MISSING``: the image path does not exist on the node ("could not open image /x.sif: failed to
#: retrieve path for /x.sif: lstat /x.sif: no such file or directory", https://github.com/nipreps/fmriprep/issues/2787:
#: the path did not resolve on that cluster's nodes).
#: ``APPTAINER_NO_USERNS``: neither unprivileged user namespaces nor a setuid starter let the user create the
#: container (https://apptainer.org/docs/admin/main/user_namespace.html).
CONTAINER_FATAL_CAUSES = (
    ("APPTAINER_NO_LOOP_DEVICE", re.compile(r"no loop devices? available|failed to find loop device|could not "
                                            r"attach image file to loop device|failed to attach loop device", re.I)),
    ("CONTAINER_IMAGE_MISSING", re.compile(r"could not open image .*no such file or directory|image file .* not "
                                           r"found|failed to retrieve path for", re.I)),
    ("APPTAINER_NO_USERNS", re.compile(r"user namespace (?:disabled|not supported|creation failed)|failed to create "
                                       r"user namespace|setuid workflow is not supported", re.I)),
)


def classify_container_fatal(text: str) -> str:
    """The cause of an Apptainer/Singularity ``FATAL:`` line (``CONTAINER_FATAL_CAUSES``), else
    ``CONTAINER_START_FAILED``."""
    return next((code for code, rx in CONTAINER_FATAL_CAUSES if rx.search(text or "")), "CONTAINER_START_FAILED")


def docker_runtimes(text: str) -> tuple[list[str], str | None]:
    """``docker info`` text (fixture 61): (``Runtimes:`` names, ``Default Runtime:``)."""
    runtimes = re.search(r"^\s*Runtimes:\s*(.*)$", text or "", re.M)
    default = re.search(r"^\s*Default Runtime:\s*(\S+)", text or "", re.M)
    return (runtimes.group(1).split() if runtimes else [], default.group(1) if default else None)


_SIZE = re.compile(r"^([\d.]+)([KMGTP]?)i?B?$", re.I)


def human_bytes(size: str, base: int = 1024) -> int | None:
    """``df -h`` sizes (``64M``, ``1.0G``, powers of 1024; ``base`` 1000 for ``df -H``/``--si``) -> bytes."""
    m = _SIZE.match(size.strip())
    if not m:
        return None
    return int(float(m.group(1)) * base ** " KMGTP".index(m.group(2).upper() or " "))


#: df's size column heading in block units: ``1K-blocks`` (the default, ``-k``), ``1M-blocks`` (``-m``),
#: ``1024-blocks`` (``-P``), ``512-blocks`` (POSIXLY_CORRECT)
_BLOCKS = re.compile(r"\b(\d+)([KMG]?)-blocks\b")


def df_size(text: str, mount: str = "/dev/shm", si: bool = False, block: int | None = None) -> int | None:
    """Size in bytes of ``mount`` in ``df -h`` / ``-H`` (``si``: powers of 1000) / ``-k`` / ``-m`` / ``-P`` output
    (https://github.com/NVIDIA/nccl/issues/290: ``shm 64M … /dev/shm``); a file system name on a line of its own (df
    wraps a long one) is read with the next line. ``block``: the block size in bytes where the header was cut off
    (``df -k /dev/shm | tail -1``: the command line says it)."""
    blocks = _BLOCKS.search(text or "")
    unit = int(blocks.group(1)) * 1024 ** " KMG".index(blocks.group(2) or " ") if blocks else block
    cells: list[str] = []
    for line in (text or "").splitlines():
        cells = (cells if len(cells) == 1 else []) + line.split()
        if len(cells) >= 6 and cells[-1] == mount:
            if unit is not None:
                return int(cells[1]) * unit if cells[1].isdigit() else None
            return human_bytes(cells[1], 1000 if si else 1024)
    return None


#: commands that run the command after their options inside a container (``docker exec X df -h /dev/shm``)
_IN_CONTAINER = {"docker": ("exec", "run"), "podman": ("exec", "run"), "nerdctl": ("exec", "run"),
                 "kubectl": ("exec",), "singularity": ("exec", "run"), "apptainer": ("exec", "run"),
                 "enroot": ("exec", "start")}


@dataclass(frozen=True)
class ShmSize:
    """``df`` of /dev/shm: its size (None: not in the output) and whether the command ran inside a container (True
    for ``docker exec X df …``, ``kubectl exec``, ``singularity exec``; None: the command does not say)."""

    size: int | None
    in_container: bool | None


def _df_of_shm(argv: tuple, env: dict | None = None) -> tuple[tuple[str, ...], bool | None] | None:
    """(df's words, ran in a container) of the first ``df … /dev/shm`` in a recorded command line, as typed
    (``sh -c "df -h /dev/shm"``, ``sudo``, piped, ``docker exec X df -h /dev/shm``), or None."""
    for c in simple_commands(argv, env):
        words = c.argv
        container = None
        if c.name in _IN_CONTAINER and any(w in _IN_CONTAINER[c.name] for w in words[1:3]):
            container = True
            shell = next((i for i, w in enumerate(words[:-2]) if os.path.basename(w) in ("sh", "bash", "dash")
                          and words[i + 1] in ("-c", "-lc")), None)
            if shell is not None:  # `docker exec X sh -c "df -h /dev/shm"`: the script the container ran
                inner = _df_of_shm(words[shell:shell + 3])
                if inner is not None:
                    return inner[0], True
        elif c.name != "df":
            continue
        start = next((i for i, w in enumerate(words) if os.path.basename(w) == "df"), None)
        if start is not None and "/dev/shm" in words[start + 1:]:
            return words[start:], container
    return None


def _shm_size(run) -> ShmSize:
    df, container = _df_of_shm(run.argv) or (("df",), None)
    human = any(w in ("-h", "-H", "--si", "--human-readable") for w in df)
    block = None if human else 1 << 20 if "-m" in df else 1024  # df's default is 1K blocks, as -k
    return ShmSize(df_size(run.stdout, si="-H" in df or "--si" in df, block=block) if run.ok else None, container)


#: ``df -h /dev/shm`` (or ``-k``, ``-m``, ``-H``, ``-P``; as typed, or inside a container: ``docker exec X df -h
#: /dev/shm``) -> ``ShmSize``
SHM_DF = Observation(("df", "-h", "/dev/shm"), lambda argv, env: _df_of_shm(argv, env) is not None, _shm_size)


def nv_libs(text: str) -> dict:
    """What ``singularity exec --nv IMAGE sh -c 'ls /.singularity.d/libs; echo LD=$LD_LIBRARY_PATH'`` printed
    (or the ``grep -c libcuda`` form of https://github.com/apptainer/singularity/issues/4783): ``{"libcuda": count,
    "libs": [...],
    "ld_library_path": str|None}``."""
    libs, count, ld = [], None, None
    for line in (text or "").splitlines():
        s = line.strip()
        if s.startswith("LD="):
            ld = s[3:]
        elif s.isdigit():
            count = int(s)
        elif s.startswith("lib") and ".so" in s:
            libs.append(s)
    if count is None:
        count = sum(1 for l in libs if l.startswith("libcuda.so"))
    return {"libcuda": count, "libs": libs, "ld_library_path": ld}


def buildcfg(text: str) -> dict[str, str]:
    """``apptainer buildcfg`` / ``singularity buildcfg``: its ``KEY=VALUE`` lines (``PACKAGE_NAME=apptainer``,
    ``LIBEXECDIR=/usr/lib/x86_64-linux-gnu``, ``APPTAINER_SUID_INSTALL=0``, ``APPTAINER_CONF_FILE=…``) as a dict;
    other lines are ignored."""
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and re.fullmatch(r"[A-Z][A-Z0-9_]*", key):
            out[key] = value.strip()
    return out


def release(version: str) -> tuple[int, ...]:
    """A dotted version's numbers (``"3.11.4"`` -> ``(3, 11, 4)``), for comparing releases."""
    return tuple(int(n) for n in re.findall(r"\d+", version or ""))


def conf_setting(text: str | None, key: str) -> str | None:
    """The value of ``key = value`` in apptainer.conf / singularity.conf (the last uncommented one, lower-cased;
    ``allow setuid = no`` -> ``"no"``), or None when the file or the line is not there."""
    value = None
    for line in (text or "").splitlines():
        name, sep, rest = line.split("#", 1)[0].partition("=")
        if sep and name.strip().lower() == key:
            value = rest.strip().lower()
    return value


def subid_count(text: str | None, user: str, uid: int) -> int:
    """How many subordinate IDs /etc/subuid (or /etc/subgid) grants ``user`` (by name or uid): the sum of the
    ``name:start:count`` lines' counts; 0 when none (subuid(5))."""
    total = 0
    for line in (text or "").splitlines():
        cells = line.strip().split(":")
        if len(cells) == 3 and cells[0] in (user, str(uid)) and cells[2].isdigit():
            total += int(cells[2])
    return total


#: options of container commands that take a value (the image is the first word after the subcommand that is
#: neither an option nor such a value): docker/podman run|create|exec, singularity/apptainer exec|run|shell|inspect
_VALUE_OPTIONS = {
    "-e", "--env", "--env-file", "-v", "--volume", "--mount", "-w", "--workdir", "-u", "--user", "--name",
    "--network", "--net", "--ipc", "--pid", "--gpus", "--runtime", "--shm-size", "-p", "--publish", "--entrypoint",
    "--device", "--ulimit", "--cap-add", "--cap-drop", "--security-opt", "-h", "--hostname", "--label", "-l",
    "--add-host", "--platform", "--cpus", "-m", "--memory", "--log-driver", "--log-opt", "--restart", "--tmpfs",
    "--group-add", "--dns", "--cgroupns", "-a", "--attach", "-f", "--format", "--type",
    "-B", "--bind", "-H", "--home", "-W", "--pwd", "--overlay", "-o", "--security", "--apply-cgroups", "--scratch",
    "-S", "--app"}
#: container commands -> their subcommands that name an image (``docker exec`` names a container)
_IMAGE_SUBCOMMANDS = {"docker": ("run", "create", "inspect", "exec"), "podman": ("run", "create", "inspect", "exec"),
                      "nerdctl": ("run", "create", "inspect", "exec"),
                      "singularity": ("exec", "run", "shell", "inspect", "test"),
                      "apptainer": ("exec", "run", "shell", "inspect", "test")}


def container_image(words: tuple[str, ...]) -> tuple[str, str] | None:
    """(subcommand, image or container) of a container command's words (``docker run --rm -e A=1 IMG cmd`` ->
    ``("run", "IMG")``, ``docker image inspect IMG`` -> ``("inspect", "IMG")``, ``singularity exec --nv -B /d:/d
    x.sif python`` -> ``("exec", "x.sif")``), else None."""
    words = tuple(words)
    if not words or words[0] not in _IMAGE_SUBCOMMANDS:
        return None
    rest = list(words[1:])
    if rest[:1] in (["image"], ["container"]):
        rest = rest[1:]
    if not rest or rest[0] not in _IMAGE_SUBCOMMANDS[words[0]]:
        return None
    sub, i = rest[0], 1
    while i < len(rest):
        word = rest[i]
        if word == "--":
            i += 1
            break
        if not word.startswith("-"):
            break
        i += 2 if word in _VALUE_OPTIONS and "=" not in word else 1
    return (sub, rest[i]) if i < len(rest) else None


def _image_cuda_command(argv: tuple, env: dict | None = None) -> str | None:
    """Where the CUDA_VERSION a recorded command line shows comes from (as typed: ``image IMG``, ``container
    NAME``), or None: ``docker image inspect IMG``
    (any ``--format``, also piped to grep), ``docker run IMG env``, ``singularity exec IMG env``, ``singularity
    inspect --environment IMG``, each with the output holding ``CUDA_VERSION``."""
    commands = simple_commands(argv, env)
    for c in commands:
        found = container_image(c.argv)
        if found is None:
            continue
        sub, image = found
        if sub == "inspect" or any("cuda_version" in w.lower() for w in c.argv) or any(
                w in ("env", "printenv") for w in c.argv[c.argv.index(image) + 1:]) or any(
                x.name in ("grep", "egrep") and any("cuda_version" in w.lower() for w in x.argv) for x in commands):
            return ("container " if sub == "exec" and c.name in ("docker", "podman", "nerdctl") else "image ") + image
    return None


@dataclass(frozen=True)
class ImageCuda:
    """The CUDA an image carries (its ``CUDA_VERSION``, which NVIDIA's CUDA images set; None: not in the output);
    ``where``: ``"image nvidia/cuda:9.2-runtime-ubuntu18.04"``, or ``"container NAME"`` for a ``docker exec``."""

    where: str
    version: str | None


def _image_cuda(run) -> ImageCuda:
    m = re.search(r"(?:^|[\s\"'])(?:export\s+)?CUDA_VERSION[=\s]\"?(\d+(?:\.\d+)+)", run.stdout if run.ok else "",
                  re.M)
    return ImageCuda(_image_cuda_command(run.argv) or "image ?", m.group(1) if m else None)


#: the CUDA_VERSION of an image as recorded by hand (``docker image inspect IMG --format '{{range .Config.Env}}…' |
#: grep CUDA_VERSION``, ``docker run IMG env``, ``singularity inspect --environment IMG``) -> ``ImageCuda``
IMAGE_CUDA = Observation(None, lambda argv, env: _image_cuda_command(argv, env) is not None, _image_cuda)


def _nv_exec_command(argv: tuple, env: dict | None = None) -> tuple[str, ...] | None:
    """The ``singularity|apptainer exec|run|shell --nv`` (or ``--nvccli``) of a recorded command line, as typed
    (``sudo``, ``sh -c "… 2>&1"``, piped), or None."""
    for c in simple_commands(argv, env):
        found = container_image(c.argv)
        if found and c.name in ("singularity", "apptainer") and found[0] in ("exec", "run", "shell", "test") and (
                "--nv" in c.argv or "--nvccli" in c.argv):
            return c.argv
    return None


@dataclass(frozen=True)
class NvExec:
    """What a ``--nv`` run of any command printed that says why the GPU is unusable in it: ``code`` (a
    ``classify_runtime_error`` code: ``CUDA_DRIVER_TOO_OLD`` for cudaError 35; ``NV_LIBS_NOT_BOUND`` when libcuda.so.1
    could not be loaded) and the ``line`` that says so; None for both when its output names no such failure."""

    code: str | None
    line: str | None


#: the program in the container could not load the driver's libcuda (TensorFlow: ``Could not load dynamic library
#: 'libcuda.so.1'; dlerror: libcuda.so.1: cannot open shared object file``; https://github.com/apptainer/singularity/
#: issues/4783), which ``--nv`` should have bound
_LIBCUDA_NOT_LOADED = re.compile(r"libcuda\.so(?:\.1)?: cannot open shared object file|"
                                 r"Could not load dynamic library 'libcuda\.so(?:\.1)?'")


def _nv_exec(run) -> NvExec:
    for line in run.output.splitlines():
        codes = classify_runtime_error(line)
        if codes:
            return NvExec(codes[0], line.strip())
    for line in run.output.splitlines():
        if _LIBCUDA_NOT_LOADED.search(line):
            return NvExec("NV_LIBS_NOT_BOUND", line.strip())
    return NvExec(None, None)


#: a recorded ``singularity|apptainer exec --nv IMAGE CMD`` of any image and command (as typed) -> ``NvExec``
NV_EXEC = Observation(None, lambda argv, env: _nv_exec_command(argv, env) is not None, _nv_exec)


#: ``docker info`` text (also through a pipe: ``sh -c "docker info | grep -i runtime"``) -> ``docker_runtimes``
DOCKER_INFO = Observation(("docker", "info"), lambda argv, env: first_command(argv, env).argv[:2] == ("docker", "info"),
                          lambda run: docker_runtimes(run.stdout))


def _nvidia_runtime(words: tuple[str, ...]) -> bool:
    """``--runtime=nvidia`` or ``--runtime nvidia`` among ``docker run``'s words."""
    return "--runtime=nvidia" in words or any(a == "--runtime" and b == "nvidia" for a, b in zip(words, words[1:]))


def _docker_gpu_command(argv: tuple, env: dict | None = None) -> tuple[str, ...] | None:
    """The ``docker run`` asking for GPUs in a recorded command line (``--gpus X``, ``--gpus=X``, ``--runtime=nvidia``
    or ``--runtime nvidia``; as typed: under ``sudo``, in ``sh -c``, piped), or None."""
    for c in simple_commands(argv, env):
        words = c.argv
        if c.name == "docker" and "run" in words[1:3] and (
                _nvidia_runtime(words) or any(a == "--gpus" or a.startswith("--gpus=") for a in words)):
            return words
    return None


def _docker_gpu_run(argv: tuple, env: dict) -> bool:
    """Any ``docker run`` asking for GPUs (fixtures 59, 62; ``_docker_gpu_command``)."""
    return _docker_gpu_command(argv, env) is not None


#: a recorded ``docker run`` of any image asking for GPUs -> how it asked for them (``docker run --runtime=nvidia``
#: or ``docker run --gpus all``); its output is the container's ``nvidia-smi -L``
DOCKER_GPUS = Observation(None, _docker_gpu_run, lambda run: "docker run --runtime=nvidia"
                          if _nvidia_runtime(_docker_gpu_command(run.argv) or ()) else "docker run --gpus all")


def _singularity_libs_run(argv: tuple, env: dict) -> bool:
    """``singularity|apptainer exec --nv IMAGE sh -c 'ls /.singularity.d/libs …; echo LD=$LD_LIBRARY_PATH'`` of any
    image (https://github.com/apptainer/singularity/issues/4783: the ``grep -c libcuda`` form), read as typed
    (``sudo``, ``sh -c "… 2>&1"``, piped: ``_nv_exec_command``)."""
    words = " ".join(_nv_exec_command(argv, env) or ())
    return "/.singularity.d/libs" in words and "LD=" in words


#: a recorded ``exec --nv`` listing of ``/.singularity.d/libs`` of any image -> ``nv_libs``
SINGULARITY_LIBS = Observation(None, _singularity_libs_run, lambda run: nv_libs(run.output))


#: what lists the host's libcuda: ``ls``/``find``/``locate`` of it (``ls /usr/lib64/libcuda.so*``), the loader's
#: cache (``ldconfig -p``, also ``| grep libcuda``)
_LISTERS = ("ls", "find", "locate", "ldconfig")
_LIBCUDA_1 = re.compile(r"(?:^|[\s/])(libcuda\.so\.1)(?=$|[\s(])", re.M)
_LIBCUDA_PATH = re.compile(r"(/\S*/libcuda\.so\.1)(?=$|\s)", re.M)


@dataclass(frozen=True)
class HostLibcuda:
    """Whether the host has ``libcuda.so.1`` (True: listed; False: the loader's cache lists none; None: the
    listing proves nothing, e.g. ``ls`` of one folder without it) and its path where the output names one."""

    present: bool | None
    path: str | None


def _host_libcuda_command(argv: tuple, env: dict | None = None) -> tuple[str, ...] | None:
    """The host command of a recorded command line that lists libcuda (as typed), or None: never one run inside a
    container (``singularity exec … ls /.singularity.d/libs`` is the container's)."""
    commands = simple_commands(argv, env)
    if not commands or any(container_image(c.argv) for c in commands):
        return None
    first = commands[0]
    if first.name not in _LISTERS:
        return None
    text = " ".join(w for c in commands for w in c.argv)
    if "libcuda" in text or (first.name == "ldconfig" and "-p" in first.argv):
        return first.argv
    return None


def _host_libcuda(run) -> HostLibcuda:
    first = _host_libcuda_command(run.argv) or ("",)
    text = run.output
    if _LIBCUDA_1.search(text):
        path = _LIBCUDA_PATH.search(text)
        return HostLibcuda(True, path.group(1) if path else None)
    # the loader's cache lists every library it knows: none there is an absence (grep's exit 1: no line matched)
    cache = first[0] == "ldconfig" and run.rc in (0, 1) and not run.missing
    return HostLibcuda(False if cache else None, None)


#: the host's libcuda as recorded by hand: ``ls /usr/lib64/libcuda.so*``, ``ldconfig -p | grep libcuda``, ``find /
#: -name 'libcuda.so*'`` (as typed) -> ``HostLibcuda``
HOST_LIBCUDA = Observation(None, lambda argv, env: _host_libcuda_command(argv, env) is not None, _host_libcuda)
