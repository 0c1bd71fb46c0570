"""The validation cases of ../shared/cases give the outcome written beside them (NN-*.expected.md)."""
from __future__ import annotations

import re

import pytest

from tests.lib.paths import CASES
from validate.checks.container import judge_nv_libs, judge_shm
from validate.checks.gpu import judge_driver
from validate.checks.horovod import judge_build, judge_controller
from validate.checks.nccl import judge_transport
from facts.parsers import container, infiniband, nccl, nvidia_smi, versions
from facts.parsers.horovod import CheckBuild, parse_check_build, version_mismatch


def case(prefix: str) -> str:
    return next(CASES.glob(prefix + "-*.txt")).read_text()


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
    from validate.checks import Context
    from validate.checks.nccl import hang_evidence
    from chexstack.tools import ToolRun
    from validate.evidence import Bundle, Replay
    from facts.parsers.pcie import parse_p2p

    matrix = (" \tGPU0\tGPU1\t\n GPU0\tX\tCNS\t\n GPU1\tCNS\tX\t\n\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n"
              "  CNS  = Chipset not supported\n  GNS  = GPU not supported\n")
    assert parse_p2p(matrix) == {("GPU0", "GPU1"): "CNS", ("GPU1", "GPU0"): "CNS"}
    bundle = Bundle()
    bundle.add_tool(ToolRun(("nvidia-smi", "topo", "-p2p", "r"), 0, matrix))
    log = nccl.parse_nccl_log(case("31").split("$ NCCL_DEBUG=INFO ./build/all_reduce_perf")[1])
    [(finding, fix)] = hang_evidence(Context(evidence=Replay(bundle)), log)
    assert finding == "nvidia-smi topo -p2p r reports P2P reads unsupported (GPU0–GPU1 CNS) while NCCL uses P2P"
    assert fix.startswith("NCCL_P2P_DISABLE=1")
