"""Kinds of fault a reviewer found by feeding the ../shared/cases through ``invoke validate --from`` (each case's
``NN-*.expected.md`` states the verdict, cause and remedy): every test judges a recorded node (a corpus bundle of
``tests/data/bundles``, or a variant of one made here by string replacement on the case's text) and asserts the
verdict, the diagnosis code and the key words of the remedy."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.lib.bundle_corpus import CORPUS, build
from tests.lib.paths import CASES
from validate.report import validate


def case(prefix: str) -> str:
    return next(CASES.glob(prefix + "-*.txt")).read_text()


def judged(tmp_path, spec: dict | str, only: str) -> dict:
    """``validate --from`` the bundle of ``spec`` (a corpus name, or a spec as ``tests.lib.bundle_corpus`` reads
    it; a literal string is a variant of a case's text): the one result of ``only``."""
    if isinstance(spec, str):
        path = CORPUS / ("%s.yaml" % spec)
    else:
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(dict({"about": "a variant made by the test"}, **spec)))
    build(path, tmp_path / "bundle")
    validate(json_path=str(tmp_path / "r.json"), from_bundle=str(tmp_path / "bundle"), only=[only])
    [result] = json.loads((tmp_path / "r.json").read_text())["results"]
    return result


# -- 01: the stack's Horovod requirement adds to the baseline (TensorFlow + MPI), and a GPU stack needs NCCL --------

def _check_build(**marks: str) -> str:
    """Case 01's ``horovodrun --check-build`` with some marks changed: ``TensorFlow="X"`` (first occurrence)."""
    text = case("01").split("#   horovodrun --check-build\n")[1]
    for name, mark in marks.items():
        text = text.replace("[ ] %s\n" % name, "[%s] %s\n" % (mark, name), 1)
    return text


@pytest.mark.parametrize("stack", ["ngc", "hopper", "conda"])
def test_01_case_output_names_every_missing_requirement_for_any_gpu_stack(tmp_path, stack):
    spec = {"stack": stack, "evidence": [{"tool": ["horovodrun", "--check-build"], "stdout": _check_build()}]}
    result = judged(tmp_path, spec, "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_BUILD_INCOMPLETE")
    assert result["measured"].endswith("missing: framework=TensorFlow, controller=MPI, tensor_op=NCCL"), result
    assert "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_GPU_OPERATIONS=NCCL pip install --no-cache-dir" \
        in result["remedy"] and "--check-build as a RUN step" in result["remedy"]


@pytest.mark.parametrize("stack", ["ngc", "hopper", "conda", "cpu", None])
def test_01_a_build_without_mpi_never_passes(tmp_path, stack):
    """Horovod 0.28.1 with TensorFlow, Gloo and NCCL but ``[ ] MPI``: every launcher starts ranks under MPI."""
    text = _check_build(TensorFlow="X", NCCL="X").replace("v0.27.0", "v0.28.1")
    spec = {"stack": stack, "evidence": [{"tool": ["horovodrun", "--check-build"], "stdout": text}]}
    result = judged(tmp_path, spec, "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_BUILD_INCOMPLETE"), result
    assert result["measured"].endswith("missing: controller=MPI") and "HOROVOD_WITH_MPI=1" in result["remedy"]


@pytest.mark.parametrize("stack, passes", [("ngc", True), ("hopper", True), ("conda", True), ("cpu", False)])
def test_01_a_complete_build_passes_and_a_cpu_stack_still_needs_its_gloo(tmp_path, stack, passes):
    text = _check_build(TensorFlow="X", MPI="X", NCCL="X").replace("[X] Gloo", "[ ] Gloo")
    spec = {"stack": stack, "evidence": [{"tool": ["horovodrun", "--check-build"], "stdout": text}]}
    result = judged(tmp_path, spec, "horovod.env")
    if passes:
        assert result["status"] == "PASS" and "framework=TensorFlow, controller=MPI" in result["expected"], result
    else:  # the cpu stack builds with HOROVOD_WITH_GLOO=1: its gate requires Gloo
        assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_BUILD_INCOMPLETE")
        assert result["measured"].endswith("missing: controller=Gloo") and "HOROVOD_WITH_GLOO=1" in result["remedy"]


# -- 02: Horovod built for another TensorFlow, as its import says so ------------------------------------------------

def _mismatch_line() -> str:
    """The error every rank of case 02 printed (its expected.md, "Observed")."""
    text = next(CASES.glob("02-*.expected.md")).read_text()
    return next(l for l in text.splitlines() if "HorovodVersionMismatchError" in l).strip().strip("`")


def _mismatch_stderr() -> str:
    """A failed ``import horovod.tensorflow`` as Python prints it: the traceback, then HorovodVersionMismatchError's
    message on three lines (horovod/common/exceptions.py)."""
    return ("Traceback (most recent call last):\n  File \"<string>\", line 4, in <module>\n"
            "  File \"/usr/local/lib/python3.8/dist-packages/horovod/tensorflow/__init__.py\", line 27, in <module>\n"
            "    _check_extension_lambda()\n" + _mismatch_line() + "\n"
            "             This can result in unexpected behavior including runtime errors.\n"
            "             Reinstall Horovod using `pip install --no-cache-dir` to build with the new version.\n")


def _probe_spec(error: str) -> dict:
    return {"evidence": [{"fact": "horovod import probe", "value": {"error": error}}]}


def test_02_the_import_probe_keeps_the_versions_of_a_message_over_several_lines(monkeypatch):
    import subprocess

    from facts import horovod_gate

    def run(argv, **kw):
        return subprocess.CompletedProcess(argv, 1, "", _mismatch_stderr())

    monkeypatch.setattr(horovod_gate.subprocess, "run", run)
    error = horovod_gate.import_probe()["error"]
    assert error.startswith("horovod.common.exceptions.HorovodVersionMismatchError: Framework tensorflow installed "
                            "with version 2.3.0 but found version 2.4.1.") and "Reinstall Horovod" in error
    assert "Traceback" not in error


@pytest.mark.parametrize("error", [_mismatch_line(), "\n".join(_mismatch_stderr().splitlines()[4:])])
def test_02_version_mismatch_names_both_versions_and_reinstalling_horovod_last(tmp_path, error):
    result = judged(tmp_path, _probe_spec(error), "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_TF_MISMATCH"), result
    assert result["measured"] == "horovod built for tensorflow 2.3.0, runtime tensorflow 2.4.1"
    assert "reinstall horovod" in result["remedy"] and "after the final TF install" in result["remedy"]
    assert "--no-cache-dir" in result["remedy"] and "scripts/setup" not in result["remedy"]


@pytest.mark.parametrize("error", [
    _mismatch_stderr().strip().splitlines()[-1],  # an older probe kept only the last line: no versions
    "ImportError: /usr/local/lib/python3.6/dist-packages/horovod/tensorflow/mpi_lib.cpython-36m-x86_64-linux-gnu.so:"
    " undefined symbol: _ZN10tensorflow8OpKernel11TraceStringEPNS_15OpKernelContextEb",  # before Horovod 0.21
])
def test_02_the_same_mismatch_without_versions(tmp_path, error):
    result = judged(tmp_path, _probe_spec(error), "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_TF_MISMATCH"), result
    assert result["measured"].startswith("horovod built for another tensorflow than the one it imports")
    assert "reinstall horovod" in result["remedy"] and "after the final TF install" in result["remedy"]


def test_02_another_import_error_is_still_horovod_import(tmp_path):
    result = judged(tmp_path, _probe_spec("ModuleNotFoundError: No module named 'horovod'"), "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_IMPORT") and "scripts/setup" in result["remedy"]


# -- 04: /dev/shm's size is read in any recorded form of df; the local ranks are the recorded launch's -------------

_MPIRUN_04 = ("mpirun --allow-run-as-root -np 4 -bind-to none -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH "
              "-x PATH -mca pml ob1 -mca btl ^openib python tensorflow_mnist.py")
_CONTAINER_REMEDY = 'start the container with ipc_mode="host" or shm_size>=1g'


def _df_04(form: str) -> str:
    """Case 04's ``df -h /dev/shm``, or the same size as ``df -k`` / ``df -m`` print it."""
    text = case("04").split("$ df -h /dev/shm\n")[1].split("$ ")[0]
    if form == "-k":
        return text.replace("Size", "1K-blocks").replace("64M", "65536")
    if form == "-m":
        return text.replace("Size", "1M-blocks").replace("64M", "64")
    return text


def _shm_spec(argv: list, df: str, mpirun: str | None = _MPIRUN_04, **extra) -> dict:
    evidence = [{"tool": argv, "stdout": df}]
    if mpirun:
        evidence.append({"tool": ["sh", "-c", mpirun], "stdout": "", "rc": 1})
    return {"evidence": evidence + extra.get("more", [])}


@pytest.mark.parametrize("argv, form", [
    (["df", "-h", "/dev/shm"], "-h"),
    (["sh", "-c", "df -h /dev/shm"], "-h"),
    (["sh", "-c", "df -k /dev/shm"], "-k"),
    (["sh", "-c", "sudo df -m /dev/shm 2>&1"], "-m"),
    (["df", "-k", "/dev/shm"], "-k"),
])
def test_04_shm_size_in_any_recorded_form_without_the_in_container_fact(tmp_path, argv, form):
    result = judged(tmp_path, _shm_spec(argv, _df_04(form)), "container.shm")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NCCL_SHM_TOO_SMALL"), result
    assert result["measured"] == "shm too small for NCCL (64MiB)" and result["expected"] == ">= 1GiB for 4 local ranks"
    assert result["remedy"].startswith(_CONTAINER_REMEDY) and "mount -o remount,size=1g /dev/shm" in result["remedy"]
    assert any(d.startswith("4 local ranks: from the bundle's `sh -c mpirun") for d in result["details"]), result


@pytest.mark.parametrize("command", ["docker exec trainer df -h /dev/shm",
                                     "sudo docker exec -it trainer df -h /dev/shm",
                                     "kubectl exec worker-0 -- df -h /dev/shm"])
def test_04_df_run_inside_the_container_gives_the_containers_remedy(tmp_path, command):
    result = judged(tmp_path, _shm_spec(["sh", "-c", command], _df_04("-h")), "container.shm")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NCCL_SHM_TOO_SMALL"), result
    assert "%s; %s" % (result["measured"], result["remedy"]) == \
        'shm too small for NCCL (64MiB); start the container with ipc_mode="host" or shm_size>=1g'


@pytest.mark.parametrize("launch, ranks", [
    (_MPIRUN_04.replace("-np 4", "-np 8"), 8),
    ("NCCL_DEBUG=INFO mpirun -np 16 -H node1:8,node2:8 python train.py 2>&1 | tee run.log", 8),
    ("horovodrun -np 4 -H localhost:4 python train.py", 4),
    ("srun -N 2 -n 8 python train.py", 4),
    ("mpirun -np 8 --map-by ppr:2:node python train.py -n 5", 2),
])
def test_04_the_local_ranks_are_the_recorded_launchs(tmp_path, launch, ranks):
    result = judged(tmp_path, _shm_spec(["df", "-h", "/dev/shm"], _df_04("-h"), launch), "container.shm")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NCCL_SHM_TOO_SMALL"), result
    assert result["expected"] == ">= 1GiB for %d local ranks" % ranks, result


def test_04_without_a_recorded_launch_the_rank_count_is_said_to_be_assumed(tmp_path):
    result = judged(tmp_path, _shm_spec(["df", "-h", "/dev/shm"], _df_04("-h"), None), "container.shm")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NCCL_SHM_TOO_SMALL"), result
    assert result["expected"].startswith(">= 1GiB for 2 local ranks (assumed: ")
    assert result["remedy"].startswith(_CONTAINER_REMEDY)


def test_04_one_rank_on_the_node_needs_no_shared_memory(tmp_path):
    result = judged(tmp_path, _shm_spec(["df", "-h", "/dev/shm"], _df_04("-h"), "mpirun -np 1 python train.py"),
                    "container.shm")
    assert result["status"] == "PASS" and result["expected"] == ">= 1GiB for 1 local ranks", result


def test_04_the_in_container_fact_still_words_the_remedy_for_the_host(tmp_path):
    spec = _shm_spec(["df", "-h", "/dev/shm"], _df_04("-h"), more=[{"fact": "in container", "value": False}])
    result = judged(tmp_path, spec, "container.shm")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NCCL_SHM_TOO_SMALL")
    assert result["remedy"] == "mount -o remount,size=1g /dev/shm (and in /etc/fstab)"


def test_04_validates_own_probe_launches_say_nothing_of_the_jobs_ranks():
    """A collected bundle holds validate's own mpirun probes (one rank per host): its replay must judge as the node
    did, so they are no launch of the job's."""
    from facts.parsers.horovodrun import launch_ranks
    from validate.checks.container import RANK_PROBE

    assert launch_ranks(("mpirun", "--oversubscribe", "-np", "1", "sh", "-c", RANK_PROBE)) is None
    assert launch_ranks(("mpirun", "-np", "2", "-H", "a:1,b:1", "hostname")) is None
    assert launch_ranks(("mpirun", "-np", "1", "python", "train.py")).per_node == 1
    assert launch_ranks(("mpirun", "-np", "16", "--hostfile", "hosts", "python", "train.py")) is None


# -- 08: the toolkit's version in any recorded form; each version file on its own ----------------------------------

def _head_08() -> dict:
    return {"tool": ["sh", "-c", "nvidia-smi | head -4"], "stdout": {"case": "08", "after": "$ nvidia-smi | head -4"}}


def _toolkit_08() -> str:
    """The toolkit case 08's nvcc names (12.4.131)."""
    from facts.parsers import versions

    return versions.nvcc(case("08"))


@pytest.mark.parametrize("argv, output", [
    (["sh", "-c", "cat /usr/local/cuda/version.json"], '{\n   "cuda" : {\n      "name" : "CUDA SDK",\n'
                                                       '      "version" : "%s"\n   }\n}\n'),
    (["cat", "/usr/local/cuda-12.4/version.json"], '{"cuda": {"name": "CUDA SDK", "version": "%s"}}\n'),
    (["sh", "-c", "echo $CUDA_VERSION"], "%s\n"),
    (["sh", "-c", "env | grep CUDA_VERSION"], "CUDA_VERSION=%s\n"),
    (["sh", "-c", "docker exec dev printenv | grep -i cuda_version"], "CUDA_VERSION=%s\n"),
    (["printenv", "CUDA_VERSION"], "%s\n"),
])
def test_08_toolkit_version_in_any_recorded_form(tmp_path, argv, output):
    spec = {"evidence": [_head_08(), {"tool": argv, "stdout": output % _toolkit_08()}]}
    result = judged(tmp_path, spec, "gpu.driver_cuda")
    assert (result["status"], result["diagnosis"]) == ("WARN", "CUDA_MINOR_VERSION_COMPAT"), result
    assert "runs CUDA 12.4.131 only through minor-version compatibility" in result["measured"]
    assert "max CUDA 12.2" in result["measured"] and "upgrade the driver" in result["remedy"]


def test_08_version_txt_is_read_when_the_bundle_lacks_version_json(tmp_path):
    spec = yaml.safe_load((CORPUS / "gpu-dgx1-v100-driver-384-cuda-version-txt.yaml").read_text())
    spec["evidence"] = [e for e in spec["evidence"] if e.get("read") != "/usr/local/cuda/version.json"]
    result = judged(tmp_path, spec, "gpu.driver_cuda")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "CUDA_DRIVER_TOO_OLD"), result
    assert result["measured"] == "driver 384.183 too old for CUDA 10.0.130 (needs >= 410.48)"
    assert "upgrade the driver to >= 410.48" in result["remedy"] and "/usr/local/cuda/version.txt" in result["expected"]


def test_08_a_bundle_without_any_toolkit_record_names_each_form(tmp_path):
    result = judged(tmp_path, {"evidence": [_head_08()]}, "gpu.driver_cuda")
    assert (result["status"], result["diagnosis"]) == ("SKIP", "EVIDENCE_MISSING"), result
    assert all(w in result["measured"] for w in ("nvcc --version", "version.json", "version.txt", "CUDA_VERSION"))


# -- 06: cudaError 35 under --nv is CUDA_DRIVER_TOO_OLD; the image's recorded CUDA_VERSION is judged -----------------

def _smi_06() -> dict:
    return {"tool": ["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"],
            "stdout": {"case": "06", "after": "$ nvidia-smi --query-gpu=driver_version,name --format=csv,noheader",
                       "until": "#"}}


def _error35() -> str:
    """Case 06's runtime error when the container's requirement check is bypassed (its last line)."""
    return case("06").strip().splitlines()[-1] + "\n"


@pytest.mark.parametrize("argv, stream, error", [
    (["singularity", "exec", "--nv", "train.sif", "python", "train.py"], "stderr", None),
    (["sh", "-c", "apptainer exec --nv /shared/train.sif python train.py 2>&1"], "stdout", None),
    (["sudo", "singularity", "run", "--nv", "-B", "/data:/data", "train.sif"], "stderr", None),
    (["sh", "-c", "singularity exec --nv train.sif python train.py 2>&1 | tail -3"], "stdout",
     "RuntimeError: CUDA runtime implicit initialization on GPU:0 failed. Status: cudaErrorInsufficientDriver\n"),
    (["apptainer", "exec", "--nvccli", "torch.sif", "python", "-c", "import torch; torch.zeros(1).cuda()"], "stderr",
     "RuntimeError: The NVIDIA driver on your system is too old (found version 9010).\n"),
])
def test_06_cuda_runtime_error_under_nv_is_the_driver_too_old(tmp_path, argv, stream, error):
    spec = {"evidence": [_smi_06(), {"tool": argv, stream: error or _error35(), "rc": 1}]}
    result = judged(tmp_path, spec, "container.singularity_nv")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "CUDA_DRIVER_TOO_OLD"), result
    assert "upgrade the driver" in result["remedy"] and "image with CUDA <= 9.1" in result["remedy"], result


def test_06_the_case_as_recorded_judges_the_driver_against_the_images_cuda(tmp_path):
    result = judged(tmp_path, "case06-cuda-driver-too-old", "gpu.driver_cuda")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "CUDA_DRIVER_TOO_OLD"), result
    assert result["measured"] == "driver 390.48 too old for CUDA 9.2.88 (needs >= 396.26)"
    assert "image nvidia/cuda:9.2-runtime-ubuntu18.04" in result["expected"]
    assert result["remedy"] == "upgrade the driver to >= 396.26, or pick an image with CUDA <= 9.1"


@pytest.mark.parametrize("argv, output", [
    (["docker", "image", "inspect", "nvidia/cuda:9.2-runtime-ubuntu18.04"],
     '[{"Config": {"Env": ["PATH=/usr/local/cuda/bin:/usr/bin", "CUDA_VERSION=%s",\n'
     '"NVIDIA_REQUIRE_CUDA=cuda>=9.2"]}}]'),
    (["sh", "-c", "sudo docker inspect -f '{{.Config.Env}}' nvidia/cuda:9.2-runtime-ubuntu18.04"],
     "[PATH=/usr/local/cuda/bin:/usr/bin CUDA_VERSION=%s NVIDIA_REQUIRE_CUDA=cuda>=9.2]\n"),
    (["docker", "run", "--rm", "-e", "X=1", "nvidia/cuda:9.2-runtime-ubuntu18.04", "env"],
     "PATH=/usr/local/cuda/bin:/usr/bin\nCUDA_VERSION=%s\n"),
    (["singularity", "inspect", "--environment", "cuda-9.2.sif"], 'export CUDA_VERSION="%s"\n'),
])
def test_06_the_images_cuda_in_any_recorded_form(tmp_path, argv, output):
    import re

    version = re.search(r"^CUDA_VERSION=(\S+)", case("06"), re.M).group(1)
    result = judged(tmp_path, {"evidence": [_smi_06(), {"tool": argv, "stdout": output % version}]}, "gpu.driver_cuda")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "CUDA_DRIVER_TOO_OLD"), result
    assert result["measured"] == "driver 390.48 too old for CUDA 9.2.88 (needs >= 396.26)"
    assert "pick an image with CUDA <= 9.1" in result["remedy"]


# -- 21: --nv evidence read as typed; the host's libcuda from its listing; LD_LIBRARY_PATH judged on its own -------

_LIBS_21 = ("$ singularity exec --nv chexnet-hvd.sif sh -c "
            "'ls /.singularity.d/libs | grep -c libcuda; echo LD=$LD_LIBRARY_PATH'")
_TF_21 = ("$ singularity exec --nv chexnet-hvd.sif python -c \"import tensorflow as tf; "
          "print(tf.config.list_physical_devices('GPU'))\"")
_HOST_21 = "$ ls /usr/lib64/libcuda.so*            # on the host"


def _section_21(after: str) -> str:
    from tests.lib.bundle_corpus import text_of

    return text_of({"case": "21", "after": after})


def _libs_21(argv: list, output: str | None = None) -> dict:
    return {"tool": argv, "stdout": output if output is not None else _section_21(_LIBS_21)}


_HOST_LS = {"tool": ["sh", "-c", "ls /usr/lib64/libcuda.so*"], "stdout": {"case": "21", "after": _HOST_21}}


@pytest.mark.parametrize("argv", [
    ["sudo", "singularity", "exec", "--nv", "chexnet-hvd.sif", "sh", "-c",
     "ls /.singularity.d/libs | grep -c libcuda; echo LD=$LD_LIBRARY_PATH"],
    ["sh", "-c", "apptainer exec --nv /shared/chexnet-hvd.sif sh -c 'ls /.singularity.d/libs | grep -c libcuda; "
                 "echo LD=$LD_LIBRARY_PATH' 2>&1"],
    ["sh", "-c", "sudo -E apptainer exec --nv --cleanenv -B /data:/data chexnet-hvd.sif sh -c "
                 "'ls /.singularity.d/libs | grep -c libcuda; echo LD=$LD_LIBRARY_PATH'"],
])
def test_21_the_nv_listing_as_typed_with_the_hosts_ls(tmp_path, argv):
    result = judged(tmp_path, {"evidence": [_libs_21(argv), _HOST_LS]}, "container.singularity_nv")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NV_LIBS_NOT_BOUND"), result
    assert result["measured"].startswith("no libcuda.so.1 in /.singularity.d/libs although the host has it")
    assert "--bind /usr/lib64/libcuda.so.1:/.singularity.d/libs/libcuda.so.1" in result["remedy"]
    assert "upgrade Singularity/Apptainer" in result["remedy"]


@pytest.mark.parametrize("host, bind", [
    ({"tool": ["sh", "-c", "ldconfig -p | grep libcuda"],
      "stdout": "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib64/libcuda.so.1\n"
                "\tlibcuda.so (libc6,x86-64) => /usr/lib64/libcuda.so\n"}, "/usr/lib64/libcuda.so.1"),
    ({"tool": ["sh", "-c", "sudo find / -name 'libcuda.so*' 2>/dev/null"],
      "stdout": "/usr/lib/x86_64-linux-gnu/libcuda.so.1\n/usr/lib/x86_64-linux-gnu/libcuda.so.535.216.03\n"},
     "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
    ({"tool": ["ls", "-l", "/usr/lib64/libcuda.so.1"],
      "stdout": "lrwxrwxrwx 1 root root 20 Jan  1 00:00 /usr/lib64/libcuda.so.1 -> libcuda.so.440.33.01\n"},
     "/usr/lib64/libcuda.so.1"),
])
def test_21_any_listing_of_the_hosts_libcuda(tmp_path, host, bind):
    argv = ["singularity", "exec", "--nv", "chexnet-hvd.sif", "sh", "-c",
            "ls /.singularity.d/libs | grep -c libcuda; echo LD=$LD_LIBRARY_PATH"]
    result = judged(tmp_path, {"evidence": [_libs_21(argv), host]}, "container.singularity_nv")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NV_LIBS_NOT_BOUND"), result
    assert "--bind %s:/.singularity.d/libs/libcuda.so.1" % bind in result["remedy"]


def test_21_the_tensorflow_run_alone_says_libcuda_was_not_loadable(tmp_path):
    tf = {"tool": ["singularity", "exec", "--nv", "chexnet-hvd.sif", "python", "-c",
                   "import tensorflow as tf; print(tf.config.list_physical_devices('GPU'))"],
          "stdout": {"case": "21", "after": _TF_21}}
    result = judged(tmp_path, {"evidence": [tf, _HOST_LS]}, "container.singularity_nv")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NV_LIBS_NOT_BOUND"), result
    assert "Could not load dynamic library 'libcuda.so.1'" in result["measured"]
    assert "--bind /usr/lib64/libcuda.so.1:/.singularity.d/libs/libcuda.so.1" in result["remedy"]


_ARGV_21 = ["singularity", "exec", "--nv", "chexnet-hvd.sif", "sh", "-c",
            "ls /.singularity.d/libs | grep -c libcuda; echo LD=$LD_LIBRARY_PATH"]


def test_21_ld_library_path_reset_is_found_without_the_host(tmp_path):
    reset = _section_21(_LIBS_21).replace("0\n", "1\n", 1)
    reset = reset.replace(reset.splitlines()[1], "LD=/opt/conda/lib")
    result = judged(tmp_path, {"evidence": [_libs_21(_ARGV_21, reset)]}, "container.singularity_nv")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NV_LD_PATH_RESET"), result
    assert "append /.singularity.d/libs" in result["remedy"] and "/opt/conda/lib" in result["measured"]


def test_21_without_the_host_recorded_a_missing_libcuda_is_a_warning_naming_what_to_look_at(tmp_path):
    result = judged(tmp_path, {"evidence": [_libs_21(_ARGV_21)]}, "container.singularity_nv")
    assert (result["status"], result["diagnosis"]) == ("WARN", "NV_LIBS_NOT_BOUND"), result
    assert "ldconfig -p | grep libcuda.so.1" in result["remedy"] and "--bind" in result["remedy"]


def test_21_a_host_whose_loader_cache_has_no_libcuda(tmp_path):
    host = {"tool": ["sh", "-c", "ldconfig -p | grep libcuda"], "stdout": "", "rc": 1}
    result = judged(tmp_path, {"evidence": [_libs_21(_ARGV_21), host]}, "container.singularity_nv")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NV_HOST_LIBCUDA_MISSING"), result
    assert "install the NVIDIA driver" in result["remedy"]


def test_21_the_case_as_typed_is_the_documented_fail(tmp_path):
    result = judged(tmp_path, "case21-singularity-nv-transcript-as-typed", "container.singularity_nv")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NV_LIBS_NOT_BOUND"), result
    assert "runtime: singularity 3.4.2" in result["details"]


@pytest.mark.parametrize("command, form, headerless", [
    ('docker exec trainer sh -c "df -h /dev/shm"', "-h", False),
    ("kubectl exec worker-0 -- sh -c 'df -k /dev/shm | tail -1'", "-k", True),
    ("sudo df -m /dev/shm | tail -n 1", "-m", True),
])
def test_04_df_inside_a_shell_and_without_its_header(tmp_path, command, form, headerless):
    df = _df_04(form)
    result = judged(tmp_path, _shm_spec(["sh", "-c", command], df.splitlines(True)[-1] if headerless else df),
                    "container.shm")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NCCL_SHM_TOO_SMALL"), result
    assert result["measured"] == "shm too small for NCCL (64MiB)" and result["remedy"].startswith(_CONTAINER_REMEDY)


@pytest.mark.parametrize("argv, stack, prefix", [
    (["horovodrun", "-np", "2", "-H", "localhost:2", "python", "train.py"], None, "[1]<stderr>:"),
    (["sh", "-c", "mpirun --allow-run-as-root -np 4 python train.py 2>&1 | tee run.log"], "ngc", "[1,2]<stderr>:"),
    (["sh", "-c", "python3 -c 'import horovod.tensorflow as hvd; hvd.init()' 2>&1"], None, ""),
])
def test_02_a_recorded_import_or_launch_that_says_so(tmp_path, argv, stack, prefix):
    """Every rank of case 02 died at import: a recorded launch (or import) of any form says what the probe would."""
    log = "".join(prefix + line + "\n" for line in _mismatch_stderr().splitlines())
    result = judged(tmp_path, {"stack": stack, "evidence": [{"tool": argv, "stdout": log, "rc": 1}]}, "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_TF_MISMATCH"), result
    assert result["measured"] == "horovod built for tensorflow 2.3.0, runtime tensorflow 2.4.1"
    assert "reinstall horovod" in result["remedy"] and "after the final TF install" in result["remedy"]
