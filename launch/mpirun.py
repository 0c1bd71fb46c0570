"""Open MPI ``mpirun`` command lines for Horovod jobs (host launches, Slurm's hybrid model, MPIJob launchers).

The flags are Horovod's documented Open MPI recipe (https://horovod.readthedocs.io/en/stable/mpi.html,
"Running Horovod with Open MPI"): ``-bind-to none -map-by slot`` (Horovod/TensorFlow manage their own threads;
fill each host's slots in order so rank 0 lands on the first host), ``-x`` to export the environment NCCL and the
Python environment need on remote ranks, and ``-mca pml ob1 -mca btl ^openib`` (the openib BTL and NCCL's own
InfiniBand use do not mix; NCCL carries the all-reduce).
"""
from __future__ import annotations

from collections.abc import Sequence

from facts.openmpi import ALLOW_RUN_AS_ROOT_FLAG

#: Exported to every rank: the loader and executable search paths, plus NCCL's transport log so a silent
#: fall-back to TCP sockets is visible (https://github.com/NVIDIA/nccl/issues/451).
EXPORTED_ENV = ("NCCL_DEBUG=INFO", "LD_LIBRARY_PATH", "PATH")
#: Open MPI TCP transport settings added to every launch: none, because none measurably helped. Measured with
#: bench/ratios/allreduce_transport.py's program (facts/transport.py) on the test cluster (two network
#: namespaces on one 2-core machine, a veth pair, 64 MiB float32, one rank per host, the machine shared with other
#: work): MPI_Allreduce busbw / iperf3 one way, median of 3 rounds per launch, two launches each —
#: defaults 0.33 and 0.25; coll_tuned_allreduce_algorithm 2 (reduce + bcast) 0.34, 0.29; 4 (ring) 0.21, 0.38;
#: btl_tcp_links 2: 0.26; btl_tcp_max_send_size and rdma_pipeline_send_length 1 MiB: 0.30;
#: btl_tcp_sndbuf/rcvbuf 4 MiB: 0.10-0.19 (worse). Every difference is within the round-to-round spread. The
#: bound is the CPU, not Open MPI: TCP over a veth pair costs CPU per byte, a two-rank allreduce sends the buffer
#: both ways at once, and iperf3 both ways at once gets ~0.5-0.8 of the one-way rate per direction on these cores.
#: Add a setting here only with a measured gain on the bench.
TCP_MCA: tuple[tuple[str, str], ...] = ()
#: Horovod settings exported to the ranks by the bench's tuned variant: none. HOROVOD_FUSION_THRESHOLD does not
#: apply to one 64 MiB tensor: a single tensor is allreduced from its input into its output without the fusion
#: buffer (horovod/common/ops/mpi_operations.cc, MPIAllreduce::Execute); HOROVOD_CYCLE_TIME 1 vs 10 ms, two ranks
#: on one host, 2 rounds each: 0.16, 0.24 vs 0.22, 0.15 Gbit/s, no difference beyond the spread.
HOROVOD_ENV: dict[str, str] = {}


def mpirun_argv(np: int, command: Sequence[str], *, hosts: Sequence[str] | None = None,
                allow_run_as_root: bool = False, exported_env: Sequence[str] = EXPORTED_ENV,
                mpirun: str = "mpirun", tcp_mca: bool = True) -> list[str]:
    """``mpirun`` argv that starts ``np`` ranks of ``command``.

    ``hosts``: Open MPI ``-H`` entries ``host:slots`` (None: the hosts come from the resource manager, e.g. a
    Slurm allocation or the MPIJob's hostfile). ``allow_run_as_root``: add Open MPI's run-as-root permission
    (``facts.openmpi``). Raises ValueError for ``np < 1`` or an empty command.
    """
    if np < 1:
        raise ValueError("np must be >= 1, got %d" % np)
    if not command:
        raise ValueError("command must not be empty")
    argv = [mpirun]
    if allow_run_as_root:
        argv.append(ALLOW_RUN_AS_ROOT_FLAG)
    argv += ["-np", str(np)]
    if hosts:
        argv += ["-H", ",".join(hosts)]
    argv += ["-bind-to", "none", "-map-by", "slot"]
    for name in exported_env:
        argv += ["-x", name]
    argv += ["-mca", "pml", "ob1", "-mca", "btl", "^openib"]
    for name, value in (TCP_MCA if tcp_mca else ()):
        argv += ["-mca", name, value]
    return argv + list(command)
