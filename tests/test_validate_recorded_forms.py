"""A command is recorded as the user typed it (issue 24, "evidence in the bundle that is not read"): under ``sudo``,
inside ``sh -c``, piped, with ``NAME=value`` in front or the launcher's ``-x NAME=value``. Every observation reads
it as the shell ran it (``facts.parsers.observation.simple_commands``), so the handed cases 35, 36 and 39 give the
same verdict through ``invoke validate --from`` however their commands were written down."""
from __future__ import annotations

import json

import pytest

from facts.parsers import container, infiniband, kernel, nccl, nvidia_smi, versions
from facts.parsers.horovodrun import CHECK_BUILD, HOROVOD_IMPORT, LOCAL_RANKS
from facts.parsers.observation import first_command, simple_commands
from tests.lib.bundle_corpus import CORPUS, build
from validate.report import validate


@pytest.mark.parametrize("argv, want", [
    (("sh", "-c", "sudo dmesg -T | grep NVRM"), [("dmesg", "-T"), ("grep", "NVRM")]),
    (("bash", "-c", "NCCL_DEBUG=INFO timeout -s KILL 60 mpirun -np 2 a.out 2>&1 | tee run.log"),
     [("mpirun", "-np", "2", "a.out"), ("tee", "run.log")]),
    (("sh", "-c", "export A=1; env B=2 nice -n 5 /usr/bin/prog > out.txt && echo 'x|y'"),
     [("prog",), ("echo", "x|y")]),
    (("sudo", "-u", "svc", "-E", "/usr/bin/docker", "run", "--gpus", "all", "img"),
     [("docker", "run", "--gpus", "all", "img")]),
    (("sh", "-c", "cat 'unbalanced"), [("cat", "'unbalanced")]),
])
def test_simple_commands_are_what_the_shell_runs(argv, want):
    assert [c.argv for c in simple_commands(argv)] == want


def test_the_environment_each_command_saw():
    first, second = simple_commands(("sh", "-c", "export NCCL_DEBUG=INFO; X=1 mpirun a; mpirun b"), {"Y": "2"})
    assert first.env == {"Y": "2", "NCCL_DEBUG": "INFO", "X": "1"} and second.env == {"Y": "2", "NCCL_DEBUG": "INFO"}
    assert first_command(()).argv == ()


@pytest.mark.parametrize("observation, argv", [
    (kernel.KERNEL_LOG, ("sh", "-c", "dmesg -T | grep NVRM")),
    (kernel.KERNEL_LOG, ("sh", "-c", "sudo dmesg | grep -i nvrm")),
    (kernel.KERNEL_LOG, ("sh", "-c", "journalctl -kb | grep NVRM")),
    (kernel.KERNEL_LOG, ("sh", "-c", "grep NVRM /var/log/kern.log")),
    (container.DOCKER_GPUS, ("sudo", "docker", "run", "--rm", "--gpus=all", "img", "nvidia-smi", "-L")),
    (container.DOCKER_GPUS, ("sh", "-c", "docker run --rm --runtime nvidia img nvidia-smi -L 2>&1")),
    (container.DOCKER_INFO, ("sh", "-c", "sudo docker info | grep -i runtime")),
    (nccl.ALL_REDUCE_PERF, ("mpirun", "-np", "2", "-x", "NCCL_DEBUG=INFO", "python", "train.py")),
    (nccl.ALL_REDUCE_PERF, ("sh", "-c", "NCCL_DEBUG=INFO mpirun -np 2 python train.py 2>&1")),
    (nccl.ALL_REDUCE_PERF, ("srun", "--export=ALL,NCCL_DEBUG=info", "python", "train.py")),
    (nccl.ALL_REDUCE_PERF, ("mpiexec", "-genv", "NCCL_DEBUG", "INFO", "-n", "2", "python", "train.py")),
    (nccl.ALL_REDUCE_PERF, ("sh", "-c", "sudo /opt/nccl-tests/build/all_reduce_perf -b 8 -e 1G -g 8")),
    (versions.OMPI_INFO, ("sh", "-c", "sudo ompi_info -a | grep -i cuda")),
    (versions.NVCC, ("sh", "-c", "/usr/local/cuda/bin/nvcc -V | grep release")),
    (infiniband.IBV_DEVINFO, ("sh", "-c", "sudo ibv_devinfo -d mlx5_0 | egrep 'state|link_layer'")),
    (nvidia_smi.EXCERPT, ("sh", "-c", "sudo nvidia-smi | head -4")),
    (CHECK_BUILD, ("sh", "-c", "/opt/venv/bin/horovodrun --check-build 2>&1")),
    (container.SHM_DF, ("sh", "-c", "sudo df -k /dev/shm | tail -1")),
    (container.SHM_DF, ("docker", "exec", "trainer", "sh", "-c", "df -h /dev/shm")),
    (LOCAL_RANKS, ("sh", "-c", "NCCL_DEBUG=INFO timeout 600 mpirun -np 8 -H a:4,b:4 python train.py 2>&1")),
    (versions.CUDA_TOOLKIT, ("sh", "-c", "cat /usr/local/cuda-12.4/version.json")),
    (versions.CUDA_TOOLKIT, ("sh", "-c", "env | grep CUDA_VERSION")),
    (container.IMAGE_CUDA, ("sh", "-c", "sudo docker image inspect nvidia/cuda:9.2-base | grep CUDA_VERSION")),
    (container.NV_EXEC, ("sh", "-c", "sudo apptainer exec --nv -B /d:/d x.sif python t.py 2>&1 | tail")),
    (container.SINGULARITY_LIBS, ("sh", "-c", "apptainer exec --nv x.sif sh -c 'ls /.singularity.d/libs; "
                                              "echo LD=$LD_LIBRARY_PATH' 2>&1")),
    (container.HOST_LIBCUDA, ("sh", "-c", "ldconfig -p | grep libcuda")),
    (container.HOST_LIBCUDA, ("sh", "-c", "ls -l /usr/lib64/libcuda.so*")),
    (HOROVOD_IMPORT, ("sh", "-c", "python3 -c 'import horovod.tensorflow as hvd' 2>&1")),
])
def test_every_observation_reads_its_command_however_it_was_written(observation, argv):
    assert observation.also(argv, {}), argv


@pytest.mark.parametrize("observation, argv", [
    (kernel.KERNEL_LOG, ("sh", "-c", "echo dmesg")),
    (container.DOCKER_GPUS, ("docker", "run", "--rm", "img", "nvidia-smi")),
    (nccl.ALL_REDUCE_PERF, ("mpirun", "-x", "NCCL_DEBUG=WARN", "python", "train.py")),
    (nvidia_smi.EXCERPT, ("nvidia-smi",)),
    (container.SHM_DF, ("df", "-h", "/")),
    (LOCAL_RANKS, ("mpirun", "-np", "2", "-H", "a:1,b:1", "hostname")),  # validate's own probe
    (versions.CUDA_TOOLKIT, ("sh", "-c", "docker exec dev printenv | grep CUDA_VERSION")),  # the container's
    (container.HOST_LIBCUDA, ("singularity", "exec", "--nv", "x.sif", "ls", "/.singularity.d/libs/libcuda.so.1")),
    (container.NV_EXEC, ("singularity", "exec", "x.sif", "python", "t.py")),
])
def test_and_not_another_command(observation, argv):
    assert not observation.also(argv, {}), argv


def _judged(tmp_path, spec: str, rewrite, only: str) -> dict:
    """Build the corpus bundle ``spec``, let ``rewrite(evidence)`` change its recorded runs, then ``validate
    --from`` it: the one result of ``only``."""
    folder = tmp_path / spec
    build(CORPUS / ("%s.yaml" % spec), folder)
    index = folder / "bundle.json"
    doc = json.loads(index.read_text())
    for entry in doc["evidence"]:
        rewrite(entry)
    index.write_text(json.dumps(doc))
    validate(json_path=str(tmp_path / "r.json"), from_bundle=str(folder), only=[only])
    [result] = json.loads((tmp_path / "r.json").read_text())["results"]
    return result


@pytest.mark.parametrize("form", [
    lambda argv: (argv, {}),  # NCCL_DEBUG=INFO only in mpirun's -x, not in the recorded environment
    lambda argv: (["sh", "-c", "NCCL_DEBUG=INFO " + " ".join(a for a in argv if a not in ("-x", "NCCL_DEBUG=INFO"))
                   + " 2>&1"], {}),
])
def test_case_35_however_the_run_was_recorded(tmp_path, form):
    def rewrite(entry):
        if entry.get("argv", [""])[0] == "mpirun":
            entry["argv"], entry["env"] = form(entry["argv"])
    result = _judged(tmp_path, "case35-nccl-duplicate-gpu-local-rank-zero", rewrite, "nccl.init")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NCCL_DUPLICATE_GPU")


@pytest.mark.parametrize("form", [
    lambda argv: ["sudo"] + argv,
    lambda argv: ["sh", "-c", " ".join(argv).replace("--gpus=all", "--runtime nvidia") + " 2>&1"],
])
def test_case_36_however_the_run_was_recorded(tmp_path, form):
    def rewrite(entry):
        if entry.get("argv", [""])[0] == "docker":
            entry["argv"] = form(entry["argv"])
    result = _judged(tmp_path, "case36-docker-gpus-libnvidia-ml-load-failed", rewrite, "container.gpus")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND")


@pytest.mark.parametrize("command", ["dmesg -T | grep NVRM", "sudo dmesg | grep NVRM", "journalctl -k | grep NVRM",
                                     "grep NVRM /var/log/kern.log"])
def test_case_39_however_the_kernel_log_was_read(tmp_path, command):
    def rewrite(entry):
        if entry.get("argv") == ["sh", "-c", "dmesg | grep NVRM"]:
            entry["argv"] = ["sh", "-c", command]
    result = _judged(tmp_path, "case39-open-kernel-module-pre-turing-gpu", rewrite, "gpu.inventory")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU")
    assert result["action"] == "reload_module", result


def test_explain_shows_the_log_lines_as_written(tmp_path):
    """``invoke train --explain`` quotes NCCL's lines as they are: case 35 from a host whose NCCL prefix is
    ``gpu01:1234:1234`` (``:1234:`` is an emoji code to rich, which printed ``gpu01🔢1234``)."""
    from tests.lib.cli import run
    from tests.lib.paths import SHARED

    log = tmp_path / "slurm-1.out"
    text = (SHARED / "cases" / "35-nccl-duplicate-gpu-local-rank-zero.txt").read_text()
    log.write_text(text.replace("gpu-node-1:67917:67949", "gpu01:1234:1234").replace("gpu-node-1", "gpu01"))
    ran = run("train", "--explain", str(log), env={"COLUMNS": "400"})
    assert "gpu01:1234:1234 [0] init.cc:748 NCCL WARN Duplicate GPU" in ran.stdout, ran.stdout
    assert "\N{INPUT SYMBOL FOR NUMBERS}" not in ran.stdout
