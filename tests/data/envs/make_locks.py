"""Write the small hand-written unified lock files of tests/data/envs with conda-lock's own models (so they are
valid lock files). Package lists, URLs and package hashes are hand-written placeholders (these files are
never installed) for ../shared/cases/14's environment; the metadata (content
hash per platform) is conda-lock's for that environment with a virtual-package spec of __cuda 11.8, __glibc 2.31.

Regenerate: .venv/bin/python tests/data/envs/make_locks.py
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from conda_lock.content_hash import compute_content_hashes
from conda_lock.lockfile import write_conda_lock_file
from conda_lock.lockfile.v1.models import HashModel, LockMeta
from conda_lock.lockfile.v2prelim.models import LockedDependency, Lockfile
from conda_lock.src_parser import make_lock_spec
from conda_lock.virtual_package import virtual_package_repo_from_specification

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CASE14 = ROOT.parent / "shared" / "cases" / "14-conda-lock-cuda-virtual-packages.yml"
MAPPING = ROOT / "envs" / "conda" / "pypi-mapping.json"
CF = "https://conda.anaconda.org/conda-forge/linux-64/"

VIRTUAL_PACKAGES = """subdirs:
  linux-64:
    packages:
      __unix: "0"
      __linux: "5.4"
      __glibc: "2.31"
      __archspec: "1 x86_64"
      __cuda: "11.8"
"""


def conda(name: str, version: str, build: str, md5: str, deps: dict[str, str] | None = None) -> LockedDependency:
    return LockedDependency(name=name, version=version, manager="conda", platform="linux-64",
                            dependencies=deps or {}, url="%s%s-%s-%s.conda" % (CF, name, version, build),
                            hash=HashModel(md5=md5), build=build, categories={"main"})


def pip(name: str, version: str, url: str, sha256: str) -> LockedDependency:
    return LockedDependency(name=name, version=version, manager="pip", platform="linux-64", dependencies={},
                            url=url, hash=HashModel(sha256=sha256), categories={"main"})


COMMON = [
    conda("python", "3.10.13", "hd12c33a_1_cpython", "6b5e4e0ef3a8d1a2b9c7f0e1d2c3b4a5"),
    conda("pip", "23.3.2", "pyhd8ed1ab_0", "8a1f7b5e2d6c4a3b9e0f1d2c3b4a5968", {"python": ">=3.7"}),
    conda("numpy", "1.23.5", "py310h53a5b5f_0", "0f6c2e9b8a7d5c4b3a2e1f0d9c8b7a65", {"python": ">=3.10,<3.11.0a0"}),
]

GPU = COMMON + [
    conda("cudatoolkit", "11.8.0", "h4ba93d1_12", "1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f", {"__glibc": ">=2.17"}),
    conda("cudnn", "8.8.0.121", "h0800d71_1", "2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f70", {"cudatoolkit": "11.*"}),
    conda("nccl", "2.18.5.1", "h6103f9b_0", "3e4f5a6b7c8d9e0f1a2b3c4d5e6f7081", {"cudatoolkit": ">=11.8,<12"}),
    conda("tensorflow-base", "2.12.1", "cuda118py310h4ee6fb6_1", "4f5a6b7c8d9e0f1a2b3c4d5e6f708192",
          {"cudatoolkit": ">=11.8,<12", "cudnn": ">=8.8.0.121,<9.0a0", "nccl": ">=2.18.5.1,<3.0a0",
           "python": ">=3.10,<3.11.0a0"}),
    conda("tensorflow", "2.12.1", "cuda118py310h9f1a7e0_1", "5a6b7c8d9e0f1a2b3c4d5e6f708192a3",
          {"tensorflow-base": "2.12.1 cuda118py310h4ee6fb6_1"}),
]

CPU_BUILD = COMMON + [
    conda("tensorflow-base", "2.12.1", "cpu_py310h3da9b3d_1", "6b7c8d9e0f1a2b3c4d5e6f708192a3b4",
          {"python": ">=3.10,<3.11.0a0"}),
    conda("tensorflow", "2.12.1", "cpu_py310hd1aba9c_1", "7c8d9e0f1a2b3c4d5e6f708192a3b4c5",
          {"tensorflow-base": "2.12.1 cpu_py310h3da9b3d_1"}),
]

PIP = [
    pip("horovod", "0.28.1", "https://files.pythonhosted.org/packages/source/h/horovod/horovod-0.28.1.tar.gz",
        "9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    pip("scikit-learn", "1.3.2", "https://files.pythonhosted.org/packages/source/s/scikit-learn/"
        "scikit_learn-1.3.2-cp310-cp310-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a09f"),
]


def metadata() -> LockMeta:
    spec = make_lock_spec(src_files=[CASE14], platform_overrides=["linux-64"], mapping_url=str(MAPPING))
    with tempfile.TemporaryDirectory() as tmp:
        vp = Path(tmp) / "virtual-packages.yml"
        vp.write_text(VIRTUAL_PACKAGES)
        hashes = compute_content_hashes(spec, virtual_package_repo_from_specification(vp))
    return LockMeta(content_hash=hashes, channels=spec.channels, platforms=spec.platforms,
                    sources=["14-conda-lock-cuda-virtual-packages.yml"])


def main() -> None:
    meta = metadata()
    for name, pkgs in (("lock-case14-gpu.yml", GPU + PIP), ("lock-case14-cpu-build.yml", CPU_BUILD + PIP)):
        write_conda_lock_file(Lockfile(package=pkgs, metadata=meta), HERE / name, metadata_choices=set())
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
