"""Allreduce bus bandwidth across two hosts beside the raw TCP bandwidth between the same two hosts, measured by
one program that ``mpirun`` starts once per host: the measurement of ``invoke validate --hosts`` (check
``mpi.bandwidth``) and of the ratio benchmark ``bench/ratios/allreduce_transport.py`` — one function
(``measure``), two callers, one parser (``parse``).

Per round, in alternating order (so drift from other load on the machine hits all alike):

* raw TCP: ``iperf3`` (https://iperf.fr, Debian's ``iperf3``): a server on the first host (``iperf3 -s -1``), the
  client on the second (``iperf3 -c HOST1 -t S -J``); Gbit/s received. With ``bidir``, also ``iperf3 --bidir``:
  both directions at once, as a two-rank allreduce sends — the ceiling of the transport when the hosts' CPUs, not
  the link, bound TCP.
* ``MPI_Allreduce`` (mpi4py's ``Comm.Allreduce``, the MPI library ``mpirun`` belongs to) of a float32 buffer of
  ``mib`` MiB, summed;
* with ``horovod``, Horovod's allreduce (``horovod.tensorflow.allreduce``, op Sum) of a tensor of the same size and
  type, in the same processes (Horovod's MPI controller uses the MPI that mpi4py initialised). Horovod is
  initialised for its step only and shut down after it (``hvd.init`` / ``hvd.shutdown``), so its background
  thread, which negotiates every ``HOROVOD_CYCLE_TIME``, does not slow the other measurements.

Bus bandwidth is nccl-tests' convention (NVIDIA/nccl-tests, doc/PERFORMANCE.md): algbw = bytes / seconds, busbw =
algbw × 2(n−1)/n for allreduce with n ranks, so it is comparable with the link's bandwidth whatever n; the time of
an iteration is the slowest rank's. Units: Gbit/s (10⁹ bits per second).

Rank 0 prints one line ``chexstack-transport: {JSON}``: ``{"hosts", "processors", "mib", "ranks", "rounds": [{"tcp",
"tcp_bidir", "mpi", "horovod"}], "errors": [...]}`` (Gbit/s; null for what was not measured, with the reason in
``errors``).

    mpirun -H a:1,b:1 -np 2 python facts/transport.py --hosts a,b [--mib 64] [--rounds 3] [--iters 3]
                                                            [--tcp-seconds 2] [--bidir] [--horovod]
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time

PREFIX = "chexstack-transport: "
#: The start of the error a wrong allreduce result gives (fast but wrong is a failure, not a bandwidth).
WRONG_SUM = "MPI_Allreduce sum wrong"
#: The iperf3 port (iperf3's default).
IPERF3_PORT = 5201


#: How ``mpi.bandwidth`` states its allreduce figure (the validate report's ``measured``), read back by
#: ``busbw_from_measured`` (``invoke bench-report --bandwidth REPORT``).
MEASURED = "MPI_Allreduce %d MiB busbw %.2f Gbit/s"
_MEASURED = re.compile(r"\bMPI_Allreduce \d+ MiB busbw (\d+(?:\.\d+)?) Gbit/s")


def measured_text(mib: int, busbw: float) -> str:
    """``MEASURED`` of ``mib`` MiB at ``busbw`` Gbit/s."""
    return MEASURED % (mib, busbw)


def busbw_from_measured(text: str) -> float | None:
    """The busbw (Gbit/s) a ``measured_text`` in ``text`` states, or None."""
    found = _MEASURED.search(text)
    return float(found.group(1)) if found else None


def busbw_gbits(nbytes: int, seconds: float, ranks: int) -> float:
    """Allreduce bus bandwidth in Gbit/s of ``nbytes`` per rank in ``seconds`` over ``ranks`` ranks (nccl-tests'
    busbw = bytes / seconds × 2(n−1)/n)."""
    return nbytes * 8.0 / seconds * 2.0 * (ranks - 1) / ranks / 1e9


def _iperf3_gbits(report: dict, bidir: bool) -> float:
    """Gbit/s received of an ``iperf3 -J`` report; with ``bidir`` the mean of the two directions."""
    end = report["end"]
    if not bidir:
        return end["sum_received"]["bits_per_second"] / 1e9
    return (end["sum_received"]["bits_per_second"] + end["sum_received_bidir_reverse"]["bits_per_second"]) / 2e9


def _iperf3(comm, server: str, seconds: float, bidir: bool, port: int) -> tuple[float | None, str]:
    """Raw TCP Gbit/s from rank 1 (client) to rank 0 (server, on host ``server``); (None, why) when it failed.
    Every rank calls it (collective)."""
    rank, ok, why = comm.Get_rank(), True, ""
    exe = shutil.which("iperf3")
    proc = None
    if rank == 0:
        if exe is None:
            ok, why = False, "iperf3 not found on %s" % _name()
        else:
            proc = subprocess.Popen([exe, "-s", "-1", "-p", str(port), "--forceflush"], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            said = []
            while not any("listening" in line for line in said):  # "Server listening on PORT" once it listens
                said.append(proc.stdout.readline())
                if not said[-1]:  # it exited: the port is taken, or another error
                    ok, why = False, "iperf3 -s on %s: %s" % (_name(), "".join(said).strip()[-300:])
                    break
    ok, why = comm.bcast((ok, why), root=0)
    result: tuple[float | None, str] = (None, why)
    if ok and rank == 1:
        if exe is None:
            result = (None, "iperf3 not found on %s" % _name())
        else:
            argv = [exe, "-c", server, "-p", str(port), "-t", str(seconds), "-J"] + (["--bidir"] if bidir else [])
            out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30)
            try:
                result = (_iperf3_gbits(json.loads(out.stdout), bidir), "")
            except (ValueError, KeyError, TypeError):
                result = (None, "%s: exit %d %s" % (" ".join(argv), out.returncode,
                                                    (out.stdout + out.stderr).strip()[-300:]))
    if proc is not None:
        try:
            proc.wait(timeout=seconds + 30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return comm.bcast(result if rank == 1 else None, root=1) if ok else result


def _name() -> str:
    from mpi4py import MPI

    return MPI.Get_processor_name()


def _time_allreduce(comm, run, iters: int) -> float:
    """Seconds per call of ``run`` (after one untimed call), the slowest rank's."""
    from mpi4py import MPI

    run()
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(iters):
        run()
    return comm.allreduce((time.perf_counter() - start) / iters, op=MPI.MAX)


def measure(hosts: list[str], mib: int = 64, rounds: int = 3, iters: int = 3, tcp_seconds: float = 2.0,
            bidir: bool = False, horovod: bool = False, port: int = IPERF3_PORT) -> dict | None:
    """The measurement, in every rank of one ``mpirun`` (rank i on ``hosts[i]``): ``rounds`` rounds of raw TCP
    (iperf3 between the first two hosts), ``MPI_Allreduce`` and (``horovod``) Horovod's allreduce of ``mib`` MiB
    float32, in alternating order. Returns the result dict on rank 0 (None on the others); see the module doc."""
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    nbytes = mib * 1024 * 1024
    send = np.ones(nbytes // 4, dtype=np.float32)
    recv = np.empty_like(send)
    errors: list[str] = []
    hvd_allreduce, hvd_out = None, []
    if horovod:
        import horovod.tensorflow as hvd
        import tensorflow as tf

        tensor = tf.constant(send)

        def hvd_allreduce():  # eager: returns when the allreduce is done; .numpy() (a copy) only after timing
            hvd_out[:] = [hvd.allreduce(tensor, op=hvd.Sum, name="chexstack_transport")]

    def mpi_allreduce():
        comm.Allreduce(send, recv, op=MPI.SUM)

    steps = ["tcp", "mpi"] + (["tcp_bidir"] if bidir else []) + (["horovod"] if horovod else [])
    results = []
    for r in range(rounds):
        row: dict[str, float | None] = {}
        for step in (steps if r % 2 == 0 else steps[::-1]):
            if step in ("tcp", "tcp_bidir"):
                if n < 2:
                    row[step] = None
                    continue
                row[step], why = _iperf3(comm, hosts[0], tcp_seconds, step == "tcp_bidir", port)
                if why and why not in errors:
                    errors.append(why)
            elif step == "mpi":
                row[step] = busbw_gbits(nbytes, _time_allreduce(comm, mpi_allreduce, iters), n) if n > 1 else None
            else:  # Horovod runs only now: its background thread must not slow the other measurements
                hvd.init()
                row[step] = busbw_gbits(nbytes, _time_allreduce(comm, hvd_allreduce, iters), n) if n > 1 else None
                hvd.shutdown()
        results.append(row)
    if not np.all(recv == n):  # the sum must be right, not only fast
        errors.append(WRONG_SUM + ": expected %d in every element" % n)
    if hvd_out and not np.all(hvd_out[0].numpy() == n):
        errors.append("Horovod allreduce sum wrong: expected %d in every element" % n)
    names = comm.gather(_name(), root=0)
    if comm.Get_rank() != 0:
        return None
    return {"hosts": hosts[:n], "processors": names, "mib": mib, "ranks": n, "iters": iters, "rounds": results,
            "errors": errors + (["one rank only: start one rank on each of two hosts"] if n < 2 else [])}


def parse(text: str) -> dict | None:
    """The result of a run from its output (the last ``chexstack-transport:`` line), or None when there is none."""
    found = None
    for line in text.splitlines():
        if line.startswith(PREFIX):
            found = json.loads(line[len(PREFIX):])
    return found


def median_of(result: dict, key: str) -> float | None:
    """Median over the rounds of ``key`` (Gbit/s), None when no round measured it."""
    values = [row[key] for row in result["rounds"] if row.get(key) is not None]
    return statistics.median(values) if values else None


def median_ratio(result: dict, top: str, bottom: str) -> float | None:
    """Median over the rounds of ``top`` / ``bottom`` of the same round (side by side), None when none has both."""
    values = [row[top] / row[bottom] for row in result["rounds"] if row.get(top) and row.get(bottom)]
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", required=True, help="the hosts, comma-separated, in rank order")
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--tcp-seconds", type=float, default=2.0)
    ap.add_argument("--bidir", action="store_true")
    ap.add_argument("--horovod", action="store_true")
    ap.add_argument("--port", type=int, default=IPERF3_PORT)
    args = ap.parse_args(argv)
    result = measure([h.split(":")[0] for h in args.hosts.split(",") if h], args.mib, args.rounds, args.iters,
                     args.tcp_seconds, args.bidir, args.horovod, args.port)
    if result is not None:
        print(PREFIX + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
