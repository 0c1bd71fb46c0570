"""MPI checks: which MPI ``mpirun`` is, and a real launch of N ranks (on ``--hosts`` when given) that joins
MPI_COMM_WORLD and allreduces (``data/mpi_allreduce.c``, compiled with ``mpicc`` once and cached).

As root, Open MPI refuses to start without its run-as-root permission (``facts.openmpi``); the flag is added only
where ``refuses_root`` says so (Open MPI, as root).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from chexstack.tools import ToolRun, run
from facts.openmpi import ALLOW_RUN_AS_ROOT_FLAG, refuses_root
from facts.parsers import versions
from facts.parsers.mpi import LaunchFailure, classify_launch, launch_failure, parse_mpi_test, world_problems
from facts.parsers.observation import Observed
from facts.parsers.versions import OMPI_INFO
from validate.checks.gpu import snapshot
from validate.checks.registry import Context, check
from validate.evidence import MissingEvidence
from validate.result import CheckResult, failed, passed, skipped, warned
from validate.tries import until_pass

TEST_SOURCE = Path(__file__).resolve().parent / "data" / "mpi_allreduce.c"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "chexstack"


def judge_mpi_version(impl: str | None, version: str | None, cuda_support: bool | None,
                      gpu_stack: bool = False) -> CheckResult:
    """``mpirun --version`` (+ ``ompi_info``'s built_with_cuda_support, never the extension list: fixture 45).
    Not CUDA-aware on a GPU stack: WARN (NCCL allreduce does not need it; MPI ops on GPU tensors do)."""
    cid = "mpi.version"
    if not version:
        return failed(cid, "mpirun --version printed no known MPI", "Open MPI, MPICH, Intel MPI or Spectrum MPI",
                      "check which mpirun is first on PATH", "MPI_UNKNOWN")
    measured = "%s %s%s" % (impl, version, {True: ", CUDA-aware", False: ", not CUDA-aware", None: ""}[cuda_support])
    if gpu_stack and cuda_support is False:
        return warned(cid, measured, "a CUDA-aware MPI for MPI operations on GPU tensors",
                      "fine for NCCL allreduce (Horovod's GPU path); rebuild Open MPI --with-cuda for MPI ops on "
                      "GPU memory", "MPI_NOT_CUDA_AWARE")
    return passed(cid, measured, "a working mpirun")


def _impl(ctx: Context) -> tuple[str | None, str | None]:
    res = ctx.tool("mpirun", "--version")
    return versions.mpirun(res.output) if res.ok else (None, None)


@check("mpi.version", "mpirun implementation and version", fast=True)
def mpi_version(ctx: Context) -> CheckResult:
    info = ctx.first(OMPI_INFO)
    try:
        res = ctx.tool("mpirun", "--version")
    except MissingEvidence:
        if info is None:
            raise
        return _from_ompi_info(ctx, info)
    if res.missing:
        return skipped("mpi.version", "mpirun not on PATH", code="TOOL_MISSING")
    impl, version = versions.mpirun(res.output)
    cuda = None
    if impl == "Open MPI":
        try:
            info = ctx.tool("ompi_info", "--parsable", "--all")
            cuda = versions.ompi_info(info.stdout)["cuda_support"] if info.ok else None
        except MissingEvidence:  # a bundle without it: CUDA-awareness not shown (never inferred)
            cuda = None
    return judge_mpi_version(impl, version, cuda, bool(ctx.stack and ctx.stack.gpu))


def _from_ompi_info(ctx: Context, info: Observed) -> CheckResult:
    """A bundle with ``ompi_info`` but no ``mpirun --version``: Open MPI, its version if the output has it."""
    got = info.value
    version = got.get("version")
    result = judge_mpi_version("Open MPI", version or "(version not in the recorded ompi_info)",
                               got.get("cuda_support"), bool(ctx.stack and ctx.stack.gpu))
    result.details.append("from the bundle's `%s`" % info.command)
    return result


def mpirun_argv(ctx: Context, np: int, hosts: list[str], per_host: int, env_names: tuple[str, ...] = ()) -> list[str]:
    """``mpirun`` with the root flag (Open MPI as root), ``-np``, ``-H a:k,b:k`` for hosts (``--oversubscribe``
    on one node, where slots default to cores) and ``-x NAME`` for each environment variable to forward. A bundle
    that did not record ``mpirun --version`` or the euid gets the command without what they decide: there the
    command only looks up the run the bundle recorded, which the check's observation accepts in any form — the
    check reads that run rather than SKIP for want of the evidence to build a command it would not run."""
    try:
        impl, _ = _impl(ctx)
        root = impl is not None and refuses_root(impl, ctx.fact("euid", os.geteuid))
    except MissingEvidence:
        impl, root = None, False
    argv = ["mpirun"]
    if root:
        argv.append(ALLOW_RUN_AS_ROOT_FLAG)
    if hosts:
        argv += ["-H", ",".join("%s:%d" % (h.split(":")[0], per_host) for h in hosts)]
    elif impl == "Open MPI":
        argv.append("--oversubscribe")
    argv += ["-np", str(np)]
    for name in env_names:
        argv += ["-x", name]
    return argv


def ranks_per_host(ctx: Context) -> int:
    """One rank per GPU on GPU nodes, else 2 (the CPU reference run's ``--np 2``)."""
    return len(snapshot(ctx).report.gpus) or 2


def mpi_test_program(ctx: Context) -> tuple[str | None, str]:
    """Path of the compiled MPI test (built once per mpicc/source), or (None, why not)."""

    def build() -> tuple[str | None, str]:
        show = run(["mpicc", "--showme"]) if run(["mpicc", "--version"]).ok else None
        if show is None:
            return None, "mpicc not found: MPI_Init/allreduce not exercised, launch only"
        key = hashlib.sha256(TEST_SOURCE.read_bytes() + show.stdout.encode()).hexdigest()[:12]
        exe = CACHE / ("mpi_allreduce-%s" % key)
        if exe.exists():
            return str(exe), ""
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_suffix(".tmp%d" % os.getpid())
        res = run(["mpicc", "-O1", "-o", str(tmp), str(TEST_SOURCE)], timeout=60)
        if not res.ok:
            return None, "mpicc could not build the MPI test: %s" % res.why_not()
        os.replace(tmp, exe)
        return str(exe), ""

    return tuple(ctx.fact("mpi.test_program", build))


def judge_launch(text: str, np: int, hosts: list[str], launch_only_why: str = "") -> CheckResult:
    cid = "mpi.launch"
    where = "on %s" % ",".join(hosts) if hosts else "on this node"
    if launch_only_why:
        got = [l for l in text.splitlines() if l.strip()]
        if len(got) != np:
            return failed(cid, "%d of %d ranks ran %s" % (len(got), np, where), "%d ranks" % np,
                          "run the mpirun line by hand; check ssh between hosts and the hostfile", "MPI_WORLD_BROKEN")
        return passed(cid, "%d ranks launched %s (%s)" % (np, where, launch_only_why), "%d ranks" % np)
    lines = parse_mpi_test(text)
    problems = world_problems(lines, np)
    if problems:
        return failed(cid, "; ".join(problems), "%d ranks in one MPI_COMM_WORLD, allreduce sum %d"
                      % (np, np * (np + 1) // 2), "run the mpirun line by hand; check ssh, the hostfile and "
                      "firewalls between hosts (Open MPI: --mca btl_tcp_if_include <iface>)", "MPI_WORLD_BROKEN")
    hosts_seen = sorted({l.host for l in lines})
    return passed(cid, "%d ranks on %s joined one world, allreduce sum %d" % (np, ",".join(hosts_seen),
                                                                              np * (np + 1) // 2),
                  "%d ranks in one MPI_COMM_WORLD" % np)


def judge_launch_failure(res: ToolRun, np: int, hosts: list[str]) -> CheckResult:
    """A failed ``mpirun``: the line that says why (``parsers.mpi.launch_failure``: ssh's error, not Open MPI's
    banner), its cause (``parsers.mpi.classify_launch``, keyed on the line that tells the causes apart: root, an
    unknown or unreachable host, ssh authentication, orted missing on a host, PMI/PMIx, slots, executable, TCP, a
    failed rank) and the fix for that cause (``launch.failure.launch_remedy``, which a failed ``invoke train``
    names too)."""
    from launch.failure import launch_remedy

    cid, command = "mpi.launch", res.command
    why = (launch_failure(res.stderr) or launch_failure(res.output)) if not (res.timed_out or res.missing) else ""
    measured = "mpirun exited %s: %s" % (res.rc, why) if why else res.why_not()
    found = classify_launch(res.output) if why else LaunchFailure("MPI_HANG" if res.timed_out else "MPI_LAUNCH_FAILED")
    return failed(cid, measured, "%d ranks" % np, launch_remedy(found, hosts, command), found.cause)


@check("mpi.launch", "a real mpirun of N ranks (MPI_Init + allreduce)", fast=False)
def launch(ctx: Context) -> CheckResult:
    cid = "mpi.launch"
    if ctx.tool("mpirun", "--version").missing:
        return skipped(cid, "mpirun not on PATH", code="TOOL_MISSING")
    per_host = ranks_per_host(ctx)
    np = per_host * max(1, len(ctx.hosts))
    exe, why = mpi_test_program(ctx)
    argv = mpirun_argv(ctx, np, ctx.hosts, per_host) + ([exe] if exe else ["hostname"])
    res = ctx.tool(*argv, timeout=90)
    if not res.ok:
        return judge_launch_failure(res, np, ctx.hosts)
    return judge_launch(res.stdout, np, ctx.hosts, why)


#: The share of the raw TCP bandwidth between two hosts an allreduce's bus bandwidth should reach.
BANDWIDTH_GOAL = 0.5


def bandwidth_argv(ctx: Context, hosts: list[str]) -> list[str]:
    """``mpirun`` of ``facts/transport.py`` (the measurement of bench/ratios/allreduce_transport.py), one rank
    on each of the first two hosts, with the launchers' Open MPI TCP settings (``launch.mpirun.TCP_MCA``)."""
    import sys

    from facts import transport
    from launch.mpirun import TCP_MCA

    argv = mpirun_argv(ctx, 2, hosts[:2], 1)
    for name, value in TCP_MCA:
        argv += ["--mca", name, value]
    return argv + [sys.executable, transport.__file__, "--hosts", ",".join(h.split(":")[0] for h in hosts[:2]),
                   "--rounds", "2", "--bidir"]


def judge_bandwidth(result: dict | None, res: ToolRun, hosts: list[str]) -> CheckResult:
    """Allreduce bus bandwidth beside raw TCP between the same two hosts (``facts.transport``): PASS at
    >= ``BANDWIDTH_GOAL`` of it, WARN below, WARN when the TCP baseline was not measured (no iperf3): the ratio
    is then unobserved; FAIL when the measurement did not run or its allreduce summed wrong."""
    from facts import transport

    cid, pair = "mpi.bandwidth", "%s,%s" % tuple(h.split(":")[0] for h in hosts[:2])
    expected = "allreduce busbw >= %.1f × raw TCP between %s" % (BANDWIDTH_GOAL, pair)
    if result is None or transport.median_of(result, "mpi") is None:
        why = res.why_not() if not res.ok else "no result line (%s)" % (res.output.strip()[-300:] or "no output")
        if "No module named 'mpi4py'" in res.output:
            return skipped(cid, "mpi4py is not installed on the hosts: pip install mpi4py (requirements/"
                           "constraints.txt pins it)", expected, "TOOL_MISSING")
        return failed(cid, "the bandwidth run across %s failed: %s" % (pair, why), expected,
                      "run `%s` by hand" % res.command, "MPI_BANDWIDTH_RUN_FAILED")
    wrong = [e for e in result["errors"] if e.startswith(transport.WRONG_SUM)]
    if wrong:
        return failed(cid, "across %s: %s" % (pair, wrong[0]), expected, "run `%s` by hand; a wrong sum is a broken "
                      "MPI or network path, not a slow one" % res.command, "MPI_WORLD_BROKEN")
    mpi, tcp = transport.median_of(result, "mpi"), transport.median_of(result, "tcp")
    details = ["round %d: %s Gbit/s" % (i, ", ".join("%s %.2f" % kv for kv in row.items() if kv[1] is not None))
               for i, row in enumerate(result["rounds"], 1)] + result["errors"]
    bidir = transport.median_of(result, "tcp_bidir")
    if tcp is None:
        return warned(cid, "%s; raw TCP not measured (%s)"
                      % (transport.measured_text(result["mib"], mpi), "; ".join(result["errors"]) or
                         "no iperf3 result"), expected,
                      "install iperf3 on both hosts (Debian/Ubuntu: apt-get install iperf3) to compare",
                      "TCP_BASELINE_MISSING", details)
    ratio = transport.median_ratio(result, "mpi", "tcp")
    measured = ("%s, raw TCP %.2f Gbit/s (iperf3 %s→%s): ratio %.2f (median of the rounds' ratios)"
                % (transport.measured_text(result["mib"], mpi), tcp, result["hosts"][1], result["hosts"][0], ratio))
    if bidir is not None:
        measured += "; both ways at once %.2f Gbit/s per direction" % bidir
    if ratio >= BANDWIDTH_GOAL:
        return passed(cid, measured, expected, details)
    return warned(cid, measured, expected, "a two-rank allreduce sends both ways at once: compare with the "
                  "per-direction TCP figure; tune Open MPI's TCP transport (btl_tcp_links, coll_tuned "
                  "allreduce algorithm: see bench/ratios/allreduce_transport.py) or pin the fast interface "
                  "(--mca btl_tcp_if_include <iface>)", "MPI_BANDWIDTH_LOW", details)


@check("mpi.bandwidth", "allreduce bus bandwidth across two --hosts vs raw TCP (iperf3) between them", fast=False)
def bandwidth(ctx: Context) -> CheckResult:
    """One try is one launch of the measurement (its rounds' median, ``facts.transport``); a ratio below the goal
    is measured again (``validate.tries.until_pass``)."""
    cid = "mpi.bandwidth"
    if len(ctx.hosts) < 2:
        return skipped(cid, "needs --hosts with two hosts (the allreduce and iperf3 run between them)",
                       code="NOT_APPLICABLE")
    if ctx.tool("mpirun", "--version").missing:
        return skipped(cid, "mpirun not on PATH", code="TOOL_MISSING")
    from facts import transport

    def attempt(n: int) -> CheckResult:
        res = ctx.tool(*bandwidth_argv(ctx, ctx.hosts), timeout=180, attempt=n)
        return judge_bandwidth(transport.parse(res.stdout) if res.ok else None, res, ctx.hosts)

    return until_pass(attempt)
