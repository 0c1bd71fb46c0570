"""NCCL checks: the NCCL library on this node, all-reduce bus bandwidth from nccl-tests against a floor for the
interconnect, and the transport NCCL chose (RDMA vs the TCP Socket fallback, https://github.com/NVIDIA/nccl/issues/451).

One ``all_reduce_perf`` run (``NCCL_DEBUG=INFO``, 1 GiB messages) feeds both ``nccl.busbw`` and
``nccl.transport``. On one node it runs ``-g <GPUs>`` in one process; with ``--hosts`` it runs under mpirun with
one rank per GPU (``-g 1``), which needs nccl-tests built with ``MPI=1``.

busbw floors (GB/s), each with its source:

* single node, 8× H100 SXM: 460 — Azure NHC ``conf/nd96isr_h100_v5.conf`` (``check_nccl_allreduce 460.0``);
* single node, 8× H200: 431 — Azure NHC ``conf/nd96isr_h200_v5.conf`` (``check_nccl_allreduce 431.0``);
* single node, 8× A100 SXM4: 228 — Azure NHC test table (nd96asr_v4 / nd96amsr_a100_v4);
* several nodes: 80 % of one node's RDMA line rate (sum of its active IB/RoCE ports / 8 bits). busbw of a
  bandwidth-bound all-reduce approaches the slowest link — the NICs between nodes (nccl-tests
  doc/PERFORMANCE.md); fixture 31 reaches 94 % over RoCE and an EDR node ~12 of 12.5 GB/s (fixture 23).

Other platforms have no sourced floor: the run is reported as a WARN with the number, never a silent PASS.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from chexstack.tools import ToolRun
from facts.faults_table import remedy as table_remedy
from facts.faults_table import remedy_or
from facts.parsers import versions
from facts.parsers.infiniband import IbPort
from facts.parsers.nccl import (
    ALL_REDUCE_PERF,
    NcclLog,
    PerfResult,
    classify_nccl_failure,
    parse_all_reduce_perf,
    parse_nccl_log,
)
from facts.parsers.observation import Observed, Stop
from facts.parsers.pcie import parse_p2p
from validate.checks.gpu import gpu_count, no_gpu_reason, snapshot
from validate.checks.infiniband import DOCKER_RDMA_FLAGS, hcas, ports_report
from validate.checks.mpi import mpirun_argv
from validate.checks.registry import Context, check
from validate.evidence import MissingEvidence
from validate.result import CheckResult, Reason, failed, passed, skipped, warned
from validate.tries import until_pass

MULTI_NODE_SHARE = 0.8
#: Seconds the all_reduce_perf run may take; no result row by then is a hang (1 GiB × 25 iterations takes seconds).
ALLREDUCE_TIMEOUT_S = 180
#: Interfaces NCCL should not use for its socket transport: tunnels, container bridges, veths, loopback.
VIRTUAL_IFACES = ("lo", "tunl", "docker", "cali", "flannel", "veth", "virbr", "cni", "weave", "vxlan")


@dataclass(frozen=True)
class Floor:
    """A busbw floor in GB/s, what it applies to, and where the number comes from."""

    gbps: float
    applies_to: str
    source: str


_NODE_FLOORS = (
    (("H100",), 8, 460.0, "Azure NHC conf/nd96isr_h100_v5.conf: check_nccl_allreduce 460.0"),
    (("H200",), 8, 431.0, "Azure NHC conf/nd96isr_h200_v5.conf: check_nccl_allreduce 431.0"),
    (("A100", "SXM4"), 8, 228.0, "Azure NHC test table (nd96asr_v4, nd96amsr_a100_v4): 228 GB/s"),
)


def busbw_floor(model: str | None, gpus_per_node: int, nodes: int, rdma_gbits_per_node: float | None) -> Floor | None:
    """The floor for this run, or None when no source gives one."""
    if nodes > 1:
        if not rdma_gbits_per_node:
            return None
        return Floor(MULTI_NODE_SHARE * rdma_gbits_per_node / 8, "%d nodes, %g Gb/s RDMA per node"
                     % (nodes, rdma_gbits_per_node), "80 %% of the NIC line rate (nccl-tests doc/PERFORMANCE.md: "
                     "busbw approaches the bottleneck link)")
    for words, n, gbps, source in _NODE_FLOORS:
        if model and gpus_per_node == n and all(w in model for w in words):
            return Floor(gbps, "%d× %s" % (n, model), source)
    return None


def judge_busbw(result: PerfResult, floor: Floor | None, expected_ranks: int | None = None) -> CheckResult:
    """Judge an all_reduce_perf run: one communicator, correct results, busbw consistent with algbw, ≥ floor."""
    cid = "nccl.busbw"
    if not result.rows:
        return failed(cid, "could not read all_reduce_perf output: %s" % "; ".join(result.problems),
                      "the size/count/…/busbw table", "run all_reduce_perf by hand", "OUTPUT_UNREADABLE")
    n = result.world_size()
    split = result.interleaved or (expected_ranks is not None and result.ranks and result.ranks != expected_ranks)
    if split:
        why = "size column goes back/repeats (several independent runs in one stream)" if result.interleaved \
            else "%d '# Rank' lines for %d expected ranks" % (result.ranks, expected_ranks)
        return failed(cid, "ranks did not form one communicator: %s" % why, "one NCCL communicator over all ranks",
                      "build nccl-tests with MPI=1 and launch it with mpirun, one rank per GPU (-g 1)",
                      "NCCL_SPLIT_WORLD")
    if result.out_of_bounds:
        return failed(cid, "%d out-of-bounds (wrong) values" % result.out_of_bounds, "0 wrong values",
                      "drain the node: the all-reduce produced wrong data (GPU/NVLink fault)", "NCCL_WRONG_RESULTS")
    big = max(result.rows, key=lambda r: r.size)
    busbw = result.avg_busbw if result.avg_busbw is not None else max(big.busbw, big.ip_busbw)
    measured = "busbw %.2f GB/s (%s), %s" % (busbw, "# Avg bus bandwidth" if result.avg_busbw is not None else
                                             "largest message, no Avg line", "%d ranks" % n if n else "world size ?")
    details = ["largest message %d B: algbw %.2f, busbw %.2f GB/s" % (big.size, big.algbw, big.busbw)]
    if n and n > 1 and big.algbw > 0:
        want = big.algbw * 2 * (n - 1) / n
        if abs(big.busbw - want) > max(0.02 * want, 0.02):
            details.append("busbw %.2f != algbw × 2(n−1)/n = %.2f for n=%d" % (big.busbw, want, n))
    if result.problems:
        details += result.problems
    if floor is None:
        return warned(cid, measured, "no sourced busbw floor for this platform",
                      "compare with a healthy node of the same kind", "NO_SOURCED_RULE", details)
    expected = ">= %g GB/s (%s; %s)" % (floor.gbps, floor.applies_to, floor.source)
    if busbw < floor.gbps:
        return failed(cid, measured, expected, "check nccl.transport, topo.nvlink, ib.ports; rerun to rule out "
                      "other jobs", "NCCL_BUSBW_LOW", details)
    return passed(cid, measured, expected, details)


def judge_transport(log: NcclLog, host_ports: list[IbPort] | None = None, multi_node: bool = False,
                    results: bool = False, hung: bool = False, ended: str | None = None) -> CheckResult:
    """Which transport NCCL picked, given the host's RDMA ports (None: not recorded) — judged by what the log proves.

    Socket while a host HCA is ACTIVE is FAIL (``NCCL using Socket transport although host HCA X is ACTIVE``,
    https://github.com/NVIDIA/nccl/issues/451, fixtures 35-36); IB, IBext and other net plugins count as RDMA and RoCE
    devices are named
    as RoCE (fixtures 37-39: ``RDMA transport selected: RoCE …``); IB and RoCE ports mixed in one device set is
    WARN (fixture 40); a shared-memory segment NCCL could not create is ``NCCL_SHM_EXHAUSTED``
    (https://github.com/NVIDIA/nccl/issues/290).
    The selection a log shows is what this check judges; whether the communicator then initialised is
    ``nccl.init``'s finding (``judge_init``) — but a run that failed after the selection (an error line, no
    ``Init COMPLETE``) proves no transport: FAIL with the failure's cause (``failure_of``: ``NCCL_INIT_FAILED``
    when none is named), never a PASS; ``hung`` (the all_reduce_perf run was stopped — timed out, killed — before
    its first result row) is ``NCCL_HANG`` (https://github.com/NVIDIA/nccl/issues/2079), and ``ended`` (why an
    all_reduce_perf run that was not stopped ended with an error before its first result row) a FAIL with the cause
    the log names (``NCCL_RUN_FAILED`` when none): a transport selected, even a communicator initialised, over which
    no data was seen to move is a milestone, never a PASS.
    A single-node run (no ``multi_node``, every NCCL line from one host) in which NCCL found no IB device (``NET/IB :
    No device found``, no HCA it failed to open, libibverbs loaded) and no channel went over ``NET/`` selected the
    Socket network but sent nothing over it: that is not a Socket fallback (no ``--device=/dev/infiniband``
    remedy); it is judged like any single-node run, by its intra-node channels
    (https://github.com/horovod/horovod/issues/3949: a one-node run that failed for another reason).
    """
    cid = "nccl.transport"
    active = [p for p in host_ports or [] if p.up]
    cause = classify_nccl_failure(log)
    sockets_virtual = [i for i in log.socket_ifaces if i.startswith(VIRTUAL_IFACES)]
    details = ["channels: %s" % ", ".join(log.channels)] if log.channels else []
    if log.socket_ifaces:
        details.append("socket interfaces: %s" % ", ".join(log.socket_ifaces))
    if log.bootstrap_ifaces:
        details.append("bootstrap interface: %s" % ", ".join(log.bootstrap_ifaces))
    if log.oob_ifaces:
        details.append("IB out-of-band interface: %s" % ", ".join(log.oob_ifaces))
    if sockets_virtual:
        details.append("NCCL picked virtual interface(s) %s: set NCCL_SOCKET_IFNAME" % ", ".join(sockets_virtual))
    if cause == "NCCL_SHM_EXHAUSTED":
        seg = " (segment %s, size %d)" % log.shm_segment if log.shm_segment else ""
        return failed(cid, "NCCL could not create a shared-memory segment%s: No space left on device in /dev/shm"
                      % seg, "/dev/shm large enough for NCCL", table_remedy(cause), cause, details)
    transport = log.transport
    net_cause = cause if cause in ("NCCL_NO_LIBIBVERBS", "NCCL_IB_DEVICE_NOT_VISIBLE") else None
    one_node = not multi_node and len(log.hosts) <= 1
    unused_socket = (transport == "Socket" and one_node and not active and log.ib_no_device and not log.ib_open_failed
                     and not log.ibverbs_missing and not any(c.startswith("NET/") for c in log.channels))
    if unused_socket:
        transport = None
        if host_ports is None:
            details.append("this node's HCAs were not recorded (ib.ports): between nodes this NCCL would use TCP "
                           "sockets unless it sees an HCA")
    if transport == "Socket":  # a verdict on the Socket fallback, or (one node, no HCA) whether the run proves it
        socket = _judge_socket(cid, log, host_ports, active, multi_node, net_cause, details)
        if socket.status.value != "PASS":
            return socket
        return _proven(cid, socket.measured, socket.expected, log, results, hung, ended, details)
    if transport == "RDMA" and len(log.rdma_links) > 1:
        eth = [d.name for d in log.ib_devices if d.link == "RoCE"]
        return warned(cid, "RDMA over mixed %s devices: %s is Ethernet (RoCE)" % ("/".join(log.rdma_links),
                                                                                ", ".join(eth)),
                      "only the IB rails in NCCL's device set", "pin the rails with NCCL_IB_HCA=<IB HCAs>",
                      "NCCL_MIXED_RAILS", details)
    if transport == "RDMA":
        picked = "RDMA transport selected: %s via %s on %s" % (
            "/".join(log.rdma_links) or "IB", "/".join(log.networks) or "NET/IB",
            ", ".join("%s:%d" % (d.name, d.port) for d in log.ib_devices) or "?")
        expected = "RDMA (IB/RoCE) between nodes"
    elif multi_node:
        return failed(cid, "no network transport in the NCCL log", "RDMA between nodes",
                      "run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET", "NCCL_NO_TRANSPORT", details)
    else:
        picked, expected = "single node: %s" % (", ".join(log.channels) or "no network needed"), "intra-node P2P/SHM"
        if unused_socket:
            picked += " (the Socket network NCCL selected, NET/IB: No device found, carries nothing within a node)"
    if transport == "RDMA":
        details.append(_gpudirect_rdma(log.channels))
    return _proven(cid, picked, expected, log, results, hung, ended, details)


def _proven(cid: str, picked: str, expected: str, log: NcclLog, results: bool, hung: bool, ended: str | None,
            details: list[str]) -> CheckResult:
    """``judge_transport``'s verdict on the transport NCCL ``picked``, by what the run proves of it: a hang, a
    failure before a communicator initialised, or an all_reduce_perf run that ended with an error before its first
    result row is a FAIL (``_no_data``, ``failure_of``); else a PASS."""
    if hung:
        return _no_data(cid, picked, expected, log, hung, ended, details)
    if log.failure_after_selection and not (log.init_complete or results):
        failure, code, remedy = failure_of(log)
        return failed(cid, "%s, then the run failed before a communicator initialised: %s" % (picked, failure),
                      "%s, used by an initialised communicator" % expected, remedy, code, details)
    if ended:
        return _no_data(cid, picked, expected, log, hung, ended, details)
    if not (log.init_complete or results):
        details.append("communicator initialisation not observed in this log: see nccl.init")
    return passed(cid, picked, expected, details)


def _judge_socket(cid: str, log: NcclLog, host_ports: list[IbPort] | None, active: list[IbPort],
                  multi_node: bool, cause: str | None, details: list[str]) -> CheckResult:
    """``judge_transport``'s verdict on a log whose NCCL selected the Socket network and used it: FAIL while a
    host HCA is ACTIVE, WARN where the HCAs were not recorded or the run spans nodes, else PASS (one node).
    ``cause``: the network cause ``classify_nccl_failure`` found (libibverbs missing, an HCA not visible) or None."""
    why = "NET/IB: No device found" if log.ib_no_device else ("libibverbs missing" if log.ibverbs_missing else "")
    if active:
        roce = any(p.link_layer == "Ethernet" for p in active)
        remedy = table_remedy(cause) if cause == "NCCL_NO_LIBIBVERBS" else (
            "docker run %s%s; Kubernetes: request the RDMA device-plugin resource and IPC_LOCK (NCCL_IB_DISABLE=0 "
            "alone does nothing)"
            % (DOCKER_RDMA_FLAGS, " --net=host (RoCE needs the host network for GIDs)" if roce else ""))
        return failed(cid, "NCCL using Socket transport although host HCA %s is ACTIVE"
                      % ", ".join(sorted({p.hca for p in active})), "RDMA (IB/RoCE) between nodes", remedy,
                      cause or "NCCL_SOCKET_FALLBACK", details)
    if host_ports is None:  # neither an HCA nor its absence observed: never "no RDMA device"
        return warned(cid, "NCCL using Socket transport (%s); this node's HCAs were not recorded"
                      % (why or "NCCL chose the Socket network"),
                      "RDMA (IB/RoCE) between nodes where the node has an HCA",
                      "on an IB/RoCE node this is the TCP fallback: %s" % (
                          "install rdma-core/libibverbs in the image (libibverbs.so.1)"
                          if cause == "NCCL_NO_LIBIBVERBS" else "docker run %s; check `ibstat` on the node"
                          % DOCKER_RDMA_FLAGS), cause or "NCCL_SOCKET_FALLBACK", details)
    if multi_node:
        return warned(cid, "NCCL over TCP sockets (no RDMA device on this node)", "RDMA between nodes",
                      "multi-node throughput will be a fraction of an RDMA fabric's", "NCCL_SOCKET_FALLBACK",
                      details)
    return passed(cid, "single node: %s; no RDMA device (Socket only matters between nodes)"
                  % (", ".join(log.channels) or "intra-node"), "intra-node P2P/SHM", details)


def _no_data(cid: str, picked: str, expected: str, log: NcclLog, hung: bool, ended: str | None,
             details: list[str]) -> CheckResult:
    """``judge_transport``'s verdict on an all_reduce_perf run that moved no data (no result row): stopped
    (``hung``: ``NCCL_HANG``) or ended with an error (``ended``: the cause the log names, else ``NCCL_RUN_FAILED``).
    What NCCL selected, and an ``Init COMPLETE``, are milestones of the run, never proof of a working transport."""
    expected = "%s, proven by a completed all-reduce" % expected
    if hung:
        return failed(cid, "%s set up, then no result: the all-reduce hung" % picked, expected,
                      "see nccl.busbw for the likely cause", "NCCL_HANG", details)
    cause = classify_nccl_failure(log)
    first = log.failure_after_selection or (log.errors[0][1] if log.errors else None)
    return failed(cid, "%s set up, then the run ended before any result: %s" % (picked, first or ended), expected,
                  remedy_or(cause, "read the run's first error (%s); see nccl.busbw" % ended),
                  cause or "NCCL_RUN_FAILED", details)


def _gpudirect_rdma(channels: list[str]) -> str:
    """The detail line on GPUDirect RDMA from NCCL's ``via`` channels: used (``/GDRDMA``), not used, not observed."""
    if any("GDRDMA" in c for c in channels):
        return "GPUDirect RDMA: used (/GDRDMA channels)"
    if any(c.startswith("NET/") for c in channels):
        return "GPUDirect RDMA: not used (no /GDRDMA in the NET channels; is nvidia-peermem / nv_peer_mem loaded?)"
    return "GPUDirect RDMA: not observed (no NET channel lines in the log)"


INIT_REMEDY = ("read the first NCCL WARN line of the run (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET); over RoCE check "
               "the GID index (NCCL_IB_GID_INDEX) and the routes between the nodes")


def failure_of(log: NcclLog) -> tuple[str, str, str]:
    """(what failed, diagnosis code, remedy) of a NCCL run that never initialised a communicator: the first error
    line (after the transport selection, else any), named by ``classify_nccl_failure`` when it knows the cause
    (``NCCL_INIT_FAILED`` and the generic remedy otherwise). Duplicate GPUs are said as the ranks and device
    NCCL names: ``ranks 0 and 1 both on CUDA device 3b000 (PCI 0000:3b:00.0)``."""
    cause = classify_nccl_failure(log)
    if cause == "NCCL_DUPLICATE_GPU":
        what = "; ".join("ranks %s %s on CUDA device %s (PCI %s)" % (
            " and ".join([", ".join(map(str, d.ranks[:-1])), str(d.ranks[-1])]), "both" if len(d.ranks) == 2
            else "all", d.device, d.pci) for d in log.duplicate_gpus)
        what += ": NCCL refused the communicator (Duplicate GPU detected, ncclInvalidUsage)"
    else:
        what = log.failure_after_selection or (log.errors[0][1] if log.errors else "no error line")
    return what, cause or "NCCL_INIT_FAILED", remedy_or(cause, INIT_REMEDY)


def judge_init(log: NcclLog, results: bool = False, hung: bool = False) -> CheckResult | None:
    """Did a NCCL communicator initialise, by what the log proves: ``Init COMPLETE`` (or ``results``: result rows)
    is PASS; an error/abort/timeout line after the transport selection (or, with no selection, any) means it never
    initialised: FAIL; a log that just ends there (an excerpt: fixtures 37-39) is not observed: WARN
    ``NCCL_INIT_NOT_OBSERVED``, never a PASS. None when the log says nothing of NCCL's initialisation."""
    cid = "nccl.init"
    expected = "a communicator initialised (\"Init COMPLETE\" or result rows)"
    if log.init_complete or results:
        return passed(cid, "communicator initialised (%s)" % ("Init COMPLETE" if log.init_complete
                                                              else "all_reduce_perf printed result rows"), expected)
    if log.failure_after_selection or (log.selected_at is None and log.errors):
        failure, code, remedy = failure_of(log)
        return failed(cid, "the communicator never initialised: %s" % failure, expected, remedy, code,
                      [line for _, line in log.errors[:5]])
    if hung:
        return failed(cid, "the run hung before any communicator finished initialising", expected, HANG_REMEDY,
                      "NCCL_HANG")
    if log.selected_at is None:
        return None
    return warned(cid, "log ends before communicator init completes (no \"Init COMPLETE\", no error); an excerpt?",
                  expected, "record the whole run (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET) to see whether the "
                  "communicator initialised", "NCCL_INIT_NOT_OBSERVED")


HANG_REMEDY = ("isolate the transport: rerun with NCCL_DEBUG=INFO and NCCL_P2P_DISABLE=1 (P2P) or NCCL_SHM_DISABLE=1 "
               "(shared memory); check ACS (lspci -vvv | grep ACSCtl, as root), the IOMMU, /dev/shm and memlock "
               "(NCCL user guide, Troubleshooting)")


def judge_hang(log: NcclLog, seconds: float | None, causes: list[tuple[str, str]], how: str | None = None
               ) -> CheckResult:
    """An all_reduce_perf run stopped with no result row is a hang, never a pass: where it stopped (before or after
    the communicator initialised, over which channels), for how long it was observed — ``seconds`` as the record
    gives it (None: "killed after an unknown time", never this check's own timeout as if observed) and ``how`` it
    was stopped (``facts.parsers.observation.Stop.how``) — and, from ``causes`` — ``[(finding, fix)]`` of
    ``hang_evidence`` — the likely cause and its fix (https://github.com/NVIDIA/nccl/issues/2079: ACS redirect on the
    GPUs' bridges)."""
    cid = "nccl.busbw"
    stage = ("after the communicator initialised (channels %s)" % (", ".join(log.channels) or "?")
             if log.init_complete else "before any communicator finished initialising")
    observed = Stop(how or "", seconds).observed
    measured = "all_reduce_perf hung %s: no result row%s%s" % (stage, " " + observed if seconds is not None
                                                              else ", " + observed, " (%s)" % how if how else "")
    expected = "a completed all-reduce"
    if not causes:
        return failed(cid, measured + "; no cause in the evidence", expected, HANG_REMEDY, "NCCL_HANG")
    return failed(cid, "%s; likely cause: %s" % (measured, causes[0][0]), expected, causes[0][1], "NCCL_HANG",
                  ["%s — fix: %s" % c for c in causes])


def hang_evidence(ctx: Context, log: NcclLog) -> list[tuple[str, str]]:
    """What this node's evidence says about a hang, most likely first, as (finding, fix): ACS redirect on the
    GPUs' bridges, an active IOMMU under P2P channels, P2P that ``nvidia-smi topo -p2p r`` reports unsupported,
    /dev/shm too small or memlock limited with RDMA (in the ranks: ``container.rank_limits``), TCP sockets between
    nodes. Evidence a bundle lacks is left out."""
    from validate.checks import container, topology

    found: list[tuple[str, str]] = []
    p2p = any(c.startswith("P2P") for c in log.channels)

    def ask(fn):
        try:
            fn()
        except MissingEvidence:
            pass

    def acs():
        listing, upstream, iommu, _ = topology.acs_facts(ctx)
        verdict = topology.judge_acs(listing, upstream, iommu) if listing is not None else None
        if verdict is not None and verdict.diagnosis == "ACS_ENABLED":
            found.append((verdict.measured, verdict.remedy))
        elif iommu and p2p:
            found.append(("IOMMU active (%s) under P2P channels" % iommu,
                          "on bare metal boot with iommu=pt (or the IOMMU off); NVIDIA/nccl#257"))

    def p2p_matrix():
        res = ctx.tool("nvidia-smi", "topo", "-p2p", "r")
        bad = sorted("%s–%s %s" % (a, b, st) for (a, b), st in parse_p2p(res.stdout).items()
                     if st != "OK" and a < b) if res.ok else []
        if bad and p2p:
            found.append(("nvidia-smi topo -p2p r reports P2P reads unsupported (%s) while NCCL uses P2P"
                          % ", ".join(bad), "NCCL_P2P_DISABLE=1, or fix P2P on the platform (ACS, IOMMU, BIOS)"))

    def limits():  # as the ranks see them; this process's own limits only when no probe rank could start
        ranks = container.rank_limits(ctx)
        for verdict in [ranks] if ranks.status.value != "SKIP" else [container.shm(ctx), container.memlock(ctx)]:
            if verdict.status.value == "FAIL":
                found.append((verdict.measured, verdict.remedy))

    for step in (acs, p2p_matrix, limits):
        ask(step)
    if log.transport == "Socket" and len(ctx.hosts) > 1:
        found.append(("NCCL used TCP sockets between the nodes", "see nccl.transport"))
    return found


def _run_allreduce(ctx: Context, attempt: int = 1) -> Observed | Reason:
    """One all_reduce_perf run for this context (from a bundle: the NCCL run it recorded, ``ALL_REDUCE_PERF``;
    its value says whether it is an all_reduce_perf run), or why it cannot run. ``attempt``: the try of
    ``nccl.busbw``'s repeated measurement (the first is the one every NCCL check reads)."""

    def go() -> Observed | Reason:
        try:
            if attempt == 1 and ctx.tool("all_reduce_perf", "--help", timeout=10).missing:
                return Reason("all_reduce_perf (nccl-tests) not on PATH: build https://github.com/NVIDIA/nccl-tests "
                              "(MPI=1 for --hosts) and put its build/ on PATH", "TOOL_MISSING")
        except MissingEvidence:  # a bundle holding a NCCL run but not the --help probe
            pass
        gpus = gpu_count(ctx) or 1
        env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
        args = ["all_reduce_perf", "-b", "1G", "-e", "1G", "-f", "2", "-w", "5", "-n", "20"]
        if len(ctx.hosts) > 1:
            argv = mpirun_argv(ctx, gpus * len(ctx.hosts), ctx.hosts, gpus, tuple(env)) + args + ["-g", "1"]
        else:
            argv = args + ["-g", str(gpus)]
        return ctx.observe(ALL_REDUCE_PERF, *argv, timeout=ALLREDUCE_TIMEOUT_S, env=env, attempt=attempt)

    return ctx.memo(("nccl.allreduce", attempt), go)


def _expected_ranks(ctx: Context) -> int | None:
    gpus = gpu_count(ctx)
    return None if gpus is None else (gpus or 1) * max(1, len(ctx.hosts))


def _host_ports(ctx: Context) -> list[IbPort] | None:
    """This node's IB/RoCE ports ([] without an HCA); None when a bundle recorded neither sysfs nor a port tool."""
    try:
        return ports_report(ctx)[0].ports if hcas(ctx) else []
    except MissingEvidence:
        pass
    # no HCA listing in the bundle: a port tool it holds (ibv_devinfo of the host,
    # https://github.com/NVIDIA/nccl/issues/451)
    try:
        return ports_report(ctx)[0].ports
    except MissingEvidence:
        return None


def _from(res: ToolRun) -> list[str]:
    return ["NCCL run recorded: `%s`" % res.command]


@check("nccl.busbw", "all-reduce bus bandwidth (nccl-tests) against the interconnect's floor",
       requires=(no_gpu_reason,), fast=False)
def busbw(ctx: Context) -> CheckResult:
    """A busbw below the floor is measured again (``validate.tries.until_pass``); every try is reported."""
    return until_pass(lambda n: _busbw_try(ctx, n))


def _busbw_try(ctx: Context, attempt: int) -> CheckResult:
    seen = _run_allreduce(ctx, attempt)
    if isinstance(seen, str):
        return skipped("nccl.busbw", seen)
    res, run = seen.run, seen.value
    if not run.all_reduce_perf:
        return skipped("nccl.busbw", "no all_reduce_perf run in the bundle (its NCCL run is `%s`)" % res.command,
                       code="EVIDENCE_MISSING")
    result = parse_all_reduce_perf(res.output)
    if run.stopped is not None and not result.rows:
        log = parse_nccl_log(res.output)
        return judge_hang(log, run.stopped.seconds, hang_evidence(ctx, log), run.stopped.how)
    if not res.ok and not result.rows:
        return failed("nccl.busbw", res.why_not(), "all_reduce_perf completes", "see nccl.transport",
                      classify_nccl_failure(parse_nccl_log(res.output)) or "TOOL_FAILED")
    try:
        gpus = snapshot(ctx).report.gpus
    except MissingEvidence:
        gpus = []
    model = gpus[0].name if gpus else None
    ports = _host_ports(ctx)
    rdma = sum(p.rate_gbps or 0 for p in ports if p.up) if ports else None
    floor = busbw_floor(model, len(gpus), max(1, len(ctx.hosts)), rdma) if gpus else None
    verdict = judge_busbw(result, floor, _expected_ranks(ctx))
    if run.stopped is not None:
        verdict.details.append("the run was stopped (%s) after %d result row(s), %s" % (
            run.stopped.how, len(result.rows), run.stopped.observed))
    return verdict


def _outcome(seen: Observed) -> tuple[bool, bool, str | None]:
    """(result rows printed, hung, why it ended) of a NCCL run: an all_reduce_perf run with no result row hung when
    it was stopped (timed out, killed: ``NcclRun.stopped``), else ended with its exit status (None when it exited 0
    or printed rows). A training job's log has no rows to wait for: its being stopped proves no hang."""
    res, run = seen.run, seen.value
    rows = bool(parse_all_reduce_perf(res.output).rows)
    if rows or not run.all_reduce_perf:
        return rows, False, None
    if run.stopped is not None:
        return rows, True, None
    return rows, False, None if res.ok else res.why_not()


def _nccl_log(ctx: Context, cid: str) -> tuple[Observed | None, CheckResult | None]:
    seen = _run_allreduce(ctx)
    if isinstance(seen, str):
        return None, skipped(cid, seen)
    if "NCCL INFO" not in seen.run.output:
        return None, skipped(cid, "no \"NCCL INFO\" line in the output of `%s` (NCCL_DEBUG=INFO log)"
                             % seen.command, code="NOT_REPORTED")
    return seen, None


@check("nccl.transport", "the transport NCCL picked (RDMA vs Socket fallback)", requires=(no_gpu_reason,),
       fast=False)
def transport(ctx: Context) -> CheckResult:
    seen, skip = _nccl_log(ctx, "nccl.transport")
    if skip:
        return skip
    res = seen.run
    rows, hung, ended = _outcome(seen)
    result = judge_transport(parse_nccl_log(res.output), _host_ports(ctx), len(ctx.hosts) > 1, rows, hung, ended)
    if not seen.value.all_reduce_perf:
        result.details.extend(_from(res))
    return result


@check("nccl.init", "a NCCL communicator initialised (Init COMPLETE), not just a transport selected",
       requires=(no_gpu_reason,), fast=False)
def init(ctx: Context) -> CheckResult:
    seen, skip = _nccl_log(ctx, "nccl.init")
    if skip:
        return skip
    res = seen.run
    rows, hung, _ = _outcome(seen)
    result = judge_init(parse_nccl_log(res.output), rows, hung)
    if result is None:
        return skipped("nccl.init", "no NCCL initialisation lines in `%s`" % res.command, code="NOT_REPORTED")
    if not seen.value.all_reduce_perf:
        result.details.extend(_from(res))
    return result


def host_nccl(ldconfig_text: str, realpath=os.path.realpath) -> tuple[str | None, str | None]:
    """(version, path) of the libnccl in ``ldconfig -p`` output; the version from the file name ``realpath``
    resolves it to."""
    for line in ldconfig_text.splitlines():
        if "libnccl.so" in line and "=>" in line:
            path = line.split("=>")[-1].strip()
            return versions.library_file([realpath(path), path], "libnccl"), path
    return None, None


@check("nccl.version", "NCCL library on this node", fast=True)
def version(ctx: Context) -> CheckResult:
    cid = "nccl.version"
    ld = ctx.tool("ldconfig", "-p")
    if not ld.ok:
        return skipped(cid, "cannot list shared libraries: %s" % ld.why_not(), code="TOOL_FAILED")
    found, path = host_nccl(ld.stdout, lambda p: ctx.fact("realpath %s" % p, lambda: os.path.realpath(p)))
    want = ctx.stack.version("nccl") if ctx.stack else None
    if path is None:
        return skipped(cid, "no libnccl on this node's library path (a container stack brings its own NCCL)",
                       code="NOT_APPLICABLE")
    measured = "NCCL %s (%s)" % (found or "?", path)
    if want and found and not found.startswith(want):
        return warned(cid, measured, "NCCL %s (stack %s)" % (want, ctx.stack.name),
                      "bare-metal runs use this NCCL: install the stack's version (containers use their own)",
                      "NCCL_VERSION_MISMATCH")
    return passed(cid, measured, "NCCL %s" % want if want else "a NCCL library")
