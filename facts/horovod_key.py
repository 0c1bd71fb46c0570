"""The key of a Horovod wheel: a digest of exactly what Horovod's build reads, so that one compiled wheel serves
every build that would have compiled the same binary (the venv of scripts/setup, the cpu stack's Docker and
Apptainer devel stages), and no other.

Run with the interpreter Horovod is built for, with the build's variables set (Python 3.5 syntax, standard
library only: it runs on the host and, copied alone, inside an image's devel stage)::

    HOROVOD_WITH_MPI=1 ... python facts/horovod_key.py --horovod 0.28.1            # prints the key
    HOROVOD_WITH_MPI=1 ... python facts/horovod_key.py --horovod 0.28.1 --facts    # the facts, as JSON
    HOROVOD_WITH_MPI=1 ... python facts/horovod_key.py --horovod 0.28.1 --wheel-in DIR
        # the wheel DIR/<key>/horovod-<version>-*.whl if there is one, else nothing (exit 0 either way)
    python facts/horovod_key.py --cache-dir                                         # the cache folder

What the key covers (``facts()``), each as the build reads it:

- the Horovod version (``--horovod``);
- the Python ABI: ``sysconfig``'s ``SOABI`` (``cpython-311-x86_64-linux-gnu``), the machine and the C library
  (``platform.libc_ver``);
- TensorFlow's version and its ``tf.sysconfig.get_compile_flags()``/``get_link_flags()`` (Horovod's CMake reads
  both: the C++11 ABI ``-D_GLIBCXX_USE_CXX11_ABI``, the C++ standard, Eigen's alignment, the framework library), with
  the ``-I``/``-L`` folders left out: they name where TensorFlow is installed, not what it is;
- the MPI: ``mpicxx --showme:version`` (Open MPI), else ``ompi_info --version``, else ``mpichversion``; ``none``
  where none is found or ``HOROVOD_WITHOUT_MPI`` is set (the build then has no MPI controller);
- the C++ compiler: ``$CXX --version`` (``c++`` when unset), first line (Debian's names the package release);
- the build's variables: every ``HOROVOD_*`` and ``CMAKE_*`` and ``CC``, ``CXX``, ``CFLAGS``, ``CXXFLAGS``,
  ``CPPFLAGS``, ``LDFLAGS`` of the environment.

Not in the key: the versions of the build's tools (CMake, setuptools, wheel, pip). They decide how the wheel is
assembled, not what the compiler is given; the cpu stack pins CMake 3.31.6 in the image while a host venv may
have CMake 4 (``CMAKE_POLICY_VERSION_MINIMUM``, which is in the key, is what makes both accept Horovod's
CMakeLists). ``--facts`` records them beside the wheel (``build_tools``) for a reader.

Not keyed at all: a GPU build (``HOROVOD_GPU*`` set, or ``HOROVOD_CUDA_HOME``/``HOROVOD_NCCL_HOME``). It also reads
the CUDA toolkit and NCCL, which this key does not cover, so ``--wheel-in`` finds nothing and the step compiles.

Why a cached wheel is safe here when https://github.com/horovod/horovod/issues/2619 is about a cached wheel that
breaks every rank: pip's own cache keys a built wheel by the sdist alone, so a wheel compiled against one
TensorFlow is reused for another. This key changes with TensorFlow's version and compile flags (and with every
other input above), so a wheel found under it was compiled against the same TensorFlow; and the Horovod gate
(``facts.horovod_gate``: ``horovodrun --check-build`` and the TF-built-for check) still runs after the install.

Exit status: 0 (the key, facts, wheel or nothing printed), 2 bad arguments.
"""
import argparse
import glob
import hashlib
import json
import os
import platform
import subprocess
import sys
import sysconfig

#: The environment variable that moves the cache (docs/testing.md); default ``$XDG_CACHE_HOME`` or ``~/.cache``,
#: then ``chexstack/wheels/horovod``.
CACHE_ENV = "CHEXSTACK_WHEEL_CACHE"
#: Version of the key's recipe: a change of what ``facts()`` collects changes every key.
KEY_FORMAT = 1
#: Build variables read besides ``HOROVOD_*``/``CMAKE_*``.
BUILD_VARIABLES = ("CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS")
#: Variables that make a GPU build (CUDA and NCCL are not in the key: such a build is never keyed).
GPU_VARIABLES = ("HOROVOD_GPU", "HOROVOD_GPU_OPERATIONS", "HOROVOD_GPU_ALLREDUCE", "HOROVOD_GPU_ALLGATHER",
                 "HOROVOD_GPU_BROADCAST", "HOROVOD_CUDA_HOME", "HOROVOD_NCCL_HOME", "HOROVOD_ROCM_HOME")

_TF_PROBE = (
    "import json, os\n"
    "os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
    "import tensorflow as tf\n"
    "print(json.dumps({'version': tf.__version__, 'compile_flags': tf.sysconfig.get_compile_flags(),"
    " 'link_flags': tf.sysconfig.get_link_flags()}))\n"
)


def cache_root(environ=None):
    """The folder holding ``<key>/horovod-*.whl``: ``$CHEXSTACK_WHEEL_CACHE``, else
    ``${XDG_CACHE_HOME:-~/.cache}/chexstack/wheels/horovod``."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_ENV):
        return environ[CACHE_ENV]
    base = environ.get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(base, "chexstack", "wheels", "horovod")


def _first_line(argv):
    """The first non-empty output line of ``argv``, or None when it cannot run or fails."""
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                           timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in p.stdout.splitlines() if line.strip()]
    return lines[0] if p.returncode == 0 and lines else None


def build_variables(environ):
    """The variables of ``environ`` Horovod's build reads: name -> value, sorted."""
    return dict(sorted((k, v) for k, v in environ.items()
                       if k.startswith(("HOROVOD_", "CMAKE_")) or k in BUILD_VARIABLES))


def gpu_build(environ):
    """Whether ``environ`` asks for a GPU build (not keyed)."""
    return any(environ.get(name, "") not in ("", "0") for name in GPU_VARIABLES)


def _without_folders(flags):
    return [f for f in flags if not f.startswith(("-I", "-L"))]


def tensorflow_facts(python):
    """``{"version", "compile_flags", "link_flags"}`` of the TensorFlow ``python`` imports (flags without their
    ``-I``/``-L`` folders), or ``{"version": None}`` when it imports none."""
    try:
        p = subprocess.run([python, "-c", _TF_PROBE], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=600)
    except (OSError, subprocess.SubprocessError):
        return {"version": None}
    if p.returncode != 0 or not p.stdout.strip():
        return {"version": None}
    tf = json.loads(p.stdout.strip().splitlines()[-1])
    return {"version": tf["version"], "compile_flags": _without_folders(tf["compile_flags"]),
            "link_flags": _without_folders(tf["link_flags"])}


def mpi_version(environ):
    """The MPI's own version line (``mpicxx: Open MPI 4.1.4 (Language: C++)``), or ``none``."""
    if environ.get("HOROVOD_WITHOUT_MPI", "") not in ("", "0"):
        return "none"
    for argv in (["mpicxx", "--showme:version"], ["ompi_info", "--version"], ["mpichversion"]):
        line = _first_line(argv)
        if line:
            return line
    return "none"


def compiler_version(environ):
    """``$CXX --version`` (``c++`` when unset), first line, or ``none``."""
    cxx = (environ.get("CXX") or "c++").split()
    return _first_line(cxx + ["--version"]) or "none"


def build_tools(python):
    """Versions of the build's tools (recorded, not keyed): CMake, setuptools, wheel."""
    here = os.path.join(os.path.dirname(python), "cmake")  # pip's cmake in the venv comes first on the build's PATH
    tools = {"cmake": _first_line([here if os.path.exists(here) else "cmake", "--version"])}
    for mod in ("setuptools", "wheel"):
        tools[mod] = _first_line([python, "-c", "import %s; print(%s.__version__)" % (mod, mod)])
    return tools


def facts(horovod, python=None, environ=None):
    """What the key digests (see the module docstring): a JSON-ready dict. ``python`` is the interpreter the build
    uses (this one by default)."""
    environ = os.environ if environ is None else environ
    python = python or sys.executable
    return {
        "key_format": KEY_FORMAT,
        "horovod": horovod,
        "python_abi": sysconfig.get_config_var("SOABI") or sys.implementation.cache_tag,
        "machine": platform.machine(),
        "libc": "-".join(platform.libc_ver()),
        "tensorflow": tensorflow_facts(python),
        "mpi": mpi_version(environ),
        "cxx": compiler_version(environ),
        "build_variables": build_variables(environ),
    }


def key_of(fact):
    """The key: the first 24 hex digits of the SHA-256 of ``fact`` as sorted JSON."""
    return hashlib.sha256(json.dumps(fact, sort_keys=True).encode()).hexdigest()[:24]


def wheel_in(folder, key, horovod):
    """The path of ``folder/key/horovod-<horovod>-*.whl`` (the newest when several), or None."""
    found = glob.glob(os.path.join(folder, key, "horovod-%s-*.whl" % horovod))
    return max(found, key=os.path.getmtime) if found else None


def main(argv=None):
    ap = argparse.ArgumentParser(prog="horovod_key.py", description=__doc__.split("\n")[0])
    ap.add_argument("--horovod", help="the Horovod version the wheel is of, e.g. 0.28.1")
    ap.add_argument("--facts", action="store_true", help="print the facts (JSON) instead of the key")
    ap.add_argument("--wheel-in", metavar="DIR", help="print DIR/<key>/horovod-<version>-*.whl when there is one")
    ap.add_argument("--cache-dir", action="store_true", help="print the cache folder (%s)" % CACHE_ENV)
    args = ap.parse_args(argv)
    if args.cache_dir:
        print(cache_root())
        return 0
    if not args.horovod:
        ap.error("--horovod VERSION is required")
    if gpu_build(os.environ):
        sys.stderr.write("horovod key: a GPU build is not keyed (CUDA and NCCL are not in the key): compile\n")
        return 0
    fact = facts(args.horovod)
    key = key_of(fact)
    if args.facts:
        fact["key"] = key
        fact["build_tools"] = build_tools(sys.executable)
        print(json.dumps(fact, indent=2, sort_keys=True))
    elif args.wheel_in:
        found = wheel_in(args.wheel_in, key, args.horovod)
        sys.stderr.write("horovod key %s: %s\n" % (key, "wheel %s" % found if found else "no wheel: compile"))
        if found:
            print(found)
    else:
        print(key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
