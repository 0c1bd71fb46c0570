"""The catalogue of verdict codes: every non-PASS result's ``diagnosis`` is one of ``CODES``, with what it means and
the next action a person takes, on one ladder from cheapest to most drastic (``Action``).

The shape is NVIDIA's health-validation tooling's: DCGM diagnostics give each failure "a specific ID, Severity, and
Category that can be useful when deciding how to handle the failure" (DCGM reference, Diagnostic Errors:
https://docs.nvidia.com/datacenter/dcgm/latest/reference/diagnostics/errors.html; its ``DCGM_ERROR_*`` severities
run from MONITOR and CONFIG to RESET and ISOLATE), and NVSentinel's ``HealthEvent`` carries an ``errorCode`` and a
``recommendedAction`` (``NONE``, ``COMPONENT_RESET``, ``RESTART_VM``, ``RESTART_BM``, ``REPLACE_VM``, ...: NVSentinel
HealthEvent data model, https://docs.nvidia.com/nvsentinel/architecture/health-event-data-model). Where DCGM's CLI
JSON "has no published stable schema" (the same page), this report has one (``validate.report_schema``).

A code is stable: other tools key on it; a new fault family gets a new code here, never a new meaning for an old
one. ``noisy`` marks a measured shortfall that one noisy run can cause: a check repeats its measurement before it
gives that verdict (``validate.tries.until_pass``). The SKIP codes say why a check did not judge the node
(``NOT_APPLICABLE``, ``TOOL_MISSING``, ``NOT_REPORTED``, ``TOOL_FAILED``, ``EVIDENCE_MISSING``).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import IntEnum

#: The name and version of this catalogue; a report names it with its digest (``digest()``).
CATALOGUE = "chexstack.validate.catalogue/1"


class Action(IntEnum):
    """The next action, cheapest first; ``max()`` of several is the most drastic. ``NONE``: nothing to do to the
    node (the check does not apply, no sourced rule judges the value, or the checker itself failed)."""

    NONE = 0
    RETRY = 1  # run it again (the check, the tool by hand, or a recording with the evidence it names)
    RECONFIGURE = 2  # change a setting, an install, a launch flag, a container option, a service
    RELOAD_MODULE = 3  # unload and load a kernel module (nvidia, nvidia-peermem, mlx5_core)
    REBOOT = 4  # reboot the node (or reset the GPU where the driver allows it)
    REPLACE_HARDWARE = 5  # reseat or replace a GPU, cable, HCA, riser: drain the node for service

    @property
    def word(self) -> str:
        """The action as the report writes it: ``retry``, ``reload_module``, ``replace_hardware``."""
        return self.name.lower()


@dataclass(frozen=True)
class Code:
    """One catalogue entry: ``meaning`` (what the verdict says of the node), ``action`` (the next one),
    ``noisy`` (a measured shortfall a check repeats before giving it)."""

    meaning: str
    action: Action
    noisy: bool = False


A = Action
#: Every verdict code. The result's ``remedy`` is the specific fix for the case at hand; the entry is the family's.
CODES: dict[str, Code] = {
    # why a check did not judge the node (SKIP)
    "NOT_APPLICABLE": Code("the check does not apply to this node or run (no GPU, one GPU, no HCA, no --hosts, no "
                           "--stack, the stack runs it in its image)", A.NONE),
    "TOOL_MISSING": Code("a tool, program or image the check runs is not installed or not built", A.RECONFIGURE),
    "NOT_REPORTED": Code("the tool ran but does not report the property (this GPU, driver or privilege)", A.NONE),
    "TOOL_FAILED": Code("a tool the check needs ran and failed without a known cause", A.RETRY),
    "EVIDENCE_MISSING": Code("the bundle being judged does not hold the evidence: collect it on the node "
                             "(invoke validate --collect) or add the output", A.RETRY),
    # judged, not judged in full
    "OUTPUT_UNREADABLE": Code("a tool's output could not be read (no table, cut short)", A.RETRY),
    "EVIDENCE_INCOMPLETE": Code("a fact needed to compare was not recorded (the host's GPU count, the port's line "
                                "rate)", A.RETRY),
    "NO_SOURCED_RULE": Code("no sourced rule or floor judges this value on this platform", A.NONE),
    "CHECK_CRASHED": Code("the checker itself failed (a chexstack bug): the node was not judged", A.NONE),
    # GPUs and the driver
    "NO_GPU_FOR_STACK": Code("a GPU stack on a node without NVIDIA GPUs", A.RECONFIGURE),
    "TOO_FEW_GPUS": Code("the node has fewer GPUs than the run asks for (invoke validate --gpus N)", A.RECONFIGURE),
    "NVML_DRIVER_LIBRARY_MISMATCH": Code("the user-space driver library differs from the loaded kernel module",
                                         A.RELOAD_MODULE),
    "NVIDIA_DRIVER_NOT_LOADED": Code("the NVIDIA kernel module is not loaded", A.RELOAD_MODULE),
    "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU": Code("the open nvidia.ko refuses a GPU it does not support (no GSP)",
                                               A.RELOAD_MODULE),
    "NVML_ERROR": Code("NVML reported an error of the driver installation", A.REBOOT),
    "NO_DEVICES": Code("the driver sees no GPU", A.REBOOT),
    "GPU_LOST": Code("a GPU fell off the bus or its handle is lost", A.REBOOT),
    "GPU_XID": Code("NVRM Xid events in the kernel log", A.REBOOT),
    "GPU_MEMORY_ERRORS": Code("uncorrectable ECC errors or failed row remapping", A.REPLACE_HARDWARE),
    "GPU_RESET_PENDING": Code("a page retirement or row remapping waits for a GPU reset", A.REBOOT),
    "GPU_ECC_DISABLED": Code("ECC is off on a GPU that has it", A.REBOOT),
    "GPU_PERSISTENCE_OFF": Code("persistence mode is off", A.RECONFIGURE),
    "GPU_PEER_OUTLIER": Code("a GPU differs from its peers (PCIe link, clocks, NVLink count, ECC mode)",
                             A.REPLACE_HARDWARE),
    "CUDA_DRIVER_TOO_OLD": Code("the driver is older than the CUDA the stack needs", A.RECONFIGURE),
    "CUDA_MINOR_VERSION_COMPAT": Code("the driver runs the stack's CUDA only through minor-version compatibility",
                                      A.RECONFIGURE),
    "DCGM_DIAG_FAIL": Code("a DCGM diagnostic failed (its own error says which)", A.REBOOT),
    "DCGM_DIAG_WARN": Code("a DCGM diagnostic warned", A.RETRY),
    "DCGM_DIAG_NOT_RUN": Code("dcgmi diag did not complete (nv-hostengine, timeout)", A.RECONFIGURE),
    # CUDA usable on every GPU (gpu.cuda: facts/cuda_probe.py; the CUresult codes of the CUDA driver API,
    # https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html, are facts.parsers.cuda.CU_RESULTS)
    "CUDA_LIBRARY_MISSING": Code("GPUs are listed but no CUDA driver library (libcuda.so.1) loads", A.RECONFIGURE),
    "CUDA_STUB_LIBRARY": Code("the libcuda.so.1 loaded is the CUDA toolkit's link stub (CUresult 34)", A.RECONFIGURE),
    "CUDA_SYSTEM_NOT_READY": Code("CUDA is not ready to start work (CUresult 802): on an NVSwitch system, Fabric "
                                  "Manager is not running", A.RECONFIGURE),
    "CUDA_DRIVER_MISMATCH": Code("libcuda differs from the loaded kernel module (CUresult 803)", A.RELOAD_MODULE),
    "CUDA_NO_DEVICE": Code("CUDA detects no GPU that the driver lists (CUresult 100)", A.RECONFIGURE),
    "CUDA_GPUS_MISSING": Code("CUDA enumerates fewer GPUs than nvidia-smi lists", A.RECONFIGURE),
    "CUDA_NOT_INITIALIZED": Code("cuInit failed (CUresult 3)", A.RELOAD_MODULE),
    "CUDA_DEVICE_UNAVAILABLE": Code("a GPU is unavailable to CUDA: exclusive-process compute mode held by another "
                                    "process, or prohibited (CUresult 46)", A.RECONFIGURE),
    "CUDA_OUT_OF_MEMORY": Code("a CUDA context or a small allocation does not fit on a GPU (CUresult 2)",
                               A.RECONFIGURE),
    "CUDA_UNKNOWN_ERROR": Code("the CUDA driver failed with an unknown internal error (CUresult 999)", A.REBOOT),
    "CUDA_CALL_FAILED": Code("a CUDA driver call failed with a code without a catalogued remedy", A.RETRY),
    "CUDA_PROBE_FAILED": Code("the CUDA probe crashed or hung inside the driver", A.REBOOT),
    # topology
    "NVLINK_DEGRADED": Code("NVLink links missing or inactive where the platform has them", A.REPLACE_HARDWARE),
    "NVLINK_PARTIAL": Code("a GPU without an NVLink peer", A.NONE),
    "NO_NVLINK": Code("no NVLink between the GPUs", A.NONE),
    "GPU_NIC_AFFINITY": Code("a GPU without a NIC on its PCIe switch (no GPUDirect RDMA path)", A.RECONFIGURE),
    "ACS_ENABLED": Code("ACS redirect on the PCIe bridges above the GPUs (peer-to-peer goes through the root "
                        "complex or hangs)", A.RECONFIGURE),
    # NCCL
    "NCCL_SHM_EXHAUSTED": Code("NCCL could not create a shared-memory segment (/dev/shm full)", A.RECONFIGURE),
    "NCCL_SHM_TOO_SMALL": Code("/dev/shm too small for NCCL's shared-memory transport", A.RECONFIGURE),
    "NCCL_SOCKET_FALLBACK": Code("NCCL uses TCP sockets where RDMA is expected", A.RECONFIGURE),
    "NCCL_IB_DEVICE_NOT_VISIBLE": Code("NCCL cannot open the HCA (no /dev/infiniband in the container)",
                                       A.RECONFIGURE),
    "NCCL_NO_LIBIBVERBS": Code("NCCL cannot load libibverbs", A.RECONFIGURE),
    "NCCL_MIXED_RAILS": Code("IB and RoCE devices mixed in NCCL's device set", A.RECONFIGURE),
    "NCCL_NO_TRANSPORT": Code("no network transport in a multi-node NCCL log", A.RETRY),
    "NCCL_SPLIT_WORLD": Code("the ranks formed several communicators, not one", A.RECONFIGURE),
    "NCCL_DUPLICATE_GPU": Code("two ranks on one GPU (NCCL refuses the communicator)", A.RECONFIGURE),
    "NCCL_IB_MEMREG_FAILED": Code("the HCA could not register NCCL's pinned memory (memlock limit)", A.RECONFIGURE),
    "NCCL_IB_COMPLETION_ERROR": Code("an RDMA transfer between the nodes failed (IB work completion error)",
                                     A.RECONFIGURE),
    "NCCL_UNROUTABLE_ADDRESS": Code("NCCL's peers advertised container-bridge addresses the other hosts cannot "
                                    "reach", A.RECONFIGURE),
    "NCCL_INIT_FAILED": Code("a NCCL communicator failed to initialise", A.RECONFIGURE),
    "NCCL_INIT_NOT_OBSERVED": Code("the log ends before the communicator initialised", A.RETRY),
    "NCCL_HANG": Code("the all-reduce hung", A.RECONFIGURE),
    "NCCL_RUN_FAILED": Code("a NCCL test run ended with an error after its transport was selected, before any "
                            "result: the transport moved no data", A.RETRY),
    "NCCL_WRONG_RESULTS": Code("the all-reduce produced wrong values", A.REPLACE_HARDWARE),
    "NCCL_BUSBW_LOW": Code("all-reduce bus bandwidth below the platform's floor in every try", A.RECONFIGURE,
                           noisy=True),
    "NCCL_VERSION_MISMATCH": Code("this node's NCCL is not the stack's", A.RECONFIGURE),
    # InfiniBand
    "NO_RDMA": Code("no RDMA device for a multi-node run", A.RECONFIGURE),
    "IB_NO_PORT": Code("no InfiniBand port found", A.RELOAD_MODULE),
    "IB_NO_SM": Code("no subnet manager on the port", A.RECONFIGURE),
    "IB_PORT_DOWN": Code("an IB port not Active/LinkUp", A.REPLACE_HARDWARE),
    "IB_RATE_DEGRADED": Code("an IB port below its peers' rate", A.REPLACE_HARDWARE),
    "IB_RATE_BELOW_HCA": Code("an IB port below its HCA's generation (cable or switch caps it)",
                              A.REPLACE_HARDWARE),
    "ETH_PORT_DOWN": Code("an Ethernet RDMA port down (not an IB rail)", A.NONE),
    "IPOIB_DOWN": Code("an IPoIB interface down", A.RECONFIGURE),
    "IB_WRITE_BW_FAILED": Code("ib_write_bw between the hosts did not run", A.RECONFIGURE),
    "IB_WRITE_BW_SMALL_MESSAGE": Code("ib_write_bw measured with a message too small to reach line rate", A.RETRY),
    "IB_BANDWIDTH_LOW": Code("RDMA write bandwidth below its share of the line rate in every try", A.RECONFIGURE,
                             noisy=True),
    # MPI
    "MPI_UNKNOWN": Code("mpirun is no known MPI", A.RECONFIGURE),
    "MPI_NOT_CUDA_AWARE": Code("the MPI is not CUDA-aware on a GPU stack", A.RECONFIGURE),
    "MPI_RUN_AS_ROOT": Code("Open MPI refuses to run as root", A.RECONFIGURE),
    "MPI_HOST_UNREACHABLE": Code("a host does not resolve or accept ssh", A.RECONFIGURE),
    "MPI_HOST_UNKNOWN": Code("ssh cannot resolve a host's name", A.RECONFIGURE),
    "MPI_SSH_AUTH": Code("ssh to a host is refused: its key or host key", A.RECONFIGURE),
    "MPI_ORTED_MISSING": Code("Open MPI's daemon (orted) is not on a host's non-interactive PATH", A.RECONFIGURE),
    "MPI_TCP_UNREACHABLE": Code("Open MPI's daemons or ranks cannot reach each other over TCP", A.RECONFIGURE),
    "MPI_DAEMON_START_FAILED": Code("Open MPI could not start its daemons and printed no more specific cause",
                                    A.RETRY),
    "PYXIS_SQUASHFS_AS_REGISTRY": Code("a squashfs image named without a leading / or ./: pyxis pulls the name "
                                       "from a registry instead of running the file", A.RECONFIGURE),
    "PYXIS_SIF_IMAGE": Code("a SIF given to pyxis, which runs squashfs files and registry images only",
                            A.RECONFIGURE),
    "MPI_SINGLE_COPY_CMA": Code("ranks in separate user or PID namespaces with Open MPI's CMA single copy on",
                                A.RECONFIGURE),
    "JOB_GPUS_IDLE": Code("a job file asks for GPUs that no rank uses", A.RECONFIGURE),
    "JOB_GPU_BINDING": Code("a job file binds each rank to fewer GPUs than its local rank's pin needs (per-task GPU "
                            "binding or CUDA_VISIBLE_DEVICES while ranks pin GPU hvd.local_rank())", A.RECONFIGURE),
    "JOB_ENV_NOT_EXPORTED": Code("a job file sets a variable the ranks never receive", A.RECONFIGURE),
    "K8S_RESOURCE_NAME_INVALID": Code("a container asks for a resource name the Kubernetes API server refuses "
                                      "(neither a standard resource nor an extended DOMAIN/NAME)", A.RECONFIGURE),
    "JOB_DOS_LINE_BREAKS": Code("a batch script with DOS line breaks (\\r\\n), which sbatch refuses", A.RECONFIGURE),
    "JOB_LAYOUT_UNKNOWN": Code("a job file does not state what a rule needs (its tasks per node, its task count): "
                               "the rule was not checked", A.NONE),
    "MPI_PMI_MISMATCH": Code("the ranks' PMI/PMIx does not match the launcher's", A.RECONFIGURE),
    "MPI_NOT_ENOUGH_SLOTS": Code("more ranks than slots", A.RECONFIGURE),
    "MPI_EXECUTABLE_MISSING": Code("the program is missing on a host", A.RECONFIGURE),
    "MPI_RANK_FAILED": Code("the launch worked and a rank failed", A.RETRY),
    "MPI_HANG": Code("mpirun neither started nor failed", A.RECONFIGURE),
    "MPI_LAUNCH_FAILED": Code("mpirun failed for a cause not recognised", A.RETRY),
    "MPI_WORLD_BROKEN": Code("the ranks did not all join one MPI_COMM_WORLD, or its allreduce summed wrong",
                             A.RECONFIGURE),
    "MPI_BANDWIDTH_LOW": Code("allreduce bus bandwidth below its share of raw TCP in every try", A.RECONFIGURE,
                              noisy=True),
    "TCP_BASELINE_MISSING": Code("no raw TCP figure to compare the allreduce with (no iperf3)", A.RECONFIGURE),
    "MPI_BANDWIDTH_RUN_FAILED": Code("the bandwidth measurement did not run", A.RETRY),
    # input capacity
    "INPUT_BOUND": Code("the cores decode fewer PNGs per second than the GPUs train on: the input bounds the run",
                        A.RECONFIGURE),
    # containers and limits
    "SHM_MISSING": Code("no readable /dev/shm", A.RECONFIGURE),
    "MEMLOCK_LIMITED": Code("locked memory limited where RDMA is used", A.RECONFIGURE),
    "RANK_PROBE_FAILED": Code("the probe rank measuring the ranks' limits did not start", A.RECONFIGURE),
    "DOCKER_ENGINE_UNREACHABLE": Code("the docker engine does not answer", A.RECONFIGURE),
    "NVIDIA_CONTAINER_TOOLKIT_MISSING": Code("docker cannot select the NVIDIA device driver", A.RECONFIGURE),
    "NVIDIA_RUNTIME_NOT_REGISTERED": Code("the nvidia runtime is not registered with docker", A.RECONFIGURE),
    "NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND": Code("nvidia-container-cli cannot load libnvidia-ml", A.RECONFIGURE),
    "NVIDIA_CONTAINER_CLI_LIBRARY_NOT_FOUND": Code("nvidia-container-cli cannot find a driver library",
                                                   A.RECONFIGURE),
    "CONTAINER_GPU_FAILED": Code("a container does not see the host's GPUs", A.RECONFIGURE),
    "NV_LIBS_NOT_BOUND": Code("--nv did not bind the driver libraries", A.RECONFIGURE),
    "NV_LD_PATH_RESET": Code("LD_LIBRARY_PATH lost /.singularity.d/libs", A.RECONFIGURE),
    "NV_HOST_LIBCUDA_MISSING": Code("the host has no libcuda.so.1 for --nv to bind (its loader cache lists none)",
                                    A.RECONFIGURE),
    "APPTAINER_NO_USERNS": Code("neither user namespaces nor a setuid starter lets this user run containers",
                                A.RECONFIGURE),
    "APPTAINER_TOO_OLD": Code("Apptainer/Singularity older than the release the launchers need", A.RECONFIGURE),
    # Horovod
    "HOROVOD_IMPORT": Code("Horovod does not import here", A.RECONFIGURE),
    "HOROVOD_BUILD_INCOMPLETE": Code("Horovod lacks a framework, controller or tensor operation", A.RECONFIGURE),
    "HOROVOD_TF_MISMATCH": Code("Horovod was built for another TensorFlow", A.RECONFIGURE),
    # the training run itself
    "TF_OUT_OF_MEMORY": Code("TensorFlow ran out of memory allocating a tensor: the batch per rank (or the image "
                             "size) needs more than a GPU's, or the host's, memory", A.RECONFIGURE),
    "IMAGE_PROBE_FAILED": Code("the probe inside the stack's image did not run", A.RECONFIGURE),
    "GLOO_LOOPBACK_ONLY": Code("Gloo with loopback as the only interface", A.RECONFIGURE),
    # the training run itself: the first fault in its ranks' output (launch.failure, facts.parsers.faults)
    "CONTAINER_START_FAILED": Code("a rank's container did not start (Apptainer/Singularity FATAL, docker, pyxis): "
                                   "the line says why", A.RECONFIGURE),
    "APPTAINER_NO_LOOP_DEVICE": Code("setuid Apptainer/Singularity found no free loop device to mount the SIF: "
                                     "several containers started at once on a kernel that creates loop devices on "
                                     "demand", A.RECONFIGURE),
    "CONTAINER_IMAGE_MISSING": Code("the container image is not at the path given on the node", A.RECONFIGURE),
    "CUDA_INIT_FAILED": Code("a rank could not initialise CUDA on its GPU (the CUDA error says why)", A.RECONFIGURE),
    "HOST_OUT_OF_MEMORY": Code("the kernel's or Slurm's out-of-memory killer ended a rank: the host's memory (or "
                               "the job's) ran out", A.RECONFIGURE),
    "HOROVOD_STALL_MISMATCH": Code("Horovod's ranks wait on tensors of different names: they run different code or "
                                   "framework versions", A.RECONFIGURE),
    "HOROVOD_STALL": Code("Horovod's ranks hung in a collective some ranks never submitted", A.RECONFIGURE),
    # issue 40 (signals): usable GPUs, and no PASS over a fault signal nothing explained
    "GPU_FABRIC_NOT_READY": Code("GPUs not registered with the NVLink fabric (Fabric State not Completed, or CUDA "
                                 "error 802 system not yet initialized): nvidia-fabricmanager is not running",
                                 A.RECONFIGURE),
    "IB_PORT_EVENTS": Code("an HCA port raised async error events, lost its link or counts link errors "
                           "(ibv_asyncwatch, the kernel log, perfquery, sysfs counters)",
                           A.REPLACE_HARDWARE),
    "GPU_MIG_ENABLED": Code("MIG mode is on where the run puts one rank on each whole GPU", A.RECONFIGURE),
    "UNEXPLAINED_FAULT_SIGNAL": Code("the check's evidence holds a fault signal (an error, failure, Xid, ECC, "
                                     "throttle, link or fabric line of facts/signals.yaml) that none of its findings "
                                     "explains: the node is not known to be fit; read the named line", A.RETRY),
    # a training run's first fault, by its known cause (facts.parsers.faults.CAUSES, each with its remedy)
    "GPU_OUT_OF_MEMORY": Code("a rank's GPU memory ran out (not the host's)", A.RECONFIGURE),
    "MPI_INIT_FAILED": Code("the ranks' MPI_Init failed: another Open MPI or PMIx than the launcher's on some host",
                            A.RECONFIGURE),
    "NCCL_CONNECT_FAILED": Code("NCCL could not connect to another rank's socket (interface or firewall)",
                                A.RECONFIGURE),
    "NCCL_LINK_LOCAL_ADDRESS": Code("NCCL's bootstrap used a link-local IPv6 address (fe80::) no other host routes",
                                    A.RECONFIGURE),
    "SLURM_TIME_LIMIT": Code("Slurm ended the job at its time limit", A.RECONFIGURE),
    "SLURM_GRES_INVALID": Code("Slurm refused the job's generic resource (GPU) request", A.RECONFIGURE),
    "SLURM_NODE_CONFIG_UNAVAILABLE": Code("no node of the partition has the configuration the job asks for",
                                          A.RECONFIGURE),
    "SLURM_REQUEST_REFUSED": Code("Slurm refused the job's allocation or step", A.RECONFIGURE),
    "CRASH_SEGFAULT": Code("a rank's process crashed with SIGSEGV", A.RECONFIGURE),
    "CRASH_ABORT": Code("a rank's process aborted (SIGABRT: a heap check, an uncaught C++ exception)", A.RECONFIGURE),
    "CRASH_SIGNAL": Code("a rank's process died on a fatal signal (SIGBUS, SIGILL, SIGFPE)", A.RECONFIGURE),
}
del A


class UncataloguedCode(Exception):
    """A non-PASS result without a code of ``CODES``: a chexstack bug, reported as an ERROR."""


def entry(code: str | None) -> Code:
    """The catalogue entry of ``code``; ``UncataloguedCode`` naming it when there is none."""
    if code not in CODES:
        raise UncataloguedCode("verdict code %r is not in validate/catalogue.py" % code)
    return CODES[code]


def document(checks: dict) -> dict:
    """The catalogue as JSON (``validate/schema/catalogue-v1.json``): its name, every check (``id``: title, whether
    it is ``fast``), every rule of ``invoke validate --job`` (``validate.jobrules``: what it expects, the job files it
    applies to) and every code (meaning, action, noisy). ``checks``: ``validate.checks.CHECKS``."""
    from validate.jobrules import RULES  # imports nothing

    return {"catalogue": CATALOGUE,
            "actions": [a.word for a in Action],
            "checks": {cid: {"title": c.title, "fast": c.fast} for cid, c in sorted(checks.items())},
            "job_rules": {rid: {"expected": r.expected, "kinds": list(r.kinds)} for rid, r in sorted(RULES.items())},
            "codes": {code: {"meaning": c.meaning, "action": c.action.word, "noisy": c.noisy}
                      for code, c in sorted(CODES.items())}}


def text(checks: dict) -> str:
    """``document(checks)`` as the file holds it (indented, sorted, one trailing newline)."""
    return json.dumps(document(checks), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def digest(checks: dict) -> str:
    """SHA-256 of ``text(checks)``: which catalogue of checks and codes produced a report."""
    return hashlib.sha256(text(checks).encode()).hexdigest()
