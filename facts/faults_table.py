"""The one table of faults: every code (``CODES``) with its meaning, the next action on one ladder from cheapest to
most drastic (``Action``), whether one noisy run can cause it (``noisy``) and its remedy where one is known.

``validate.catalogue`` publishes it (``validate/schema/catalogue-v1.json``: meaning, action, noisy) and judges
results by it; ``facts.parsers.faults.CAUSES`` (a first fault's known causes), ``launch.failure`` (a failed run's
explanation, a failed launch) and validate's checks and job rules read each code's remedy here. A new fault is a new
entry here (``docs/extending.md``, "Add a fault"); no other module keeps a table of codes and remedies
(``tests/test_fault_table.py``).

The shape is NVIDIA's health-validation tooling's: DCGM diagnostics give each failure "a specific ID, Severity, and
Category that can be useful when deciding how to handle the failure" (DCGM reference, Diagnostic Errors:
https://docs.nvidia.com/datacenter/dcgm/latest/reference/diagnostics/errors.html; its ``DCGM_ERROR_*`` severities
run from MONITOR and CONFIG to RESET and ISOLATE), and NVSentinel's ``HealthEvent`` carries an ``errorCode`` and a
``recommendedAction`` (``NONE``, ``COMPONENT_RESET``, ``RESTART_VM``, ``RESTART_BM``, ``REPLACE_VM``, ...: NVSentinel
HealthEvent data model, https://docs.nvidia.com/nvsentinel/architecture/health-event-data-model).

A code is stable: other tools key on it; a new fault family gets a new code here, never a new meaning for an old
one. ``noisy`` marks a measured shortfall that one noisy run can cause: a check repeats its measurement before it
gives that verdict (``validate.tries.until_pass``). The SKIP codes say why a check did not judge the node
(``NOT_APPLICABLE``, ``TOOL_MISSING``, ``NOT_REPORTED``, ``TOOL_FAILED``, ``EVIDENCE_MISSING``).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from facts.openmpi import ALLOW_RUN_AS_ROOT_ENV, ALLOW_RUN_AS_ROOT_FLAG


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
    """One entry of the table: ``meaning`` (what the verdict says of the node), ``action`` (the next one),
    ``noisy`` (a measured shortfall a check repeats before giving it), ``remedy`` (the fix of the fault where one
    is known: a text, or a %-template whose keys its reader fills, e.g. ``%(hosts)s``; None where each result
    names its own), ``gpu_remedy`` (the fix for GPU ranks, where it differs), ``run_remedy`` (the fix as a failed
    run's first fault gives it, where it differs from the node check's: ``run_fix``)."""

    meaning: str
    action: Action
    noisy: bool = False
    remedy: str | None = None
    gpu_remedy: str | None = None
    run_remedy: str | None = None



# --- remedies that several codes share -------------------------------------------------------------------------------

#: Horovod's install guide: a framework's extension is built only where the framework imports at install time, and
#: against the MPI whose mpicxx is on PATH; ``--check-build`` lists what was built
#: (https://horovod.readthedocs.io/en/stable/install_include.html, https://github.com/horovod/horovod/issues/2619,
#: https://github.com/horovod/horovod/issues/1190: ``undefined symbol: ompi_mpi_op_sum``).
REBUILD_HOROVOD = (
    "rebuild Horovod against the TensorFlow and the MPI this process loads, after the final framework install: "
    "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 pip install --no-cache-dir --no-binary horovod horovod (with the "
    "mpicc/mpicxx of the MPI you launch with first on PATH); `horovodrun --check-build` must then list the framework "
    "and the controller, and `ldd` of Horovod's mpi_lib must name that MPI's libmpi; the same on every host "
    "(https://horovod.readthedocs.io/en/stable/install_include.html)")

#: NCCL's troubleshooting guide (InfiniBand: "ulimit -l unlimited"; in containers `--ulimit memlock=-1`:
#: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html) and Slurm's FAQ on locked memory
#: (slurmd's own limit is propagated to the tasks: https://slurm.schedmd.com/faq.html#memlock).
MEMLOCK_REMEDY = (
    "raise the locked-memory limit of the ranks to unlimited where they run: bare metal `* - memlock unlimited` in "
    "/etc/security/limits.conf (ulimit -l must print unlimited in the ranks' own shell: mpirun ... bash -c 'ulimit "
    "-l'); under Slurm the tasks inherit slurmd's limit (LimitMEMLOCK=infinity in slurmd's unit) unless "
    "PropagateResourceLimits says otherwise (srun --propagate=NONE keeps the node's limit); in a container docker "
    "run --ulimit memlock=-1 (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html, "
    "https://slurm.schedmd.com/faq.html#memlock)")

#: NCCL_SOCKET_IFNAME / NCCL_IB_HCA (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html) and the
#: interface selection the Horovod thread settles on (https://github.com/horovod/horovod/issues/110).
NCCL_SOCKET_REMEDY = (
    "point NCCL at an interface every host reaches the others on: NCCL_SOCKET_IFNAME=<that interface> (eth0, ib0; "
    "=^docker0,lo to exclude), and NCCL_IB_HCA=<the HCAs that route> for the RDMA traffic; open the ports between "
    "the hosts (a firewall drops the connect: it times out) and test with `nc -zv HOST PORT` or the nccl-tests "
    "between the two hosts (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html)")

#: Open MPI's ranks join the runtime of the mpirun that started them; another Open MPI's library (or a Horovod built
#: against one) cannot (https://www.open-mpi.org/faq/?category=running#adding-ompi-to-path,
#: https://github.com/horovod/horovod/issues/2059).
MPI_INIT_REMEDY = (
    "run one Open MPI on every host: the same version at the same prefix (`mpirun -H HOSTS ompi_info --version` "
    "must print one version; start mpirun by its full path or with --prefix), the ranks' Python loading that MPI's "
    "libmpi (LD_LIBRARY_PATH exported with -x) and a Horovod built against it (horovodrun --check-build); under srun "
    "use --mpi=pmix with an Open MPI built against Slurm's PMIx (srun --mpi=list) "
    "(https://www.open-mpi.org/faq/?category=running#adding-ompi-to-path)")

#: Slurm's GRES (https://slurm.schedmd.com/gres.html) and its refusal of a request no node of the partition can
#: satisfy (https://slurm.schedmd.com/sbatch.html).
SCHEDULER_REMEDY = (
    "ask for what the partition's nodes have: `sinfo -o '%P %G %D'` lists each partition's GPUs (gres) and "
    "`scontrol show node NODE` a node's Gres, CPUs and memory; request GPUs as they are named there (--gres=gpu:N, "
    "--gpus-per-node=N); an srun inside an allocation can only use what the allocation holds (an enclosing job's "
    "SLURM_* variables carry into a job submitted from it) (https://slurm.schedmd.com/gres.html)")

#: Slurm's --time and --requeue (https://slurm.schedmd.com/sbatch.html#OPT_time).
TIME_LIMIT_REMEDY = (
    "give the job more time (sbatch --time, within the partition's MaxTime: `sinfo -o '%P %l'`) or make it "
    "resumable: the trainer's --resume continues after the last committed checkpoint, and sbatch --requeue (invoke "
    "train --launcher slurm --requeue) resubmits it (https://slurm.schedmd.com/sbatch.html#OPT_time)")

#: The nvidia kernel module and the user-space libraries are one driver version; a package update replaces the
#: libraries while the old module stays loaded until a reboot or reload (NVIDIA's driver README, "nvidia-smi ...
#: Driver/library version mismatch"; https://github.com/NVIDIA/nvidia-docker/issues/1242).
DRIVER_MISMATCH_REMEDY = (
    "the loaded nvidia kernel module is another version than the driver's user-space libraries (a driver update "
    "without a reboot: compare /proc/driver/nvidia/version with the libraries' version): reboot the node, or unload "
    "and reload the nvidia modules once no process holds a GPU (rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia; "
    "nvidia-smi), and hold the driver packages out of unattended upgrades "
    "(https://github.com/NVIDIA/nvidia-docker/issues/1242)")

#: A native crash: CPython's faulthandler prints the Python stack (https://docs.python.org/3/library/faulthandler.html).
CRASH_REMEDY = (
    "rerun with PYTHONFAULTHANDLER=1 for the Python stack of the crash; read the native frames after it: a crash "
    "in Horovod's extension or libmpi after an upgrade is a Horovod built against another TensorFlow or MPI "
    "(horovodrun --check-build; rebuild it), one in libcuda a driver/CUDA mismatch (invoke validate on that node), "
    "one in XLA/TensorFlow its own bug (rerun without XLA, report it with the backtrace) "
    "(https://docs.python.org/3/library/faulthandler.html)")

#: GPU memory exhausted: TensorFlow's BFC allocator, CUDA's CUDA_ERROR_OUT_OF_MEMORY, PyTorch's caching allocator
#: (https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth).
GPU_OOM_REMEDY = (
    "the GPU's memory ran out (not the host's): lower --batch-size, the batch of each rank, or --image-size; one rank "
    "per GPU (two ranks pinned to one GPU halve its memory: pin hvd.local_rank()); no other process on the GPU "
    "(nvidia-smi) (https://www.tensorflow.org/guide/gpu#limiting_gpu_memory_growth)")

#: The host's memory: the kernel's OOM killer (mm/oom_kill.c) and Slurm's cgroup (task/cgroup:
#: https://slurm.schedmd.com/cgroup.conf.html).
HOST_OOM_REMEDY = (
    "the host's (or the job's cgroup's) memory ran out and the kernel killed a rank (not the GPU's memory): fewer "
    "ranks per host, a smaller --batch-size or --image-size, or more memory for the job (sbatch --mem / "
    "--mem-per-cpu, or --exclusive for the whole node's memory; a pod's memory limit); dmesg on that host names "
    "what was killed (https://slurm.schedmd.com/cgroup.conf.html)")

#: /dev/shm too small or full for NCCL's shared-memory segments (https://github.com/NVIDIA/nccl/issues/290).
SHM_REMEDY = ('start the container with ipc_mode="host" or shm_size>=1g (docker run --ipc=host / --shm-size=1g; '
              "Kubernetes: an emptyDir {medium: Memory} volume at /dev/shm); NCCL_SHM_DISABLE=1 only as a slower "
              "workaround")

#: Two ranks on one GPU: NCCL allows one rank per GPU in a communicator. Horovod's local rank comes from its MPI, and
#: is 0 on every rank when Horovod was built against another MPI than the ``mpirun`` that started the ranks
#: (https://github.com/horovod/horovod/issues/3949, #515, #604: "different versions of mpicxx and mpirun"). Slurm's
#: --gpus-per-task/--gpu-bind bind each task to its own GPUs, renumbered from 0 inside it
#: (https://slurm.schedmd.com/srun.html#OPT_gpu-bind): with a trainer that pins local rank N (validate --job's
#: job.gpu_binding) the node's GPUs stay visible to every task.
DUPLICATE_GPU_REMEDY = (
    "give each rank its own GPU: pin GPU hvd.local_rank() (TF 2: tf.config.set_visible_devices(gpus[hvd.local_rank()], "
    "'GPU'); TF 1: config.gpu_options.visible_device_list = str(hvd.local_rank())) — chexstack's trainer does, so it "
    "needs every GPU of its node visible; only a script that always uses GPU 0 may instead start each rank with its "
    "own CUDA_VISIBLE_DEVICES; if hvd.local_rank() is 0 on every rank, Horovod's MPI is not the MPI of the mpirun that "
    "started the ranks: compare `which mpirun` with `ldd` of Horovod's MPI library and `horovodrun --check-build`, "
    "then rebuild Horovod against that MPI or launch with its own mpirun; under Slurm keep every GPU of a node "
    "visible to its tasks and let the trainer pin local rank N to GPU N (--gpus-per-node=N --ntasks-per-node=N, "
    "--gpu-bind=none), not --gpus-per-task=1 nor one CUDA_VISIBLE_DEVICES per task, which leave each task one GPU "
    "numbered 0 so local rank 1 finds no GPU 1 (invoke validate --job: job.gpu_binding)")

#: NCCL could not pin memory for the HCA (Horovod's troubleshooting guide: "NCCL WARN Call to ibv_reg_mr failed",
#: memlock unlimited); the limit that counts is the ranks', under their launcher (container.rank_limits).
MEMREG_REMEDY = ("raise the locked-memory limit to unlimited where the ranks run: docker run --ulimit memlock=-1; bare "
                 "metal '* - memlock unlimited' in /etc/security/limits.conf and the batch system's own (slurmd's "
                 "LimitMEMLOCK=infinity, PropagateResourceLimits); see container.memlock and container.rank_limits")

#: An RDMA work completion with an error status (ibv_wc_status, libibverbs' verbs.h; 12 IBV_WC_RETRY_EXC_ERR: the
#: peer never acknowledged): the fabric between the nodes, not NCCL's set-up
#: (https://github.com/NVIDIA/nccl/issues/185).
COMPLETION_REMEDY = (
    "an RDMA transfer between the nodes failed (the ibv_wc status in the line; 12: retries exceeded, the peer never "
    "acknowledged): check both ends' ports (ibstat: Active/LinkUp), that the HCAs NCCL uses reach each other "
    "(NCCL_IB_HCA to the rails that route), over RoCE the GID index (NCCL_IB_GID_INDEX, show_gids) and the lossless "
    "settings (PFC/ECN); ib_write_bw between the two hosts tells the fabric from NCCL")

#: Ranks in containers on a host-private bridge advertise addresses no other host routes
#: (https://github.com/NVIDIA/nccl/issues/331, https://github.com/pytorch/pytorch/issues/23363).
UNROUTABLE_REMEDY = (
    "the ranks' containers are on a host-private bridge (docker0 172.17.0.0/16, cni0), whose addresses the other hosts "
    "cannot reach: run them on the host network (docker run --network host; Kubernetes hostNetwork: true or a CNI "
    "whose pod addresses route between nodes) and point NCCL at a routed interface "
    "(NCCL_SOCKET_IFNAME=<the host's NIC>)")
#: A GPU's runtime fault as a failed run's first fault gives it: NVIDIA's Xid catalogue
#: (https://docs.nvidia.com/deploy/xid-errors/) gives each Xid's cause and action (79: drain and reset or reboot;
#: 48/94/95: reset, replace on recurrence; 63/64: row remapping).
XID_RUN_REMEDY = (
    "drain the node (scontrol update nodename=NODE state=drain reason=xid) and run invoke validate on it (gpu.xid "
    "reads the kernel log's Xid events, and its ECC and row-remapping checks the GPU's memory); reset the GPU "
    "(nvidia-smi -r) or reboot it, and have it serviced if the Xid recurs; rerun the job on other nodes "
    "(https://docs.nvidia.com/deploy/xid-errors/)")


A = Action
#: Every fault and verdict code. A check's result's ``remedy`` is the specific fix for the case at hand; an entry's
#: ``remedy``, where it has one, is the fix a check, a failed run's explanation and a job file's rule all give.
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
                                         A.RELOAD_MODULE,
        run_remedy=DRIVER_MISMATCH_REMEDY,
        remedy="the user-space driver was upgraded while the old kernel module is still loaded: reboot (or unload "
               "and reload the nvidia kernel modules)"),
    "NVIDIA_DRIVER_NOT_LOADED": Code("the NVIDIA kernel module is not loaded", A.RELOAD_MODULE,
        remedy="install the NVIDIA driver / load its kernel module (modprobe nvidia; check dmesg for NVRM errors)"),
    # NVIDIA driver README, "Open Linux Kernel Modules": Turing and later only; the .run installer's -m=kernel picks
    # the proprietary flavour; distributions ship both (e.g. nvidia-driver-N vs nvidia-driver-N-open; negativo17:
    # https://github.com/negativo17/nvidia-driver/issues/158, the kernel module flavour switched back)
    "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU": Code("the open nvidia.ko refuses a GPU it does not support (no GSP)",
                                               A.RELOAD_MODULE,
        remedy="install the proprietary kernel module flavour of the driver: the .run installer with -m=kernel, "
               "the distribution's non-open packages (e.g. nvidia-driver-N, not nvidia-driver-N-open) or its "
               "switch (negativo17: the kernel module flavour in /etc/nvidia/kernel.conf, then rebuild), or a "
               "driver branch that defaults to it; a pre-Turing GPU cannot use the open kernel modules at all"),
    "NVML_ERROR": Code("NVML reported an error of the driver installation", A.REBOOT,
        remedy="check the driver installation (dmesg, nvidia-bug-report.sh)"),
    "NO_DEVICES": Code("the driver sees no GPU", A.REBOOT,
        remedy="the driver sees no GPU: check dmesg for NVRM errors and the PCI device (lspci -d 10de:)"),
    "GPU_LOST": Code("a GPU fell off the bus or its handle is lost", A.REBOOT,
        remedy="drain the node, reset the GPU (nvidia-smi -r -i <id>) or reboot; if it recurs (Xid 79) the GPU "
               "needs service", run_remedy=XID_RUN_REMEDY),
    "GPU_XID": Code("NVRM Xid events in the kernel log", A.REBOOT, run_remedy=XID_RUN_REMEDY),
    "GPU_MEMORY_ERRORS": Code("uncorrectable ECC errors or failed row remapping", A.REPLACE_HARDWARE,
                              run_remedy=XID_RUN_REMEDY),
    "GPU_RESET_PENDING": Code("a page retirement or row remapping waits for a GPU reset", A.REBOOT),
    "GPU_ECC_DISABLED": Code("ECC is off on a GPU that has it", A.REBOOT),
    "GPU_PERSISTENCE_OFF": Code("persistence mode is off", A.RECONFIGURE),
    "GPU_PEER_OUTLIER": Code("a GPU differs from its peers (PCIe link, clocks, NVLink count, ECC mode)",
                             A.REPLACE_HARDWARE),
    "CUDA_DRIVER_TOO_OLD": Code("the driver is older than the CUDA the stack needs", A.RECONFIGURE,
        remedy="upgrade the driver or use an image with an older CUDA (gpu.driver_cuda)"),
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
    # The remedy of each NCCL failure cause ``facts.parsers.nccl.classify_nccl_failure`` names: validate's NCCL checks
    # and a failed training run's explanation (``nccl_diagnosis``) give the same one.
    "NCCL_SHM_EXHAUSTED": Code("NCCL could not create a shared-memory segment (/dev/shm full)", A.RECONFIGURE,
        remedy=SHM_REMEDY),
    "NCCL_SHM_TOO_SMALL": Code("/dev/shm too small for NCCL's shared-memory transport", A.RECONFIGURE),
    "NCCL_SOCKET_FALLBACK": Code("NCCL uses TCP sockets where RDMA is expected", A.RECONFIGURE),
    "NCCL_IB_DEVICE_NOT_VISIBLE": Code("NCCL cannot open the HCA (no /dev/infiniband in the container)",
                                       A.RECONFIGURE,
        remedy="give the container the HCAs: docker run --device=/dev/infiniband --cap-add=IPC_LOCK --ulimit "
               "memlock=-1; Kubernetes: the RDMA device-plugin resource and IPC_LOCK"),
    "NCCL_NO_LIBIBVERBS": Code("NCCL cannot load libibverbs", A.RECONFIGURE,
        remedy="install rdma-core/libibverbs in the image (libibverbs.so.1)"),
    "NCCL_MIXED_RAILS": Code("IB and RoCE devices mixed in NCCL's device set", A.RECONFIGURE),
    "NCCL_NO_TRANSPORT": Code("no network transport in a multi-node NCCL log", A.RETRY),
    "NCCL_SPLIT_WORLD": Code("the ranks formed several communicators, not one", A.RECONFIGURE),
    "NCCL_DUPLICATE_GPU": Code("two ranks on one GPU (NCCL refuses the communicator)", A.RECONFIGURE,
        remedy=DUPLICATE_GPU_REMEDY),
    "NCCL_IB_MEMREG_FAILED": Code("the HCA could not register NCCL's pinned memory (memlock limit)", A.RECONFIGURE,
        remedy=MEMREG_REMEDY,
        run_remedy=MEMLOCK_REMEDY),
    "NCCL_IB_COMPLETION_ERROR": Code("an RDMA transfer between the nodes failed (IB work completion error)",
                                     A.RECONFIGURE,
        remedy=COMPLETION_REMEDY),
    "NCCL_UNROUTABLE_ADDRESS": Code("NCCL's peers advertised container-bridge addresses the other hosts cannot "
                                    "reach", A.RECONFIGURE,
        remedy=UNROUTABLE_REMEDY),
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
    # The fix for each cause of a failed launch (``facts.parsers.mpi.LAUNCH_CAUSES``, and validate's ``MPI_HANG``):
    # ``%(hosts)s`` the hosts the distinguishing lines name (else the run's), ``%(command)s`` the launch command.
    "MPI_RUN_AS_ROOT": Code("Open MPI refuses to run as root", A.RECONFIGURE,
        remedy="add %s (or set %s), or run as a normal user (Open MPI FAQ: running as root)" % (
               ALLOW_RUN_AS_ROOT_FLAG, " ".join("%s=%s" % kv for kv in sorted(ALLOW_RUN_AS_ROOT_ENV.items())))),
    "MPI_HOST_UNREACHABLE": Code("a host does not resolve or accept ssh", A.RECONFIGURE,
        remedy="every host must accept ssh from this node without a password: `ssh HOST true` for each of "
               "%(hosts)s (sshd running, its port, no firewall), then `%(command)s`"),
    "MPI_HOST_UNKNOWN": Code("ssh cannot resolve a host's name", A.RECONFIGURE,
        remedy="%(hosts)s does not resolve from this node: check the name in -H/--hosts or the hostfile "
               "(HOST:SLOTS: the slots after a colon), /etc/hosts or DNS; `getent hosts HOST` must print its "
               "address"),
    "MPI_SSH_AUTH": Code("ssh to a host is refused: its key or host key", A.RECONFIGURE,
        remedy="ssh to %(hosts)s is refused or asks for a password: put this user's public key in "
               "~/.ssh/authorized_keys there (ssh-copy-id HOST) and accept the host keys; `ssh -o BatchMode=yes "
               "HOST true` must succeed for each"),
    "MPI_ORTED_MISSING": Code("Open MPI's daemon (orted) is not on a host's non-interactive PATH", A.RECONFIGURE,
        remedy="Open MPI's daemon (orted) is not found by a non-interactive ssh login on %(hosts)s: install the "
               "same Open MPI at the same path on every host and start mpirun by its full path or with --prefix "
               "DIR (or set PATH and LD_LIBRARY_PATH for non-interactive shells there); `ssh HOST which orted` "
               "must print it (Open MPI FAQ: running, prerequisites)"),
    "MPI_TCP_UNREACHABLE": Code("Open MPI's daemons or ranks cannot reach each other over TCP", A.RECONFIGURE,
        remedy="the ranks could not open TCP connections to each other: a firewall between the hosts, or an "
               "interface one host cannot reach; open the ports or pin a common interface (--mca "
               "btl_tcp_if_include IFACE --mca oob_tcp_if_include IFACE)"),
    "MPI_DAEMON_START_FAILED": Code("Open MPI could not start its daemons and printed no more specific cause",
                                    A.RETRY,
        remedy="mpirun could not start its daemon on a host and no line says why: `ssh HOST orted --version` for "
               "each of %(hosts)s (ssh, then Open MPI on the remote PATH), and /tmp writable there"),
    # The fix of each image pyxis mis-reads (``facts.pyxis.image_problem``), for a failed job's log
    # (``pyxis_diagnosis``) and a batch script's ``--container-image`` (``invoke validate --job``): ``%(image)s`` the
    # image as given, ``%(name)s`` its file name, ``%(stem)s`` without the suffix.
    "PYXIS_SQUASHFS_AS_REGISTRY": Code("a squashfs image named without a leading / or ./: pyxis pulls the name "
                                       "from a registry instead of running the file", A.RECONFIGURE,
        remedy="name the squashfs file so that pyxis reads it as a file: its absolute path on the nodes' shared "
               "storage (--container-image=/shared/images/%(name)s) or ./%(image)s from the job's working "
               "directory; pyxis pulls any name that does not start with / or . from a registry (NVIDIA/pyxis#127)"),
    "PYXIS_SIF_IMAGE": Code("a SIF given to pyxis, which runs squashfs files and registry images only",
                            A.RECONFIGURE,
        remedy="pyxis runs enroot images (a squashfs file, a registry image), not a SIF: run the SIF with "
               "singularity exec under the host's mpirun (invoke train --launcher slurm --hybrid --image "
               "/shared/images/%(name)s), or give pyxis a squashfs of the image (enroot import -o "
               "/shared/images/%(stem)s.sqsh docker://REGISTRY#IMAGE, or dockerd://IMAGE)"),
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
    "MPI_PMI_MISMATCH": Code("the ranks' PMI/PMIx does not match the launcher's", A.RECONFIGURE,
        remedy="start the ranks with mpirun, or with srun --mpi=pmix (srun --mpi=list shows what Slurm offers) "
               "and an Open MPI built against the same PMIx (ompi_info | grep -i pmix) — Open MPI FAQ: running "
               "jobs under Slurm"),
    # The fix of a cause for GPU ranks, where it differs: one rank per GPU (``launch.job``, validate's
    # ``job.rank_per_gpu``) leaves no room for more ranks than slots, and ``--oversubscribe`` would put two ranks on one
    # GPU, which NCCL refuses ("Duplicate GPU detected": ``NCCL_DUPLICATE_GPU``).
    "MPI_NOT_ENOUGH_SLOTS": Code("more ranks than slots", A.RECONFIGURE,
        remedy="give the hosts' slots (-H host:N) or --oversubscribe",
        gpu_remedy="one rank per GPU: lower -np to the GPUs the hosts have (their slots: -H host:N with N its GPUs, a "
               "Slurm allocation's tasks, an MPIJob's workers × slotsPerWorker), or add hosts with GPUs; not "
               '--oversubscribe, which puts two ranks on one GPU (NCCL: "Duplicate GPU detected")'),
    "MPI_EXECUTABLE_MISSING": Code("the program is missing on a host", A.RECONFIGURE,
        remedy="install the program at the same path on every host (or a shared file system)"),
    "MPI_RANK_FAILED": Code("the launch worked and a rank failed", A.RETRY,
        remedy="the launch worked: read the failing rank's output (`%(command)s`)"),
    "MPI_HANG": Code("mpirun neither started nor failed", A.RECONFIGURE,
        remedy="an mpirun that neither starts nor fails waits on a host: ssh asking for a password or a host key "
               "(`ssh -o BatchMode=yes HOST true` for each of %(hosts)s), or a firewall between the hosts on Open "
               "MPI's TCP ports (pin the interface: --mca btl_tcp_if_include / oob_tcp_if_include <iface>)"),
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
    "MEMLOCK_LIMITED": Code("locked memory limited where RDMA is used", A.RECONFIGURE,
        remedy=MEMLOCK_REMEDY),
    "RANK_PROBE_FAILED": Code("the probe rank measuring the ranks' limits did not start", A.RECONFIGURE),
    "DOCKER_ENGINE_UNREACHABLE": Code("the docker engine does not answer", A.RECONFIGURE),
    "NVIDIA_CONTAINER_TOOLKIT_MISSING": Code("docker cannot select the NVIDIA device driver", A.RECONFIGURE,
        remedy="install the NVIDIA Container Toolkit and run nvidia-ctk runtime configure --runtime=docker (not "
               "docker from snap)"),
    "NVIDIA_RUNTIME_NOT_REGISTERED": Code("the nvidia runtime is not registered with docker", A.RECONFIGURE,
        remedy="nvidia-ctk runtime configure --runtime=docker; restart docker"),
    "NVIDIA_CONTAINER_CLI_NVML_NOT_FOUND": Code("nvidia-container-cli cannot load libnvidia-ml", A.RECONFIGURE),
    "NVIDIA_CONTAINER_CLI_LIBRARY_NOT_FOUND": Code("nvidia-container-cli cannot find a driver library",
                                                   A.RECONFIGURE),
    "CONTAINER_GPU_FAILED": Code("a container does not see the host's GPUs", A.RECONFIGURE),
    "NV_LIBS_NOT_BOUND": Code("--nv did not bind the driver libraries", A.RECONFIGURE),
    "NV_LD_PATH_RESET": Code("LD_LIBRARY_PATH lost /.singularity.d/libs", A.RECONFIGURE),
    "NV_HOST_LIBCUDA_MISSING": Code("the host has no libcuda.so.1 for --nv to bind (its loader cache lists none)",
                                    A.RECONFIGURE),
    "APPTAINER_NO_USERNS": Code("neither user namespaces nor a setuid starter lets this user run containers",
                                A.RECONFIGURE,
        remedy="let the user create containers on the node: unprivileged user namespaces (sysctl "
               "user.max_user_namespaces above 0) or Apptainer's setuid starter "
               "(https://apptainer.org/docs/admin/main/user_namespace.html); invoke validate's container checks "
               "judge both"),
    "APPTAINER_TOO_OLD": Code("Apptainer/Singularity older than the release the launchers need", A.RECONFIGURE),
    # Horovod
    "HOROVOD_IMPORT": Code("Horovod does not import here", A.RECONFIGURE,
        remedy=REBUILD_HOROVOD),
    "HOROVOD_BUILD_INCOMPLETE": Code("Horovod lacks a framework, controller or tensor operation", A.RECONFIGURE,
        remedy=REBUILD_HOROVOD),
    # The fix of a rank's failure that validate's checks diagnose too, by code: Horovod built for another TensorFlow
    # (https://github.com/horovod/horovod/issues/2619: horovod.env and horovod.image) and a driver older than the CUDA
    # runtime the ranks load (cudaError 35, https://github.com/NVIDIA/nvidia-docker/issues/745: container.gpus,
    # gpu.driver_cuda). In validate's words: its checks and a failed run's explanation (``runtime_diagnosis``) say the
    # same. And a rank's own out-of-memory error (TensorFlow's ResourceExhaustedError, ``TF_OUT_OF_MEMORY``: the batch
    # per rank does not fit the device's memory), which only a failed run's explanation names.
    "HOROVOD_TF_MISMATCH": Code("Horovod was built for another TensorFlow", A.RECONFIGURE,
        remedy="reinstall horovod (pip install --no-cache-dir, so no wheel built for the old TensorFlow is "
               "reused) after the final TF install: install every package that can touch TensorFlow first and "
               "Horovod last"),
    # the training run itself
    "TF_OUT_OF_MEMORY": Code("TensorFlow ran out of memory allocating a tensor: the batch per rank (or the image "
                             "size) needs more than a GPU's, or the host's, memory", A.RECONFIGURE,
        remedy="lower --batch-size, the batch of each rank (the global batch is it × the ranks: to keep a global "
               "batch, add ranks), or --image-size; a GPU rank has one GPU's memory to itself (two ranks on one "
               "GPU halve it: one rank per GPU), CPU ranks share their host's memory (fewer ranks per host)"),
    "IMAGE_PROBE_FAILED": Code("the probe inside the stack's image did not run", A.RECONFIGURE),
    "GLOO_LOOPBACK_ONLY": Code("Gloo with loopback as the only interface", A.RECONFIGURE),
    # the training run itself: the first fault in its ranks' output (launch.failure, facts.parsers.faults)
    "CONTAINER_START_FAILED": Code("a rank's container did not start (Apptainer/Singularity FATAL, docker, pyxis): "
                                   "the line says why", A.RECONFIGURE,
        remedy="the quoted line says why the container could not start: start the same container by hand on that "
               "node (`singularity exec IMAGE true`, `docker run IMAGE true`) and run invoke validate there (its "
               "container checks)"),
    # The fix of each cause of a run's first fault that has no other part of the message to say it
    # (``first_fault_diagnosis``), by the catalogue's code.
    "APPTAINER_NO_LOOP_DEVICE": Code("setuid Apptainer/Singularity found no free loop device to mount the SIF: "
                                     "several containers started at once on a kernel that creates loop devices on "
                                     "demand", A.RECONFIGURE,
        remedy="pre-create the loop devices on every node: the kernel parameter max_loop=N (N at least the "
               "containers a node starts at once, its ranks) or `options loop max_loop=N` in /etc/modprobe.d/ "
               "where loop is a module "
               "(https://www.kernel.org/doc/html/latest/admin-guide/kernel-parameters.html, loop.max_loop), or "
               "`sudo losetup -f` once per container before the job "
               "(https://github.com/sylabs/singularity/issues/1499); or a SingularityCE with the LOOP_CTL_ADD fix "
               "(https://github.com/sylabs/singularity/pull/1504, on release-3.11 as #1541; #2144 still failed on "
               "3.11.4, so max_loop is the dependable one); or run unprivileged: user-namespace mode mounts the "
               "SIF with squashfuse and needs no loop device "
               "(https://apptainer.org/docs/admin/main/user_namespace.html)"),
    # issue 42 item 4: a pod's image pulled from its registry (launch.pods.pull_image, the kubelet's ErrImagePull)
    "IMAGE_MANIFEST_UNKNOWN": Code("the registry holds no image at the reference a job pulls (a wrong digest or "
                                   "tag, a repository never pushed)", A.RECONFIGURE,
        remedy="push the image, then name it by the digest the push printed (skopeo copy --digestfile; `skopeo "
               "inspect docker://REGISTRY/REPO:TAG` prints the digest a tag points to), and check that the registry "
               "and repository are the ones pushed to (`curl https://REGISTRY/v2/REPO/tags/list`; the distribution "
               "spec: https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pulling-manifests)"),
    "REGISTRY_UNREACHABLE": Code("the registry a job pulls from does not answer", A.RECONFIGURE,
        remedy="check the registry from the node that pulled: `curl https://REGISTRY/v2/` must answer (an empty "
               "{} or a 401); start it or give its right host and port (the test cluster's: scripts/testcluster "
               "up, CHEXSTACK_REGISTRY), and let the node's traffic reach it (https://distribution.github.io/"
               "distribution/about/deploying/)"),
    "REGISTRY_CERT_UNTRUSTED": Code("the engine that pulls does not trust the registry's TLS certificate",
                                    A.RECONFIGURE,
        remedy="give the puller the registry's CA, each tool its own documented way, never an insecure-registries "
               "switch: dockerd and skopeo /etc/docker/certs.d/HOST:PORT/ca.crt (https://docs.docker.com/engine/"
               "security/certificates/), containerd its hosts.toml ca, Apptainer SSL_CERT_DIR (https://pkg.go.dev/"
               "crypto/x509#SystemCertPool); the test cluster's CA is CHEXSTACK_REGISTRY_CA"),
    "REGISTRY_UNAUTHORIZED": Code("the registry refused the pull: it wants credentials the puller did not give, or "
                                  "refused those it gave", A.RECONFIGURE,
        remedy="log the puller in (docker login REGISTRY; skopeo --creds or --authfile), or for pods give them an "
               "imagePullSecrets of type kubernetes.io/dockerconfigjson "
               "(https://kubernetes.io/docs/tasks/configure-pod-container/pull-image-private-registry/)"),
    "CONTAINER_IMAGE_MISSING": Code("the container image is not at the path given on the node", A.RECONFIGURE,
        remedy="put the image on storage every node mounts, at the same absolute path, and give that path (`ls -l "
               "PATH` on each node; https://github.com/nipreps/fmriprep/issues/2787)"),
    "CUDA_INIT_FAILED": Code("a rank could not initialise CUDA on its GPU (the CUDA error says why)", A.RECONFIGURE),
    # issue 40 item 3 (fixexplain): a CUDA kernel's fault while the run trained (not an initialisation failure); the
    # error is sticky and may be reported by a later call (CUDA_LAUNCH_BLOCKING=1 makes launches synchronous;
    # compute-sanitizer finds the access: https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html)
    "CUDA_RUNTIME_ERROR": Code("a CUDA kernel failed while a rank trained (illegal address, launch failure, "
                               "device-side assert): a kernel bug or the GPU's fault", A.RECONFIGURE, remedy=(
        "run invoke validate on that node (gpu.xid: an Xid at the same time in its kernel log is the GPU's fault, and "
        "its ECC checks the GPU's memory): with an Xid 48/79/94/95 or ECC errors drain the node; without one, a "
        "kernel bug: rerun with CUDA_LAUNCH_BLOCKING=1 for the launch that failed, and under compute-sanitizer for "
        "the access (https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html, "
        "https://docs.nvidia.com/deploy/xid-errors/)")),
    "HOST_OUT_OF_MEMORY": Code("the kernel's or Slurm's out-of-memory killer ended a rank: the host's memory (or "
                               "the job's) ran out", A.RECONFIGURE,
        remedy=HOST_OOM_REMEDY),
    "HOROVOD_STALL_MISMATCH": Code("Horovod's ranks wait on tensors of different names: they run different code or "
                                   "framework versions", A.RECONFIGURE,
        remedy="run one environment on every host: one image (invoke train --stack ...) or one shared venv and "
               "checkout, and compare what each host really runs: `mpirun -H %(hosts)s python -c 'import "
               "tensorflow as tf, keras; print(tf.__version__, keras.__version__)'` and a diff of `pip freeze` "
               "from each host (chexstack's metrics.json records each rank's host); "
               "https://github.com/horovod/horovod/issues/67, #100, #2640"),
    "HOROVOD_STALL": Code("Horovod's ranks hung in a collective some ranks never submitted", A.RECONFIGURE,
        remedy="the missing ranks never reached this collective: a collective inside rank-dependent code (`if "
               "hvd.rank() == 0:` around an allreduce or a callback), a different number of steps per rank, or "
               "those ranks stuck before it (`py-spy dump --pid PID` on them shows where); "
               "https://github.com/horovod/horovod/issues/457, #1012"),
    # issue 40 (signals): usable GPUs, and no PASS over a fault signal nothing explained
    "GPU_FABRIC_NOT_READY": Code("GPUs not registered with the NVLink fabric (Fabric State not Completed, or CUDA "
                                 "error 802 system not yet initialized): nvidia-fabricmanager is not running",
                                 A.RECONFIGURE),
    "IB_PORT_EVENTS": Code("an HCA port raised async error events, lost its link or counts link errors "
                           "(ibv_asyncwatch, the kernel log, perfquery, sysfs counters)",
                           A.REPLACE_HARDWARE, run_remedy=(
        "drain the node and run invoke validate on it (ib.ports reads the port's state and its error events); reset "
        "the adapter (mlxfwreset, or reboot) and have it or its cable serviced if the health report recurs; rerun the "
        "job on other nodes (https://enterprise-support.nvidia.com/s/article/understanding-mlx5-linux-counters-and-"
        "status-parameters)")),
    "GPU_MIG_ENABLED": Code("MIG mode is on where the run puts one rank on each whole GPU", A.RECONFIGURE),
    "UNEXPLAINED_FAULT_SIGNAL": Code("the check's evidence holds a fault signal (an error, failure, Xid, ECC, "
                                     "throttle, link or fabric line of facts/signals.yaml) that none of its findings "
                                     "explains: the node is not known to be fit; read the named line", A.RETRY),
    # a training run's first fault, by its known cause (facts.parsers.faults.CAUSES, each with its remedy)
    "GPU_OUT_OF_MEMORY": Code("a rank's GPU memory ran out (not the host's)", A.RECONFIGURE,
        remedy=GPU_OOM_REMEDY),
    "MPI_INIT_FAILED": Code("the ranks' MPI_Init failed: another Open MPI or PMIx than the launcher's on some host",
                            A.RECONFIGURE,
        remedy=MPI_INIT_REMEDY),
    "NCCL_CONNECT_FAILED": Code("NCCL could not connect to another rank's socket (interface or firewall)",
                                A.RECONFIGURE,
        remedy=NCCL_SOCKET_REMEDY),
    "NCCL_LINK_LOCAL_ADDRESS": Code("NCCL's bootstrap used a link-local IPv6 address (fe80::) no other host routes",
                                    A.RECONFIGURE,
        remedy="set NCCL_SOCKET_IFNAME to an interface with an address every host routes to (its IPv4: eth0, ib0) or "
               "NCCL_SOCKET_FAMILY=AF_INET; " + NCCL_SOCKET_REMEDY),
    "SLURM_TIME_LIMIT": Code("Slurm ended the job at its time limit", A.RECONFIGURE,
        remedy=TIME_LIMIT_REMEDY),
    "SLURM_GRES_INVALID": Code("Slurm refused the job's generic resource (GPU) request", A.RECONFIGURE,
        remedy=SCHEDULER_REMEDY),
    "SLURM_NODE_CONFIG_UNAVAILABLE": Code("no node of the partition has the configuration the job asks for",
                                          A.RECONFIGURE,
        remedy=SCHEDULER_REMEDY),
    "SLURM_REQUEST_REFUSED": Code("Slurm refused the job's allocation or step", A.RECONFIGURE,
        remedy=SCHEDULER_REMEDY),
    "CRASH_SEGFAULT": Code("a rank's process crashed with SIGSEGV", A.RECONFIGURE,
        remedy=CRASH_REMEDY),
    "CRASH_ABORT": Code("a rank's process aborted (SIGABRT: a heap check, an uncaught C++ exception)", A.RECONFIGURE,
        remedy=CRASH_REMEDY),
    "CRASH_SIGNAL": Code("a rank's process died on a fatal signal (SIGBUS, SIGILL, SIGFPE)", A.RECONFIGURE,
        remedy=CRASH_REMEDY),
}
del A


def remedy(code: str) -> str:
    """The remedy of ``code`` (``CODES[code].remedy``); KeyError naming the code where the table has none."""
    fix = CODES[code].remedy
    if fix is None:
        raise KeyError("%s has no remedy in facts/faults_table.py" % code)
    return fix


def run_fix(code: str) -> str:
    """The fix of ``code`` as a failed run's explanation gives it: ``run_remedy`` where the entry has one, else
    ``remedy``."""
    return CODES[code].run_remedy or remedy(code)


def remedies(codes) -> dict[str, str]:
    """``{code: remedy}`` for ``codes``, in their order; each must have one (``remedy``)."""
    return {code: remedy(code) for code in codes}


def remedy_or(code: str | None, default: str) -> str:
    """The remedy of ``code`` where the table has one, else ``default`` (a code of None or without a remedy)."""
    entry = CODES.get(code or "")
    return entry.remedy if entry is not None and entry.remedy is not None else default
