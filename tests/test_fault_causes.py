"""The known causes of a first fault (``facts.parsers.faults.CAUSES``): each KIND of failure the corpus holds, read
from other spellings of the same tools' messages than the corpus cases (other versions, other launchers' prefixes),
through ``invoke train --explain``: the cause's code, the rank it hit first, and its remedy with a public source; and
the table itself: every code catalogued, every remedy sourced."""
from __future__ import annotations

import re

import pytest

from facts.parsers import faults
from tests.lib import cli as cmd

#: (a log's lines, the code its first fault gets, phrases its explanation says): each line a tool's own message.
VARIANTS = [
    # build: Horovod's extension built against another framework / never built
    (["[1,0]<stderr>:ImportError: /opt/venv/lib/python3.8/site-packages/horovod/torch/mpi_lib_v2.cpython-38-x86_64-"
      "linux-gnu.so: undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs"],
     "HOROVOD_IMPORT", ["rank 0", "undefined symbol", "horovodrun --check-build", "--no-binary horovod"]),
    (["[0]<stderr>:ValueError: Horovod has not been built with TensorFlow support."],
     "HOROVOD_BUILD_INCOMPLETE", ["HOROVOD_WITH_TENSORFLOW=1", "horovodrun --check-build"]),
    # crash: the signal and the frame
    (["[1,1]<stderr>:[node2:01234] *** Process received signal ***",
      "[1,1]<stderr>:[node2:01234] Signal: Segmentation fault (11)",
      "[1,1]<stderr>:[node2:01234] [ 0] /lib64/libpthread.so.0(+0xf630)[0x7f00]",
      "[1,1]<stderr>:[node2:01234] [ 1] /usr/lib64/openmpi/lib/libmpi.so.40(MPI_Allreduce+0x1a)[0x7f01]"],
     "CRASH_SEGFAULT", ["SIGSEGV", "rank 1", "libmpi.so.40 (MPI)"]),
    (["2: free(): invalid pointer", "2: Aborted (core dumped)"], "CRASH_ABORT", ["SIGABRT", "rank 2"]),
    (["[0]<stderr>:Fatal Python error: Segmentation fault"], "CRASH_SEGFAULT", ["SIGSEGV"]),
    # memlock: RDMA memory refused by the locked-memory limit
    (["[1,3]<stderr>:[1700000000.1] [n1:99 :0]  ib_md.c:309 UCX ERROR ibv_reg_mr(address=0x7f, length=4096, "
      "access=0xf) failed: Cannot allocate memory"], "MEMLOCK_LIMITED", ["rank 3", "ulimit -l", "memlock=-1",
                                                                        "https://slurm.schedmd.com/faq.html"]),
    (["n1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB", "n1:1:2 [0] misc/ibvwrap.cc:212 NCCL WARN Call to "
      "ibv_reg_mr failed"], "NCCL_IB_MEMREG_FAILED", ["locked-memory", "troubleshooting"]),
    # mpi_init
    (["[n3:04411] [[1234,0],2] ORTE_ERROR_LOG: Not found in file ess_hnp_module.c at line 320",
      "It looks like orte_init failed for some reason; your parallel process is"], "MPI_INIT_FAILED",
     ["MPI_Init", "one Open MPI on every host", "ompi_info --version"]),
    # nccl_network
    (["[1,1]<stderr>:n2:5:9 [1] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>",
      "[1,1]<stderr>:n2:5:9 [1] misc/socket.cc:456 NCCL WARN Net : Connect to 10.0.0.1<41234> failed : Connection "
      "refused"], "NCCL_CONNECT_FAILED", ["rank 1", "Connection refused", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA"]),
    (["0: n1:5:9 [0] misc/socket.cc:480 NCCL WARN socketStartConnect: Connect to fe80::1e34:daff:fe4c:1%ib0<40000> "
      "failed : Software caused connection abort"], "NCCL_LINK_LOCAL_ADDRESS", ["link-local", "NCCL_SOCKET_IFNAME"]),
    # oom: GPU vs host
    (["[1,0]<stderr>:RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity)"],
     "GPU_OUT_OF_MEMORY", ["GPU's memory", "--batch-size", "rank 0"]),
    (["slurmstepd: error: Job 77 exceeded memory limit (9000000 > 8388608), being killed"],
     "HOST_OUT_OF_MEMORY", ["host's", "--mem"]),
    (["srun: error: n4: task 3: Out Of Memory"], "HOST_OUT_OF_MEMORY", ["rank 3", "not the GPU's memory"]),
    # time_limit
    (["slurmstepd: error: *** STEP 55.0 ON n1 CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***"],
     "SLURM_TIME_LIMIT", ["time limit", "--time", "--resume", "--requeue"]),
    # scheduler
    (["srun: error: Unable to allocate resources: Requested node configuration is not available"],
     "SLURM_NODE_CONFIG_UNAVAILABLE", ["scontrol show node", "sinfo"]),
    (["sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification"],
     "SLURM_GRES_INVALID", ["gres", "--gpus-per-node"]),
    # gpu_fault: a GPU's fault while the run trained, not its initialisation (issue 40 item 3, M5)
    (["[1,1]<stderr>:Epoch 1/5", "[1,1]<stderr>:RuntimeError: CUDA error: an illegal memory access was encountered",
      "[1,1]<stderr>:CUDA kernel errors might be asynchronously reported at some other API call"],
     "CUDA_RUNTIME_ERROR", ["rank 1", "not an initialisation failure", "CUDA_LAUNCH_BLOCKING=1", "compute-sanitizer",
                            "gpu.xid"]),
    (["0: 2024-01-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_event.cc:29] Error polling for event "
      "status: failed to query event: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"],
     "CUDA_RUNTIME_ERROR", ["rank 0", "unspecified launch failure", "invoke validate"]),
    (["[2]<stderr>:RuntimeError: CUDA error: device-side assert triggered"], "CUDA_RUNTIME_ERROR",
     ["rank 2", "device-side assert", "CUDA_LAUNCH_BLOCKING=1"]),
    (["[1,0]<stderr>:RuntimeError: CUDA error: uncorrectable ECC error encountered"], "GPU_MEMORY_ERRORS",
     ["rank 0", "ECC", "drain the node"]),
    # gpu_fault: the driver's Xid in the kernel log, before the kill that followed (M6)
    (["NVRM: Xid (PCI:0000:3b:00): 79, pid=123, GPU has fallen off the bus.", "srun: error: node01: task 0: Killed"],
     "GPU_LOST", ["fell off the bus", "drain the node", "gpu.xid", "what followed from it"]),
    (["[Mon Jan  1 00:00:00 2024] NVRM: Xid (PCI:0000:86:00): 95, pid=2211, Uncontained: FBHUB. RST: Yes, D-RST: No",
      "[1,0]<stderr>:Killed"], "GPU_MEMORY_ERRORS", ["95", "uncontained", "nvidia-smi -r"]),
    (["kernel: NVRM: Xid (PCI:0000:b3:00): 74, pid=991, NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000)",
      "2: Killed"], "GPU_XID", ["Xid 74", "NVLink", "invoke validate"]),
    (["nvidia-nvswitch2: SXid (PCI:0000:86:00.0): 12028, Non-fatal, Link 20 egress non-posted PRIV error",
      "[1,3]<stderr>:Killed"], "GPU_XID", ["SXid 12028", "Fabric Manager", "drain the node"]),
    # hca: the adapter's own health report in the kernel log, before the ranks' failures
    (["[Mon Jan  1 00:00:00 2024] mlx5_core 0000:5e:00.0: print_health_info:424:(pid 0): Fatal error 1 detected",
      "[1,0]<stderr>:NCCL WARN NET/IB : Got completion from peer 10.0.0.2 with error 12"],
     "IB_PORT_EVENTS", ["HCA", "ib.ports", "mlxfwreset"]),
    # the kernel's OOM killer line first, the kill after it
    (["[Mon Jan  1 00:00:00 2024] Out of memory: Killed process 4242 (python) total-vm:99kB",
      "srun: error: n1: task 2: Killed"], "HOST_OUT_OF_MEMORY", ["host's", "what followed from it"]),
    # image_pull: a pod's image pull (launch.pods.pull_image: the kubelet's events, dockerd's error quoted), each
    # text as dockerd 20.10 and skopeo 1.9 printed it on the test cluster (tests/test_pods_pull_testcluster.py
    # checks them live)
    (['Pulling image "10.213.57.1:5000/chexstack/p@sha256:%s"' % ("0" * 64),
      'Failed to pull image "10.213.57.1:5000/chexstack/p@sha256:%s": manifest for 10.213.57.1:5000/chexstack/p@'
      'sha256:%s not found: manifest unknown: manifest unknown' % ("0" * 64, "0" * 64), "Error: ErrImagePull"],
     "IMAGE_MANIFEST_UNKNOWN", ["manifest unknown", "a wrong digest", "--digestfile"]),
    (['Failed to pull image "10.213.57.1:5009/chexstack/p@sha256:%s": Get "https://10.213.57.1:5009/v2/": dial tcp '
      '10.213.57.1:5009: connect: connection refused' % ("f" * 64), "Error: ErrImagePull"],
     "REGISTRY_UNREACHABLE", ["connection refused", "curl https://REGISTRY/v2/"]),
    (['Error response from daemon: Get "https://10.213.57.1:5001/v2/": x509: certificate signed by unknown '
      'authority'], "REGISTRY_CERT_UNTRUSTED", ["unknown authority", "certs.d", "SSL_CERT_DIR"]),
    (['Failed to pull image "10.213.57.1:5001/chexstack/p@sha256:%s": Get "https://10.213.57.1:5001/v2/chexstack/p/'
      'manifests/sha256:%s": no basic auth credentials' % ("f" * 64, "f" * 64), "Error: ErrImagePull"],
     "REGISTRY_UNAUTHORIZED", ["no basic auth credentials", "imagePullSecrets"]),
    (['time="2026-12-06T19:34:43Z" level=fatal msg="Error parsing image name \\"docker://10.213.57.1:5001/chexstack/'
      'p@sha256:%s\\": reading manifest sha256:%s in 10.213.57.1:5001/chexstack/p: unauthorized: authentication '
      'required"' % ("f" * 64, "f" * 64)], "REGISTRY_UNAUTHORIZED", ["authentication required", "--creds"]),
    # version_mismatch, not gpu_init
    (["docker: Error response from daemon: failed to create task for container: OCI runtime create failed: "
      "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown."],
     "NVML_DRIVER_LIBRARY_MISMATCH", ["version mismatch", "reboot"]),
]


@pytest.mark.parametrize("lines,code,phrases", VARIANTS, ids=[v[1] + "-%d" % i for i, v in enumerate(VARIANTS)])
def test_each_kind_of_first_fault_gets_its_cause_rank_and_sourced_remedy(tmp_path, lines, code, phrases):
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    ran = cmd.run("train", "--explain", str(log))
    assert ran.returncode == 1, ran.stdout + ran.stderr
    message = ran.stdout.split("\nfull log:")[0]
    assert re.findall(r"\[([A-Z][A-Z0-9_]+)\]", message)[0] == code, message
    assert "unclassified failure" not in message and "no failure" not in message
    for phrase in phrases:
        assert phrase in message, (phrase, message)
    assert "https://" in message  # the remedy's public source


def test_a_wrapped_ranks_line_is_read_whole_and_keeps_its_rank():
    """A log collector that wraps at a fixed column leaves the cause on an unprefixed line: it is rank 3's."""
    scanner = faults.FaultScanner()
    scanner.feed("[1]<stderr>:2020-01-01 00:00:00.000000: I tensorflow/x.cc:1] " + "short info line")
    head = "[3]<stderr>:2020-01-01 00:00:00.000000: F tensorflow/statusor.cc:34] Attempting to fetch value instead "
    scanner.feed(head + "of handling error Interna")
    scanner.feed("l: no supported devices found for platform CUDA")
    assert scanner.first is not None and scanner.first.rank == 3 and scanner.first.kind == "gpu_init"
    assert scanner.first.text.endswith("Internal: no supported devices found for platform CUDA")
    assert scanner.first.number == 2 and scanner.counts == {"gpu_init": 1}


def test_a_launchers_banner_after_a_long_rank_line_is_not_a_continuation():
    scanner = faults.FaultScanner()
    scanner.feed("[1,2]<stderr>:" + "x" * 120)
    scanner.feed("mpirun noticed that process rank 2 with PID 1 on node n exited on signal 11 (Segmentation fault).")
    assert scanner.first is None and scanner.first_summary.rank is None


def test_horovodruns_timestamped_prefix_is_a_ranks():
    assert faults.split_rank("Fri Sep 25 16:52:35 2020[3]<stderr>:text") == (3, "text")


def test_every_cause_is_catalogued_and_sourced():
    """One code family, one meaning (validate/catalogue.py); each remedy names its public source."""
    from validate.catalogue import CODES

    for cause in faults.CAUSES:
        assert cause.code in CODES, cause.code
        assert cause.kind in faults.KIND and cause.source and "https://" in cause.remedy, cause.code
    assert len({c.code for c in faults.CAUSES}) == len(faults.CAUSES)


def test_the_duplicate_gpu_fix_pins_by_local_rank_with_every_node_gpu_visible():
    """validate --job FAILs --gpus-per-task for a trainer that pins local rank N (job.gpu_binding): the duplicate-GPU
    remedy (case 35's kind) and the invalid-ordinal one say the same, never --gpus-per-task=1 as the fix."""
    from launch import failure

    ordinal = next(fix for rx, fix in failure.CUDA_INIT_REMEDY if rx.search("CUDA error: invalid device ordinal"))
    for remedy in (failure.DUPLICATE_GPU_REMEDY, ordinal):
        assert "--gpus-per-node=N --ntasks-per-node=N" in remedy and "--gpu-bind=none" in remedy
        assert "job.gpu_binding" in remedy
    assert "not --gpus-per-task=1" in failure.DUPLICATE_GPU_REMEDY
