"""trainer.asrun: what a rank really imported, read from the running process (this venv's TensorFlow 2.15.1 and
Horovod 0.28.1, built with MPI and Gloo, no NCCL)."""
from __future__ import annotations

import hashlib
from importlib import metadata

import pytest

from trainer import asrun


@pytest.mark.parametrize("code, version", [(21803, "2.18.3"), (2708, "2.7.8"), (0, None), (False, None),
                                           (True, "built")])
def test_nccl_version_code(code, version):
    """NCCL_VERSION_CODE: major*1000+minor*100+patch before NCCL 2.9, major*10000+minor*100+patch since."""
    assert asrun.nccl_version(code) == version


def test_this_process_facts():
    import horovod
    import tensorflow as tf

    found = asrun.facts()
    assert found["tensorflow"] == tf.__version__ and found["horovod"] == horovod.__version__
    assert found["horovod_build"] == {"mpi": True, "gloo": True, "nccl": 0} and found["nccl"] is None
    assert "cuda" not in found  # a CPU build of TensorFlow names no CUDA
    lines = sorted({"%s==%s" % (d.metadata["Name"].lower(), d.version) for d in metadata.distributions()})
    assert found["packages"] == len(lines)
    assert found["packages_sha256"] == hashlib.sha256("\n".join(lines).encode()).hexdigest()


def test_gpu_library_versions_from_the_mapped_files():
    """The versioned file names of the libraries a GPU rank mapped (an NGC 19.06 container's), first of each."""
    maps = "\n".join([
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/local/cuda-10.1/targets/x86_64-linux/lib/libcudart.so.10.1.168",
        "7f02-7f03 r-xp 00000000 08:01 2 /usr/lib/x86_64-linux-gnu/libcudnn.so.7.6.0",
        "7f04-7f05 r-xp 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/libnccl.so.2.4.7",
        "7f06-7f07 r-xp 00000000 08:01 4 /usr/lib/x86_64-linux-gnu/libnccl.so.2",  # a soname link: no version
        "7f08-7f09 r-xp 00000000 08:01 5 /usr/lib/x86_64-linux-gnu/libcudart.so.9.0.176"])
    assert asrun.mapped_versions(maps) == {"cuda": "10.1.168", "cudnn": "7.6.0", "nccl": "2.4.7"}
    assert asrun.mapped_versions("7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so.6") == {}
