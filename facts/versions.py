"""Turn the JSON of ``facts/probe.py`` (run inside an image or on a node) into one observed version per
Table 1 row (``envs.manifest.COMPONENTS``).

``observed_versions(probe)`` -> ``{row: Observed}``; each ``Observed`` says where the value was read
(``evidence``), or why none could be (``problem``). Sources are tried from the most to the least direct, e.g.
CUDA: ``nvcc --version`` > ``/usr/local/cuda/version.{json,txt}`` > the image's ``CUDA_VERSION`` variable >
TensorFlow's build info. ``cuda_driver`` is a host property, read from ``nvidia-smi`` when a GPU is visible, never
from the image. nvidia-smi's "CUDA Version" is the driver's maximum CUDA, so it is never used for ``cuda``
(https://github.com/devcontainers/features/issues/1295).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from facts.parsers import versions as p


@dataclass(frozen=True)
class Observed:
    """One row as found: ``version`` (dotted, or None), ``name`` (product, e.g. "Open MPI", "Ubuntu"),
    ``evidence`` (the file, command or variable it was read from) or ``problem`` (why nothing was found)."""

    version: str | None
    evidence: str | None = None
    name: str | None = None
    problem: str | None = None


def _cmd(probe: dict, key: str) -> str:
    res = probe.get("commands", {}).get(key) or {}
    return (res.get("out") or "") if res.get("rc") == 0 else ""


def _failed(what: str, result: dict) -> Observed:
    lines = (result.get("error") or "no result").strip().splitlines()
    return Observed(None, problem="%s failed: %s" % (what, lines[-1] if lines else "no output"))


def _first(candidates, missing: str) -> Observed:
    for version, evidence in candidates:
        if version:
            return Observed(version, evidence)
    return Observed(None, problem=missing)


def _files(probe: dict, suffixes: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(path, text) for path, text in sorted(probe.get("files", {}).items()) if path.endswith(suffixes)]


def observed_versions(probe: dict) -> dict[str, Observed]:
    """Map a probe JSON object to ``{row: Observed}`` for every Table 1 row."""
    files, env, libs = probe.get("files", {}), probe.get("env", {}), probe.get("libraries", [])
    tf, hvd = probe.get("tensorflow") or {}, probe.get("horovod") or {}
    build_info = tf.get("build_info") or {}
    out: dict[str, Observed] = {}

    out["tensorflow"] = Observed(tf["version"], "import tensorflow") if tf.get("version") else _failed(
        "import tensorflow", tf)
    out["horovod"] = Observed(hvd["version"], "import horovod") if hvd.get("version") else _failed(
        "import horovod + hvd.init()", hvd)

    impl, ver = p.mpirun(_cmd(probe, "mpirun --version"))
    if not ver:
        ver = p.ompi_info(_cmd(probe, "ompi_info --parsable --all"))["version"]
        impl = "Open MPI" if ver else None
    out["mpi"] = Observed(ver, "mpirun --version", impl) if ver else Observed(None, problem="no mpirun/ompi_info")

    cuda_files = [(p.cuda_version_file(t), path) for path, t in _files(probe, ("version.json", "version.txt"))]
    out["cuda"] = _first([(p.nvcc(_cmd(probe, "nvcc --version")), "nvcc --version")] + cuda_files +
                         [(env.get("CUDA_VERSION"), "$CUDA_VERSION"),
                          (build_info.get("cuda_version"), "tf.sysconfig.get_build_info()")],
                         "no CUDA toolkit found (nvcc, version.json/txt, $CUDA_VERSION)")

    cudnn_headers = [(p.cudnn_header(t), path) for path, t in _files(probe, ("cudnn_version.h", "cudnn.h",
                                                                             "cudnn_version_v8.h", "cudnn_v7.h"))]
    out["cudnn"] = _first(cudnn_headers + [(p.library_file(libs, "libcudnn"), "libcudnn.so.*"),
                                           (env.get("CUDNN_VERSION"), "$CUDNN_VERSION")],
                          "no cuDNN found (headers, libcudnn.so.*, $CUDNN_VERSION)")

    nccl_headers = [(p.nccl_header(t), path) for path, t in _files(probe, ("nccl.h",))]
    out["nccl"] = _first(nccl_headers + [(p.library_file(libs, "libnccl"), "libnccl.so.*"),
                                         (env.get("NCCL_VERSION"), "$NCCL_VERSION")],
                         "no NCCL found (nccl.h, libnccl.so.*, $NCCL_VERSION)")

    py = p.python((probe.get("python") or {}).get("version", ""))
    out["python"] = Observed(py, "sys.version") if py else Observed(None, problem="no Python version")

    name, ver = p.os_release(files)
    out["os"] = Observed(ver, "/etc/os-release", name) if ver else Observed(None, problem="no /etc/os-release")

    gcc = p.gcc(_cmd(probe, "gcc --version"))
    out["gcc"] = Observed(gcc, "gcc --version") if gcc else Observed(None, problem="no gcc")

    smi = _cmd(probe, "nvidia-smi")
    driver = re.search(r"Driver Version:\s*(\S+)", smi)
    out["cuda_driver"] = Observed(driver.group(1), "nvidia-smi (host driver)") if driver else Observed(
        None, problem="no GPU visible (nvidia-smi): the driver is a host property")
    return out
