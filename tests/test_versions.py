"""Version parsers on real tool outputs (../shared/fixtures) and the probe -> Table 1 rows mapping."""
from __future__ import annotations

import json
import subprocess
import sys

from facts.parsers import versions as v
from facts.versions import observed_versions
from tests.lib.paths import REPO


def test_nvcc_all_layouts(fixture_text):
    assert v.nvcc(fixture_text("nvcc-version-10.0.txt")) == "10.0.130"
    assert v.nvcc(fixture_text("nvcc-version-10.1-no-build-line.txt")) == "10.1.243"
    # CUDA >= 11 adds a trailing "Build cuda_..." line (fixture 49)
    assert v.nvcc(fixture_text("nvcc-version-11.1-with-build-line.txt")) == "11.1.105"


def test_cuda_version_file_txt_and_json(fixture_text):
    assert v.cuda_version_file(fixture_text("cuda-version-txt-10.0.txt")) == "10.0.130"
    assert v.cuda_version_file('{"cuda": {"name": "CUDA SDK", "version": "11.1.1"}}') == "11.1.1"
    assert v.cuda_version_file("garbage") is None


def test_cudnn_headers(fixture_text):
    assert v.cudnn_header(fixture_text("cudnn-h-grep-major-7.5.txt")) == "7.5.0"
    assert v.cudnn_header(fixture_text("cudnn_version-h-defines-8.0.4.txt")) == "8.0.4"
    assert v.cudnn_header('#include "cudnn_version.h"\n') is None  # cuDNN 8's cudnn.h: not "missing"


def test_mpi_versions(fixture_text):
    assert v.mpirun(fixture_text("mpirun-version-openmpi-2.1.1.txt")) == ("Open MPI", "2.1.1")
    assert v.ompi_info(fixture_text("ompi_info-parsable-head-5.0.2.txt"))["version"] == "5.0.2"
    assert v.ompi_info(fixture_text("ompi_info-parsable-cuda-support-false.txt"))["cuda_support"] is False
    # the `cuda` MPI extension is listed although CUDA support is not built (fixture 45)
    assert v.ompi_info(fixture_text("ompi_info-a-grep-cuda-not-built.txt"))["cuda_support"] is False


def test_misc_versions():
    assert v.gcc("gcc (Ubuntu 5.4.0-6ubuntu1~16.04.11) 5.4.0 20160609\nCopyright") == "5.4.0"
    assert v.python("3.5.2 (default, Nov 12 2018, 13:43:14) \n[GCC 5.4.0 20160609]") == "3.5.2"
    assert v.nccl_header("#define NCCL_MAJOR 2\n#define NCCL_MINOR 4\n#define NCCL_PATCH 7\n") == "2.4.7"
    assert v.library_file(["/x/libnccl.so.2", "/x/libnccl.so.2.4.7"], "libnccl") == "2.4.7"
    assert v.os_release({"/etc/os-release": 'NAME="Ubuntu"\nVERSION="16.04.6 LTS (Xenial Xerus)"\n'
                                            'VERSION_ID="16.04"\n'}) == ("Ubuntu", "16.04.6")
    assert v.os_release({"/etc/os-release": 'NAME="CentOS Linux"\nVERSION_ID="7"\n',
                         "/etc/redhat-release": "CentOS Linux release 7.4.1708 (Core)\n"}) \
        == ("CentOS Linux", "7.4.1708")


def test_probe_runs_here_and_maps_every_row():
    """The real probe on this host, read back through observed_versions."""
    out = subprocess.run([sys.executable, str(REPO / "facts" / "probe.py")], capture_output=True, text=True,
                         check=True, timeout=300).stdout
    obs = observed_versions(json.loads(out))
    from envs.manifest import COMPONENTS
    assert set(obs) == set(COMPONENTS)
    import tensorflow  # noqa: F401  (the venv's)
    assert obs["tensorflow"].version == tensorflow.__version__
    assert obs["python"].version == "%d.%d.%d" % sys.version_info[:3]
    assert obs["mpi"].name == "Open MPI"
    assert obs["cuda_driver"].version is None and "host property" in obs["cuda_driver"].problem


def test_probe_failure_is_a_problem_not_a_crash():
    obs = observed_versions({"tensorflow": {"error": "Traceback...\nImportError: No module named tensorflow"},
                             "horovod": {"error": "HorovodVersionMismatchError: built for 2.3.0"}})
    assert obs["tensorflow"].version is None and "No module named tensorflow" in obs["tensorflow"].problem
    assert "HorovodVersionMismatchError" in obs["horovod"].problem
    assert all(o.version is None for o in obs.values())
