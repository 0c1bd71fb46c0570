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
"""
from __future__ import annotations

import shlex

from chexstack.errors import ChexstackError
from envs.check import horovod_env_findings
from envs.manifest import Stack
from envs.rules import horovod_has
from facts.openmpi import ALLOW_RUN_AS_ROOT_ENV  # the build runs as root; hvd.init() starts MPI
from images import parts
from images.parts import Part
from images.payload import BUILD_ONLY_GATE

GATE_DIR = "/usr/local/share/chexstack-build/gate"


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


def pip_install(stack: Stack, pip: str) -> Part:
    """``<flags> pip install --no-cache-dir --no-build-isolation --no-deps horovod==<manifest version>``: compiled
    against the TensorFlow already installed (no build isolation), never from a cached wheel. Its dependencies
    are pinned in the manifest's python_packages and installed before."""
    check_build_flags(stack)
    flags = parts.horovod_env_prefix(stack.build.horovod_env)
    pin = stack.pin("horovod") if stack.components["horovod"].package else "horovod==%s" % stack.version("horovod")
    return parts.run("%s %s install --no-cache-dir --no-build-isolation --no-deps %s" % (flags, pip, pin),
                     name="horovod")


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
