"""The validation cases of ../shared/cases give the outcome written beside them (NN-*.expected.md)."""
from __future__ import annotations

import re

from facts.parsers import container, infiniband, kernel, nccl, nvidia_smi, versions
from facts.parsers.horovod import CheckBuild, parse_check_build, version_mismatch
from tests.lib.cases import case
from validate.checks.container import judge_nv_libs, judge_shm
from validate.checks.gpu import judge_driver
from validate.checks.horovod import judge_build, judge_controller
from validate.checks.nccl import judge_transport


def test_01_partial_horovod_build_lists_exactly_what_is_missing():
    required = [("framework", "TensorFlow"), ("controller", "MPI"), ("tensor_op", "NCCL")]
    result = judge_build(parse_check_build(case("01")), required)
    assert result.status.value == "FAIL" and result.diagnosis == "HOROVOD_BUILD_INCOMPLETE"
    assert result.measured.endswith("missing: framework=TensorFlow, controller=MPI, tensor_op=NCCL")
    assert "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_GPU_OPERATIONS=NCCL pip install --no-cache-dir" \
        in result.remedy
    assert "--check-build as a RUN step" in result.remedy


def test_02_horovod_built_for_another_tensorflow():
    observed = ("horovod.common.exceptions.HorovodVersionMismatchError: Framework tensorflow installed with "
                "version 2.3.0 but found version 2.4.1.")
    framework, built_for, found = version_mismatch(observed)
    assert (framework, built_for, found) == ("tensorflow", "2.3.0", "2.4.1")
    build = CheckBuild("0.21.3", {"framework": {"TensorFlow": True}, "controller": {"MPI": True},
                                  "tensor_op": {"NCCL": True}})
    result = judge_build(build, [("framework", "TensorFlow")], tf_version=found, built_for=built_for)
    assert result.status.value == "FAIL" and result.diagnosis == "HOROVOD_TF_MISMATCH"
    assert result.measured == "horovod built for tensorflow 2.3.0, runtime tensorflow 2.4.1"
    assert "reinstall horovod" in result.remedy and "after the final TF install" in result.remedy


def test_04_shm_64mib_with_4_local_ranks():
    text = case("04")
    size = container.df_size(text)
    assert size == 64 * 2 ** 20
    result = judge_shm(size, local_ranks=4, container=True)
    assert result.status.value == "FAIL"
    assert "%s; %s" % (result.measured, result.remedy) == \
        'shm too small for NCCL (64MiB); start the container with ipc_mode="host" or shm_size>=1g'
    assert any("emptyDir {medium: Memory}" in d for d in result.details)
    # the log classifier names the root cause instead of "unhandled system error"
    log = nccl.parse_nccl_log(text)
    assert nccl.classify_nccl_failure(log) == "NCCL_SHM_EXHAUSTED"
    verdict = judge_transport(log)
    assert verdict.status.value == "FAIL" and verdict.diagnosis == "NCCL_SHM_EXHAUSTED"
    assert "size 9637888" in verdict.measured and "NCCL_SHM_DISABLE=1 only as a slower workaround" in verdict.remedy


def test_04_big_shm_or_one_rank_passes():
    assert judge_shm(2 ** 30, 4, True).status.value == "PASS"
    assert judge_shm(64 * 2 ** 20, 1, True).status.value == "PASS"


def test_05_socket_fallback_although_host_hca_is_active():
    text = case("05")
    host = text.split("# Container started")[0]
    ports = infiniband.parse_ibv_devinfo(host, device="mlx5_bond_0").ports
    assert [(p.name, p.state, p.link_layer) for p in ports] == [("mlx5_bond_0:1", "Active", "Ethernet")]
    result = judge_transport(nccl.parse_nccl_log(text), ports, multi_node=True)
    assert result.status.value == "FAIL"
    assert result.measured == "NCCL using Socket transport although host HCA mlx5_bond_0 is ACTIVE"
    assert result.diagnosis == "NCCL_IB_DEVICE_NOT_VISIBLE"
    assert "--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1" in result.remedy
    assert "--net=host" in result.remedy  # link_layer Ethernet: RoCE needs the host network
    assert "NCCL_IB_DISABLE=0 alone does nothing" in result.remedy


def test_06_driver_too_old_for_the_image_cuda():
    text = case("06")
    rows, _ = nvidia_smi.parse_query_csv(text.split("$ nvidia-smi")[1].split("\n", 1)[1].split("# Image")[0],
                                          fields=["driver_version", "name"])
    assert rows == [{"driver_version": "390.48", "name": "Tesla K80"}]
    cuda = re.search(r"^CUDA_VERSION=(\S+)", text, re.M).group(1)
    result = judge_driver(rows[0]["driver_version"], None, cuda, "image nvidia/cuda:9.2-runtime-ubuntu18.04")
    assert result.status.value == "FAIL" and result.diagnosis == "CUDA_DRIVER_TOO_OLD"
    assert result.measured == "driver 390.48 too old for CUDA 9.2.88 (needs >= 396.26)"
    assert "pick an image with CUDA <= 9.1" in result.remedy


def test_06_both_error_spellings_map_to_one_diagnosis():
    lines = [l for l in case("06").splitlines() if "unsatisfied condition" in l or "insufficient" in l]
    assert len(lines) == 2
    assert [container.classify_runtime_error(l) for l in lines] == [["CUDA_DRIVER_TOO_OLD"]] * 2


def test_08_cuda_version_of_nvidia_smi_is_the_drivers_maximum():
    text = case("08")
    report = nvidia_smi.parse_table(text)
    assert (report.driver_version, report.driver_max_cuda) == ("535.216.03", "12.2")
    assert not hasattr(report, "cuda_version") and not hasattr(report, "toolkit_version")
    toolkit = versions.nvcc(text)
    assert toolkit == "12.4.131"
    result = judge_driver(report.driver_version, report.driver_max_cuda, toolkit, "nvcc")
    assert result.status.value == "WARN" and result.diagnosis == "CUDA_MINOR_VERSION_COMPAT"
    assert "minor-version compatibility" in result.measured and "max CUDA 12.2" in " ".join(result.details)


def test_21_singularity_nv_did_not_bind_libcuda():
    text = case("21")
    inside = container.nv_libs(text.split("$ ls /usr/lib64")[0])
    assert inside["libcuda"] == 0 and "/.singularity.d/libs" in inside["ld_library_path"]
    host_has_libcuda = "libcuda.so.1" in text.split("$ ls /usr/lib64")[1]
    result = judge_nv_libs(inside, host_has_libcuda)
    assert result.status.value == "FAIL" and result.diagnosis == "NV_LIBS_NOT_BOUND"
    assert "--bind /usr/lib64/libcuda.so.1:/.singularity.d/libs/libcuda.so.1" in result.remedy
    assert versions.singularity(text.split("$ singularity version\n")[1]) == "3.4.2"


def test_21_reset_ld_library_path_is_its_own_diagnosis():
    result = judge_nv_libs({"libcuda": 1, "libs": ["libcuda.so.1"], "ld_library_path": "/opt/conda/lib"}, True)
    assert result.status.value == "FAIL" and result.diagnosis == "NV_LD_PATH_RESET"


def test_23_gloo_with_loopback_only():
    both = judge_controller(["lo"], gloo=True, mpi=True)
    assert both.status.value == "WARN" and both.diagnosis == "GLOO_LOOPBACK_ONLY"
    assert "horovodrun --mpi" in both.remedy and "--network host" in both.remedy
    gloo_only = judge_controller(["lo"], gloo=True, mpi=False)
    assert gloo_only.status.value == "FAIL"
    assert judge_controller(["lo", "eth0"], gloo=True, mpi=True).status.value == "PASS"


def test_31_p2p_hang_is_explained_by_acs_not_passed(tmp_path):
    """../shared/cases/31: all_reduce_perf initialises with P2P/CUMEM channels and prints no result row — a hang
    (never a transport PASS), explained from the node's evidence (the case's bundle in tests/data/bundles: ACSCtl of
    the GPUs' bridges, the IOMMU lines) with the ACS fix."""
    from tests.lib.bundle_corpus import CORPUS, build
    from validate.checks import Context
    from validate.checks.nccl import hang_evidence, judge_hang
    from validate.checks.topology import ACS_REMEDY
    from validate.evidence import Bundle, Replay

    run = case("31").split("$ NCCL_DEBUG=INFO ./build/all_reduce_perf")[1]
    log, perf = nccl.parse_nccl_log(run), nccl.parse_all_reduce_perf(run)
    assert log.init_complete and log.channels == ["P2P/CUMEM"] and not perf.rows
    transport = judge_transport(log, hung=True)
    assert transport.status.value == "FAIL" and transport.diagnosis == "NCCL_HANG"
    assert transport.measured == "single node: P2P/CUMEM set up, then no result: the all-reduce hung"
    build(CORPUS / "case31-acs-redirect-p2p-hang.yaml", tmp_path / "b")
    causes = hang_evidence(Context(evidence=Replay(Bundle.load(tmp_path / "b"))), log)
    result = judge_hang(log, 600, causes)
    assert result.status.value == "FAIL" and result.diagnosis == "NCCL_HANG"
    assert result.measured == (
        "all_reduce_perf hung after the communicator initialised (channels P2P/CUMEM): no result row in 600 s; "
        "likely cause: ACS redirect enabled on 0000:40:03.1, 0000:40:03.2 (upstream of 0000:41:00.0, "
        "0000:61:00.0): GPU P2P is routed through the root complex/IOMMU; NCCL may hang or run slowly")
    assert result.remedy == ACS_REMEDY and "pci=noacs" in ACS_REMEDY and "ECAP_ACS+6.w=0000" in ACS_REMEDY
    assert "NCCL_P2P_DISABLE=1" in ACS_REMEDY
    assert judge_hang(log, 600, []).remedy.startswith("isolate the transport")


def test_31_p2p_matrix_that_reports_no_p2p_explains_a_hang_over_p2p_channels():
    """``nvidia-smi topo -p2p r`` in nvidia-smi's layout (constructed: a PCIe box whose chipset does not support
    P2P, the CNS of its legend) recorded in a bundle; the case's P2P/CUMEM log that hung."""
    from chexstack.tools import ToolRun
    from facts.parsers.pcie import parse_p2p
    from validate.checks import Context
    from validate.checks.nccl import hang_evidence
    from validate.evidence import Bundle, Replay

    matrix = (" \tGPU0\tGPU1\t\n GPU0\tX\tCNS\t\n GPU1\tCNS\tX\t\n\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n"
              "  CNS  = Chipset not supported\n  GNS  = GPU not supported\n")
    assert parse_p2p(matrix) == {("GPU0", "GPU1"): "CNS", ("GPU1", "GPU0"): "CNS"}
    bundle = Bundle()
    bundle.add_tool(ToolRun(("nvidia-smi", "topo", "-p2p", "r"), 0, matrix))
    log = nccl.parse_nccl_log(case("31").split("$ NCCL_DEBUG=INFO ./build/all_reduce_perf")[1])
    [(finding, fix)] = hang_evidence(Context(evidence=Replay(bundle)), log)
    assert finding == "nvidia-smi topo -p2p r reports P2P reads unsupported (GPU0–GPU1 CNS) while NCCL uses P2P"
    assert fix.startswith("NCCL_P2P_DISABLE=1")


def test_35_duplicate_gpu_names_the_ranks_and_the_device_and_pins_gpus_not_the_network():
    """../shared/cases/35 (horovod/horovod#3949): hvd.local_rank() 0 on both ranks of one node, both pin GPU 0 and
    NCCL refuses the communicator: nccl.init names the ranks and the device; the remedy is rank->GPU pinning and the
    MPI mismatch behind a local rank of 0 everywhere, never RoCE GIDs or routes."""
    from validate.checks.nccl import judge_init

    log = nccl.parse_nccl_log(case("35"))
    assert [(d.device, d.ranks, d.pci) for d in log.duplicate_gpus] == [("3b000", [0, 1], "0000:3b:00.0")]
    assert log.hosts == ["gpu-node-1"] and nccl.classify_nccl_failure(log) == "NCCL_DUPLICATE_GPU"
    result = judge_init(log)
    assert result.status.value == "FAIL" and result.diagnosis == "NCCL_DUPLICATE_GPU"
    assert result.measured.startswith("the communicator never initialised: ranks 0 and 1 both on CUDA device 3b000")
    for words in ("hvd.local_rank()", "CUDA_VISIBLE_DEVICES", "which mpirun", "ldd", "horovodrun --check-build",
                  "--gpus-per-task"):
        assert words in result.remedy
    for wrong in ("GID", "route", "RoCE", "/dev/infiniband"):
        assert wrong not in result.remedy


def test_35_single_node_socket_selection_is_not_a_socket_fallback():
    """The same log through nccl.transport: one node, NET/IB found no device, no channel over NET/: the Socket
    selection carried nothing, so no "Socket fallback" and no --device=/dev/infiniband remedy; the run failed
    before a communicator initialised, so it is a FAIL with the duplicate GPU's cause."""
    log = nccl.parse_nccl_log(case("35"))
    result = judge_transport(log)
    assert result.status.value == "FAIL" and result.diagnosis == "NCCL_DUPLICATE_GPU"
    assert result.measured.startswith("single node: no network needed (the Socket network NCCL selected")
    assert "NCCL using Socket transport" not in result.measured and "/dev/infiniband" not in result.remedy
    assert "GID" not in result.remedy
    # between nodes the same selection is the TCP fallback, named as such (the transport's own code)
    between = judge_transport(log, multi_node=True)
    assert between.diagnosis == "NCCL_SOCKET_FALLBACK" and "NCCL using Socket transport" in between.measured
    two_hosts = nccl.parse_nccl_log(case("35").replace("[1,1]<stdout>:gpu-node-1:", "[1,1]<stdout>:gpu-node-2:"))
    assert two_hosts.hosts == ["gpu-node-1", "gpu-node-2"]
    assert judge_transport(two_hosts).diagnosis == "NCCL_SOCKET_FALLBACK"
    # a host HCA that is ACTIVE while NCCL sees none stays the fallback FAIL (../shared/cases/05)
    ports = infiniband.parse_ibv_devinfo(case("05").split("# Container started")[0], device="mlx5_bond_0").ports
    assert judge_transport(log, ports).measured == "NCCL using Socket transport although host HCA mlx5_bond_0 is ACTIVE"


def test_35_duplicate_gpu_of_any_ranks_and_device():
    """The kind, not the file: 8 ranks of one node on the same GPU (horovod/horovod#3929: "rank N and rank 0 both on
    CUDA device 1000"), in unprefixed NCCL lines."""
    from validate.checks.nccl import judge_init

    lines = ["node7:%d:%d [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.3<0>" % (100 + r, 100 + r)
             for r in range(8)]
    lines += ["node7:%d:%d [0] init.cc:1032 NCCL WARN Duplicate GPU detected : rank %d and rank 0 both on CUDA device "
              "1000" % (100 + r, 140 + r, r) for r in range(1, 8)]
    lines.append("RuntimeError: ncclCommInitRank failed: invalid usage")
    result = judge_init(nccl.parse_nccl_log("\n".join(lines)))
    assert result.status.value == "FAIL" and result.diagnosis == "NCCL_DUPLICATE_GPU"
    assert "ranks 0, 1, 2, 3, 4, 5, 6 and 7 all on CUDA device 1000 (PCI 0000:01:00.0)" in result.measured


def _case36() -> tuple[str, str]:
    """(the head of nvidia-smi, the failing docker run's output) of ../shared/cases/36."""
    head, run = case("36").split("$ nvidia-smi | head -4\n")[1].split("$ sudo docker run")
    return head, run.split("\n", 1)[1]


def test_36_nvidia_container_cli_cannot_load_nvml_while_the_host_driver_works():
    """../shared/cases/36 (NVIDIA/nvidia-docker#1711): nvidia-smi answers on the host (driver 530.30.02), the hook's
    nvidia-container-cli cannot load libnvidia-ml.so.1: the engine does not see the host's libraries (snap, Docker
    Desktop), never "the host has no driver"; the head of nvidia-smi gives no GPU count, so no "0 GPUs"."""
    from validate.checks.container import judge_container_gpus

    head, run = _case36()
    report = nvidia_smi.parse_table(head)
    assert (report.driver_version, report.gpus, report.error) == ("530.30.02", [], None)
    assert container.classify_runtime_error(run) == ["NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND"]
    assert container.library_not_loaded(run) == "libnvidia-ml.so.1"
    result = judge_container_gpus(run, False, None, None, "docker run --gpus all", report.driver_version)
    assert result.status.value == "FAIL" and result.diagnosis == "NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND"
    assert "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1" in result.measured
    assert result.remedy.startswith("the host's driver works (nvidia-smi: driver 530.30.02)")
    for words in ("snap", "Docker Desktop", "docker-ce", "docker.io", "nvidia-ctk runtime configure --runtime=docker",
                  "ldconfig -p | grep libnvidia-ml.so.1", "/etc/nvidia-container-runtime/config.toml"):
        assert words in result.remedy
    unknown = judge_container_gpus(run, False, None, None, "docker run --gpus all", None)
    for verdict in (result, unknown):
        text = " ".join([verdict.measured, verdict.expected, verdict.remedy] + verdict.details)
        assert "0 GPUs" not in text and "no driver" not in text and "install the NVIDIA driver" not in text
        assert "driver is not loaded" not in text and "not installed" not in text
    assert unknown.diagnosis == "NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND" and "run nvidia-smi on the host" in unknown.remedy


def test_36_any_library_nvidia_container_cli_fails_to_load():
    """The kind: the library by path (WSL's /usr/lib/wsl/lib), libcuda.so.1 of older libnvidia-container releases,
    and docker's own lines after the error do not replace the quoted failure."""
    from validate.checks.container import judge_container_gpus

    _, run = _case36()
    wsl = run.replace("failed: libnvidia-ml.so.1", "failed: /usr/lib/wsl/lib/libnvidia-ml.so.1")
    assert container.classify_runtime_error(wsl) == ["NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND"]
    cuda = run.replace("libnvidia-ml.so.1", "libcuda.so.1") + "ERRO[0000] error waiting for container: context " \
                                                                "canceled\n"
    result = judge_container_gpus(cuda, False, 4, None, "docker run --gpus all", "418.87.01")
    assert result.diagnosis == "NVIDIA_CONTAINER_CLI_LIBRARY_NOT_FOUND"
    assert result.measured.endswith("load library failed: libcuda.so.1: cannot open shared object file: no such file "
                                    "or directory: unknown.")
    assert "ldconfig -p | grep libcuda.so.1" in result.remedy and "driver 418.87.01" in result.remedy


def test_36_bundle_expects_the_hosts_gpus_not_zero(tmp_path):
    """Through --from: the bundle holds only the head of nvidia-smi, so the GPU count is unknown (never 0)."""
    import json

    from tests.lib.bundle_corpus import CORPUS, build
    from validate.report import validate

    build(CORPUS / "case36-docker-gpus-libnvidia-ml-load-failed.yaml", tmp_path / "b")
    code = validate(json_path=str(tmp_path / "r.json"), from_bundle=str(tmp_path / "b"), only=["container.gpus"])
    [gpus] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert code == 1 and gpus["diagnosis"] == "NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND"
    assert gpus["expected"] == "nvidia-smi -L inside a container lists the host's GPUs"
    assert "driver 530.30.02" in gpus["remedy"]


def _case39(after: str) -> str:
    from tests.lib.bundle_corpus import text_of

    return text_of({"case": "39", "after": after})


def test_39_open_kernel_module_refuses_a_pre_turing_gpu():
    """../shared/cases/39 (zzzhouuu/truenas-nvidia-drivers#20): a Tesla P4 (10de:1bb3) on the PCI bus, the loaded
    nvidia.ko is the open module, nvidia-smi "No devices found": the cause comes from the kernel log, the remedy is
    the proprietary kernel module flavour — never "driver not installed", never a hardware fault."""
    from validate.checks.gpu import judge_inventory

    smi, dmesg = _case39("$ nvidia-smi"), _case39("$ dmesg | grep NVRM")
    [refusal] = kernel.parse_open_module_refusals(dmesg)
    assert (refusal.device, refusal.pci_id, refusal.pre_turing) == ("0000:03:00.0", "10de:1bb3", True)
    assert kernel.parse_dmesg(dmesg) == []  # RmInitAdapter failed is no Xid
    for wording in (smi, smi.replace("No devices found", "No devices were found")):
        report = nvidia_smi.parse_table(wording)
        assert report.error.code == "NO_DEVICES" and report.error.message == wording.strip()
        result = judge_inventory(report, ["0000:03:00.0"], refusals=[refusal])
        assert result.status.value == "FAIL" and result.diagnosis == "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU"
        assert result.measured == (
            "1 NVIDIA GPU on the PCI bus, nvidia-smi sees none (%s): the loaded open nvidia.ko does not support "
            "0000:03:00.0 (PCI ID 10de:1bb3), which has no GPU System Processor (GSP)" % wording.strip())
        assert "pre-Turing" in " ".join(result.details)
        for words in ("proprietary kernel module flavour", "-m=kernel", "-open", "kernel.conf"):
            assert words in result.remedy
        text = " ".join([result.measured, result.remedy] + result.details)
        for wrong in ("not installed", "install the NVIDIA driver", "modprobe", "drain", "reset the GPU", "service"):
            assert wrong not in text
    # without the kernel log the verdict stays the driver's own words (no cause invented)
    assert judge_inventory(nvidia_smi.parse_table(smi), ["0000:03:00.0"]).diagnosis == "NO_DEVICES"


def test_a_run_asking_for_more_gpus_than_the_node_has_fails_the_inventory():
    """``invoke validate --gpus 4`` on a node without GPUs exited 0 (the GPU checks skipped): the run asked for 4.
    FAIL ``TOO_FEW_GPUS``, naming the count asked; without a count asked, the node without GPUs still SKIPs; a
    failure of the driver keeps its own code."""
    from facts.parsers.nvidia_smi import SmiReport
    from validate.checks.gpu import judge_inventory

    none = judge_inventory(SmiReport(), [], smi_missing=True, gpus_asked=4)
    assert (none.status, none.diagnosis, none.expected) == ("FAIL", "TOO_FEW_GPUS", "4 GPUs (--gpus 4)")
    assert none.measured == "not a GPU node (no nvidia-smi, no NVIDIA GPU in /sys/bus/pci)", none.measured
    assert judge_inventory(SmiReport(), [], smi_missing=True).status == "SKIP"
    smi = "No devices were found\n"
    assert judge_inventory(nvidia_smi.parse_table(smi), ["0000:03:00.0"], gpus_asked=1).diagnosis == "NO_DEVICES"


def test_39_any_refused_gpu_any_log_layout_and_what_nvidia_smi_prints_instead():
    """The kind: the same refusal for a Tesla V100 (10de:1db5, NVIDIA/open-gpu-kernel-modules#322) with a timestamp
    on every dmesg line, while nvidia-smi cannot talk to the driver; one refused GPU of two; a PCI ID in Turing's
    range or later (these have a GSP) is not told to leave the open modules."""
    from validate.checks.gpu import judge_inventory

    v100 = ("[    5.101] NVRM: The NVIDIA GPU 0000:1a:00.0 (PCI ID: 10de:1db5)\n"
            "[    5.101] NVRM: installed in this system is not supported by open\n"
            "[    5.101] NVRM: nvidia.ko because it does not include the required GPU\n"
            "[    5.101] NVRM: System Processor (GSP).\n"
            "[    5.102] NVRM: Please see the 'Open Linux Kernel Modules' and 'GSP\n")
    refusals = kernel.parse_open_module_refusals(v100)
    assert [(r.device, r.pci_id, r.pre_turing) for r in refusals] == [("0000:1a:00.0", "10de:1db5", True)]
    no_driver = nvidia_smi.parse_table("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                       "driver. Make sure that the latest NVIDIA driver is installed and running.\n")
    result = judge_inventory(no_driver, ["0000:1a:00.0"], refusals=refusals)
    assert result.diagnosis == "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU" and "-m=kernel" in result.remedy
    # a GPU nvidia-smi lists (its bus id in nvidia-smi's 8-digit domain form) is not said to be refused
    one = nvidia_smi.SmiReport(driver_version="580.65.06", gpus=[nvidia_smi.Gpu(0, "Tesla T4", "00000000:3B:00.0")])
    both = kernel.parse_open_module_refusals(v100 + v100.replace("0000:1a:00.0", "0000:3b:00.0"))
    assert judge_inventory(one, ["0000:3b:00.0", "0000:1a:00.0"], refusals=both).measured.startswith(
        "2 NVIDIA GPUs on the PCI bus, nvidia-smi sees 1: the loaded open nvidia.ko does not support 0000:1a:00.0 ")
    blackwell = kernel.parse_open_module_refusals(v100.replace("10de:1db5", "10de:2b85"))
    newer = judge_inventory(nvidia_smi.parse_table("No devices were found\n"), ["0000:1a:00.0"], refusals=blackwell)
    assert newer.diagnosis == "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU" and "Turing's range or later" in newer.remedy
    assert "proprietary" not in newer.remedy


def test_39_bundle_verdict_does_not_depend_on_nvidia_smis_exit_status(tmp_path):
    import json

    from tests.lib.bundle_corpus import CORPUS, build
    from validate.report import validate

    build(CORPUS / "case39-open-kernel-module-pre-turing-gpu.yaml", tmp_path / "b")
    index = tmp_path / "b" / "bundle.json"
    verdicts = []
    for rc in (6, 0):
        doc = json.loads(index.read_text())
        next(e for e in doc["evidence"] if e.get("argv") == ["nvidia-smi"])["rc"] = rc
        index.write_text(json.dumps(doc))
        code = validate(json_path=str(tmp_path / "r.json"), from_bundle=str(tmp_path / "b"), only=["gpu.inventory"])
        [inventory] = json.loads((tmp_path / "r.json").read_text())["results"]
        verdicts.append((code, inventory["status"], inventory["diagnosis"], inventory["measured"]))
    assert verdicts[0] == verdicts[1] and verdicts[0][:3] == (1, "FAIL", "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU")


def test_35_the_table_shows_the_remedy_as_written(tmp_path):
    """The table prints cells as text: ``gpus[hvd.local_rank()]`` and a rank prefix ``[1,0]`` are not rich markup."""
    from chexstack.console import console
    from launch.failure import DUPLICATE_GPU_REMEDY
    from tests.lib.bundle_corpus import CORPUS, build
    from validate.report import validate

    build(CORPUS / "case35-nccl-duplicate-gpu-local-rank-zero.yaml", tmp_path / "b")
    width = console.width
    console.width = 2000
    try:
        with console.capture() as shown:
            validate(from_bundle=str(tmp_path / "b"), only=["nccl.init"])
    finally:
        console.width = width
    assert "gpus[hvd.local_rank()]" in DUPLICATE_GPU_REMEDY and DUPLICATE_GPU_REMEDY in shown.get()
