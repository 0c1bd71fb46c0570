"""Topology checks from ``nvidia-smi topo -m``, ``nvidia-smi nvlink --status`` and ``lspci -vvv``: NVLink where the
platform has it, GPU–NIC affinity, every NVLink link up, ACS redirect off on the PCIe bridges above the GPUs.

What "where the platform has it" means (by GPU model and count):

* 2–4 SXM GPUs (Dell C4140 with 4× V100-SXM2, HGX 4-GPU boards): every pair directly linked (fixture 13).
* 8× V100-SXM2 (DGX-1V, hybrid cube mesh): each GPU has NVLinks to 4 of the 7 others and reaches the rest over
  PCIe/SYS; all pairs must NOT be required (NVIDIA DGX-1 with Tesla V100 System Architecture, WP-08437-002;
  fixture 12).
* 8 newer SXM GPUs (A100/H100/H200 on NVSwitch): every pair (NV12/NV18…, fixture 14).
* PCIe GPUs: NVLink optional (bridges); none means allreduce crosses PCIe/the CPU — a WARN, not a FAIL
  (fixtures 17, 18).
* Model unknown: every GPU needs at least one NVLink peer once any GPU has one (fixture 16).
"""
from __future__ import annotations

import os
import re
from itertools import combinations

from facts.parsers.nvidia_smi import parse_nvlink_status
from facts.parsers.pcie import LSPCI_TREE, LSPCI_VERBOSE, AcsBridge, Lspci, iommu_enabled, upstream_bridges
from facts.parsers.topology import Topology, parse_topo
from validate.checks.gpu import no_gpu_reason, snapshot
from validate.checks.readings import kernel_log, pci_nvidia_gpus
from validate.checks.registry import Context, check
from validate.evidence import MissingEvidence
from validate.result import CheckResult, Reason, failed, passed, skipped, warned

#: NVLinks per GPU in a DGX-1V hybrid cube mesh: 4 peers (WP-08437-002).
CUBE_MESH_PEERS = 4
#: NCCL uses GPUDirect RDMA only for a NIC within NCCL_NET_GDR_LEVEL of the GPU; the default allows a path
#: through PCIe switches (PIX/PXB) but not through the CPU (NCCL env docs, NCCL_NET_GDR_LEVEL).
GDR_CODES = ("PIX", "PXB")


def _sxm(model: str | None) -> bool:
    """SXM parts: names with "SXM", and the SXM-only H100/H200 names ("NVIDIA H100 80GB HBM3", "NVIDIA H200")."""
    return bool(model) and bool(re.search(r"SXM|HBM3|^NVIDIA H200$", model))


def nvlink_expectation(model: str | None, n: int) -> str:
    """``"all-pairs"``, ``"cube-mesh"``, ``"optional"`` (PCIe parts) or ``"each-has-peer"`` (model unknown)."""
    if model is None:
        return "each-has-peer"
    if not _sxm(model):
        return "optional"
    if "V100" in model and n == 8:
        return "cube-mesh"
    return "all-pairs"


def judge_nvlink(topo: Topology, model: str | None) -> CheckResult:
    cid = "topo.nvlink"
    n = len(topo.gpus)
    if topo.problems and not topo.gpus:
        return failed(cid, "could not read nvidia-smi topo -m: %s" % "; ".join(topo.problems), "a GPU matrix",
                      "run nvidia-smi topo -m by hand", "OUTPUT_UNREADABLE")
    if n < 2:
        return skipped(cid, "%d GPU on this node: no pair to link" % n, code="NOT_APPLICABLE")
    want = nvlink_expectation(model, n)
    peers = {g: topo.nvlinks(g) for g in topo.gpus}
    linked_pairs = sum(1 for a, b in combinations(topo.gpus, 2) if b in peers[a])
    measured = "%d of %d GPU pairs NVLinked" % (linked_pairs, n * (n - 1) // 2)
    platform = "%d× %s" % (n, model) if model else "%d GPUs" % n
    details = ["%s: %s" % (g, ", ".join("%s NV%d" % kv for kv in p.items()) or "no NVLink") for g, p in peers.items()]
    if topo.problems:
        details += topo.problems
    if want == "all-pairs":
        missing = ["%s–%s (%s)" % (a, b, topo.link.get((a, b), "?")) for a, b in combinations(topo.gpus, 2)
                   if b not in peers[a]]
        if missing:
            return failed(cid, "%s; no NVLink on %d pair(s): %s%s" % (measured, len(missing), ", ".join(missing[:4]),
                                                                    ", …" if len(missing) > 4 else ""),
                          "NVLink between every GPU pair (%s)" % platform,
                          "reseat/replace the GPU baseboard links; check nvidia-smi nvlink --status and Xid 74",
                          "NVLINK_DEGRADED", ["no NVLink: %s" % ", ".join(missing)] + details)
        return passed(cid, measured, "every pair (%s)" % platform, details)
    if want == "cube-mesh":
        short = ["%s has %d NVLink peers" % (g, len(p)) for g, p in peers.items() if len(p) < CUBE_MESH_PEERS]
        if short:
            return failed(cid, "; ".join(short), "%d NVLink peers per GPU (hybrid cube mesh, %s)"
                          % (CUBE_MESH_PEERS, platform), "check nvidia-smi nvlink --status and Xid 74",
                          "NVLINK_DEGRADED", details)
        return passed(cid, "%s; %d peers per GPU" % (measured, CUBE_MESH_PEERS),
                      "hybrid cube mesh (%s): 4 NVLink peers per GPU, not all pairs" % platform, details)
    if linked_pairs == 0:
        worst = "SYS" if any(c == "SYS" for (a, b), c in topo.link.items() if a in topo.gpus and b in topo.gpus) \
            else "PCIe"
        return warned(cid, "%s: PCIe only%s" % (measured, ", GPU pairs across NUMA nodes (SYS)" if worst == "SYS"
                                                else ""),
                      "NVLink between GPUs for full single-node allreduce speed" if want != "optional"
                      else "NVLink (optional on PCIe GPUs)",
                      "expect low single-node busbw (allreduce over PCIe / host memory); keep ranks of a job on "
                      "one NUMA node where possible", "NO_NVLINK", details)
    lonely = [g for g, p in peers.items() if not p]
    if lonely:
        return warned(cid, "%s; %s has no NVLink peer" % (measured, ", ".join(lonely)),
                      "every GPU with an NVLink peer", "a job across all GPUs is limited by the PCIe hop of %s"
                      % ", ".join(lonely), "NVLINK_PARTIAL", details)
    return passed(cid, measured, "every GPU with an NVLink peer", details)


def judge_gpu_nic(topo: Topology) -> CheckResult:
    cid = "topo.gpu_nic"
    if not topo.gpus:
        return failed(cid, "could not read nvidia-smi topo -m: %s" % "; ".join(topo.problems), "a GPU matrix",
                      "run nvidia-smi topo -m by hand", "OUTPUT_UNREADABLE")
    if not topo.nics:
        return skipped(cid, "no NIC in nvidia-smi topo -m (no RDMA NIC on this node)", code="NOT_APPLICABLE")
    nearest = {g: topo.nearest_nic(g) for g in topo.gpus}
    details = ["%s: nearest NIC %s (%s)" % (g, n, c) for g, (n, c) in nearest.items()]
    far = ["%s→%s %s" % (g, n, c) for g, (n, c) in nearest.items() if c not in GDR_CODES]
    if far:
        return warned(cid, "no NIC behind a PCIe switch for %d of %d GPUs (%s)" % (len(far), len(topo.gpus),
                                                                                ", ".join(far[:4])),
                      "a NIC at PIX/PXB for every GPU (GPUDirect RDMA)",
                      "inter-node traffic of those GPUs goes through the CPU (no GPUDirect RDMA by default); "
                      "pin NCCL_IB_HCA per rank or accept the lower busbw", "GPU_NIC_AFFINITY", details)
    return passed(cid, "every GPU has a NIC at PIX/PXB", "GPUDirect RDMA path for every GPU", details)


def judge_nvlink_links(links: dict[int, dict[int, float | None]]) -> CheckResult:
    """``nvidia-smi nvlink --status``: every link listed must report a speed; ``<inactive>`` is degraded NVLink."""
    cid = "gpu.nvlink_links"
    if not links or not any(links.values()):
        return skipped(cid, "no NVLink links reported", code="NOT_REPORTED")
    inactive = ["GPU%d link %d" % (g, l) for g, ls in links.items() for l, speed in ls.items() if speed is None]
    counts = sorted({len(ls) for ls in links.values()})
    speeds = sorted({s for ls in links.values() for s in ls.values() if s is not None})
    measured = "%d GPUs × %s links at %s GB/s" % (len(links), "/".join(map(str, counts)),
                                                  "/".join("%g" % s for s in speeds) or "?")
    if inactive or len(counts) > 1:
        per_gpu = ["GPU%d: %d link(s), %d inactive" % (g, len(ls), sum(v is None for v in ls.values()))
                   for g, ls in links.items()]
        return failed(cid, "%s; %d inactive: %s%s" % (measured, len(inactive), ", ".join(inactive[:6]),
                                                     ", …" if len(inactive) > 6 else "")
                      if inactive else "%s; unequal link counts" % measured,
                      "every link active", "check Xid 74 in dmesg; reset the GPU; service the baseboard",
                      "NVLINK_DEGRADED", ["inactive: %s" % ", ".join(inactive)] * bool(inactive) + per_gpu)
    return passed(cid, measured, "every link active")


def _topo(ctx: Context) -> tuple[Topology | None, Reason | None]:
    res = ctx.tool("nvidia-smi", "topo", "-m")
    if not res.ok:
        return None, Reason(res.why_not(), "TOOL_FAILED")
    return parse_topo(res.stdout), None


def _model(ctx: Context) -> str | None:
    """The node's one GPU model; None when mixed or unknown (a bundle without nvidia-smi: the rule for an unknown
    model applies)."""
    try:
        names = {g.name for g in snapshot(ctx).report.gpus if g.name}
    except MissingEvidence:
        return None
    return names.pop() if len(names) == 1 else None


@check("topo.nvlink", "NVLink between GPUs where the platform has it", requires=(no_gpu_reason,), fast=True)
def nvlink(ctx: Context) -> CheckResult:
    topo, why = _topo(ctx)
    return skipped("topo.nvlink", why) if topo is None else judge_nvlink(topo, _model(ctx))


@check("topo.gpu_nic", "GPU–NIC affinity (GPUDirect RDMA path)", requires=(no_gpu_reason,), fast=True)
def gpu_nic(ctx: Context) -> CheckResult:
    topo, why = _topo(ctx)
    return skipped("topo.gpu_nic", why) if topo is None else judge_gpu_nic(topo)


@check("gpu.nvlink_links", "every NVLink link active", requires=(no_gpu_reason,), fast=True)
def nvlink_links(ctx: Context) -> CheckResult:
    res = ctx.tool("nvidia-smi", "nvlink", "--status")
    if not res.ok:
        return skipped("gpu.nvlink_links", res.why_not(), code="TOOL_FAILED")
    return judge_nvlink_links(parse_nvlink_status(res.stdout))


ACS_REMEDY = ("disable ACS on those bridges: in the BIOS (ACS / PCIe ACS control), or boot with pci=noacs, or at run "
              "time `setpci -s <bridge> ECAP_ACS+6.w=0000` for each (lost at reboot); slower workaround: "
              "NCCL_P2P_DISABLE=1 (NCCL user guide, Troubleshooting: PCI Access Control Services)")
ACS_VM_NOTE = ("in a VM ACS is needed for device passthrough: there, keep it and use NCCL_P2P_DISABLE=1 or ask for "
               "a host with P2P-capable passthrough (NCCL user guide, Troubleshooting: ACS)")


def judge_acs(bridges: list[AcsBridge] | Lspci, gpu_upstream: dict[str, list[str] | None] | None,
              iommu: str | None = None, virtual: bool | None = None) -> CheckResult:
    """ACS redirect (``SrcValid+``/``ReqRedir+``/``CmpltRedir+`` in ``lspci -vvv``'s ACSCtl) on a bridge above a
    GPU: FAIL ``ACS_ENABLED`` on bare metal (NCCL P2P hangs or crawls, https://github.com/NVIDIA/nccl/issues/2079), WARN
    in a VM (ACS is
    required for passthrough there). ``bridges``: the devices with an ACSCtl line, or the whole ``Lspci`` listing
    (then one limited to some devices, ``lspci -s``, proves nothing of a bridge it does not show: no redirect among
    the recorded bridges is a PASS only when every bridge above the GPUs was recorded, else a WARN
    ``EVIDENCE_INCOMPLETE``); ``gpu_upstream``: ``{GPU PCI address: bridges above it, None when not known}``
    (every bridge with ACS counts when unknown); ``iommu``: the kernel log line showing an IOMMU, or None;
    ``virtual``: None unknown."""
    cid = "topo.pcie_acs"
    listing = bridges if isinstance(bridges, Lspci) else Lspci(bridges=list(bridges))
    bridges = listing.bridges
    if not bridges:
        return skipped(cid, "no ACSCtl line in lspci -vvv (no ACS capability, or lspci not run as root)",
                       code="NOT_REPORTED")
    known = {g: ups for g, ups in (gpu_upstream or {}).items() if ups is not None}
    above = {b.address: sorted(g for g, ups in known.items() if b.address in ups) for b in bridges if b.address}
    relevant = [b for b in bridges if above.get(b.address)] if any(above.values()) else bridges
    details = ["%s (%s): ACSCtl %s" % (b.address or "a device whose lspci line was not recorded", b.name or "?",
                                       " ".join("%s%s" % (k, "+" if v else "-") for k, v in b.flags.items()))
               for b in relevant]
    on = [b for b in relevant if b.redirects]
    expected = "ACS redirect off (SrcValid- ReqRedir- CmpltRedir-) on every bridge between GPUs"
    if not on:
        return _acs_off(cid, listing, gpu_upstream or {}, relevant, expected, details)
    gpus = sorted({g for b in on for g in above.get(b.address, [])})
    named = [b.address for b in on if b.address]
    unnamed = len(on) - len(named)
    where = ", ".join(named + (["%d device(s) whose lspci line was not recorded" % unnamed] if unnamed else []))
    measured = ("ACS redirect enabled on %s%s: GPU P2P is routed through the root complex/IOMMU; NCCL may hang or "
                "run slowly" % (where, " (upstream of %s)" % ", ".join(gpus) if gpus else ""))
    if iommu:
        details.append("IOMMU active: %s" % iommu)
    if virtual:
        return warned(cid, measured, expected, ACS_VM_NOTE, "ACS_ENABLED", details)
    if virtual is None:
        details.append(ACS_VM_NOTE)
    return failed(cid, measured, expected, ACS_REMEDY, "ACS_ENABLED", details)


def _acs_off(cid: str, listing: Lspci, gpu_upstream: dict[str, list[str] | None], relevant: list[AcsBridge],
             expected: str, details: list[str]) -> CheckResult:
    """``judge_acs``'s verdict when no recorded bridge redirects: a PASS when the listing covers the bridges above
    the GPUs (a whole listing, or every one of them shown), else a WARN naming what was not recorded."""
    measured = "ACS redirect off on %d bridge(s)%s" % (len(relevant), " above the GPUs"
                                                      if relevant is not listing.bridges else "")
    if listing.partial:
        shown = set(listing.devices) | {b.address for b in listing.bridges}
        unseen = sorted({u for ups in gpu_upstream.values() if ups for u in ups} - shown)
        unknown = sorted(g for g, ups in gpu_upstream.items() if ups is None)
        if unseen or unknown or not gpu_upstream:
            missing = ("bridges above the GPUs not in the recorded lspci: %s" % ", ".join(unseen) if unseen else
                       "the bridges above %s not known" % (", ".join(unknown) or "the GPUs"))
            return warned(cid, "%s recorded; %s" % (measured, missing), expected,
                          "record `sudo lspci -vvv` (every device) or `lspci -s <bridge> -vvv` for each bridge above "
                          "the GPUs, with the PCI tree (`lspci -tv`)", "EVIDENCE_INCOMPLETE", details)
    return passed(cid, measured, expected, details)


def pci_gpus(ctx: Context) -> tuple[dict[str, list[str] | None], str]:
    """The NVIDIA GPUs on the PCI bus, each with the bridges above it (None: not known), and where they come from:
    sysfs (this node, or a bundle's listing of /sys/bus/pci/devices with each GPU's resolved path), else a bundle's
    recorded ``lspci -tv`` (``LSPCI_TREE``), else the GPUs a bundle's recorded ``lspci -vv`` lists (the bridges
    above them by their bus ranges). ``MissingEvidence`` naming them when a bundle holds none."""

    def find() -> tuple[dict[str, list[str] | None], str]:
        tree = ctx.first(LSPCI_TREE)
        gpus = pci_nvidia_gpus(ctx)
        if gpus is not None:
            return {g: _sysfs_upstream(ctx, g, tree.value if tree else {}) for g in gpus}, "sysfs"
        if tree is not None and tree.value:
            return dict(tree.value), "the bundle's `%s`" % tree.command
        listing, _, commands = lspci_listing(ctx, missing_ok=True)
        if listing is not None and listing.gpus:
            return ({g: listing.upstream(g) for g in listing.gpus},
                    "the bundle's `%s`" % "`, `".join(commands))
        raise MissingEvidence("the PCI device listing (/sys/bus/pci/devices, or `lspci -tv`)")

    return ctx.memo("pci gpus", find)


def _sysfs_upstream(ctx: Context, gpu: str, tree: dict[str, list[str]]) -> list[str] | None:
    """The bridges above ``gpu`` from its resolved sysfs path; a bundle without the path: its recorded tree's."""
    try:
        return upstream_bridges(ctx.fact("sysfs path of %s" % gpu,
                                         lambda: os.path.realpath("/sys/bus/pci/devices/" + gpu)))
    except MissingEvidence:
        return tree.get(gpu)


def gpus_on_pci(ctx: Context) -> list[str]:
    return list(pci_gpus(ctx)[0])


def _fewer_than_two_pci_gpus(ctx: Context) -> Reason | None:
    n = len(gpus_on_pci(ctx))
    return None if n >= 2 else Reason("%d NVIDIA GPU on the PCI bus: no GPU peer traffic" % n, "NOT_APPLICABLE")


def virtual_machine(ctx: Context) -> bool | None:
    """``systemd-detect-virt``: True in a VM, False on bare metal, None when unknown."""
    try:
        res = ctx.tool("systemd-detect-virt")
    except MissingEvidence:
        return None
    if res.missing or res.timed_out:
        return None
    return res.stdout.strip() not in ("none", "")


def lspci_listing(ctx: Context, missing_ok: bool = False) -> tuple[Lspci | None, str, list[str]]:
    """(the PCI devices' ACS control as ``lspci -vvv`` shows it, or None; why not; the commands read): every run of
    a bundle ``LSPCI_VERBOSE`` reads (as typed: ``sudo lspci -s 40:03.1 -vvv | grep …``, one per bridge), merged;
    else ``lspci -vvv`` (this node). ``MissingEvidence`` from a bundle without one, unless ``missing_ok``."""

    def read() -> tuple[Lspci | None, str, list[str]]:
        seen = []
        while (one := ctx.first(LSPCI_VERBOSE, attempt=len(seen) + 1)) is not None:  # every recorded run, in order
            seen.append(one)
        if not seen:
            one = ctx.observe(LSPCI_VERBOSE)
            if not one.run.ok:
                return None, one.run.why_not(), []
            seen = [one]
        read = [s for s in seen if s.run.ok or s.run.output.strip()]
        if not read:
            return None, seen[0].run.why_not(), []
        return Lspci.merged([s.value for s in read]), "", [s.command for s in read]

    try:
        return ctx.memo("lspci -vvv", read)
    except MissingEvidence:
        if missing_ok:
            return None, "", []
        raise


def acs_facts(ctx: Context) -> tuple[Lspci | None, dict[str, list[str] | None], str | None, str]:
    """(the ``lspci -vvv`` listing or None, {GPU: bridges above it}, IOMMU line, why no lspci); the GPUs' evidence
    (``pci_gpus``) is named in the listing's details by ``pcie_acs``."""
    listing, why, _ = lspci_listing(ctx)
    if listing is None:
        return None, {}, None, why
    upstream = pci_gpus(ctx)[0]
    log = kernel_log(ctx)
    iommu = iommu_enabled(log.stdout) if log is not None and log.ok else None
    return listing, upstream, iommu, ""


@check("topo.pcie_acs", "ACS redirect off on the PCIe bridges above the GPUs (GPU peer-to-peer)",
       requires=(_fewer_than_two_pci_gpus,), fast=True)
def pcie_acs(ctx: Context) -> CheckResult:
    listing, upstream, iommu, why = acs_facts(ctx)
    if listing is None:
        return skipped("topo.pcie_acs", why, code="TOOL_FAILED")
    result = judge_acs(listing, upstream, iommu, virtual_machine(ctx))
    commands, source = lspci_listing(ctx)[2], pci_gpus(ctx)[1]
    if commands != [LSPCI_VERBOSE.command]:
        result.details.append("ACS control from the bundle's `%s`" % "`, `".join(commands))
    if source != "sysfs":
        result.details.append("GPUs and the bridges above them from %s" % source)
    return result
