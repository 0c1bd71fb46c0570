"""A command is recorded as the user typed it (issue 24, "evidence in the bundle that is not read"): under ``sudo``,
inside ``sh -c``, piped, with ``NAME=value`` in front or the launcher's ``-x NAME=value``. Every observation reads
it as the shell ran it (``facts.parsers.observation.simple_commands``), so the handed cases 35, 36 and 39 give the
same verdict through ``invoke validate --from`` however their commands were written down."""
from __future__ import annotations

import pytest

from chexstack.tools import ToolRun
from facts.parsers import container, infiniband, kernel, nccl, nvidia_smi, versions
from facts.parsers.horovodrun import CHECK_BUILD, HOROVOD_IMPORT, LOCAL_RANKS
from facts.parsers.observation import first_command, simple_commands
from tests.lib.bundle_corpus import judged


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
    (infiniband.IBSTAT, ("sh", "-c", "sudo ibstat")),
    (infiniband.IBSTAT, ("sh", "-c", "ibstat")),
    (infiniband.IBSTAT, ("sh", "-c", "ibstat | cat")),
    (infiniband.IBSTAT, ("ibstat", "mlx5_0")),
    (infiniband.IBSTAT, ("sudo", "/usr/sbin/ibstat", "mlx5_0", "1")),
    (infiniband.IBSTATUS, ("sh", "-c", "sudo ibstatus 2>&1")),
    (infiniband.IBSTATUS, ("ibstatus", "mlx5_0:1")),
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
    (infiniband.IBSTAT, ("ibstat", "-l")),  # the CA names only: no port state
    (infiniband.IBSTAT, ("sh", "-c", "sudo ibstat -p")),
    (infiniband.IBSTAT, ("ibstatus",)),
    (infiniband.IBSTATUS, ("ibstat",)),
    (container.SHM_DF, ("df", "-h", "/")),
    (LOCAL_RANKS, ("mpirun", "-np", "2", "-H", "a:1,b:1", "hostname")),  # validate's own probe
    (versions.CUDA_TOOLKIT, ("sh", "-c", "docker exec dev printenv | grep CUDA_VERSION")),  # the container's
    (container.HOST_LIBCUDA, ("singularity", "exec", "--nv", "x.sif", "ls", "/.singularity.d/libs/libcuda.so.1")),
    (container.NV_EXEC, ("singularity", "exec", "x.sif", "python", "t.py")),
])
def test_and_not_another_command(observation, argv):
    assert not observation.also(argv, {}), argv


def _judged(tmp_path, spec: str, rewrite, only: str) -> dict:
    """The one result of ``only`` on the corpus bundle ``spec`` whose recorded runs ``rewrite(evidence)`` changed."""
    return judged(spec, tmp_path, rewrite, [only])[only]


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
    ran = run("train", "--explain", str(log), env={"COLUMNS": "400"}, expect=1)
    assert "gpu01:1234:1234 [0] init.cc:748 NCCL WARN Duplicate GPU" in ran.stdout, ran.stdout
    assert "\N{INPUT SYMBOL FOR NUMBERS}" not in ran.stdout


#: ibstat's output of one CA (../shared/fixtures, 2 HDR CAs all Active) and of one port as ``ibstat CA PORT`` prints
#: it (infiniband-diags ibstat.c's port_dump, constructed: a header line ``CA: 'mlx5_0'``, no indentation)
ONE_PORT = ("CA: 'mlx5_0'\nPort 1:\nState: Active\nPhysical state: LinkUp\nRate: 200\nBase lid: 12\nLMC: 0\n"
            "SM lid: 1\nCapability mask: 0x2651e848\nPort GUID: 0x0c42a103006f1234\nLink layer: InfiniBand\n")


@pytest.mark.parametrize("argv, stdout, hcas", [
    (["sh", "-c", "sudo ibstat"], {"fixture": "ibstat-a100-hdr200-all-active.txt"}, None),
    (["sh", "-c", "ibstat | cat"], {"fixture": "ibstat-a100-hdr200-all-active.txt"}, None),
    (["ibstat", "mlx5_0", "1"], ONE_PORT, "mlx5_0"),
    (["sh", "-c", "sudo ibstatus"], {"fixture": "ibstatus-a100-hdr200-all-active.txt"}, None),
])
def test_case_05_with_the_host_ports_recorded_by_ibstat_as_typed(tmp_path, argv, stdout, hcas):
    """../shared/cases/05's Socket fallback, with the host's ACTIVE HCAs recorded by ``ibstat``/``ibstatus`` as
    typed instead of ``ibv_devinfo``: nccl.transport FAILs ``NCCL_SOCKET_FALLBACK`` naming the HCAs and the docker
    flags (never the WARN "HCAs were not recorded"; its code is the cause the case's log names: NCCL could not open
    the HCA), ib.ports reads the same run."""
    from tests.lib.bundle_corpus import text_of

    def rewrite(entry):
        if "ibv_devinfo" in " ".join(entry.get("argv") or []):
            entry["argv"] = argv
            (tmp_path / "bundle" / entry["stdout"]).write_text(text_of(stdout))

    got = judged("case05-nccl-socket-fallback-hca-active", tmp_path, rewrite, ["nccl.transport", "ib.ports"])
    transport, ports = got["nccl.transport"], got["ib.ports"]
    assert (transport["status"], transport["diagnosis"]) == ("FAIL", "NCCL_IB_DEVICE_NOT_VISIBLE"), transport
    assert transport["measured"].startswith("NCCL using Socket transport although host HCA mlx5_0")
    assert "--device=/dev/infiniband" in transport["remedy"] and "IPC_LOCK" in transport["remedy"]
    assert "not recorded" not in transport["measured"]
    assert ports["status"] == "PASS" and "IB ports Active/LinkUp at 200 Gb/s" in ports["measured"], ports
    assert ("one HCA recorded" in ports["measured"]) == (hcas is not None)


def test_ibstat_of_one_port_reads_its_ca_from_the_header_or_the_command():
    report, ca = infiniband.IBSTAT.parse(ToolRun(("ibstat", "mlx5_0", "1"), 0, ONE_PORT))
    assert ca == "mlx5_0" and [(p.name, p.state, p.rate_gbps) for p in report.ports] == [("mlx5_0:1", "Active", 200)]
    headless = ONE_PORT.split("\n", 1)[1]
    report, ca = infiniband.IBSTAT.parse(ToolRun(("sh", "-c", "sudo ibstat mlx5_3 1 | grep -v GUID"), 0, headless))
    assert ca == "mlx5_3" and [p.name for p in report.ports] == ["mlx5_3:1"]
    # ibstat's -d is debug output, not a device (unlike ibv_devinfo's)
    assert infiniband.IBSTAT.parse(ToolRun(("ibstat", "-d"), 0, ONE_PORT))[1] is None


def test_case_05_without_the_open_failure_is_the_socket_fallback(tmp_path):
    """The same node when NCCL's log only says ``NET/IB : No device found`` (no line on the HCA it could not open):
    the host's ACTIVE HCAs, recorded as ``sudo ibstat``, make it the Socket fallback (``NCCL_SOCKET_FALLBACK``)."""
    from tests.lib.bundle_corpus import text_of

    def rewrite(entry):
        path = tmp_path / "bundle" / str(entry.get("stdout"))
        if "ibv_devinfo" in " ".join(entry.get("argv") or []):
            entry["argv"] = ["sh", "-c", "sudo ibstat"]
            path.write_text(text_of({"fixture": "ibstat-a100-hdr200-all-active.txt"}))
        elif (entry.get("argv") or [""])[0] == "mpirun":
            path.write_text("".join(line + "\n" for line in path.read_text().splitlines()
                                    if "ibv_open_device" not in line and "Unable to open" not in line))

    transport = judged("case05-nccl-socket-fallback-hca-active", tmp_path, rewrite, ["nccl.transport"])[
        "nccl.transport"]
    assert (transport["status"], transport["diagnosis"]) == ("FAIL", "NCCL_SOCKET_FALLBACK"), transport
    assert transport["measured"].startswith("NCCL using Socket transport although host HCA mlx5_0, mlx5_1")
    assert "--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1" in transport["remedy"]
