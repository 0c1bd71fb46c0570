"""The MPI library the trainer's ranks run under (trainer.mpilib): MPI_Get_library_version of the libmpi Horovod
mapped into the process, recorded in throughput.json's versions (``openmpi``) for bench.guard."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.lib.paths import REPO
from trainer import mpilib

#: What Debian bookworm's Open MPI 4.1.4 answers (this machine, ``MPI_Get_library_version``); MPICH's first line as
#: MPICH 4.x prints it (mpich/src/mpi/init/library_version.c: "MPICH Version:\t%s\n...").
OPEN_MPI = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022\x00"
MPICH = "MPICH Version:\t4.1\nMPICH Release date:\tFri Jan 27 13:54:44 CST 2023\n"


def test_the_library_string_names_implementation_and_version():
    assert mpilib.parse_library_version(OPEN_MPI) == ("Open MPI", "4.1.4")
    assert mpilib.parse_library_version(MPICH) == ("MPICH", "4.1")
    assert mpilib.parse_library_version("Some MPI 1.0") == (None, None)
    assert mpilib.versions_entry({"implementation": "Open MPI", "version": "4.1.4"}) == {"openmpi": "4.1.4"}
    assert mpilib.versions_entry({"implementation": "MPICH", "version": "4.1"}) == {"mpi": "MPICH 4.1"}
    assert mpilib.versions_entry(None) == {}


def test_the_mapped_libmpi_is_found_in_proc_maps_and_libmpi_cxx_is_not_it():
    maps = ("7f0000000000-7f0000001000 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libmpi_cxx.so.40.30.1\n"
            "7f0000002000-7f0000003000 r-xp 00000000 08:01 2 /usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4\n")
    assert mpilib.mapped_libmpi(maps) == "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4"
    assert mpilib.mapped_libmpi("7f-8f r-xp 0 0 0 /usr/lib/libc.so.6\n") is None


def test_a_process_with_horovod_records_the_mpi_ompi_info_names():
    """The real thing: after ``import horovod.tensorflow`` (as the trainer's ranks do), the record's version is
    the one ``ompi_info --version`` of this machine's Open MPI prints, from the library Horovod mapped."""
    code = ("import json, horovod.tensorflow; from trainer import mpilib; print(json.dumps(mpilib.record()))")
    ran = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    assert ran.returncode == 0, ran.stderr[-2000:]
    found = json.loads(ran.stdout.strip().splitlines()[-1])
    ompi = subprocess.run(["ompi_info", "--version"], capture_output=True, text=True).stdout.split()
    assert (found["implementation"], "v" + found["version"]) == ("Open MPI", ompi[2])
    assert "libmpi.so" in found["path"] and found["path"] in found["source"]
