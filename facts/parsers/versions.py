"""Version strings out of real tool output and files (nvcc, version.txt/json, cudnn headers, nccl.h, mpirun,
ompi_info, gcc, os-release, library file names).

Every function takes text (or file names) and returns a dotted version string or None when the text holds none;
none of them raises on odd input. Fixture names refer to ../shared/fixtures (SOURCES.md gives their origin).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from facts.parsers.container import container_image
from facts.parsers.observation import Observation, first_command, simple_commands

_DOTTED = r"\d+(?:\.\d+)+"


def nvcc(text: str) -> str | None:
    """``nvcc --version`` -> full toolkit version ``"10.1.243"`` (``V`` field), else the ``release`` ``"10.1"``.

    Matches ``release (\\d+)\\.(\\d+), V(\\S+)`` anywhere in the text: CUDA ≥ 11 adds a last ``Build cuda_…`` line
    that breaks ``$``-anchored regexes (fixture 49, k2#584).
    """
    m = re.search(r"release (\d+\.\d+), V(" + _DOTTED + ")", text or "")
    if m:
        return m.group(2)
    m = re.search(r"release (\d+\.\d+)", text or "")
    return m.group(1) if m else None


def cuda_version_file(text: str) -> str | None:
    """``/usr/local/cuda/version.txt`` (``CUDA Version 10.0.130``, CUDA ≤ 11.0) or ``version.json``
    (``{"cuda": {"version": "11.1.1"}}``, CUDA ≥ 11.1) -> ``"10.0.130"``."""
    text = text or ""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)["cuda"]["version"]
        except (ValueError, KeyError, TypeError):
            return None
    m = re.search(r"CUDA Version (" + _DOTTED + ")", text)
    return m.group(1) if m else None


def _defines(text: str, prefix: str, parts: tuple[str, ...]) -> str | None:
    values = []
    for part in parts:
        m = re.search(r"^\s*#define\s+%s%s\s+(\d+)\s*$" % (prefix, part), text or "", re.M)
        if not m:
            return None
        values.append(m.group(1))
    return ".".join(values)


def cudnn_header(text: str) -> str | None:
    """``#define CUDNN_MAJOR 7`` / ``MINOR`` / ``PATCHLEVEL`` lines (cudnn.h for cuDNN ≤ 7, cudnn_version.h for
    ≥ 8: fixtures 51, 52) -> ``"7.5.0"``. A cudnn.h of cuDNN 8 holds no such lines: None, not "missing"."""
    return _defines(text, "CUDNN_", ("MAJOR", "MINOR", "PATCHLEVEL"))


def nccl_header(text: str) -> str | None:
    """``nccl.h``'s ``#define NCCL_MAJOR 2`` / ``NCCL_MINOR 4`` / ``NCCL_PATCH 7`` -> ``"2.4.7"``."""
    return _defines(text, "NCCL_", ("MAJOR", "MINOR", "PATCH"))


def library_file(paths: list[str], name: str) -> str | None:
    """The longest version among file names like ``.../libnccl.so.2.4.7`` for ``name="libnccl"``."""
    best = None
    for p in paths:
        m = re.search(r"(?:^|/)%s\.so\.(%s)$" % (re.escape(name), _DOTTED), p)
        if m and (best is None or len(m.group(1)) > len(best)):
            best = m.group(1)
    return best


def mpirun(text: str) -> tuple[str | None, str | None]:
    """``mpirun --version`` -> (implementation, version), e.g. ``("Open MPI", "2.1.1")`` (fixture 43).

    Implementation keys as in Horovod's own MPI detection: 'Open MPI'/'OpenRTE', 'IBM Spectrum MPI',
    'MPICH'/'HYDRA', 'Intel(R) MPI'.
    """
    text = text or ""
    for impl, pattern in (("Open MPI", r"\((?:Open MPI|OpenRTE)\)\s+(\S+)"),
                          ("IBM Spectrum MPI", r"IBM Spectrum MPI\D*(" + _DOTTED + ")"),
                          ("Intel MPI", r"Intel\(R\) MPI Library.*?Version (\S+)"),
                          ("MPICH", r"HYDRA build details:.*?Version:\s+(\S+)|MPICH Version:\s+(\S+)")):
        m = re.search(pattern, text, re.S)
        if m:
            return impl, next(g for g in m.groups() if g)
    return None, None


def ompi_info(text: str) -> dict[str, str | bool | None]:
    """``ompi_info --parsable [--all]`` or ``ompi_info -a`` -> ``{"version": "5.0.2", "cuda_support": bool|None}``.

    ``cuda_support`` comes only from ``mpi_built_with_cuda_support``/``opal_built_with_cuda_support`` values
    (fixtures 44-46): the ``cuda`` name in the MPI extensions list appears even when CUDA is not built (fixture 45).
    """
    version = re.search(r"^ompi:version:full:(\S+)", text or "", re.M)
    cuda = re.search(r'(?:mpi|opal)_built_with_cuda_support(?::value:|" \(current value: ")(true|false)', text or "")
    return {"version": version.group(1) if version else None,
            "cuda_support": None if not cuda else cuda.group(1) == "true"}


def gcc(text: str) -> str | None:
    """First line of ``gcc --version``: ``gcc (Ubuntu 5.4.0-6ubuntu1~16.04.11) 5.4.0 20160609`` -> ``"5.4.0"``."""
    first = (text or "").strip().splitlines()[:1]
    m = re.search(r"\)\s+(" + _DOTTED + ")", first[0]) if first else None
    return m.group(1) if m else None


def python(text: str) -> str | None:
    """``sys.version`` or ``python --version`` -> ``"3.5.2"``."""
    m = re.search(r"(?:^|Python )(\d+\.\d+\.\d+)", (text or "").strip())
    return m.group(1) if m else None


def os_release(files: dict[str, str]) -> tuple[str | None, str | None]:
    """(distribution, most precise version) from ``/etc/os-release`` and the distribution's own release file:
    Ubuntu ``VERSION="16.04.6 LTS (Xenial Xerus)"`` -> 16.04.6; RHEL/CentOS ``/etc/redhat-release`` ``CentOS
    Linux release 7.4.1708 (Core)`` -> 7.4.1708; Debian ``/etc/debian_version`` ``12.5`` -> 12.5."""
    fields = dict(re.findall(r'^([A-Z_]+)="?(.*?)"?\s*$', files.get("/etc/os-release", ""), re.M))
    name, version = fields.get("NAME"), fields.get("VERSION_ID")
    m = re.match(_DOTTED, fields.get("VERSION", ""))
    if m and (version is None or m.group(0).startswith(version)):
        version = m.group(0)
    rh = re.search(r"release (" + _DOTTED + ")", files.get("/etc/redhat-release", ""))
    if rh:
        version = rh.group(1)
    deb = (files.get("/etc/debian_version") or "").strip()
    if name and name.startswith("Debian") and re.match(r"^(?:" + _DOTTED + r"|\d+)$", deb):
        version = deb
    return name, version


def nvidia_container_runtime(text: str) -> str | None:
    """``nvidia-container-runtime --version``: the first line only (``NVIDIA Container Runtime version 1.13.5``;
    the runc block that follows has versions of its own, fixture 63) -> ``"1.13.5"``."""
    first = (text or "").strip().splitlines()[:1]
    m = re.search(r"NVIDIA Container Runtime version (" + _DOTTED + ")", first[0]) if first else None
    return m.group(1) if m else None


def singularity(text: str) -> str | None:
    """``singularity version`` / ``apptainer version`` (``3.4.2-1.1.el7``, ``apptainer version 1.2.5``)
    -> ``"3.4.2"``."""
    m = re.search(r"(?:^|version\s+)(" + _DOTTED + ")", (text or "").strip())
    return m.group(1) if m else None


def nvidia_kernel_module(text: str) -> str | None:
    """The kernel module's version in ``/proc/driver/nvidia/version``: ``NVRM version: NVIDIA UNIX x86_64 Kernel
    Module  550.54.14  …`` or ``… UNIX Open Kernel Module for x86_64  575.57.08  Release Build …``."""
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text or "")
    return m.group(1) if m else None


#: ``ompi_info`` in any form (``--parsable --all``, ``-a | grep cuda``, a head of it: fixtures 44-46) -> ``ompi_info``'s
#: dict
OMPI_INFO = Observation(("ompi_info", "--parsable", "--all"),
                        lambda argv, env: first_command(argv, env).name == "ompi_info",
                        lambda run: ompi_info(run.stdout))


#: ``nvcc --version``, also filtered (``sh -c "nvcc --version | grep release"``) -> ``nvcc``'s version or None
NVCC = Observation(("nvcc", "--version"), lambda argv, env: first_command(argv, env).argv[:2] in (("nvcc", "--version"),
                                                                                        ("nvcc", "-V")),
                   lambda run: nvcc(run.stdout))


#: the CUDA toolkit's version files (``/usr/local/cuda/version.json``, ``/usr/local/cuda-12.4/version.txt``)
_CUDA_VERSION_FILE = re.compile(r"(?:^|/)cuda[\w.-]*/version\.(?:json|txt)$")
_CUDA_VERSION_VAR = re.compile(r"^\s*(?:export\s+)?CUDA_VERSION=\"?(" + _DOTTED + ")", re.M)


@dataclass(frozen=True)
class CudaToolkit:
    """The CUDA toolkit version a recorded command printed (None: not in its output) and where it comes from
    (``source``: ``"/usr/local/cuda/version.json"``, ``"CUDA_VERSION"``)."""

    version: str | None
    source: str


def _toolkit_form(argv: tuple, env: dict | None = None) -> str | None:
    """Which toolkit record a command line is, as typed (``sh -c``, ``sudo``, piped): ``"file"`` for ``cat`` of a
    CUDA version file (``/usr/local/cuda/version.json`` or ``.txt``), ``"env"`` for ``CUDA_VERSION`` as the shell
    or the environment shows it (``echo $CUDA_VERSION``, ``printenv CUDA_VERSION``, ``env | grep CUDA_VERSION``);
    else None."""
    commands = simple_commands(argv, env)
    if not commands or any(container_image(c.argv) for c in commands):
        return None  # a container's or an image's: ``container.IMAGE_CUDA``
    first = commands[0]
    if first.name in ("cat", "head", "less", "more", "jq") and any(
            _CUDA_VERSION_FILE.search(w) for w in first.argv[1:]):
        return "file"
    if first.name == "echo" and any("$CUDA_VERSION" in w or "${CUDA_VERSION}" in w for w in first.argv[1:]):
        return "env"
    if first.name == "printenv" and "CUDA_VERSION" in first.argv[1:]:
        return "env"
    if any(c.name in ("grep", "egrep") and any("cuda_version" in w.lower() for w in c.argv[1:]) for c in commands):
        return "env"  # `env | grep CUDA_VERSION` (``env`` alone is a wrapper with nothing to run), `printenv | grep`
    return None


def _cuda_toolkit(run) -> CudaToolkit:
    """A toolkit record's version, read as its command line says: a version file's format, else ``CUDA_VERSION=X``
    or the bare version ``echo $CUDA_VERSION`` prints."""
    form = _toolkit_form(run.argv)
    text = run.stdout if run.ok else ""
    if form == "file":
        words = first_command(run.argv).argv
        path = next((w for w in words if _CUDA_VERSION_FILE.search(w)), "version file")
        return CudaToolkit(cuda_version_file(text), path)
    m = _CUDA_VERSION_VAR.search(text) or re.match(r"\s*(" + _DOTTED + r")\s*$", text)
    return CudaToolkit(m.group(1) if m else None, "CUDA_VERSION")


#: the CUDA toolkit's version as recorded by hand: ``cat /usr/local/cuda/version.json`` (or ``version.txt``), ``echo
#: $CUDA_VERSION``, ``env | grep CUDA_VERSION`` (as typed) -> ``CudaToolkit``
CUDA_TOOLKIT = Observation(None, lambda argv, env: _toolkit_form(argv, env) is not None, _cuda_toolkit)
