"""Open MPI ``mpirun`` command lines for Horovod jobs (host launches, Slurm's hybrid model, MPIJob launchers).

The flags are Horovod's documented Open MPI recipe (https://horovod.readthedocs.io/en/stable/mpi.html,
"Running Horovod with Open MPI"): ``-bind-to none -map-by slot`` (Horovod/TensorFlow manage their own threads;
fill each host's slots in order so rank 0 lands on the first host), ``-x`` to export the environment NCCL and the
Python environment need on remote ranks, and ``-mca pml ob1 -mca btl ^openib`` (the openib BTL and NCCL's own
InfiniBand use do not mix; NCCL carries the all-reduce).
"""
from __future__ import annotations

from collections.abc import Sequence

#: Exported to every rank: the loader and executable search paths, plus NCCL's transport log so a silent
#: fall-back to TCP sockets is visible (../shared/cases/05).
EXPORTED_ENV = ("NCCL_DEBUG=INFO", "LD_LIBRARY_PATH", "PATH")
#: Open MPI's TCP transport settings of every launch (measured: bench/ratios/allreduce_transport.py).
TCP_MCA: tuple[tuple[str, str], ...] = ()
#: Horovod's settings exported to every rank (measured: bench/ratios/allreduce_transport.py).
HOROVOD_ENV: dict[str, str] = {}


def mpirun_argv(np: int, command: Sequence[str], *, hosts: Sequence[str] | None = None,
                allow_run_as_root: bool = False, exported_env: Sequence[str] = EXPORTED_ENV,
                mpirun: str = "mpirun", tcp_mca: bool = True) -> list[str]:
    """``mpirun`` argv that starts ``np`` ranks of ``command``.

    ``hosts``: Open MPI ``-H`` entries ``host:slots`` (None: the hosts come from the resource manager, e.g. a
    Slurm allocation or the MPIJob's hostfile). ``allow_run_as_root``: Open MPI refuses to start as root without
    ``--allow-run-as-root``. Raises ValueError for ``np < 1`` or an empty command.
    """
    if np < 1:
        raise ValueError("np must be >= 1, got %d" % np)
    if not command:
        raise ValueError("command must not be empty")
    argv = [mpirun]
    if allow_run_as_root:
        argv.append("--allow-run-as-root")
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
