"""InfiniBand checks: the device files a process (or container) needs, port state and rate, IPoIB, and
``ib_write_bw`` between two hosts.

Port rule (per HCA, InfiniBand link layer only; Ethernet ports are RoCE/front-end NICs, never IB rails): a port is
up when State is Active AND Physical state is LinkUp; its rate must be at least ``EXPECTED_RATE_GBPS`` (the seed's
EDR). An HCA with no port up is FAIL; a down port on an HCA that has another port up is WARN (often an uncabled
second port, fixture 28). A down port's rate is not judged (a Polling port reports a meaningless ``Rate: 10``,
fixture 25). Down + LinkUp + LID 65535 means the cable is fine but no subnet manager configured the port
(fixture 24).
"""
from __future__ import annotations

import os
import socket
import subprocess
import time

from facts.parsers.infiniband import (
    IB_COUNTERS,
    IB_EVENTS,
    IB_WRITE_BW,
    IBSTAT,
    IBSTATUS,
    IBV_DEVINFO,
    IbPort,
    IbReport,
    WriteBw,
    parse_ib_write_bw,
    parse_sysfs,
    port_events,
    run_port_events,
)
from facts.parsers.kernel import KERNEL_LOG
from facts.parsers.observation import Observed
from facts.signals import read_kind
from validate.checks.registry import Context, check
from validate.evidence import MissingEvidence
from validate.result import CheckResult, failed, passed, skipped, warned
from validate.tries import until_pass

#: The seed study's fabric: EDR InfiniBand, 100 Gb/s per port (4X EDR) — the floor under every comparison.
EXPECTED_RATE_GBPS = 100.0
#: InfiniBand generations by 4X port rate in Gb/s (InfiniBand Trade Association roadmap).
GENERATIONS = {40.0: "QDR", 56.0: "FDR", 100.0: "EDR", 200.0: "HDR", 400.0: "NDR", 800.0: "XDR"}
#: The 4X rate each ConnectX physical function links at (``CA type`` = PCI device ID, vendor 15b3, PCI ID
#: repository): ConnectX-4/-5 EDR, ConnectX-6 HDR, ConnectX-7 NDR. Virtual functions (MT4124, MT4126, …) and
#: Ethernet-only parts are left out: their rate is the peers' to judge.
HCA_RATE = {"MT4115": ("ConnectX-4", 100.0), "MT4119": ("ConnectX-5", 100.0), "MT4121": ("ConnectX-5 Ex", 100.0),
            "MT4123": ("ConnectX-6", 200.0), "MT4129": ("ConnectX-7", 400.0)}
#: ib_write_bw must reach this share of the port's line rate (fixture 64: 98.01 Gb/s on a 100G port passes;
#: Azure's NHC asks 78 Gb/s non-GDR on EDR, conf/nd40rs_v2.conf, so 90 % is the stricter of the two).
WRITE_BW_SHARE = 0.9
SYSFS = "/sys/class/infiniband"
DOCKER_RDMA_FLAGS = "--device=/dev/infiniband --cap-add=IPC_LOCK --ulimit memlock=-1"


def _down_hint(p: IbPort) -> str:
    if p.phys_state == "LinkUp" and p.state == "Down" and p.base_lid in (65535, 0, None):
        return "%s: State Down but Physical state LinkUp, LID %s: no subnet manager / port not initialized " \
               "(not a cable fault)" % (p.name, p.base_lid if p.base_lid is not None else "?")
    if p.phys_state == "Polling":
        return "%s: Physical state Polling: no link partner (cable or switch port)" % p.name
    if p.phys_state == "Disabled":
        return "%s: port disabled" % p.name
    if p.state in ("Init", "Armed"):
        return "%s: State %s: waiting for the subnet manager" % (p.name, p.state)
    return "%s: State %s, Physical state %s" % (p.name, p.state or "?", p.phys_state or "?")


def rate_name(gbps: float) -> str:
    return "%g Gb/s%s" % (gbps, " (%s)" % GENERATIONS[gbps] if gbps in GENERATIONS else "")


def rate_findings(rails: list[IbPort], floor: float) -> tuple[list[str], list[str]]:
    """(fail, warn) findings comparing like with like: an up rail slower than its peers (the node's fastest up
    rail: a degraded link) or below the ``floor``: FAIL; every rail of an HCA model slower than that model's
    generation (ConnectX-7 ports at HDR 200): WARN. Each names the port, its value and its peers' value."""
    up = [p for p in rails if p.up and p.rate_gbps is not None]
    if not up:
        return [], []
    peer = max(p.rate_gbps for p in up)
    fail, warn = [], []
    for p in up:
        peers = [q for q in up if q is not p and q.rate_gbps == peer]
        if p.rate_gbps < peer:
            fail.append("%s at %s while its %d peer(s) run %s (degraded link: check the cable, the switch port and "
                        "ibstat's Rate)" % (p.name, rate_name(p.rate_gbps), len(peers), rate_name(peer)))
        elif p.rate_gbps < floor:
            fail.append("%s: %g Gb/s < %g Gb/s" % (p.name, p.rate_gbps, floor))
    for ca_type, (model, gen_rate) in HCA_RATE.items():
        slow = [p for p in up if p.ca_type == ca_type and p.rate_gbps == peer < gen_rate]
        if slow:
            warn.append("%d %s (%s) port(s) at %s; that HCA links at %s" % (len(slow), model, ca_type,
                                                                            rate_name(peer), rate_name(gen_rate)))
    return fail, warn


def judge_ports(report: IbReport, expected_rate: float = EXPECTED_RATE_GBPS, source: str = "ibstat") -> CheckResult:
    """Every IB rail up; rates compared like with like (``rate_findings``: against the node's other rails and
    the HCA's generation, never only a fixed floor); every finding listed (the measured line has the first)."""
    cid = "ib.ports"
    rails = [p for p in report.ports if p.link_layer != "Ethernet"]
    eth = [p for p in report.ports if p.link_layer == "Ethernet"]
    details = ["%s: Ethernet (RoCE/front-end), not an IB rail" % p.name for p in eth]
    details += report.problems
    if not rails and not report.missing_hcas:
        if eth and any(p.up for p in eth):
            return passed(cid, "no InfiniBand port; %d Ethernet RDMA port(s) up (RoCE)" % sum(p.up for p in eth),
                          "IB ports Active/LinkUp", details)
        return failed(cid, "no InfiniBand port found by %s" % source, "IB ports Active/LinkUp",
                      "check the HCA driver (mlx5_core, ib_core) and `ibstat`", "IB_NO_PORT", details)
    fail, warn = [], []
    by_hca: dict[str, list[IbPort]] = {}
    for p in rails:
        by_hca.setdefault(p.hca, []).append(p)
    for hca, ports in by_hca.items():
        up = [p for p in ports if p.up]
        for p in ports:
            if not p.up:
                (warn if up else fail).append(_down_hint(p))
    rate_fail, rate_warn = rate_findings(rails, expected_rate)
    fail += rate_fail
    warn += rate_warn
    for hca in report.missing_hcas:
        fail.append("%s: %s could not read it (device vanished / driver problem)" % (hca, source))
    rates = sorted({p.rate_gbps for p in rails if p.up and p.rate_gbps is not None})
    n_up = sum(p.up for p in rails)
    measured = "%d/%d IB ports Active/LinkUp%s" % (n_up, len(rails), " at %s Gb/s" % "/".join("%g" % r for r in rates)
                                                   if rates else " (rate not reported by %s)" % source)
    if eth:
        measured += "; %d Ethernet port(s) not counted" % len(eth)
    expected = ("every HCA's IB ports Active + LinkUp, each at its peers' rate and its HCA's generation (EDR 100, "
                "HDR 200, NDR 400 Gb/s per port), >= %g Gb/s (EDR)" % expected_rate)
    if fail:
        if any("subnet manager" in f for f in fail):
            diagnosis, remedy = "IB_NO_SM", "start/check the subnet manager (opensm/UFM) for that port"
        elif fail == rate_fail:
            diagnosis, remedy = "IB_RATE_DEGRADED", ("reseat or replace the cable, check the switch port's speed "
                                                     "(ibportstate), then ibstat: the port must match its peers")
        else:
            diagnosis, remedy = "IB_PORT_DOWN", ("check cable, switch port and HCA (ibstat, dmesg mlx5_core); "
                                                 "expected HCAs must be up")
        return failed(cid, "%s; %s" % (measured, fail[0]), expected, remedy, diagnosis, fail[1:] + warn + details)
    if warn:
        if warn == rate_warn:
            return warned(cid, "%s; %s" % (measured, warn[0]), expected, "check the cables and switch ports: an "
                          "HDR100/EDR cable or switch caps the link below the HCA's generation", "IB_RATE_BELOW_HCA",
                          warn[1:] + details)
        return warned(cid, "%s; %s" % (measured, warn[0]), expected,
                      "cable the port or ignore it if it is not a rail", "IB_PORT_DOWN", warn[1:] + details)
    eth_down = [p.name for p in eth if not p.up]
    if eth_down:
        return warned(cid, "%s; Ethernet port(s) down: %s" % (measured, ", ".join(eth_down)), expected,
                      "not IB rails: ignore them if unused (front-end/management); a RoCE rail must be up",
                      "ETH_PORT_DOWN", details)
    if report.problems:
        return warned(cid, measured, expected, "output incomplete: %s" % report.problems[0], "OUTPUT_UNREADABLE",
                      details)
    return passed(cid, measured, expected, details)


def read_sysfs_ports(ctx: Context, root: str = SYSFS) -> str:
    """The text of ``grep "" <root>/*/ports/*/{state,rate,phys_state,link_layer,lid,sm_lid}`` (for
    ``parse_sysfs``), read through ``ctx``."""
    lines = []
    for path in ctx.glob(os.path.join(root, "*", "ports", "*", "*")):
        if os.path.basename(path) in ("state", "rate", "phys_state", "link_layer", "lid", "sm_lid"):
            value = ctx.read(path)
            if value is None:
                continue
            rel = os.path.relpath(path, root)
            lines.append("/sys/class/infiniband/%s:%s" % (rel, value.strip()))
    return "\n".join(lines)


def hcas(ctx: Context, root: str = SYSFS) -> list[str]:
    """RDMA devices (HCAs) in sysfs."""
    return [os.path.basename(p) for p in ctx.glob(os.path.join(root, "*"))]


def ports_report(ctx: Context) -> tuple[IbReport, str]:
    """Port state from the first source that answers: ibstat, ibstatus, ibv_devinfo, then sysfs (no tool)."""

    def read() -> tuple[IbReport, str]:
        for tool in (IBSTAT, IBSTATUS, IBV_DEVINFO):  # a bundle's ibv_devinfo may be for one device, filtered
            try:
                seen = ctx.first(tool) or ctx.observe(tool)
            except MissingEvidence:  # a bundle without this tool: the next source
                continue
            if seen.run.missing:
                continue
            report, device = seen.value
            if report.ports or report.missing_hcas:
                return report, seen.command if device else tool.command
        return parse_sysfs(read_sysfs_ports(ctx)), "sysfs"

    return ctx.memo("ib.ports", read)


@check("ib.devices", "RDMA devices visible to this process (/dev/infiniband)", fast=True)
def devices(ctx: Context) -> CheckResult:
    cid = "ib.devices"
    found = hcas(ctx)
    uverbs = ctx.glob("/dev/infiniband/uverbs*")
    if not found:
        if len(ctx.hosts) > 1:
            return warned(cid, "no RDMA device (%s is empty)" % SYSFS, "an IB/RoCE HCA for a multi-node run",
                          "NCCL will fall back to TCP sockets between nodes", "NO_RDMA")
        return skipped(cid, "no RDMA device on this node (%s missing or empty)" % SYSFS, code="NOT_APPLICABLE")
    if not uverbs:
        return failed(cid, "HCAs %s present but /dev/infiniband/uverbs* missing" % ", ".join(found),
                      "/dev/infiniband/uverbs* for every HCA",
                      "in a container: docker run %s (+ --net=host for RoCE); on the host: modprobe ib_uverbs"
                      % DOCKER_RDMA_FLAGS, "NCCL_IB_DEVICE_NOT_VISIBLE")
    return passed(cid, "%d HCA(s) %s; %d uverbs device(s)" % (len(found), ", ".join(found), len(uverbs)),
                  "/dev/infiniband/uverbs* for every HCA")


@check("ib.ports", "IB port state Active + LinkUp, rate, link layer", fast=True)
def ports(ctx: Context) -> CheckResult:
    try:
        listed = ctx.tool("ibstat").ok or bool(hcas(ctx))
    except MissingEvidence:  # a bundle without ibstat or the HCA listing: whatever port tool it holds decides
        listed = True
    if not listed:
        return skipped("ib.ports", "no RDMA device on this node (%s missing or empty)" % SYSFS, code="NOT_APPLICABLE")
    try:
        report, source = ports_report(ctx)
    except MissingEvidence as e:  # no port state recorded: the ports' error events, if any, are still this check's
        events = _port_events(ctx)
        if not events:
            raise
        return warned("ib.ports", "the HCAs reported %d port fault%s (the port state is not recorded: %s not in "
                      "the bundle): %s" % (len(events), "" if len(events) == 1 else "s", e.what, events[0].line),
                      "every port Active/LinkUp; no port error events", PORT_EVENTS_REMEDY, "IB_PORT_EVENTS",
                      list(dict.fromkeys("%s (%s)" % (h.line, h.where) for h in events)))
    result = judge_ports(report, source=source)
    if " " in source:  # a bundle's run for one device (`ibv_devinfo -d X | egrep …`): it proves only that HCA
        result.measured = "one HCA recorded (`%s`): %s" % (source, result.measured)
    return judge_port_events(result, _port_events(ctx))


def _port_events(ctx: Context) -> list:
    """The port faults (``facts.parsers.infiniband.port_events``) of a bundle's ``ibv_asyncwatch``, ``perfquery``
    or ``ibqueryerrors``, of the error counters in sysfs, and of the kernel log (a bundle's, or ``dmesg`` here; none
    where it cannot be read)."""
    events = ctx.first(IB_EVENTS)
    hits = run_port_events(events.run, "ib-events") if events is not None else []
    counters = ctx.first(IB_COUNTERS)
    hits += run_port_events(counters.run) if counters is not None else []
    try:  # the error counters of sysfs (a bundle without their listing: not recorded)
        for path in ctx.glob(os.path.join(SYSFS, "*", "ports", "*", "counters", "*")):
            if read_kind(path) == "ib-counters-sysfs":
                hits += port_events(ctx.read(path) or "", "ib-counters-sysfs", path)
    except MissingEvidence:
        pass
    try:
        log = ctx.first(KERNEL_LOG) or ctx.observe(KERNEL_LOG)
    except MissingEvidence:
        return hits
    return hits + (run_port_events(log.run) if log.run.ok else [])


#: what to do about a port that raises error events (NVIDIA, "Understanding mlx5 Linux counters and status
#: parameters"; ibv_get_async_event(3): IBV_EVENT_PORT_ERR is "Link became unavailable on a port")
PORT_EVENTS_REMEDY = ("a port that raises error events flaps or loses its link: read its error counters (`perfquery "
                      "-x` or `ibqueryerrors`; /sys/class/infiniband/DEV/ports/N/counters/link_downed, symbol_error), "
                      "the cable's and transceiver's state (`mlxlink -d DEV -p N -m`), then reseat or replace the "
                      "cable or transceiver; drain the node while they recur")


def judge_port_events(result: CheckResult, hits: list) -> CheckResult:
    """``result`` of the ports, with the HCA's async error events and link-down lines (``hits``) judged: a port
    that PASSes while it raised them (or while its error counters are not zero) is a WARN ``IB_PORT_EVENTS``
    naming each line; a FAIL lists them too. The
    lines are claimed (``explains``) either way."""
    if not hits:
        return result
    lines = list(dict.fromkeys(h.line for h in hits))
    result.explains = list(result.explains) + lines
    details = list(dict.fromkeys("%s (%s)" % (h.line, h.where) for h in hits))
    if result.status.value == "PASS":
        measured = "%s; but the HCAs reported %d port fault%s (async error events, link down, error counters): %s" % (
            result.measured, len(hits), "" if len(hits) == 1 else "s", lines[0])
        return warned(result.id, measured, result.expected + "; no port error events", PORT_EVENTS_REMEDY,
                      "IB_PORT_EVENTS", list(result.details) + details)
    result.details = list(result.details) + details
    return result


def ipoib_interfaces(ctx: Context, root: str = "/sys/class/net") -> dict[str, str]:
    """``{name: operstate}`` of IPoIB interfaces (``type`` 32 = ARPHRD_INFINIBAND)."""
    out = {}
    for dev in ctx.glob(os.path.join(root, "*")):
        kind = ctx.read(os.path.join(dev, "type"))
        if kind is None or kind.strip() != "32":
            continue
        state = ctx.read(os.path.join(dev, "operstate"))
        if state is not None:
            out[os.path.basename(dev)] = state.strip()
    return out


@check("ib.ipoib", "IPoIB interface up (optional)", fast=True)
def ipoib(ctx: Context) -> CheckResult:
    """Optional: NCCL moves data over verbs, IPoIB only helps bootstrap/OOB; fabrics without IPoIB are normal
    (imbue-ai/cluster-health#4)."""
    cid = "ib.ipoib"
    ifaces = ipoib_interfaces(ctx)
    if not ifaces:
        return skipped(cid, "no IPoIB interface (optional: NCCL uses verbs, not IPoIB)", code="NOT_APPLICABLE")
    down = ["%s %s" % kv for kv in ifaces.items() if kv[1] != "up"]
    if down:
        return warned(cid, "IPoIB down: %s" % ", ".join(down), "IPoIB interfaces up (if used for bootstrap)",
                      "ip link set <iface> up, or set NCCL_SOCKET_IFNAME to another interface", "IPOIB_DOWN")
    return passed(cid, "IPoIB up: %s" % ", ".join(ifaces), "IPoIB interfaces up")


def judge_write_bw(wb: WriteBw, line_rate_gbps: float | None) -> CheckResult:
    cid = "ib.write_bw"
    if wb.bw_avg_gbps is None:
        return failed(cid, "no ib_write_bw result: %s" % "; ".join(wb.problems), "a BW average row",
                      "run ib_write_bw by hand between the two hosts", "OUTPUT_UNREADABLE")
    measured = "%.2f Gb/s average at %d B on %s (%s)" % (wb.bw_avg_gbps, wb.msg_bytes, wb.device or "?",
                                                           wb.link_type or "?")
    if wb.problems:
        return warned(cid, measured, "Gb/s figures", "; ".join(wb.problems), "OUTPUT_UNREADABLE")
    if wb.msg_bytes < 65536:
        return warned(cid, measured, "a message of >= 64 KiB", "run with -s 65536 (or -a and read the largest size)",
                      "IB_WRITE_BW_SMALL_MESSAGE")
    if line_rate_gbps is None:
        return warned(cid, measured, "the port's line rate", "port rate unknown: compare by hand",
                      "EVIDENCE_INCOMPLETE")
    floor = WRITE_BW_SHARE * line_rate_gbps
    if wb.bw_avg_gbps < floor:
        return failed(cid, measured, ">= %.0f Gb/s (%d %% of %g Gb/s)" % (floor, WRITE_BW_SHARE * 100, line_rate_gbps),
                      "check link rate/width (ibstat), PCIe width of the HCA, and the switch port",
                      "IB_BANDWIDTH_LOW")
    return passed(cid, measured, ">= %.0f Gb/s (%d %% of %g Gb/s)" % (floor, WRITE_BW_SHARE * 100, line_rate_gbps))


@check("ib.write_bw", "ib_write_bw between two hosts (with --hosts)", fast=False)
def write_bw(ctx: Context) -> CheckResult:
    cid = "ib.write_bw"
    if ctx.first(IB_WRITE_BW) is not None:  # a bundle's runs (captured by hand, or this check's tries)
        return until_pass(lambda n: _recorded_write_bw(ctx, ctx.first(IB_WRITE_BW, attempt=n)))
    me = set(ctx.fact("hostnames", lambda: [socket.gethostname(), socket.getfqdn(), "localhost"]))
    peers = [h for h in ctx.hosts if h.split(":")[0] not in me]
    if not peers:
        return skipped(cid, "needs a second host: pass --hosts this,other", code="NOT_APPLICABLE")
    report, _ = ports_report(ctx)
    up = [p for p in report.ports if p.up]
    if not up:
        return skipped(cid, "no RDMA port up on this node (see ib.ports)", code="NOT_APPLICABLE")
    peer, dev = peers[0].split(":")[0], up[0].hca
    args = ["ib_write_bw", "-d", dev, "--report_gbits", "-s", "65536", "-D", "5", "-q", "4"]

    def attempt(n: int) -> CheckResult:  # the server answers one test: each try starts its own
        server = ctx.fact("ib.write_bw.server %s" % peer + (" try %d" % n if n > 1 else ""),
                          lambda: _start_server(peer, args))
        if server is not None:
            return skipped(cid, server, code="TOOL_FAILED")
        client = ctx.tool(*(args + [peer]), timeout=40, attempt=n)
        if client.missing:
            return skipped(cid, "ib_write_bw not on PATH (perftest)", code="TOOL_MISSING")
        if not client.ok:
            return failed(cid, client.why_not(), "ib_write_bw to %s" % peer, "check that both hosts reach each other "
                          "over %s (ibstat, GID/LID)" % dev, "IB_WRITE_BW_FAILED")
        return judge_write_bw(parse_ib_write_bw(client.output), up[0].rate_gbps)

    return until_pass(attempt)


def _recorded_write_bw(ctx: Context, run: Observed | None) -> CheckResult:
    """Judge a bundle's ``ib_write_bw`` run against the line rate of its device's port, when the bundle recorded
    the ports (without them the rate is unknown: a WARN, never a PASS); ``MissingEvidence`` for a try the bundle
    does not hold (``run`` None)."""
    if run is None:
        raise MissingEvidence("another ib_write_bw run")
    wb = run.value
    try:
        rates = [p.rate_gbps for p in ports_report(ctx)[0].ports if p.up and p.hca == wb.device]
    except MissingEvidence:
        rates = []
    result = judge_write_bw(wb, rates[0] if rates else None)
    result.details.append("from the bundle's `%s`" % run.command)
    return result


def _start_server(peer: str, args: list[str]) -> str | None:
    """Start the ib_write_bw server on ``peer`` over ssh (it exits after one test); None or why it could not."""
    try:
        subprocess.Popen(["ssh", "-o", "BatchMode=yes", peer] + args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as e:
        return "cannot start the ib_write_bw server on %s over ssh: %s" % (peer, e)
    time.sleep(2)
    return None
