"""Horovod in an image: built LAST against the installed TensorFlow, then gated inside the build.

Facts (with their sources in envs/rules.yaml, queried through ``envs.rules``):
- ``horovodrun --check-build`` and ``hvd.nccl_built()``/``mpi_built()``/``gloo_built()`` exist from 0.17.0;
  before that the only proof is ``import horovod.tensorflow`` + ``hvd.init()``.
- ``horovod/metadata.json`` (the TensorFlow version Horovod was compiled against) exists in the 0.2x releases;
  where it is absent the TF-built-for check is skipped, not failed.
- ``HOROVOD_GPU_OPERATIONS`` exists from 0.20.0; ``HOROVOD_GPU_ALLREDUCE`` (+ ``_ALLGATHER``/``_BROADCAST``) before.

Why last and with ``--no-cache-dir``: a later layer that changes TensorFlow, or a cached wheel compiled for
another TensorFlow, breaks every rank at import (https://github.com/horovod/horovod/issues/2619); the gate makes the
build itself fail.

The one cache the cpu stack's devel stage does take from is chexstack's own Horovod wheel cache
(``facts.horovod_key``: the folder ``<key>/`` that scripts/setup fills), because its key is a digest of exactly
what the build reads: Horovod's version, the Python ABI, TensorFlow's version and compile flags, the MPI, the C++
compiler and the build variables. pip's cache keys a wheel by the sdist alone, which is how a wheel compiled for
another TensorFlow came back in #2619; a wheel under this key was compiled against the same TensorFlow, or the key
would differ. The stage computes the key itself (``facts/horovod_key.py``, copied in alone) and installs the
wheel only when the key matches, else compiles from source as before: the image still builds from its recipe alone
where no cache is at hand, and the gate runs after either, unchanged. The host side (``host_wheel``) only decides
which one file the build context carries: the newest cached wheel whose recorded facts agree with the stack's
manifest (the rows horovod, tensorflow, python, mpi, gcc and ``build.horovod_env``).
"""
from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from chexstack.errors import ChexstackError
from envs.check import horovod_env_findings
from envs.manifest import Stack
from envs.rules import horovod_has
from facts import horovod_key
from facts.openmpi import ALLOW_RUN_AS_ROOT_ENV  # the build runs as root; hvd.init() starts MPI
from images import parts
from images.parts import Part
from images.payload import BUILD_ONLY_GATE

GATE_DIR = "/usr/local/share/chexstack-build/gate"
#: Where a devel stage gets the key script and (when the host has one for the stack) the cached wheel; build-only.
WHEEL_DIR = "/usr/local/share/chexstack-build/horovod-wheels"
CONTEXT_WHEELS = "build-only/horovod-wheels"


# Horovod < 0.17: no --check-build; the import + init is the whole proof (Python >= 3.5 syntax).
_IMPORT_INIT_CHECK = (
    "import tensorflow as tf, horovod, horovod.tensorflow as hvd; hvd.init(); "
    'print("horovod gate: PASS: Horovod %s import + hvd.init() (size %d) with TensorFlow %s" '
    "% (horovod.__version__, hvd.size(), tf.__version__))"
)


def has_check_build(horovod_version: str) -> bool:
    """Whether ``horovodrun --check-build`` exists in this Horovod release (envs/rules.yaml: from 0.17.0)."""
    return horovod_has(horovod_version, "check_build")


def check_build_flags(stack: Stack) -> None:
    """Refuse ``HOROVOD_*`` build variables the stack's Horovod release does not read (a typo, or
    ``HOROVOD_GPU_OPERATIONS`` before 0.20.0: the build silently ignores it and the image lacks NCCL) — the
    blocking findings of ``invoke stacks --check`` (``envs.check.horovod_env_findings``). ChexstackError naming the
    manifest field."""
    errors = [f for f in horovod_env_findings(stack) if f.severity == "error"]
    if errors:
        raise ChexstackError("\n".join("envs/stacks/%s.yaml: field %s: %s (%s)" % (stack.name, f.field, f.message,
                                                                                   f.source) for f in errors))


def required_components(horovod_env: dict[str, str]) -> list[tuple[str, str]]:
    """What ``horovodrun --check-build`` must mark ``[X]``, from the stack's build flags:
    ``HOROVOD_WITH_TENSORFLOW`` -> framework=TensorFlow, ``HOROVOD_WITH_MPI``/``_GLOO`` -> controller=MPI/Gloo,
    ``HOROVOD_GPU_OPERATIONS``/``HOROVOD_GPU_ALLREDUCE`` = NCCL -> tensor_op=NCCL."""
    on = {k for k, v in horovod_env.items() if v not in ("", "0")}
    req = []
    if "HOROVOD_WITH_TENSORFLOW" in on:
        req.append(("framework", "TensorFlow"))
    req += [("controller", name) for flag, name in (("HOROVOD_WITH_MPI", "MPI"), ("HOROVOD_WITH_GLOO", "Gloo"))
            if flag in on]
    if "NCCL" in (horovod_env.get("HOROVOD_GPU_OPERATIONS"), horovod_env.get("HOROVOD_GPU_ALLREDUCE")):
        req.append(("tensor_op", "NCCL"))
    return req


def _names_version(text: object, version: str | None) -> bool:
    """Whether ``text`` (a tool's version line) names ``version`` as a whole dotted prefix (``12.2`` in
    ``c++ (Debian 12.2.0-14+deb12u1) 12.2.0``, not in ``12.20``)."""
    return bool(version) and isinstance(text, str) and \
        re.search(r"(?<![\d.])%s(?!\d)" % re.escape(str(version)), text) is not None


def _fits(stack: Stack, fact: dict) -> bool:
    """Whether a cached wheel's recorded facts (``horovod_key.py --facts``) agree with the stack's manifest."""
    tf = fact.get("tensorflow") or {}
    python = str(stack.version("python") or "")
    return (fact.get("key_format") == horovod_key.KEY_FORMAT and fact.get("horovod") == stack.version("horovod")
            and fact.get("build_variables") == dict(stack.build.horovod_env)
            and tf.get("version") == stack.version("tensorflow")
            and str(fact.get("python_abi", "")).startswith("cpython-%s-" % python.replace(".", ""))
            and _names_version(fact.get("mpi"), stack.version("mpi"))
            and _names_version(fact.get("cxx"), stack.version("gcc")))


def host_wheel(stack: Stack, root: Path | None = None) -> Path | None:
    """The one cached wheel (``root``: ``horovod_key.cache_root()``, i.e. ``$CHEXSTACK_WHEEL_CACHE``) the build
    context carries for ``stack``: the newest ``<key>/horovod-<version>-*.whl`` whose ``<key>/key.json`` names that
    key and agrees with the manifest (``_fits``); None when there is none. Whether the stage installs it is decided
    inside the stage, by the key computed there."""
    root = Path(root or horovod_key.cache_root())
    found = []
    for meta in root.glob("*/key.json"):
        try:
            fact = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        wheel = horovod_key.wheel_in(str(root), meta.parent.name, str(stack.version("horovod")))
        if wheel and isinstance(fact, dict) and fact.get("key") == meta.parent.name and _fits(stack, fact):
            found.append(Path(wheel))
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def pip_install(stack: Stack, python: str, pip: str, wheels: Path | None = None) -> Part:
    """Horovod from the wheel cache when the stage's own key has a wheel there, else compiled:
    ``<flags> pip install --no-cache-dir --no-build-isolation --no-deps horovod==<manifest version>`` against the
    TensorFlow already installed (no build isolation), never from pip's cache. Two steps: COPY ``CONTEXT_WHEELS``
    (``facts/horovod_key.py`` and, when ``host_wheel`` finds one under ``wheels``, that wheel as
    ``<key>/<file>``) to ``WHEEL_DIR``; then one RUN that computes the key with the build's flags
    (``horovod_key.py --wheel-in``) and installs the wheel it names, or compiles. Horovod's dependencies are pinned
    in the manifest's python_packages and installed before."""
    check_build_flags(stack)
    flags = parts.horovod_env_prefix(stack.build.horovod_env)
    pin = stack.pin("horovod") if stack.components["horovod"].package else "horovod==%s" % stack.version("horovod")
    files: dict[str, Path | bytes] = {"horovod_key.py": parts.REPO / "facts" / "horovod_key.py"}
    wheel = host_wheel(stack, wheels)
    if wheel is not None:
        files["%s/%s" % (wheel.parent.name, wheel.name)] = wheel
    lookup = "%s %s %s/horovod_key.py --horovod %s --wheel-in %s" % (flags, python, WHEEL_DIR,
                                                                        stack.version("horovod"), WHEEL_DIR)
    install = ('if [ -n "$wheel" ]; then %s install --no-cache-dir --no-deps "$wheel"; '
               "else %s %s install --no-cache-dir --no-build-isolation --no-deps %s; fi" % (pip, flags, pip, pin))
    return parts.combine("horovod", parts.copy_dir(CONTEXT_WHEELS, files, WHEEL_DIR),
                         parts.run("wheel=$(%s)" % lookup, install))


def gate(stack: Stack, python: str, extra_env: dict[str, str] | None = None) -> Part:
    """The build fails unless Horovod is usable as the stack requires (era-aware):
    >= 0.17: ``python -m facts.horovod_gate --require ...`` (``--check-build`` marks + TF-built-for check);
    older: ``import horovod.tensorflow`` + ``hvd.init()``. ``python`` may be a command (``micromamba run ...
    python``); ``extra_env`` is set for the check only (e.g. CUDA stubs)."""
    root = parts.horovod_env_prefix({**ALLOW_RUN_AS_ROOT_ENV, **(extra_env or {})})
    if not has_check_build(stack.version("horovod")):
        return parts.run("%s %s -c %s" % (root, python, shlex.quote(_IMPORT_INIT_CHECK)), name="horovod-gate")
    require = ",".join("%s=%s" % kn for kn in required_components(stack.build.horovod_env))
    files = {rel: parts.REPO / rel for rel in BUILD_ONLY_GATE}
    return parts.combine(
        "horovod-gate",
        parts.copy_dir("build-only/gate", files, GATE_DIR),
        parts.run("cd %s" % GATE_DIR, "%s %s -m facts.horovod_gate --require %s" % (root, python, require)),
    )
