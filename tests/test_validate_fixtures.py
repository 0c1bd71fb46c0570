"""Every file in ../shared/fixtures gives the verdict ../shared/fixtures/SOURCES.md documents (row numbers in the
comments), through the same parser + judge the check uses on a live node — judge by judge, with the parameters a
node would give (host ports, GPU model). The same fixtures as recorded nodes through ``invoke validate --from``:
tests/test_validate_bundles.py.

VERDICTS: fixture -> (judge on its parsed text) -> status + text the result must contain.
VALUES: fixtures that are version sources (no verdict of their own) -> the value parsed.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from chexstack.tools import ToolRun
from facts.parsers import container, nccl, versions
from facts.parsers import infiniband as ib
from facts.parsers import nvidia_smi as smi
from facts.parsers.dcgm import parse_dcgmi_diag
from facts.parsers.horovod import parse_check_build
from facts.parsers.infiniband import IbPort
from facts.parsers.kernel import parse_dmesg
from facts.parsers.mpi import classify_launch, launch_failure
from facts.parsers.topology import parse_topo
from tests.lib.paths import FIXTURES
from validate.checks.container import judge_container_gpus, judge_docker
from validate.checks.gpu import judge_dcgm, judge_driver, judge_ecc, judge_inventory, judge_persistence, judge_xid
from validate.checks.horovod import judge_build
from validate.checks.infiniband import judge_ports, judge_write_bw
from validate.checks.mpi import judge_launch_failure, judge_mpi_version
from validate.checks.nccl import Floor, busbw_floor, judge_busbw, judge_init, judge_transport
from validate.checks.topology import judge_gpu_nic, judge_nvlink, judge_nvlink_links


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def query(name: str) -> smi.SmiReport:
    rows, problems = smi.parse_query_csv(text(name))
    return smi.SmiReport(driver_version=rows[0].get("driver_version"), gpus=smi.gpus_from_query(rows),
                         problems=problems)


def driver_vs_nvcc(table: str, nvcc: str):
    report = smi.parse_table(text(table))
    return judge_driver(report.driver_version, report.driver_max_cuda, versions.nvcc(text(nvcc)), "nvcc")


def docker_info(gpu_node: bool):
    runtimes, default = container.docker_runtimes(text("docker-info-grep-runtime-no-nvidia.txt"))
    return judge_docker({"Runtimes": dict.fromkeys(runtimes, {}), "DefaultRuntime": default}, None, gpu_node)


#: Constructed: the kind of line NVIDIA/nccl-tests#185 reports after fixture 38's selection (ibv_modify_qp: Network
#: is unreachable), to show that an error after the selection fails the run.
ROCE_QP_FAILURE = ("dgxh100-4:460770:460842 [0] NCCL WARN Call to ibv_modify_qp failed with error Network is "
                   "unreachable\n")
IB_HOST = [IbPort("mlx5_0", 1, "Active", "LinkUp", 100.0, "InfiniBand")]
TF_MPI_NCCL = [("framework", "TensorFlow"), ("controller", "MPI"), ("tensor_op", "NCCL")]

VERDICTS = [
    # 1, 2, 3: the default table; the header's CUDA Version is the driver's maximum
    ("nvidia-smi-h100x8-550.txt", lambda t: judge_inventory(smi.parse_table(t)), "PASS",
     "8× NVIDIA H100 80GB HBM3, 81559 MiB each, driver 550.90.07"),
    ("nvidia-smi-h200x8-550-persistence-off.txt", lambda t: judge_persistence(smi.parse_table(t).gpus), "WARN",
     "persistence mode off on GPU 0,1,2,3,4,5,6,7"),
    ("nvidia-smi-h200x8-550-persistence-off.txt", lambda t: judge_inventory(smi.parse_table(t)), "PASS",
     "8× NVIDIA H200"),
    ("nvidia-smi-dgx1-v100x8-384.txt", lambda t: judge_inventory(smi.parse_table(t)), "PASS",
     "8× Tesla V100-SXM2..., 32502 MiB each, driver 384.183"),
    # the run's --gpus: as many as the node has pass, more is TOO_FEW_GPUS
    ("nvidia-smi-dgx1-v100x8-384.txt", lambda t: judge_inventory(smi.parse_table(t), gpus_asked=8), "PASS",
     "8× Tesla V100-SXM2"),
    ("nvidia-smi-dgx1-v100x8-384.txt", lambda t: judge_inventory(smi.parse_table(t), gpus_asked=16), "FAIL",
     "8× Tesla V100-SXM2..., 32502 MiB each, driver 384.183"),
    ("nvidia-smi-dgx1-v100x8-384.txt", lambda t: driver_vs_nvcc("nvidia-smi-dgx1-v100x8-384.txt",
                                                                 "nvcc-version-10.0.txt"), "FAIL",
     "driver 384.183 too old for CUDA 10.0.130 (needs >= 410.48)"),
    # 4, 5, 6: -q text and XML (two DTD versions)
    ("nvidia-smi-q-h100x8-535.txt", lambda t: judge_ecc(smi.parse_q_text(t).gpus), "PASS",
     "no uncorrectable errors or pending retirements on 8 GPU(s)"),
    ("nvidia-smi-q-h100x8-535.txt", lambda t: judge_persistence(smi.parse_q_text(t).gpus), "PASS", "on for 8"),
    ("nvidia-smi-q-x-a100-sxm4-mig-v12.xml", lambda t: judge_persistence(smi.parse_q_xml(t).gpus), "WARN",
     "persistence mode off"),
    ("nvidia-smi-q-x-a100-sxm4-mig-v12.xml", lambda t: judge_ecc(smi.parse_q_xml(t).gpus), "PASS", "ECC on"),
    ("nvidia-smi-q-x-tesla-t4-v11.xml", lambda t: judge_ecc(smi.parse_q_xml(t).gpus), "PASS", "ECC on"),
    # 7, 8: --query-gpu CSV ([N/A], units in header and values)
    ("nvidia-smi-query-gpu-csv-h100-590-allfields.txt", lambda t: judge_inventory(
        query("nvidia-smi-query-gpu-csv-h100-590-allfields.txt")), "PASS", "1× NVIDIA H100 80GB HBM3"),
    ("nvidia-smi-query-gpu-csv-h100-590-allfields.txt", lambda t: judge_ecc(
        query("nvidia-smi-query-gpu-csv-h100-590-allfields.txt").gpus), "PASS", "ECC on"),
    ("nvidia-smi-query-gpu-csv-h200x8-units.txt", lambda t: judge_inventory(
        query("nvidia-smi-query-gpu-csv-h200x8-units.txt")), "PASS",
     "8× NVIDIA H200, 143771 MiB each, driver 570.211.01"),
    # 10: "Successfully ran" and still a Fail row; the wrapped Error cell is joined
    ("dcgmi-diag-r1-dcgm3.1.8-h200x8-persistence-fail.txt", lambda t: judge_dcgm(parse_dcgmi_diag(t)), "FAIL",
     "Persistence Mode: Fail"),
    # 11
    ("nvidia-smi-nvlink-status-a100x8.txt", lambda t: judge_nvlink_links(smi.parse_nvlink_status(t)), "PASS",
     "8 GPUs × 12 links at 25 GB/s"),
    # 12-18: topology
    ("nvidia-smi-topo-dgx1-like-v100-sxm2-8gpu.txt", lambda t: judge_nvlink(parse_topo(t), "Tesla V100-SXM2-32GB"),
     "PASS", "16 of 28 GPU pairs NVLinked; 4 peers per GPU"),
    ("nvidia-smi-topo-dgx1-like-v100-sxm2-8gpu.txt", lambda t: judge_nvlink(parse_topo(t), None), "PASS",
     "16 of 28 GPU pairs"),
    ("nvidia-smi-topo-4x-v100-sxm2-nv2-dell-c4140-tabs.txt",
     lambda t: judge_nvlink(parse_topo(t), "Tesla V100-SXM2-16GB"), "PASS", "6 of 6 GPU pairs NVLinked"),
    ("nvidia-smi-topo-4x-v100-sxm2-nv2-dell-c4140-tabs.txt", lambda t: judge_gpu_nic(parse_topo(t)), "WARN",
     "GPU0→mlx5_0 NODE"),
    ("nvidia-smi-topo-h200x8-nv18-8nic-legend-tabs.txt", lambda t: judge_nvlink(parse_topo(t), "NVIDIA H200"),
     "PASS", "28 of 28 GPU pairs NVLinked"),
    ("nvidia-smi-topo-h200x8-nv18-8nic-legend-tabs.txt", lambda t: judge_gpu_nic(parse_topo(t)), "PASS",
     "every GPU has a NIC at PIX/PXB"),
    ("nvidia-smi-topo-h200-vm-1gpu-ansi-header.txt", lambda t: judge_nvlink(parse_topo(t), "NVIDIA H200"), "SKIP",
     "1 GPU on this node: no pair to link"),
    ("nvidia-smi-topo-3gpu-partial-nv4-2nic-legend.txt", lambda t: judge_nvlink(parse_topo(t), None), "WARN",
     "GPU2 has no NVLink peer"),
    ("nvidia-smi-topo-pcie-5gpu-2numa-sys-phb-node.txt", lambda t: judge_nvlink(parse_topo(t), None), "WARN",
     "PCIe only, GPU pairs across NUMA nodes (SYS)"),
    ("nvidia-smi-topo-pcie-2x5090-phb-tabs.txt", lambda t: judge_nvlink(parse_topo(t), "NVIDIA GeForce RTX 5090"),
     "WARN", "0 of 1 GPU pairs NVLinked: PCIe only"),
    # 19-30: InfiniBand ports
    ("ibstat-h100-ndr400-all-active.txt", lambda t: judge_ports(ib.parse_ibstat(t)), "PASS",
     "8/8 IB ports Active/LinkUp at 400 Gb/s; 1 Ethernet port(s) not counted"),
    ("ibstat-h100-mixed-some-down-disabled.txt", lambda t: judge_ports(ib.parse_ibstat(t)), "WARN",
     "8/8 IB ports Active/LinkUp at 400 Gb/s; 4 Ethernet port(s) not counted; "
     "Ethernet port(s) down: mlx5_2:1, mlx5_7:1, mlx5_8:1"),
    ("ibstat-a100-hdr200-all-active.txt", lambda t: judge_ports(ib.parse_ibstat(t)), "PASS",
     "8/8 IB ports Active/LinkUp at 200 Gb/s; 1 Ethernet port(s) not counted"),
    ("ibstat-a100-ibpanic-exit255.txt", lambda t: judge_ports(ib.parse_ibstat(t)), "FAIL",
     "mlx5_8: ibstat could not read it"),
    ("ibstat-edr100-connectx4-active.txt", lambda t: judge_ports(ib.parse_ibstat(t)), "PASS",
     "1/1 IB ports Active/LinkUp at 100 Gb/s"),
    ("ibstat-hdr200-state-down-linkup-no-sm-lid65535.txt", lambda t: judge_ports(ib.parse_ibstat(t)), "FAIL",
     "no subnet manager / port not initialized (not a cable fault)"),
    ("ibstat-mlx5-port-down-polling-redacted-guids.txt", lambda t: judge_ports(ib.parse_ibstat(t)), "FAIL",
     "mlx5_10:1: Physical state Polling: no link partner"),
    ("ibstat-mlx5-port-down-disabled-truncated.txt", lambda t: judge_ports(ib.parse_ibstat(t)), "FAIL",
     "mlx5_8:1: port disabled"),
    ("ibstatus-a100-hdr200-all-active.txt", lambda t: judge_ports(ib.parse_ibstatus(t), source="ibstatus"), "PASS",
     "IB ports Active/LinkUp at 200 Gb/s"),
    ("ibv_devinfo-mlx4-fdr-2hca-port2-down-tabs.txt", lambda t: judge_ports(ib.parse_ibv_devinfo(t),
                                                                            source="ibv_devinfo"), "WARN",
     "2/4 IB ports Active/LinkUp (rate not reported by ibv_devinfo); mlx4_1:2"),
    ("ibv_devinfo-azure-ndv5-mlx5_ib-8x-ndr-plus-an0-eth.txt",
     lambda t: judge_ports(ib.parse_ibv_devinfo(t), source="ibv_devinfo"), "PASS",
     "8/8 IB ports Active/LinkUp (rate not reported by ibv_devinfo); 1 Ethernet port(s) not counted"),
    ("sysfs-infiniband-ports-grep-edr-active.txt", lambda t: judge_ports(ib.parse_sysfs(t), source="sysfs"), "PASS",
     "2/2 IB ports Active/LinkUp at 100 Gb/s"),
    # 31-34: nccl-tests
    ("nccl-tests-all_reduce_perf-2node-16x-a100-roce-healthy.txt",
     lambda t: judge_busbw(nccl.parse_all_reduce_perf(t), Floor(180.0, "2 nodes × 8 A100, RoCE", "SOURCES.md #31"),
                           16), "PASS", "busbw 188.65 GB/s (# Avg bus bandwidth), 16 ranks"),
    ("nccl-tests-all_reduce_perf-8x-h200-8G-nvls.txt",
     lambda t: judge_busbw(nccl.parse_all_reduce_perf(t), busbw_floor("NVIDIA H200", 8, 1, None), 8), "PASS",
     "busbw 476.97 GB/s (# Avg bus bandwidth), 8 ranks"),
    ("nccl-tests-all_reduce_perf-2node-independent-runs-interleaved-excerpt.txt",
     lambda t: judge_busbw(nccl.parse_all_reduce_perf(t), None, 16), "FAIL", "ranks did not form one communicator"),
    ("nccl-tests-2080ti-nvlink-bridge-tail-excerpt.txt",
     lambda t: judge_busbw(nccl.parse_all_reduce_perf(t), None, 2), "WARN", "largest message, no Avg line), 2 ranks"),
    # 35-40: NCCL_DEBUG=INFO transport
    ("nccl-debug-info-socket-no-ib-horovodrun.txt", lambda t: judge_transport(nccl.parse_nccl_log(t), IB_HOST),
     "FAIL", "NCCL using Socket transport although host HCA mlx5_0 is ACTIVE"),
    ("nccl-debug-info-socket-libibverbs-missing-t4-2.8.3.txt",
     lambda t: judge_transport(nccl.parse_nccl_log(t), IB_HOST), "FAIL", "NCCL using Socket transport"),
    # 37-39: judged by what the log proves (issue 12): the transport selection is observed (PASS, RoCE named as
    # RoCE, IBext/SHARP counts as RDMA); these logs end before any communicator finished initialising, so
    # nccl.init is "not observed" (WARN), never a PASS; an error after the selection fails both
    ("nccl-debug-info-net-ib-mlx5-ib-2.4.7.txt", lambda t: judge_transport(nccl.parse_nccl_log(t), IB_HOST, True),
     "PASS", "RDMA transport selected: IB via NET/IB on mlx5_0:1"),
    ("nccl-debug-info-net-ib-mlx5-ib-2.4.7.txt", lambda t: judge_transport(nccl.parse_nccl_log(t), IB_HOST, True),
     "PASS", "GPUDirect RDMA: not observed (no NET channel lines in the log)"),
    ("nccl-debug-info-net-ib-mlx5-ib-2.4.7.txt", lambda t: judge_init(nccl.parse_nccl_log(t)), "WARN",
     "log ends before communicator init completes"),
    ("nccl-debug-info-net-ib-roce-h100-2.19.3.txt", lambda t: judge_transport(nccl.parse_nccl_log(t), None, True),
     "PASS", "RDMA transport selected: RoCE via IB on mlx5_10:1, mlx5_11:1"),
    ("nccl-debug-info-net-ib-roce-h100-2.19.3.txt", lambda t: judge_init(nccl.parse_nccl_log(t)), "WARN",
     "an excerpt?"),
    # the later failure (its text paraphrased into one constructed WARN line): no transport PASS
    ("nccl-debug-info-net-ib-roce-h100-2.19.3.txt",
     lambda t: judge_transport(nccl.parse_nccl_log(t + ROCE_QP_FAILURE), None, True), "FAIL",
     "then the run failed before a communicator initialised: dgxh100-4:460770:460842 [0] NCCL WARN"),
    ("nccl-debug-info-net-ib-roce-h100-2.19.3.txt", lambda t: judge_init(nccl.parse_nccl_log(t + ROCE_QP_FAILURE)),
     "FAIL", "the communicator never initialised: dgxh100-4:460770:460842 [0] NCCL WARN"),
    ("nccl-debug-info-ibext-sharp-plugin-h100.txt", lambda t: judge_transport(nccl.parse_nccl_log(t), None, True),
     "PASS", "RDMA transport selected: IB via IBext on mlx5_0:1"),
    ("nccl-debug-info-ibext-sharp-plugin-h100.txt", lambda t: judge_init(nccl.parse_nccl_log(t)), "WARN",
     "no \"Init COMPLETE\", no error"),
    ("nccl-debug-info-ibext-sharp-plugin-h100.txt",
     lambda t: judge_init(nccl.parse_nccl_log(t + "gpu-node19:49355:49414 [1] NCCL INFO comm 0x1 rank 1 nranks "
                                              "16 cudaDev 1 busId 2a000 - Init COMPLETE\n")),
     "PASS", "communicator initialised (Init COMPLETE)"),
    ("nccl-debug-info-mixed-ib-roce-rank-prefix-2.5.6.txt",
     lambda t: judge_transport(nccl.parse_nccl_log(t), None, True), "WARN", "mlx5_2 is Ethernet (RoCE)"),
    # 41, 42: horovodrun --check-build (exit status means nothing; the marks do)
    ("horovodrun-check-build-0.22.1-tf-torch-mpi-gloo-nccl.txt",
     lambda t: judge_build(parse_check_build(t), TF_MPI_NCCL), "PASS", "Horovod v0.22.1"),
    ("horovodrun-check-build-0.18.1-nothing-built-mlsl.txt",
     lambda t: judge_build(parse_check_build(t), TF_MPI_NCCL), "FAIL",
     "missing: framework=TensorFlow, controller=MPI, tensor_op=NCCL"),
    # 43-46: MPI
    ("mpirun-version-openmpi-2.1.1.txt", lambda t: judge_mpi_version(*versions.mpirun(t), None), "PASS",
     "Open MPI 2.1.1"),
    ("ompi_info-parsable-cuda-support-false.txt",
     lambda t: judge_mpi_version("Open MPI", "(version not in this excerpt)", versions.ompi_info(t)["cuda_support"],
                                 gpu_stack=True), "WARN", "not CUDA-aware"),
    ("ompi_info-a-grep-cuda-not-built.txt",
     lambda t: judge_mpi_version("Open MPI", "(version not in this excerpt)", versions.ompi_info(t)["cuda_support"],
                                 gpu_stack=True), "WARN", "not CUDA-aware"),
    ("ompi_info-parsable-head-5.0.2.txt", lambda t: judge_mpi_version("Open MPI", versions.ompi_info(t)["version"],
                                                                      None), "PASS", "Open MPI 5.0.2"),
    # 53, 54: kernel log
    ("dmesg-nvrm-gpu-fallen-off-bus-no-xid.txt", lambda t: judge_xid(parse_dmesg(t)), "FAIL",
     "Xid 79 on 0000:b3:00.0: fallen off the bus"),
    ("dmesg-nvrm-xid79-sxid20034-hgx.txt", lambda t: judge_xid(parse_dmesg(t)), "FAIL",
     "Xid 79 on 0000:91:00: pid='<unknown>', name=<unknown>, GPU has fallen off the bus. (+4 more)"),
    # 55-58: NVML failures are classified, never "no GPU"
    ("nvidia-smi-gpu-lost-device-handle.txt", lambda t: judge_inventory(smi.parse_table(t)), "FAIL",
     "Unable to determine the device handle for 0000:07:00.0"),
    ("nvidia-smi-gpu-lost-device-handle-legacy-space.txt", lambda t: judge_inventory(smi.parse_table(t)), "FAIL",
     "Unable to determine the device handle for 0000:0B:00.0"),
    ("nvidia-smi-nvml-driver-library-mismatch-570-with-libversion.txt", lambda t: judge_inventory(smi.parse_table(t)),
     "FAIL", "Failed to initialize NVML: Driver/library version mismatch"),
    ("nvidia-smi-nvml-driver-library-mismatch-legacy.txt", lambda t: judge_inventory(smi.parse_table(t)), "FAIL",
     "Failed to initialize NVML: Driver/library version mismatch"),
    # 59-62: docker and the NVIDIA runtime
    ("docker-run-gpus-could-not-select-device-driver.txt", lambda t: judge_container_gpus(t, False, 8, None), "FAIL",
     'could not select device driver "" with capabilities'),
    ("docker-compose-gpu-could-not-select-device-driver-nvidia.txt", lambda t: judge_container_gpus(t, False, 8, None),
     "FAIL", 'could not select device driver "nvidia"'),
    ("docker-info-grep-runtime-no-nvidia.txt", lambda t: docker_info(gpu_node=True), "WARN", "no nvidia runtime"),
    ("docker-info-grep-runtime-no-nvidia.txt", lambda t: docker_info(gpu_node=False), "PASS",
     "NVIDIA runtime not needed"),
    ("docker-run-unknown-runtime-nvidia.txt", lambda t: judge_container_gpus(t, False, 8, None), "FAIL",
     "unknown or invalid runtime name: nvidia"),
    # 64, 65: ib_write_bw
    ("ib_write_bw-roce100g-oci-98gbps.txt", lambda t: judge_write_bw(ib.parse_ib_write_bw(t), 100.0), "PASS",
     "98.01 Gb/s average at 65536 B on mlx5_5 (Ethernet)"),
    ("ib_write_bw-ib-client-report-gbits-all-sizes-head-excerpt.txt",
     lambda t: judge_write_bw(ib.parse_ib_write_bw(t), 100.0), "WARN", "0.17 Gb/s average at 8 B"),
]

DIAGNOSES = {
    "nvidia-smi-gpu-lost-device-handle.txt": "GPU_LOST",
    "nvidia-smi-gpu-lost-device-handle-legacy-space.txt": "GPU_LOST",
    "nvidia-smi-nvml-driver-library-mismatch-570-with-libversion.txt": "NVML_DRIVER_LIBRARY_MISMATCH",
    "nvidia-smi-nvml-driver-library-mismatch-legacy.txt": "NVML_DRIVER_LIBRARY_MISMATCH",
    "ibstat-hdr200-state-down-linkup-no-sm-lid65535.txt": "IB_NO_SM",
    "nccl-tests-all_reduce_perf-2node-independent-runs-interleaved-excerpt.txt": "NCCL_SPLIT_WORLD",
    "nccl-debug-info-socket-libibverbs-missing-t4-2.8.3.txt": "NCCL_NO_LIBIBVERBS",
    "nccl-debug-info-socket-no-ib-horovodrun.txt": "NCCL_SOCKET_FALLBACK",
    "docker-run-gpus-could-not-select-device-driver.txt": "NVIDIA_CONTAINER_TOOLKIT_MISSING",
    "docker-compose-gpu-could-not-select-device-driver-nvidia.txt": "NVIDIA_CONTAINER_TOOLKIT_MISSING",
    "docker-run-unknown-runtime-nvidia.txt": "NVIDIA_RUNTIME_NOT_REGISTERED",
    "dmesg-nvrm-xid79-sxid20034-hgx.txt": "GPU_XID",
    "nccl-debug-info-net-ib-mlx5-ib-2.4.7.txt": "NCCL_INIT_NOT_OBSERVED",
    "nccl-debug-info-ibext-sharp-plugin-h100.txt": "NCCL_INIT_NOT_OBSERVED",
}

VALUES = [
    ("nvidia-smi-version-590.txt", lambda t: (smi.parse_version(t).driver_version,
                                              smi.parse_version(t).driver_max_cuda), ("590.48.01", "13.1")),
    ("nvidia-smi-h100x8-550.txt", lambda t: smi.parse_table(t).driver_max_cuda, "12.4"),
    ("nvcc-version-10.0.txt", versions.nvcc, "10.0.130"),
    ("nvcc-version-10.1-no-build-line.txt", versions.nvcc, "10.1.243"),
    ("nvcc-version-11.1-with-build-line.txt", versions.nvcc, "11.1.105"),
    ("cuda-version-txt-10.0.txt", versions.cuda_version_file, "10.0.130"),
    ("cudnn-h-grep-major-7.5.txt", versions.cudnn_header, "7.5.0"),
    ("cudnn_version-h-defines-8.0.4.txt", versions.cudnn_header, "8.0.4"),
    ("nvidia-container-runtime-version-1.13.5.txt", versions.nvidia_container_runtime, "1.13.5"),
    ("ompi_info-a-grep-cuda-not-built.txt", lambda t: versions.ompi_info(t)["cuda_support"], False),
    ("nccl-tests-2080ti-nvlink-bridge-tail-excerpt.txt",
     lambda t: (nccl.parse_all_reduce_perf(t).world_size(), nccl.parse_all_reduce_perf(t).peak_busbw), (2, 21.86)),
    ("nccl-debug-info-net-ib-roce-h100-2.19.3.txt", lambda t: nccl.parse_nccl_log(t).rdma_links, ["RoCE"]),
    ("ibstat-mlx5-port-down-disabled-truncated.txt", lambda t: ib.parse_ibstat(t).problems,
     ["mlx5_8:1: no Rate/Link layer line (output cut off?)"]),
    ("ibstat-a100-ibpanic-exit255.txt", lambda t: (len(ib.parse_ibstat(t).ports), ib.parse_ibstat(t).missing_hcas),
     (8, ["mlx5_8"])),
    ("nvidia-smi-nvml-driver-library-mismatch-570-with-libversion.txt",
     lambda t: smi.classify_error(t).detail, ["NVML library version 570.124"]),
]


def _id(row) -> str:
    return "%s-%s" % (row[0].rsplit(".", 1)[0], row[2])


@pytest.mark.parametrize("fixture,judge,status,contains", VERDICTS, ids=[_id(r) for r in VERDICTS])
def test_fixture_verdict(fixture, judge, status, contains):
    result = judge(text(fixture))
    assert result.status.value == status, result
    assert contains in " | ".join([result.measured, result.expected] + result.details), result
    if fixture in DIAGNOSES and status != "PASS":
        assert result.diagnosis == DIAGNOSES[fixture]
    elif fixture == "nccl-debug-info-net-ib-roce-h100-2.19.3.txt" and status == "FAIL":
        assert result.diagnosis == "NCCL_INIT_FAILED"
    if status in ("FAIL", "WARN"):
        assert result.remedy, "a FAIL/WARN names its remedy"
    assert "no GPU" not in result.measured


@pytest.mark.parametrize("fixture,parse,value", VALUES, ids=[r[0].rsplit(".", 1)[0] for r in VALUES])
def test_fixture_value(fixture, parse, value):
    assert parse(text(fixture)) == value


def test_every_fixture_has_a_test():
    covered = {r[0] for r in VERDICTS} | {r[0] for r in VALUES}
    on_disk = {p.name for p in FIXTURES.iterdir() if p.name != "SOURCES.md"}
    assert on_disk - covered == set()
    assert covered - on_disk == set()


def test_down_port_rate_is_not_judged():
    """Fixture 25: ``Rate: 10`` on a Polling port is meaningless — no "rate" complaint for it."""
    result = judge_ports(ib.parse_ibstat(text("ibstat-mlx5-port-down-polling-redacted-guids.txt")))
    assert "Gb/s <" not in " ".join([result.measured] + result.details)


def test_busbw_is_algbw_times_2_n_minus_1_over_n():
    """Fixture 32: 272.55 × 2·7/8 = 476.96; a busbw that does not fit the factor is reported."""
    result = nccl.parse_all_reduce_perf(text("nccl-tests-all_reduce_perf-8x-h200-8G-nvls.txt"))
    row = result.rows[0]
    assert round(row.algbw * 2 * 7 / 8, 2) == row.busbw == 476.96
    verdict = judge_busbw(result, busbw_floor("NVIDIA H100 80GB HBM3", 8, 1, None), 8)
    assert "!=" not in " ".join(verdict.details)
    assert "460" in verdict.expected and verdict.status.value == "PASS"


def test_dcgm_error_cell_is_joined_across_wrapped_lines():
    diag = parse_dcgmi_diag(text("dcgmi-diag-r1-dcgm3.1.8-h200x8-persistence-fail.txt"))
    assert diag.ran
    error = diag.with_result("Fail")[0].error
    assert "Persistence mode for GPU 0 is currently disabled. The DCGM diagnostic requires peristence mode" in error
    assert 'by running "nvidia-smi -i <gpuId> -pm 1 " as root.' in error


def test_topology_parses_every_layout():
    names = ["nvidia-smi-topo-h200-vm-1gpu-ansi-header.txt", "nvidia-smi-topo-h200x8-nv18-8nic-legend-tabs.txt",
             "nvidia-smi-topo-dgx1-like-v100-sxm2-8gpu.txt", "nvidia-smi-topo-pcie-2x5090-phb-tabs.txt"]
    topos = [parse_topo(text(n)) for n in names]
    assert [len(t.gpus) for t in topos] == [1, 8, 8, 2]
    assert all(not t.problems for t in topos)
    assert topos[1].nics[0] == "mlx5_0" and topos[1].nearest_nic("GPU0") == ("mlx5_4", "PIX")
    assert topos[2].link[("GPU2", "mlx5_0")] == "PIX" and topos[2].cpu_affinity["GPU4"] == "12-23,36-47"


# Real Open MPI 4.1.4 launch failures made on this machine (tests/data/mpi/SOURCES.md): the line that says why,
# never the first line of Open MPI's banner (review finding 10).
MPI_DATA = Path(__file__).resolve().parent / "data" / "mpi"
LAUNCH_FAILURES = [
    ("openmpi-4.1.4-unresolvable-hosts.txt", 255,
     "ssh: Could not resolve hostname node1: Name or service not known; "
     "ssh: Could not resolve hostname node2: Name or service not known", "MPI_HOST_UNKNOWN"),
    ("openmpi-4.1.4-ssh-port-refused.txt", 255, "ssh: connect to host 127.0.0.2 port 1: Connection refused",
     "MPI_HOST_UNREACHABLE"),
    ("openmpi-4.1.4-not-enough-slots.txt", 1,
     "There are not enough slots available in the system to satisfy the 4 slots that were requested by the "
     "application", "MPI_NOT_ENOUGH_SLOTS"),
    ("openmpi-4.1.4-executable-missing.txt", 132,
     "mpirun was unable to launch the specified application as it could not access or execute an executable "
     "(Executable: /nonexistent/prog, Node: vm)", "MPI_EXECUTABLE_MISSING"),
    ("openmpi-4.1.4-as-root.txt", 1, "mpirun has detected an attempt to run as root.", "MPI_RUN_AS_ROOT"),
    ("openmpi-4.1.4-rank-exit-3.txt", 3,
     "Primary job terminated normally, but 1 process returned a non-zero exit code. Per user-direction, the job "
     "has been aborted.", "MPI_RANK_FAILED"),
    ("openmpi-4.1.4-srun-without-pmi.txt", 1,
     "[vm:19525] OPAL ERROR: Unreachable in file ext3x_client.c at line 112; *** An error occurred in MPI_Init; "
     "*** on a NULL communicator (+3 more)", "MPI_PMI_MISMATCH"),
]
LAUNCH_REMEDIES = {"MPI_RUN_AS_ROOT": "--allow-run-as-root", "MPI_PMI_MISMATCH": "srun --mpi=pmix",
                   "MPI_NOT_ENOUGH_SLOTS": "--oversubscribe"}


@pytest.mark.parametrize("name,rc,why,cause", LAUNCH_FAILURES, ids=[r[0][14:-4] for r in LAUNCH_FAILURES])
def test_mpirun_launch_failure_names_the_line_that_matters_and_its_cause(name, rc, why, cause):
    """Issue 12 item 7: a refused launch is diagnosed by its cause (root, unreachable host, PMI/PMIx, …)."""
    output = (MPI_DATA / name).read_text()
    assert launch_failure(output) == why
    hosts = ["node1", "node2"]
    result = judge_launch_failure(ToolRun(("mpirun", "-H", "node1:2,node2:2", "-np", "4", "prog"), rc, "", output),
                                  4, hosts)
    assert result.status.value == "FAIL" and result.diagnosis == cause
    assert LAUNCH_REMEDIES.get(cause, "") in result.remedy
    assert result.measured == "mpirun exited %d: %s" % (rc, why) and "-----" not in result.measured
    assert ("`ssh HOST true` for each of 127.0.0.2" in result.remedy) == ("port 1: Connection refused" in why)
    assert ("node1,node2 does not resolve" in result.remedy) == (cause == "MPI_HOST_UNKNOWN")


def test_mpirun_launch_failure_parser_edges():
    assert launch_failure("") == ""
    banner_only = "-" * 74 + "\nFirst line of a\nbanner.\n\nMore help.\n" + "-" * 74 + "\n"
    assert launch_failure(banner_only) == "First line of a banner."
    assert launch_failure("-" * 74 + "\nCut off before its closing rule") == "Cut off before its closing rule"
    # under load Open MPI 4.1.4 printed its own setpgid notice ahead of ssh's error (seen in the suite): the cause's
    # line leads, whatever came first
    notice = "[vm:4242] plm:rsh: Warning: setpgid(4243,4243) failed in parent with errno=Permission denied(13)\n"
    unresolvable = (MPI_DATA / "openmpi-4.1.4-unresolvable-hosts.txt").read_text()
    assert launch_failure(notice + unresolvable) == (
        "ssh: Could not resolve hostname node1: Name or service not known; ssh: Could not resolve hostname node2: "
        "Name or service not known; " + notice.strip())
    assert classify_launch(notice + unresolvable).cause == "MPI_HOST_UNKNOWN"
    many = "\n".join("ssh: Could not resolve hostname n%d: Name or service not known" % i for i in range(5))
    assert launch_failure(many).endswith("n2: Name or service not known (+2 more)")
    timed_out = judge_launch_failure(ToolRun(("mpirun", "-np", "2", "x"), None, timed_out=True), 2, [])
    assert timed_out.measured == "`mpirun -np 2 x` timed out" and timed_out.diagnosis == "MPI_HANG"
    assert "ssh -o BatchMode=yes HOST true" in timed_out.remedy
