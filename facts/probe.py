"""Collect the raw facts of an environment as JSON, for version checks done elsewhere.

Runs INSIDE stack images (``python facts/probe.py``), with the interpreter the trainer uses, so it is Python 3.5
syntax and standard library only, and it never parses versions itself: it records command outputs and file
contents verbatim, and the host-side parsers in ``facts/parsers/versions.py`` turn them into versions
(``facts.versions.observed_versions``). A missing tool is recorded as ``null`` / an ``error`` text, never
raised.

Output (stdout, one JSON object)::

    {"probe": 1, "python": {"version": "3.5.2 ...", "executable": ...},
     "files": {"/etc/os-release": "...", ...},          # text of the files that exist
     "commands": {"mpirun --version": {"rc": 0, "out": "..."}, ...},
     "env": {"CUDA_VERSION": "10.1.168", ...},          # the NVIDIA image variables that are set
     "libraries": ["/usr/lib/x86_64-linux-gnu/libnccl.so.2.4.7", ...],
     "tensorflow": {"version": ..., "built_with_cuda": ..., "build_info": {...}} | {"error": ...},
     "horovod": {"version": ..., "built_for": {...}, "init": {...}} | {"error": ...}}
"""
import glob
import json
import os
import subprocess
import sys

FILES = [
    "/etc/os-release", "/etc/redhat-release", "/etc/debian_version", "/etc/lsb-release",
    "/usr/local/cuda/version.txt", "/usr/local/cuda/version.json",
]
HEADER_DIRS = ["/usr/include", "/usr/include/x86_64-linux-gnu", "/usr/local/cuda/include"]
HEADERS = ["cudnn_version.h", "cudnn.h", "cudnn_version_v8.h", "cudnn_v7.h", "nccl.h"]
LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/cuda/lib64", "/usr/local/lib",
            "/usr/local/nccl/lib"]
LIB_PATTERNS = ["libnccl.so*", "libcudnn.so*", "libcudart.so*", "libmpi.so*"]
ENV_KEYS = ["CUDA_VERSION", "CUDNN_VERSION", "NCCL_VERSION", "NVIDIA_REQUIRE_CUDA", "TENSORFLOW_VERSION",
            "NVIDIA_TENSORFLOW_VERSION", "NVIDIA_BUILD_ID", "HOROVOD_VERSION", "OPENMPI_VERSION",
            "NVIDIA_PIPELINE_ID", "CONDA_PREFIX", "LD_LIBRARY_PATH"]
COMMANDS = [
    ["mpirun", "--version"],
    ["ompi_info", "--parsable", "--all"],
    ["nvcc", "--version"],
    ["gcc", "--version"],
    ["horovodrun", "--check-build"],
    ["nvidia-smi"],
]

# Runs in a child interpreter so that a crashing import (a Horovod built for another TF:
# https://github.com/horovod/horovod/issues/2619)
# is recorded instead of killing the probe.
TF_SNIPPET = r"""
import json
import tensorflow as tf
out = {"version": tf.__version__}
try:
    out["built_with_cuda"] = bool(tf.test.is_built_with_cuda())
except Exception as e:
    out["built_with_cuda"] = None
try:
    info = tf.sysconfig.get_build_info()
    out["build_info"] = dict((k, str(v)) for k, v in info.items())
except Exception:
    out["build_info"] = None
print(json.dumps(out))
"""

HVD_SNIPPET = r"""
import json, os
import horovod
out = {"version": getattr(horovod, "__version__", None), "built_for": None}
meta = os.path.join(os.path.dirname(horovod.__file__), "metadata.json")
if os.path.exists(meta):
    with open(meta) as f:
        out["built_for"] = json.load(f)
import tensorflow
import horovod.tensorflow as hvd
hvd.init()
init = {"size": hvd.size(), "rank": hvd.rank()}
for name in ("mpi_built", "gloo_built", "nccl_built", "mpi_enabled", "gloo_enabled"):
    fn = getattr(hvd, name, None)
    if fn is not None:
        try:
            init[name] = fn()
        except Exception as e:
            init[name] = "error: %s" % e
out["init"] = init
print(json.dumps(out))
"""


def read_text(path, limit=200000):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except (IOError, OSError):
        return None


# Lines kept of long outputs (the rest is noise for version checks).
KEEP_LINES = {"ompi_info --parsable --all": ("version:full", "cuda_support:value:")}


def resolve(name):
    """A tool next to this interpreter (a venv's horovodrun) wins over PATH."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    return local if os.path.exists(local) else name


def run(argv, timeout=120, env=None):
    """Run ``argv``; ``{"rc": int, "out": stdout+stderr}`` or ``{"rc": null, "error": why}``."""
    argv = [resolve(argv[0])] + list(argv[1:])
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, env=env)
    except (OSError, ValueError) as e:
        return {"rc": None, "error": "%s: %s" % (type(e).__name__, e)}
    except subprocess.TimeoutExpired:
        return {"rc": None, "error": "timed out after %d s" % timeout}
    return {"rc": p.returncode, "out": p.stdout.decode("utf-8", "replace")}


def python_json(snippet):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    res = run([sys.executable, "-c", snippet], timeout=300, env=env)
    if res.get("rc") != 0:
        text = res.get("out") or res.get("error") or ""
        return {"error": text.strip()[-2000:]}
    lines = res["out"].strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        return {"error": "no JSON in output: %s" % res["out"][-2000:]}


def headers():
    out = {}
    prefixes = list(HEADER_DIRS)
    if os.environ.get("CONDA_PREFIX"):
        prefixes.append(os.path.join(os.environ["CONDA_PREFIX"], "include"))
    for d in prefixes:
        for name in HEADERS:
            path = os.path.join(d, name)
            text = read_text(path)
            if text is not None:
                keep = [l for l in text.splitlines() if l.startswith("#define") and
                        ("CUDNN_" in l or "NCCL_" in l) and ("MAJOR" in l or "MINOR" in l or "PATCH" in l
                                                            or "VERSION" in l)]
                out[path] = "\n".join(keep)
    return out


def libraries():
    dirs = list(LIB_DIRS)
    if os.environ.get("CONDA_PREFIX"):
        dirs.append(os.path.join(os.environ["CONDA_PREFIX"], "lib"))
    found = []
    for d in dirs:
        for pat in LIB_PATTERNS:
            found.extend(glob.glob(os.path.join(d, pat)))
    return sorted(set(found))


def collect():
    env_cmd = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMPI_ALLOW_RUN_AS_ROOT="1",
                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    files = {}
    for path in FILES:
        text = read_text(path)
        if text is not None:
            files[path] = text
    files.update(headers())
    commands = {}
    for argv in COMMANDS:
        key = " ".join(argv)
        res = run(argv, env=env_cmd)
        if key in KEEP_LINES and "out" in res:
            res["out"] = "\n".join(l for l in res["out"].splitlines() if any(k in l for k in KEEP_LINES[key]))
        commands[key] = res
    return {
        "probe": 1,
        "python": {"version": sys.version, "executable": sys.executable},
        "files": files,
        "commands": commands,
        "env": dict((k, os.environ[k]) for k in ENV_KEYS if k in os.environ),
        "libraries": libraries(),
        "tensorflow": python_json(TF_SNIPPET),
        "horovod": python_json(HVD_SNIPPET),
    }


if __name__ == "__main__":
    json.dump(collect(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
