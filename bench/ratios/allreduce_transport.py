"""Benchmark: on two hosts of the test cluster (scripts/testcluster), 64 MiB float32 allreduce — Horovod's, and
``MPI_Allreduce`` of the same buffer over the same transport — beside raw TCP (``iperf3``) between the same hosts,
with Open MPI's and Horovod's defaults and with the settings the launchers use (``launch.mpirun.TCP_MCA``,
``launch.mpirun.HOROVOD_ENV``), side by side in one run.

Each variant is one ``mpirun`` of ``facts.transport`` (the measurement ``invoke validate --hosts`` runs), one rank
per host, started on the first host (``scripts/testcluster exec``) and reaching the second over ssh as users'
launches do. Within it, ``--rounds`` rounds alternate raw TCP, ``MPI_Allreduce`` and Horovod's allreduce; the
ratios are medians of the per-round ratios. Variants alternate too (default, tuned, default, tuned ...).

Printed: busbw in Gbit/s (nccl-tests' bus bandwidth), iperf3's Gbit/s one way and per direction with both ways at
once (``--bidir``: what a two-rank allreduce does), and the ratios Horovod / MPI (goal >= 0.95: framework
overhead) and MPI / TCP (goal >= 0.5: the share of the link the transport uses).

    .venv/bin/python bench/ratios/allreduce_transport.py [--mib 64] [--rounds 3] [--iters 3] [--tcp-seconds 2]
                                                         [--repeats 1]
    (as root, with the test cluster up: scripts/testcluster up)
"""
from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from facts import transport  # noqa: E402
from launch import mpirun  # noqa: E402

HOSTS = ("chex1", "chex2")
STATE = "/run/chexstack-testcluster"


def launch_argv(mib: int, rounds: int, iters: int, tcp_seconds: float, tuned: bool,
                python: str = sys.executable) -> list[str]:
    """The mpirun of one variant, run on the first host: Open MPI's defaults, or the launchers' settings."""
    command = [python, transport.__file__, "--hosts", ",".join(HOSTS), "--mib", str(mib), "--rounds",
               str(rounds), "--iters", str(iters), "--tcp-seconds", str(tcp_seconds), "--bidir", "--horovod"]
    env = tuple("%s=%s" % kv for kv in sorted(mpirun.HOROVOD_ENV.items())) if tuned else ()
    argv = mpirun.mpirun_argv(len(HOSTS), command, hosts=["%s:1" % h for h in HOSTS], allow_run_as_root=True,
                              exported_env=("PATH", "PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL=2") + env, tcp_mca=tuned)
    return [str(REPO / "scripts" / "testcluster"), "exec", HOSTS[0]] + argv[:1] + [
        "--mca", "plm_rsh_agent", "ssh -F %s/ssh/config" % STATE] + argv[1:]


def run_variant(argv: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=900)
    result = transport.parse(out.stdout)
    if out.returncode != 0 or result is None:
        sys.exit("variant failed (exit %d): %s\n%s" % (out.returncode, shlex.join(argv),
                                                       (out.stdout + out.stderr)[-3000:]))
    return result


def show(name: str, result: dict) -> None:
    print("%s: %d MiB float32, %d ranks on %s" % (name, result["mib"], result["ranks"],
                                                   ",".join(result["processors"])))
    for i, row in enumerate(result["rounds"], 1):
        print("  round %d: " % i + ", ".join("%s %.2f" % (k, v) for k, v in row.items() if v is not None)
              + " Gbit/s")
    for error in result["errors"]:
        print("  error: %s" % error)
    med = {k: transport.median_of(result, k) for k in ("tcp", "tcp_bidir", "mpi", "horovod")}
    print("  median: iperf3 %.2f Gbit/s one way, %.2f per direction both ways; MPI_Allreduce busbw %.2f; Horovod "
          "allreduce busbw %.2f" % (med["tcp"], med["tcp_bidir"], med["mpi"], med["horovod"]))
    hvd_mpi = transport.median_ratio(result, "horovod", "mpi")
    mpi_tcp = transport.median_ratio(result, "mpi", "tcp")
    mpi_bidir = transport.median_ratio(result, "mpi", "tcp_bidir")
    print("  ratio Horovod/MPI = %.3f (goal >= 0.95: %s)" % (hvd_mpi, "met" if hvd_mpi >= 0.95 else "MISSED"))
    print("  ratio MPI/TCP     = %.3f (goal >= 0.50: %s); MPI / TCP per direction both ways = %.3f"
          % (mpi_tcp, "met" if mpi_tcp >= 0.5 else "MISSED", mpi_bidir))
    print("  ceiling: a two-rank allreduce sends the buffer both ways at once; TCP both ways carries %.3f of the "
          "one-way rate per direction here, so MPI/TCP cannot exceed that with no MPI overhead at all"
          % transport.median_ratio(result, "tcp_bidir", "tcp"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--tcp-seconds", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=1, help="launches of each variant, alternating")
    args = ap.parse_args()
    print("settings of the launchers (tuned): mpirun %s; %s" % (
        " ".join("--mca %s %s" % kv for kv in mpirun.TCP_MCA), " ".join("%s=%s" % kv for kv in
                                                                       sorted(mpirun.HOROVOD_ENV.items()))))
    results: dict[str, list[dict]] = {"defaults": [], "tuned": []}
    for _ in range(args.repeats):
        for name in results:
            results[name].append(run_variant(launch_argv(args.mib, args.rounds, args.iters, args.tcp_seconds,
                                                           name == "tuned")))
    merged = {}
    for name, runs in results.items():
        merged[name] = dict(runs[0], rounds=[row for r in runs for row in r["rounds"]],
                            errors=[e for r in runs for e in r["errors"]])
        show("Open MPI and Horovod %s" % ("defaults" if name == "defaults" else "as the launchers set them"),
             merged[name])
    for key in ("mpi", "horovod"):
        before, after = (transport.median_of(merged[n], key) for n in ("defaults", "tuned"))
        print("tuned / defaults, %s busbw: %.3f (%.2f -> %.2f Gbit/s)" % (key, after / before, before, after))


if __name__ == "__main__":
    main()
