"""What a GPU stack's lock must contain (https://github.com/conda/conda-lock/issues/101): a lock solved without the
target's virtual packages
can silently hold a CPU TensorFlow; this assertion turns that into a FAIL.

``gpu_lock_problems(lock, platform, cuda_max, cudatoolkit)`` returns one line per problem (empty: the lock is fit):

- a CUDA runtime package (``cudatoolkit``, or ``cuda-version`` in CUDA 12-era conda-forge) is present, matching
  ``cudatoolkit`` (the environment's exact pin, e.g. "11.8") when given, and not newer than ``cuda_max`` (the
  ``__cuda`` the lock targets: the cluster driver's CUDA, https://github.com/devcontainers/features/issues/1295 and
  https://github.com/NVIDIA/nvidia-docker/issues/745);
- ``cudnn`` and ``nccl`` are present;
- some ``tensorflow*`` package has a build string containing ``gpu`` or ``cuda``.
"""
from __future__ import annotations

import re

from conda_lock.lockfile.v2prelim.models import Lockfile
from conda_lock.models.lock_spec import LockSpecification

from envs.rules import parse_version, same_release

CUDA_RUNTIME_PACKAGES = ("cudatoolkit", "cuda-version")
_EXACT = re.compile(r"^=?=?([0-9]+(?:\.[0-9]+)*)(?:\.\*)?$")


def expected_cudatoolkit(spec: LockSpecification, platform: str) -> str | None:
    """The environment's exact ``cudatoolkit`` pin ("cudatoolkit=11.8" → "11.8"); None for ranges or no pin."""
    for dep in spec.dependencies.get(platform, []):
        if dep.name in CUDA_RUNTIME_PACKAGES and dep.manager == "conda":
            m = _EXACT.match(getattr(dep, "version", "") or "")
            if m:
                return m.group(1)
    return None


def gpu_lock_problems(lock: Lockfile, platform: str, cuda_max: str | None, cudatoolkit: str | None = None
                      ) -> list[str]:
    """Problems of ``lock``'s ``platform`` section for a GPU stack (see module docstring); [] when fit."""
    pkgs = {p.name: p for p in lock.package if p.platform == platform and p.manager == "conda"}
    if not pkgs:
        return ["%s: the lock has no conda packages for this platform" % platform]
    problems = []
    runtime = next((pkgs[n] for n in CUDA_RUNTIME_PACKAGES if n in pkgs), None)
    if runtime is None:
        problems.append("%s: no CUDA runtime package (%s)" % (platform, " or ".join(CUDA_RUNTIME_PACKAGES)))
    else:
        if cudatoolkit and not same_release(cudatoolkit, runtime.version):
            problems.append("%s: %s %s, expected %s.*" % (platform, runtime.name, runtime.version, cudatoolkit))
        if cuda_max and parse_version(runtime.version).release[:2] > parse_version(cuda_max).release[:2]:
            problems.append("%s: %s %s is newer than the target driver's CUDA %s (__cuda): the lock is valid but "
                            "the environment will not start there" % (platform, runtime.name, runtime.version,
                                                                       cuda_max))
    for name in ("cudnn", "nccl"):
        if name not in pkgs:
            problems.append("%s: no %s" % (platform, name))
    tf = {n: p.build or "" for n, p in pkgs.items() if n.startswith("tensorflow")}
    if not tf:
        problems.append("%s: no tensorflow package" % platform)
    elif not any("gpu" in b or "cuda" in b for b in tf.values()):
        problems.append("%s: tensorflow resolved to a CPU build (%s)"
                        % (platform, ", ".join("%s %s" % nb for nb in sorted(tf.items()))))
    return problems
