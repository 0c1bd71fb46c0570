"""What this rank actually imported, as the libraries themselves report it (Python 3.5 syntax): the run record's
``as_run`` block, one entry per rank in rank order (``gathered``), which the launcher compares with the stack's
manifest and between ranks (``launch.drift``).

Each value is read from the running process, never from a manifest or a file on PATH:

- ``python``: ``platform.python_version()``; ``tensorflow``: ``tf.__version__``; ``horovod``: ``horovod.__version__``;
- ``horovod_build``: ``hvd.mpi_built()``, ``hvd.gloo_built()``, ``hvd.nccl_built()`` (Horovod >= 0.20 has all three,
  https://horovod.readthedocs.io/en/stable/api.html; an older Horovod lacks some: absent, not guessed);
- ``nccl``: the version code ``hvd.nccl_built()`` returns since Horovod 0.21 (``NCCL_VERSION_CODE`` of the nccl.h it
  was built with: major*1000+minor*100+patch before NCCL 2.9, major*10000+minor*100+patch since, see
  https://github.com/NVIDIA/nccl/blob/master/src/nccl.h.in), None when Horovod has no NCCL;
- ``cuda``/``cudnn``/``nccl``: first the version in the file name of the ``libcudart``/``libcudnn``/``libnccl`` shared
  object mapped into this process (``/proc/self/maps``: ``libcudart.so.10.1.168`` is the library the rank really
  loaded, as ``trainer.mpilib`` reads libmpi), else ``tf.sysconfig.get_build_info()`` (TensorFlow >= 2.3: the
  versions TensorFlow was built against, cuDNN often as its major version only) and for NCCL Horovod's build; absent
  on a CPU build or where neither says;
- ``openmpi``/``mpi``: ``trainer.mpilib`` (``MPI_Get_library_version`` of the mapped libmpi);
- ``packages_sha256``: the SHA-256 of the sorted ``name==version`` lines of every installed distribution
  (``importlib.metadata`` on Python >= 3.8, ``pkg_resources`` before), what ``pip freeze`` lists; ``packages``: their
  count.
"""
import hashlib
import json
import platform
import re
import sys
from collections import OrderedDict

import numpy as np

from trainer import compat, mpilib


def nccl_version(code):
    """"2.18.3" for a ``NCCL_VERSION_CODE`` (21803), "2.7.8" for 2708; None for 0/False (no NCCL); True (an old
    Horovod's bool) is "built" without a version."""
    if code is True:
        return "built"
    if not code:
        return None
    code = int(code)
    if code >= 10000:
        return "%d.%d.%d" % (code // 10000, (code % 10000) // 100, code % 100)
    return "%d.%d.%d" % (code // 1000, (code % 1000) // 100, code % 100)


def installed_packages():
    """Sorted ``name==version`` lines (names lower-cased) of every distribution this Python sees."""
    if sys.version_info >= (3, 8):
        from importlib import metadata  # novermin: Python >= 3.8 only, guarded
        found = set("%s==%s" % ((d.metadata["Name"] or "").lower(), d.version) for d in metadata.distributions())
    else:  # Python 3.5-3.7: setuptools' pkg_resources (present where pip is)
        import pkg_resources
        found = set("%s==%s" % (d.project_name.lower(), d.version) for d in pkg_resources.working_set)
    return sorted(found)


def horovod_build():
    """{"mpi", "gloo", "nccl"} as Horovod's ``*_built()`` say (bools; ``nccl``: the version code as given), only
    the ones this Horovod has."""
    import horovod.tensorflow as hvd_tf
    found = OrderedDict()
    for name in ("mpi", "gloo", "nccl"):
        fn = getattr(hvd_tf, name + "_built", None)
        if fn is not None:
            try:
                value = fn()
            except Exception as e:  # noqa: BLE001 - a Horovod that cannot say is recorded as such
                value = "error: %s" % e
            found[name] = value if isinstance(value, (bool, str)) else int(value)
    return found


def build_info():
    """{"cuda", "cudnn"} TensorFlow was built against (``tf.sysconfig.get_build_info``), only those it gives."""
    get = getattr(getattr(compat.tf, "sysconfig", None), "get_build_info", None)
    info = dict(get()) if get else {}
    return OrderedDict((k, str(info[k + "_version"])) for k in ("cuda", "cudnn") if info.get(k + "_version"))


_MAPPED = re.compile(r"/lib(cudart|cudnn|nccl)\.so\.(\d+(?:\.\d+)+)$")


def mapped_versions(maps_text):
    """{"cuda", "cudnn", "nccl"} from the versioned file names of the GPU libraries in ``maps_text`` (the content of
    ``/proc/PID/maps``), only those mapped with a version of two parts or more."""
    names = {"cudart": "cuda", "cudnn": "cudnn", "nccl": "nccl"}
    found = OrderedDict()
    for line in maps_text.splitlines():
        match = _MAPPED.search(line.strip())
        if match and names[match.group(1)] not in found:
            found[names[match.group(1)]] = match.group(2)
    return found


def _mapped():
    try:
        with open(mpilib.MAPS) as f:
            return mapped_versions(f.read())
    except (IOError, OSError):
        return OrderedDict()


def facts():
    """This rank's as-run facts (the keys above), an OrderedDict of JSON values."""
    build = horovod_build()
    found = OrderedDict([("python", platform.python_version()), ("tensorflow", compat.tf_version()),
                         ("horovod", compat.horovod_version()), ("horovod_build", build)])
    if "nccl" in build:
        found["nccl"] = nccl_version(build["nccl"])
    found.update(build_info())
    found.update(_mapped())
    found.update(mpilib.versions_entry(mpilib.record()))
    packages = installed_packages()
    found["packages"] = len(packages)
    found["packages_sha256"] = hashlib.sha256("\n".join(packages).encode("utf-8")).hexdigest()
    return found


def gathered(rt, mine=None, name="chexstack_as_run"):
    """Every rank's ``facts()`` (or ``mine``: any JSON value) in rank order: each rank's JSON as UTF-8 codes, padded
    to the longest (two allgathers named after ``name``: the lengths, then the rows)."""
    data = bytearray(json.dumps(facts() if mine is None else mine).encode("utf-8"))
    lengths = compat.allgather(np.array([len(data)], dtype=np.int32), name + "_lengths")
    row = np.zeros((1, int(max(lengths))), dtype=np.int32)
    row[0, :len(data)] = list(data)
    rows = compat.allgather(row, name)
    return [json.loads(bytes(bytearray(int(c) for c in r[:int(n)])).decode("utf-8"), object_pairs_hook=OrderedDict)
            for r, n in zip(rows, lengths)]
