"""The MPI library this process runs under, as the library itself says (Python 3.5, stdlib only).

Source of the fact: ``MPI_Get_library_version`` of the ``libmpi`` shared object mapped into this process
(``/proc/self/maps``; Horovod's TensorFlow extension links it when Horovod was built with MPI, and it is mapped once
``horovod.tensorflow`` is imported). MPI-3.1 (section 8.1.1) lets ``MPI_Get_library_version`` be called before
``MPI_Init`` and after ``MPI_Finalize``, from any thread, so asking does not touch the run. It is the library the
ranks really loaded, not whichever ``mpirun``/``ompi_info`` comes first on PATH (a hybrid Slurm job's host MPI vs
the image's is the case where those differ) and it needs no mpi4py.

The library string starts ``Open MPI v4.1.4, package: ...`` (Open MPI), ``MPICH Version:\\t4.1`` (MPICH) or
``Intel(R) MPI Library 2021.6 ...``: ``record()`` keeps its first line and the implementation and version read
from it. Without a mapped ``libmpi`` (Horovod built with Gloo only, or not Linux) there is nothing to ask: None.
"""
import ctypes
import re
from collections import OrderedDict

#: MPICH's MPI_MAX_LIBRARY_VERSION_STRING (8192) is the largest of the implementations (Open MPI: 256).
MAX_LIBRARY_VERSION_STRING = 8192
MAPS = "/proc/self/maps"
_LIBMPI = re.compile(r"(/\S*/libmpi(?:_\w+)?\.so[.\d]*)$")
_PATTERNS = (("Open MPI", re.compile(r"^Open MPI v(\d[\w.]*)")),
             ("MPICH", re.compile(r"^MPICH Version:\s*(\d[\w.]*)")),
             ("Intel MPI", re.compile(r"^Intel\(R\) MPI Library (\d[\w.]*)")),
             ("MVAPICH2", re.compile(r"^MVAPICH2 Version\s*:\s*(\d[\w.]*)")))


def mapped_libmpi(maps_text):
    """The path of the first ``libmpi*.so*`` in ``maps_text`` (the content of ``/proc/PID/maps``), or None."""
    for line in maps_text.splitlines():
        found = _LIBMPI.search(line.strip())
        if found and "libmpi_cxx" not in found.group(1):
            return found.group(1)
    return None


def parse_library_version(text):
    """(implementation, version) of an ``MPI_Get_library_version`` string, e.g. ("Open MPI", "4.1.4");
    (None, None) for a library not listed in ``_PATTERNS``."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    for name, pattern in _PATTERNS:
        found = pattern.match(first)
        if found:
            return name, found.group(1).rstrip(",")
    return None, None


def library_version(path):
    """The ``MPI_Get_library_version`` string of the shared object at ``path`` (already mapped: ``ctypes``
    returns the loaded handle). Raises OSError / AttributeError when it cannot be called."""
    lib = ctypes.CDLL(path)
    buf = ctypes.create_string_buffer(MAX_LIBRARY_VERSION_STRING)
    length = ctypes.c_int(0)
    if lib.MPI_Get_library_version(buf, ctypes.byref(length)) != 0:
        raise OSError("MPI_Get_library_version returned an error")
    return buf.raw[:length.value].decode("utf-8", "replace").rstrip("\x00")


def record():
    """{"implementation", "version", "library" (the first line of its version string), "path", "source"} of the
    MPI this process has mapped, or None when none is (or ``/proc/self/maps`` cannot be read)."""
    try:
        with open(MAPS) as f:
            path = mapped_libmpi(f.read())
    except (IOError, OSError):
        return None
    if path is None:
        return None
    try:
        text = library_version(path)
    except (OSError, AttributeError) as e:
        return OrderedDict([("implementation", None), ("version", None), ("library", None), ("path", path),
                            ("source", "MPI_Get_library_version failed: %s" % e)])
    name, version = parse_library_version(text)
    return OrderedDict([("implementation", name), ("version", version),
                        ("library", text.strip().splitlines()[0] if text.strip() else ""), ("path", path),
                        ("source", "MPI_Get_library_version of %s (mapped in this process)" % path)])


def versions_entry(found):
    """The run record's ``versions`` entry for ``found`` (``record()``): {"openmpi": "4.1.4"} for Open MPI (the
    key the stack manifests' ``mpi`` row and bench.guard use), {"mpi": "MPICH 4.1"} for another MPI, {} for
    none."""
    if not found or not found["version"]:
        return {}
    if found["implementation"] == "Open MPI":
        return {"openmpi": found["version"]}
    return {"mpi": "%s %s" % (found["implementation"], found["version"])}
