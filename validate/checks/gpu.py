"""GPU checks: inventory, persistence mode, ECC / retired pages, the driver vs the stack's CUDA, kernel Xid events,
DCGM diagnostics.

Each ``judge_*`` function is pure (parsed facts in, ``CheckResult`` out) and is what the tests run on the recorded
outputs of ../shared/fixtures; each ``@check`` function runs the tools and calls its judge.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from chexstack.errors import ChexstackError
from chexstack.tools import ToolRun
from facts.faults_table import remedies
from facts.parsers import versions
from facts.parsers.container import IMAGE_CUDA
from facts.parsers.dcgm import Diag, parse_dcgmi_diag
from facts.parsers.kernel import OpenModuleRefusal, XidEvent, parse_dmesg, parse_open_module_refusals
from facts.parsers.nvidia_smi import (
    CUDA_NOT_READY,
    CUDA_OS_CALL,
    CUDA_RUN,
    EXCERPT,
    FABRIC,
    FABRIC_MANAGER,
    FABRIC_MANAGER_LOG,
    MIG_MODES,
    PEER_PROPERTIES,
    PEER_QUERY,
    PROPERTIES,
    PROPERTIES_BASIC,
    Fabric,
    Gpu,
    SmiReport,
    classify_error,
    is_inventory_query,
    parse_nvlink_status,
    parse_query_csv,
    parse_table,
    peers_from_query,
)
from facts.parsers.versions import CUDA_TOOLKIT, NVCC
from validate.checks.readings import kernel_log, pci_nvidia_gpus
from validate.checks.registry import Context, check
from validate.evidence import MissingEvidence
from validate.result import CheckResult, Reason, Status, failed, passed, skipped, warned

NOT_GPU_NODE = Reason("not a GPU node (no nvidia-smi, no NVIDIA GPU in /sys/bus/pci)", "NOT_APPLICABLE")

#: The fix of each fault of the driver and the GPUs this check names (the table of faults', ``facts.faults_table``).
REMEDY = remedies((
    "NVML_DRIVER_LIBRARY_MISMATCH", "NVIDIA_DRIVER_NOT_LOADED", "GPU_LOST", "NO_DEVICES",
    "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU", "NVML_ERROR"))


@dataclass
class GpuSnapshot:
    """nvidia-smi's view of this node once per run: ``report`` (table + query CSV merged), ``pci_gpus`` (NVIDIA
    display/3D controllers on the PCI bus, from sysfs), ``smi_missing``, ``source``: the bundle's run the report
    comes from when it is not nvidia-smi's table (None: the table); ``excerpt``: the bundle's run of the head of
    the table when that is all it holds (driver and maximum CUDA only)."""

    report: SmiReport = field(default_factory=SmiReport)
    pci_gpus: list[str] | None = field(default_factory=list)
    smi_missing: bool = False
    source: str | None = None
    excerpt: str | None = None


def snapshot(ctx: Context) -> GpuSnapshot:
    return ctx.memo("gpu.snapshot", lambda: _snapshot(ctx))


def _snapshot(ctx: Context) -> GpuSnapshot:
    snap = GpuSnapshot(pci_gpus=pci_nvidia_gpus(ctx))
    try:  # a bundle of outputs captured by hand may hold only the per-GPU query (or nvidia-smi -q)
        table = ctx.tool("nvidia-smi")
    except MissingEvidence:
        excerpt = ctx.first(EXCERPT)
        if excerpt is not None:
            snap.report = excerpt.value
            snap.excerpt = "`%s`" % excerpt.command
        table = None
    if table is not None and table.missing:
        snap.smi_missing = True
        return snap
    if table is not None:
        snap.report = parse_table(table.output)
    try:  # the query adds ECC / retired pages / remapped rows; a bundle without it leaves them unreported
        query = ctx.observe(PROPERTIES)
        if not query.run.ok and "not a valid field" in query.run.output:
            query = ctx.observe(PROPERTIES_BASIC)
    except MissingEvidence:
        if table is None and snap.excerpt is None:
            raise MissingEvidence("`nvidia-smi`") from None
        return snap
    if not query.run.ok:
        if table is None:
            snap.report = SmiReport(error=classify_error(query.run.output), problems=[query.run.why_not()])
        return snap
    got = query.value
    if table is None:
        got.driver_max_cuda = got.driver_max_cuda or snap.report.driver_max_cuda
        snap.report = got
        snap.report.problems = list(got.problems)
        if not is_inventory_query(query.run):
            snap.source = "`%s`" % query.command
    elif got.gpus:
        mig = {_bus(g.bus_id): g.mig_enabled for g in snap.report.gpus}
        for g in got.gpus:
            if g.mig_enabled is None:
                g.mig_enabled = mig.get(_bus(g.bus_id))
        snap.report.gpus = got.gpus
        snap.report.problems.extend(got.problems)
    return snap


def gpu_count(ctx: Context) -> int | None:
    """GPUs nvidia-smi lists on this node; None when a bundle recorded no nvidia-smi, or only the head of its table
    (``facts.parsers.nvidia_smi.EXCERPT``: a driver and its maximum CUDA, no GPU rows — never "0 GPUs")."""
    try:
        snap = snapshot(ctx)
    except MissingEvidence:
        return None
    return None if snap.excerpt and not snap.report.gpus else len(snap.report.gpus)


def no_gpu_reason(ctx: Context) -> str | None:
    """Why GPU checks do not apply on this node, or None when there are NVIDIA GPUs (working or not) — or when a
    bundle recorded no nvidia-smi (each check then asks for its own evidence and SKIPs without it)."""
    try:
        snap = snapshot(ctx)
    except MissingEvidence:
        return None
    if snap.smi_missing and not snap.pci_gpus:
        return NOT_GPU_NODE
    return None


def _bus(address: str | None) -> str:
    """``00000000:03:00.0`` (nvidia-smi) and ``0000:03:00.0`` (sysfs, the kernel) as one key."""
    return (address or "").lower()[-12:]


def judge_open_module(refusals: list[OpenModuleRefusal], report: SmiReport, pci: int) -> CheckResult | None:
    """The kernel log's refusal by the open nvidia.ko of GPUs nvidia-smi does not list (``refusals``: from
    ``facts.parsers.kernel.parse_open_module_refusals``; ``pci``: NVIDIA GPUs on the PCI bus, 0 when not recorded):
    FAIL ``NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU`` — the driver is installed and loaded, its open flavour does not
    drive a GPU without a GSP (https://github.com/zzzhouuu/truenas-nvidia-drivers/issues/20,
    https://github.com/NVIDIA/open-gpu-kernel-modules/issues/322). A PCI ID in Turing's range or later (which has
    a GSP) is named as such, without the proprietary-flavour remedy. None when no listed-missing GPU was refused."""
    listed = {_bus(g.bus_id) for g in report.gpus}
    refused = [r for r in refusals if _bus(r.device) not in listed]
    if not refused:
        return None
    on_bus = max(pci, len(listed) + len(refused))
    seen = "%d" % len(report.gpus) if report.gpus else "none"
    why = " (%s)" % report.error.message if report.error else ""
    measured = "%d NVIDIA GPU%s on the PCI bus, nvidia-smi sees %s%s: the loaded open nvidia.ko does not support %s, " \
               "which %s no GPU System Processor (GSP)" % (
                   on_bus, "" if on_bus == 1 else "s", seen, why,
                   ", ".join("%s (PCI ID %s)" % (r.device, r.pci_id) for r in refused),
                   "has" if len(refused) == 1 else "have")
    old = [r for r in refused if r.pre_turing]
    details = ["PCI ID %s is below 10de:1e00, where Turing's device IDs begin: a pre-Turing GPU (Maxwell, Pascal, "
                "Volta), which the open kernel modules never support" % r.pci_id for r in old]
    expected = "nvidia-smi lists every GPU (the open kernel modules drive Turing and later only)"
    if len(old) == len(refused):
        return failed("gpu.inventory", measured, expected, REMEDY["NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU"],
                      "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU", details)
    newer = ", ".join(r.pci_id for r in refused if not r.pre_turing)
    return failed("gpu.inventory", measured, expected,
                  "PCI ID %s is in Turing's range or later, which has a GSP: the open module did not recognise the "
                  "GPU; check that this driver release supports it (the README's list of supported GPUs) and that "
                  "the device reads correctly on the bus (lspci -vvv -s ADDRESS)%s" % (
                      newer, "; for the pre-Turing ones: " + REMEDY["NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU"]
                      if old else ""), "NVIDIA_OPEN_MODULE_UNSUPPORTED_GPU", details)


def judge_inventory(report: SmiReport, pci_gpus: list[str] | None = None, smi_missing: bool = False,
                    stack_needs_gpu: bool = False, refusals: list[OpenModuleRefusal] | None = None,
                    gpus_asked: int = 0) -> CheckResult:
    """Count, model, memory and driver; a classified NVML failure or fewer GPUs than on the PCI bus is FAIL; GPUs
    the open kernel module refused in the kernel log (``refusals``; None: not read) are named as that cause
    (``judge_open_module``), whatever nvidia-smi printed instead ("No devices were found", "No devices found", no
    driver to talk to). Fewer working GPUs than ``gpus_asked`` (``invoke validate --gpus N``; 0: no number asked)
    is FAIL ``TOO_FEW_GPUS``."""
    verdict = _judge_inventory(report, pci_gpus, smi_missing, stack_needs_gpu, refusals)
    have = len(report.gpus) if verdict.status in (Status.PASS, Status.WARN) else 0
    if gpus_asked > have and verdict.status != Status.FAIL:
        return failed(verdict.id, verdict.measured, "%d GPU%s (--gpus %d)" % (gpus_asked, "" if gpus_asked == 1
                                                                              else "s", gpus_asked),
                      "run on a node with %d GPUs, or ask for as many as this node has (--gpus)" % gpus_asked,
                      "TOO_FEW_GPUS", verdict.details)
    return verdict


def _judge_inventory(report: SmiReport, pci_gpus: list[str] | None, smi_missing: bool, stack_needs_gpu: bool,
                     refusals: list[OpenModuleRefusal] | None) -> CheckResult:
    cid = "gpu.inventory"
    pci = len(pci_gpus or [])
    if not smi_missing and refusals:
        verdict = judge_open_module(refusals, report, pci)
        if verdict is not None:
            return verdict
    if smi_missing:
        if pci:
            return failed(cid, "%d NVIDIA GPU(s) on the PCI bus but nvidia-smi is not installed" % pci,
                          "the NVIDIA driver (kernel module + nvidia-smi)", REMEDY["NVIDIA_DRIVER_NOT_LOADED"],
                          "NVIDIA_DRIVER_NOT_LOADED")
        if stack_needs_gpu:
            return failed(cid, "no NVIDIA GPU on the PCI bus, nvidia-smi not on PATH", "NVIDIA GPUs for this stack",
                          "run this stack on a GPU node", "NO_GPU_FOR_STACK")
        return skipped(cid, NOT_GPU_NODE)
    err = report.error
    if err is not None and (err.code != "GPU_LOST" or not report.gpus):
        measured = err.message + ("" if not pci else " (%d NVIDIA GPU(s) on the PCI bus)" % pci)
        return failed(cid, measured, "nvidia-smi lists every GPU", REMEDY[err.code], err.code, err.detail)
    gpus = report.gpus
    if not gpus:
        return failed(cid, "nvidia-smi printed no GPU table (%s)" % "; ".join(report.problems or ["empty output"]),
                      "one row per GPU", "run nvidia-smi by hand and check dmesg for NVRM errors", "OUTPUT_UNREADABLE")
    names = sorted({g.name or "?" for g in gpus})
    mem = sorted({g.memory_total_mib for g in gpus if g.memory_total_mib})
    measured = "%d× %s%s, driver %s" % (len(gpus), " + ".join(names),
                                          ", %s MiB each" % "/".join(map(str, mem)) if mem else "",
                                          report.driver_version or "?")
    if err is not None:  # GPU_LOST with other GPUs still listed (fixture 55)
        return failed(cid, "%s; %s" % (measured, err.message), "every GPU answers", REMEDY["GPU_LOST"], "GPU_LOST",
                      err.detail)
    if pci and len(gpus) < pci:
        return failed(cid, "%s; %d NVIDIA GPU(s) on the PCI bus" % (measured, pci), "%d GPUs in nvidia-smi" % pci,
                      REMEDY["GPU_LOST"], "GPU_LOST")
    if report.problems:
        return warned(cid, measured, "a readable nvidia-smi output", "could not read: %s" % "; ".join(report.problems),
                      "OUTPUT_UNREADABLE")
    return passed(cid, measured, "every GPU listed by nvidia-smi")


def judge_persistence(gpus: list[Gpu]) -> CheckResult:
    """Persistence mode off: WARN (driver state torn down between jobs; DCGM's Deployment test fails, fixture 10)."""
    cid = "gpu.persistence"
    known = [g for g in gpus if g.persistence is not None]
    if not known:
        return skipped(cid, "persistence mode not reported", code="NOT_REPORTED")
    off = [str(g.index) for g in known if not g.persistence]
    if off:
        return warned(cid, "persistence mode off on GPU %s" % ",".join(off), "on for every GPU",
                      "nvidia-smi -pm 1 as root, or enable the nvidia-persistenced service", "GPU_PERSISTENCE_OFF")
    return passed(cid, "on for %d GPU(s)" % len(known), "on for every GPU")


def judge_ecc(gpus: list[Gpu]) -> CheckResult:
    """ECC on; no uncorrectable volatile errors; no retired page / row remap pending (needs a GPU reset) or failed."""
    cid = "gpu.ecc"
    fields = [(g.ecc_enabled, g.ecc_uncorrected_volatile, g.retired_pages_pending, g.remapped_rows_pending,
               g.remapped_rows_failure) for g in gpus]
    if not any(v is not None for row in fields for v in row):
        return skipped(cid, "ECC and page retirement not reported by this GPU/driver", code="NOT_REPORTED")
    bad = ["GPU %s: row remapping failed" % g.index for g in gpus if g.remapped_rows_failure]
    bad += ["GPU %s: %d uncorrectable ECC errors" % (g.index, g.ecc_uncorrected_volatile) for g in gpus
            if g.ecc_uncorrected_volatile]
    pending = ["GPU %s: %s pending" % (g.index, "row remap" if g.remapped_rows_pending else "page retirement")
               for g in gpus if g.remapped_rows_pending or g.retired_pages_pending]
    off = ["GPU %s" % g.index for g in gpus if g.ecc_enabled is False]
    expected = "ECC on, 0 uncorrectable errors, nothing pending"
    if bad:
        return failed(cid, "; ".join(bad), expected, "drain the node; reset the GPU; replace it if errors recur",
                      "GPU_MEMORY_ERRORS", pending)
    if pending:
        return warned(cid, "; ".join(pending), expected, "reset the GPU (nvidia-smi -r) or reboot to apply it",
                      "GPU_RESET_PENDING")
    if off:
        return warned(cid, "ECC disabled on %s" % ", ".join(off), expected, "nvidia-smi -e 1 and reboot",
                      "GPU_ECC_DISABLED")
    return passed(cid, "ECC on, no uncorrectable errors or pending retirements on %d GPU(s)" % len(gpus), expected)


#: Data-center GPU names, for the NGC release notes' driver exceptions ("Tesla (for example T4 or any other
#: Tesla board)"; later parts are named without "Tesla").
DATACENTER_GPU = re.compile(r"^(Tesla |NVIDIA (A100|A800|A30|A40|A10|A16|A2|H100|H200|H800|H20|GH200|L40|L4|B100|B200)"
                            r"\b)")


def datacenter_gpus(names: list[str]) -> bool | None:
    """True when every GPU is a data-center part, False when one is not, None when no name is known."""
    names = [n for n in names if n]
    return all(DATACENTER_GPU.match(n) for n in names) if names else None


def ngc_release(image: str | None) -> str | None:
    """``nvcr.io/nvidia/tensorflow:19.06-py3`` -> ``19.06``; None for other images."""
    m = re.match(r"^nvcr\.io/nvidia/[\w-]+:(\d\d\.\d\d)\b", image or "")
    return m.group(1) if m else None


def judge_driver(driver: str, driver_max_cuda: str | None, cuda: str, what: str, ngc: str | None = None,
                 datacenter: bool | None = None) -> CheckResult:
    """Can this driver run CUDA ``cuda`` (``what``: where that CUDA comes from, e.g. "stack ngc", "nvcc")?

    PASS natively, WARN through CUDA ≥ 11 minor-version compatibility
    (https://github.com/devcontainers/features/issues/1295), FAIL below the floor
    with both numbers (https://github.com/NVIDIA/nvidia-docker/issues/745). ``ngc``: the NGC release the CUDA comes
    from, whose release notes let
    data-center GPUs (``datacenter``) run it on older driver branches (19.06: R384 ≥ 384.111 or R410).
    ``driver_max_cuda`` is nvidia-smi's "CUDA Version" (the driver's maximum), shown as such; the rules are
    ``envs.rules.check_driver``.
    """
    from envs import rules  # part of this tree: an ImportError is a checker bug (ERROR), never a SKIP

    cid = "gpu.driver_cuda"
    measured_driver = "driver %s (max CUDA %s per nvidia-smi)" % (driver, driver_max_cuda or "?")
    try:
        verdict = rules.check_driver(driver, cuda, ngc, datacenter)
    except ChexstackError as e:
        return warned(cid, measured_driver, "CUDA %s (%s)" % (cuda, what), "no rule to judge it: %s" % e,
                      "NO_SOURCED_RULE")
    message, _, ways = verdict.message.partition("; ")
    expected = "a driver that runs CUDA %s (%s) — %s" % (cuda, what, verdict.source)
    if verdict.status == "FAIL":
        return failed(cid, message, expected, ways, "CUDA_DRIVER_TOO_OLD", [measured_driver])
    if verdict.status == "WARN":
        return warned(cid, message, expected, "upgrade the driver for CUDA %s's full feature set" % cuda,
                      "CUDA_MINOR_VERSION_COMPAT", [measured_driver])
    return passed(cid, message, expected, [measured_driver])


#: the toolkit's version files, newest format first (version.json from CUDA 11.1, version.txt up to 11.0)
CUDA_VERSION_FILES = ("/usr/local/cuda/version.json", "/usr/local/cuda/version.txt")


def _local_toolkit(ctx: Context) -> tuple[str | None, str, list[str]]:
    """(the CUDA toolkit on this node, where it comes from, the bundle's run it was read from): nvcc (also ``nvcc
    --version | grep release``, https://github.com/devcontainers/features/issues/1295), a bundle's toolkit record by
    hand (``cat /usr/local/cuda/version.json``, ``echo $CUDA_VERSION``, ``env | grep CUDA_VERSION``:
    ``versions.CUDA_TOOLKIT``), else the version files, each on its own (a bundle lacking version.json may hold
    version.txt). (None, "", []) when none says; ``MissingEvidence`` naming them all when a bundle holds none."""
    missing = []
    nvcc = ctx.first(NVCC)
    if nvcc is None:
        try:
            nvcc = ctx.observe(NVCC)
        except MissingEvidence as e:  # a bundle without nvcc: the toolkit's version file may be there
            nvcc, missing = None, [e.what]
    if nvcc is not None and nvcc.run.ok and nvcc.value:
        return nvcc.value, "toolkit on this node (nvcc)", []
    recorded = ctx.first(CUDA_TOOLKIT)
    if recorded is not None and recorded.value.version:
        return (recorded.value.version, "toolkit on this node (%s)" % recorded.value.source,
                ["from the bundle's `%s`" % recorded.command])
    for path in CUDA_VERSION_FILES:
        try:
            text = ctx.read(path)
        except MissingEvidence:
            missing.append(path)
            continue
        v = versions.cuda_version_file(text) if text else None
        if v:
            return v, "toolkit on this node (%s)" % path, []
    if len(missing) == 1 + len(CUDA_VERSION_FILES):
        raise MissingEvidence(", ".join(missing) + " or CUDA_VERSION")
    return None, "", []


def _cuda_runs(ctx: Context) -> list[ToolRun]:
    """Every recorded CUDA program run a bundle holds (live: none; a live CUDA probe is its own check)."""
    runs, n = [], 1
    while n < 16:
        got = ctx.first(CUDA_RUN, attempt=n)
        if got is None:
            break
        runs.append(got.run)
        n += 1
    return runs


def _fabric(ctx: Context) -> list[Fabric] | None:
    """The fabric state of every GPU (``FABRIC``: a bundle's ``nvidia-smi -q`` in any form, else the query); None
    when not recorded or the driver does not report it."""
    try:
        got = ctx.first(FABRIC) or ctx.observe(FABRIC)
    except MissingEvidence:
        return None
    return got.value


def _fabric_manager_log(ctx: Context) -> list[str]:
    """The fault lines of a bundle's fabric manager log (``journalctl -u nvidia-fabricmanager``); [] without one."""
    got = ctx.first(FABRIC_MANAGER_LOG)
    return got.value if got is not None else []


def _fabric_manager(ctx: Context) -> str | None:
    """The fabric manager service's state as systemctl printed it (``failed``, ``inactive``, ``Active: failed
    (Result: exit-code) …``), or None when not recorded."""
    try:
        got = ctx.first(FABRIC_MANAGER) or ctx.observe(FABRIC_MANAGER)
    except MissingEvidence:
        return None
    if got.run.missing:
        return None
    lines = [l.strip() for l in got.value.splitlines() if l.strip()]
    active = [l for l in lines if l.startswith("Active:")]
    return (active or lines or [None])[0]


#: The fix of a GPU that has not joined the NVLink fabric (NVIDIA Fabric Manager user guide; its package must match
#: the driver's version exactly: https://github.com/nanoporetech/dorado/issues/1214; a service that failed to start:
#: https://github.com/NVIDIA/NVSentinel/issues/883, https://github.com/NVIDIA/gpu-operator/issues/2511)
FABRIC_REMEDY = ("install the Fabric Manager package of exactly the driver's version (nvidia-fabricmanager-%s), "
                 "`systemctl enable --now nvidia-fabricmanager`, read `journalctl -u nvidia-fabricmanager` if it "
                 "fails again, and wait for `State: Completed` / `Status: Success` on every GPU (`nvidia-smi -q | "
                 "grep -A 2 Fabric`); keep the node drained until then")
#: MIG splits a GPU into instances that a process sees one at a time (NVIDIA MIG user guide,
#: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/index.html); the trainer runs one rank per whole GPU, and
#: NCCL does not support MIG instances as ranks ("each GPU slice does not come with a different CUDA index",
#: "communication between MIG instances cannot use CUDA P2P": https://github.com/NVIDIA/nccl/issues/1716; several
#: MIG instances in one job: https://github.com/NVIDIA/k8s-device-plugin/issues/446)
MIG_REMEDY = ("disable MIG on the GPUs the job uses: `sudo nvidia-smi -i N -mig 0` (stop the processes on it "
              "first), then reset the GPU (`nvidia-smi -r -i N`) or reboot; `nvidia-smi -q | grep -A 2 'MIG Mode'` "
              "must show Current: Disabled")


def judge_usable(report: SmiReport, fabric: list[Fabric] | None, cuda_runs: list[ToolRun] = (),
                 service=lambda: None, mig_modes: list[tuple[str, bool | None]] = (),
                 service_log=lambda: []) -> CheckResult | None:
    """Whether the GPUs nvidia-smi lists are usable, not only listed: None when nothing says otherwise; FAIL
    ``GPU_FABRIC_NOT_READY`` when a GPU has not joined the NVLink fabric (``Fabric.registering``) or a recorded
    CUDA program failed with 802 "system not yet initialized" (``CUDA_NOT_READY``), with the fabric manager's
    service state (``service()``: systemctl's line, or None), the fault lines of its log (``service_log()``) and the
    CUDA lines quoted; FAIL ``GPU_MIG_ENABLED`` when MIG is on (one rank per whole GPU is what the trainer runs): a
    GPU of ``report`` whose ``mig_enabled``, or a GPU of a recorded ``nvidia-smi -q`` (``mig_modes``:
    ``facts.parsers.nvidia_smi.parse_mig_modes``)."""
    cid = "gpu.inventory"
    stuck = [f for f in fabric or [] if f.registering]
    lines = [l.strip() for run in cuda_runs for l in run.output.splitlines()
             if CUDA_NOT_READY.search(l) or CUDA_OS_CALL.search(l)]
    not_ready = [l for l in lines if CUDA_NOT_READY.search(l)]
    if stuck or not_ready:
        n = len(report.gpus)
        state = ("GPU%s not registered with the NVLink fabric (%s)" % (
            "s" if len(stuck) != 1 else "", "; ".join(sorted({"Fabric State: %s, Status: %s" % (
                f.state, f.status or "?") for f in stuck}))) if stuck
                 else "the fabric state is not recorded")
        svc = service()
        listed = ("nvidia-smi lists %d× %s, but " % (n, " + ".join(sorted({g.name or "?" for g in report.gpus})))
                  if n else "nvidia-smi's GPU list is not recorded; ")
        measured = "%s%s%s%s" % (
            listed, state,
            "; nvidia-fabricmanager: %s" % svc if svc else "",
            "; CUDA cannot initialise them (802 cudaErrorSystemNotReady: %s)" % not_ready[0] if not_ready else "")
        details = ["%s: Fabric State %s, Status %s" % (f.gpu, f.state, f.status or "?") for f in stuck]
        details += ["nvidia-fabricmanager's log: %s" % line for line in service_log()]
        details += ["%s (%s)" % (l, "CUDA error 802, the fabric not ready" if CUDA_NOT_READY.search(l) else
                                 "follows from the first GPU's 802: not a separate fault") for l in lines]
        verdict = failed(cid, measured, "every GPU's Fabric State Completed, Status Success (NVSwitch systems: "
                         "nvidia-fabricmanager running)",
                         FABRIC_REMEDY % (report.driver_version or "<the driver's version: nvidia-smi's header>"),
                         "GPU_FABRIC_NOT_READY", details)
        # the CUDA programs that failed so did so because of it: their abort lines ("terminate called ...") too
        verdict.explains = [l.strip() for run in cuda_runs if any(CUDA_NOT_READY.search(l) for l in
                                                                  run.output.splitlines())
                            for l in run.output.splitlines() if len(l.strip()) >= 6]
        return verdict
    mig = ["%s" % (g.index if g.index is not None else g.bus_id) for g in report.gpus if g.mig_enabled]
    details = ["%s (%s): MIG Current Enabled" % (g.bus_id or g.index, g.name or "?") for g in report.gpus
               if g.mig_enabled]
    if not mig:
        mig = [gpu for gpu, enabled in mig_modes if enabled]
        details = ["%s: MIG Mode Current Enabled" % gpu for gpu in mig]
    if mig:
        return failed(cid, "MIG mode enabled on GPU %s: a rank sees one MIG instance, not the GPU" % ", ".join(mig),
                      "MIG disabled (one rank per whole GPU)", MIG_REMEDY, "GPU_MIG_ENABLED", details)
    return None


def _usable(ctx: Context, report: SmiReport) -> CheckResult | None:
    """``judge_usable`` of what the node (or its bundle) shows of the GPUs nvidia-smi lists in ``report``."""
    modes = ctx.first(MIG_MODES)
    return judge_usable(report, _fabric(ctx), _cuda_runs(ctx), lambda: _fabric_manager(ctx),
                        modes.value if modes is not None else [], lambda: _fabric_manager_log(ctx))


@check("gpu.inventory", "GPUs visible to the driver (count, model, memory, driver)", fast=True)
def inventory(ctx: Context) -> CheckResult:
    try:
        snap = snapshot(ctx)
    except MissingEvidence:  # no GPU list recorded: a recorded fabric state or CUDA program may still show the fault
        usable = _usable(ctx, SmiReport())
        if usable is None:
            raise
        return usable
    if snap.excerpt and not snap.report.gpus:
        return skipped("gpu.inventory", "the bundle holds only an excerpt of nvidia-smi (%s): driver %s, no GPU rows"
                       % (snap.excerpt, snap.report.driver_version or "?"), code="EVIDENCE_MISSING")
    refusals = None
    if not snap.smi_missing and (snap.report.error is not None or len(snap.report.gpus) < len(snap.pci_gpus or [])):
        log = kernel_log(ctx)  # why the driver lists fewer GPUs than the bus has
        refusals = parse_open_module_refusals(log.stdout) if log is not None else None
    result = judge_inventory(snap.report, snap.pci_gpus, snap.smi_missing, bool(ctx.stack and ctx.stack.gpu),
                             refusals, ctx.gpus or 0)
    if result.status in (Status.PASS, Status.WARN) and snap.report.gpus:
        usable = _usable(ctx, snap.report)
        if usable is not None:
            result = usable
    if refusals:
        result.details.append("from the kernel log `%s`" % log.command)
    if snap.source:
        result.details.append("from the bundle's %s (no nvidia-smi table recorded)" % snap.source)
    return result


@check("gpu.persistence", "persistence mode", requires=(no_gpu_reason,), fast=True)
def persistence(ctx: Context) -> CheckResult:
    return judge_persistence(snapshot(ctx).report.gpus)


@check("gpu.ecc", "ECC errors, retired pages, remapped rows", requires=(no_gpu_reason,), fast=True)
def ecc(ctx: Context) -> CheckResult:
    return judge_ecc(snapshot(ctx).report.gpus)


@check("gpu.driver_cuda", "driver vs the CUDA the stack (or a recorded image, or this node's toolkit) needs",
       requires=(no_gpu_reason,), fast=True)
def driver_cuda(ctx: Context) -> CheckResult:
    cid = "gpu.driver_cuda"
    report = snapshot(ctx).report
    driver, found = report.driver_version, []
    if not driver:  # nvidia-smi did not say (NVML failed, or no nvidia-smi): the loaded kernel module is the driver
        driver = versions.nvidia_kernel_module(ctx.read("/proc/driver/nvidia/version") or "")
        if not driver:
            return skipped(cid, "driver version unknown: nvidia-smi did not report it and no "
                           "/proc/driver/nvidia/version (see gpu.inventory)", code="NOT_REPORTED")
        found = ["driver %s read from /proc/driver/nvidia/version (the loaded kernel module): nvidia-smi did not "
                 "report it" % driver]
    ngc, source = None, []
    if ctx.stack is not None:
        cuda, what = ctx.stack.version("cuda"), "stack %s" % ctx.stack.name
        if cuda is None:
            return skipped(cid, "stack %s has no CUDA" % ctx.stack.name, code="NOT_APPLICABLE")
        ngc = ngc_release(ctx.stack.base.image)
    elif (image := ctx.first(IMAGE_CUDA)) is not None and image.value.version:
        # a bundle's image CUDA (`docker image inspect IMG … | grep CUDA_VERSION`): what that image's runtime needs
        cuda, what, source = image.value.version, image.value.where, [
            "CUDA_VERSION from the bundle's `%s`" % image.command]
    else:
        cuda, what, source = _local_toolkit(ctx)
        if cuda is None:
            return skipped(cid, "no --stack given and no CUDA toolkit on this node (nvcc, /usr/local/cuda/version.*)",
                           code="NOT_APPLICABLE")
    result = judge_driver(driver, report.driver_max_cuda, cuda, what, ngc,
                          datacenter_gpus([g.name for g in report.gpus]))
    result.details.extend(found + source)
    return result


def judge_xid(events: list[XidEvent]) -> CheckResult:
    """Hardware Xids (79 fallen off the bus, 48 DBE, 74 NVLink, …) or fatal NVSwitch SXids: FAIL; other Xids
    (usually application faults: 13, 31, 43): WARN."""
    cid = "gpu.xid"
    fatal = [e for e in events if e.fatal]
    other = [e for e in events if not e.fatal]

    def line(e: XidEvent) -> str:
        return "%s %d on %s: %s" % ("SXid" if e.sxid else "Xid", e.xid, e.device, e.text)

    if fatal:
        return failed(cid, line(fatal[0]) + ("" if len(fatal) == 1 else " (+%d more)" % (len(fatal) - 1)),
                      "no hardware Xid/SXid since boot",
                      "drain the node; reset the GPU or reboot; a repeated Xid 79/48/74 needs service "
                      "(NVIDIA Xid catalog)", "GPU_XID", [line(e) for e in events])
    if other:
        return warned(cid, line(other[-1]), "no Xid since boot", "see the NVIDIA Xid catalog for this Xid",
                      "GPU_XID", [line(e) for e in other])
    return passed(cid, "no NVRM Xid/SXid in the kernel log", "no Xid since boot")


@check("gpu.xid", "NVRM Xid / fallen-off-the-bus events in the kernel log", requires=(no_gpu_reason,), fast=True)
def xid(ctx: Context) -> CheckResult:
    log = ctx.tool("dmesg")
    if not log.ok:
        return skipped("gpu.xid", "cannot read the kernel log: %s" % log.why_not(), code="TOOL_FAILED")
    return judge_xid(parse_dmesg(log.stdout))


def judge_dcgm(diag: Diag) -> CheckResult:
    """Every row of ``dcgmi diag`` counts: "Successfully ran diagnostic" with a Fail row is a FAIL (fixture 10)."""
    cid = "gpu.dcgm"
    if not diag.rows:
        return failed(cid, "could not read dcgmi diag: %s" % "; ".join(diag.problems), "a result table",
                      "run dcgmi diag -r 1 by hand", "OUTPUT_UNREADABLE")
    fails, warns = diag.with_result("Fail"), diag.with_result("Warn")
    details = ["%s: %s" % (r.name, r.error) for r in fails + warns if r.error]
    tested = [r for r in diag.rows if r.result in ("Pass", "Fail", "Warn", "Skip")]
    if fails:
        return failed(cid, "%s: Fail" % ", ".join(r.name for r in fails), "every diagnostic Pass",
                      (fails[0].error[:200] or "see dcgmi diag -r 1"), "DCGM_DIAG_FAIL", details)
    if warns:
        return warned(cid, "%s: Warn" % ", ".join(r.name for r in warns), "every diagnostic Pass",
                      warns[0].error[:200] or "see dcgmi diag -r 1", "DCGM_DIAG_WARN", details)
    return passed(cid, "%d diagnostics Pass" % len(tested), "every diagnostic Pass")


#: ``fast``: DCGM's level 1 is the one "to use as a readiness metric", levels 2 and 3 an epilogue on failure and a
#: post-mortem (DCGM user guide, DCGM Diagnostics:
#: https://docs.nvidia.com/datacenter/dcgm/2.3/dcgm-user-guide/dcgm-diagnostics.html); it starts no workload.
@check("gpu.dcgm", "DCGM quick diagnostic (dcgmi diag -r 1)", requires=(no_gpu_reason,), fast=True)
def dcgm(ctx: Context) -> CheckResult:
    res = ctx.tool("dcgmi", "diag", "-r", "1", timeout=120)
    if res.missing:
        return skipped("gpu.dcgm", "dcgmi not on PATH (DCGM not installed)", code="TOOL_MISSING")
    if res.timed_out:
        return failed("gpu.dcgm", res.why_not(), "dcgmi diag -r 1 within 120 s", "check nv-hostengine",
                      "DCGM_DIAG_NOT_RUN")
    return judge_dcgm(parse_dcgmi_diag(res.output))



#: Properties whose outlier slows every collective of the node (FAIL); the others are configuration (WARN).
PEER_HARDWARE = ("PCIe generation", "PCIe width", "NVLinks")


def _peer_text(name: str, value: int) -> str:
    if name == "ECC":
        return "on" if value else "off"
    unit = dict((p[0], p[1]) for p in PEER_PROPERTIES).get(name, "")
    return "%s%d" % (unit, value) if unit in ("Gen", "x") else "%d%s" % (value, unit)


def judge_peers(props: dict[str, dict[str, int | None]], nvlinks: dict[str, int] | None = None) -> CheckResult:
    """The GPUs of one node compared with each other (``{"GPU i (bus id)": {property: value}}``, properties of
    ``parsers.nvidia_smi.PEER_PROPERTIES``, plus ``nvlinks``: active NVLinks per GPU). A GPU below its peers is
    named with its value and theirs: FAIL for PCIe generation/width and NVLink count (a slot, riser or link fault
    slows every collective), WARN for clocks and ECC (configuration)."""
    cid = "gpu.peers"
    if len(props) < 2:
        return skipped(cid, "%d GPU on this node: no peer to compare" % len(props), code="NOT_APPLICABLE")
    columns = [p[0] for p in PEER_PROPERTIES] + (["NVLinks"] if nvlinks else [])
    values = {g: dict(v, NVLinks=(nvlinks or {}).get(g)) for g, v in props.items()}
    fail, warn, alike, unknown = [], [], [], []
    for name in columns:
        known = {g: v[name] for g, v in values.items() if v.get(name) is not None}
        if len(known) < 2:
            unknown.append(name)
            continue
        best = max(known.values())
        peers = sum(1 for v in known.values() if v == best)
        low = ["%s: %s %s (its %d peer(s): %s)" % (g, name, _peer_text(name, v), peers, _peer_text(name, best))
               for g, v in known.items() if v < best]
        (fail if name in PEER_HARDWARE else warn).extend(low)
        if not low:
            alike.append("%s %s" % (name, _peer_text(name, best)))
    expected = "every GPU like its peers: %s" % ", ".join(columns)
    details = ["not reported: %s" % ", ".join(unknown)] if unknown else []
    if fail:
        return failed(cid, fail[0], expected, "reseat the GPU / check its riser and slot (nvidia-smi -q: GPU Link Info)"
                      " and its NVLinks (nvidia-smi nvlink --status, Xid 74); drain the node until it matches",
                      "GPU_PEER_OUTLIER", fail[1:] + warn + details)
    if warn:
        return warned(cid, warn[0], expected, "set the same clocks and ECC mode on every GPU (nvidia-smi -rgc, "
                      "nvidia-smi -e 1 and reboot)", "GPU_PEER_OUTLIER", warn[1:] + details)
    return passed(cid, "%d GPUs alike: %s" % (len(props), ", ".join(alike) or "nothing reported"), expected,
                  details)


@check("gpu.peers", "GPUs of this node alike: PCIe generation and width, clocks, NVLink count, ECC",
       requires=(no_gpu_reason,), fast=True)
def peers(ctx: Context) -> CheckResult:
    res = ctx.tool("nvidia-smi", "--query-gpu=" + ",".join(PEER_QUERY), "--format=csv")
    if not res.ok:
        return skipped("gpu.peers", res.why_not(), code="TOOL_FAILED")
    props = peers_from_query(parse_query_csv(res.stdout)[0])
    try:
        links = ctx.tool("nvidia-smi", "nvlink", "--status")
    except MissingEvidence:
        links = None
    nvlinks = None
    if links is not None and links.ok:
        active = {i: sum(1 for speed in ls.values() if speed is not None)
                  for i, ls in parse_nvlink_status(links.stdout).items()}
        nvlinks = {g: active[int(g.split()[1])] for g in props if g.split()[1].isdigit()
                   and int(g.split()[1]) in active} or None
    return judge_peers(props, nvlinks)


def _same_version(a: str, b: str) -> bool:
    """``590.48`` (NVML's short form) and ``590.48.01`` are the same driver; ``565.57.01`` and ``570.124`` not."""
    x, y = a.split("."), b.split(".")
    n = min(len(x), len(y))
    return x[:n] == y[:n]


def judge_driver_module(module: str | None, library: str | None, library_from: str, pci_gpus: int) -> CheckResult:
    """The loaded kernel module (``/proc/driver/nvidia/version``) against the user-space driver library
    (``library_from``: NVML's own version in nvidia-smi's mismatch message, or the ``libnvidia-ml.so`` file).
    They differ after a driver upgrade without a reboot: NVML then fails (fixture 57)."""
    cid = "gpu.driver_module"
    if module is None:
        if pci_gpus:
            return failed(cid, "no /proc/driver/nvidia/version: the nvidia kernel module is not loaded (%d NVIDIA "
                          "GPU(s) on the PCI bus)" % pci_gpus, "the nvidia kernel module loaded",
                          REMEDY["NVIDIA_DRIVER_NOT_LOADED"], "NVIDIA_DRIVER_NOT_LOADED")
        return skipped(cid, "no nvidia kernel module loaded (no /proc/driver/nvidia/version)", code="NOT_APPLICABLE")
    expected = "kernel module = user-space library version"
    if library is None:
        return skipped(cid, "kernel module %s; the user-space library's version was not found (%s)"
                       % (module, library_from), expected, "NOT_REPORTED")
    if not _same_version(module, library):
        return failed(cid, "kernel module %s, user-space library %s (%s)" % (module, library, library_from), expected,
                      REMEDY["NVML_DRIVER_LIBRARY_MISMATCH"], "NVML_DRIVER_LIBRARY_MISMATCH")
    return passed(cid, "kernel module %s, user-space library %s (%s)" % (module, library, library_from), expected)


def _user_space_library(ctx: Context) -> tuple[str | None, str]:
    """The NVIDIA user-space driver's version: from nvidia-smi's "NVML library version" (printed on a mismatch),
    else the resolved ``libnvidia-ml.so.1`` of ``ldconfig -p``."""
    for line in (snapshot(ctx).report.error.detail if snapshot(ctx).report.error else []):
        m = re.search(r"NVML library version:? (\d+\.\d+(?:\.\d+)?)", line)
        if m:
            return m.group(1), "nvidia-smi: NVML library version"
    ld = ctx.tool("ldconfig", "-p")
    for line in ld.stdout.splitlines() if ld.ok else []:
        if "libnvidia-ml.so.1" in line and "=>" in line:
            path = line.split("=>")[-1].strip()
            real = ctx.fact("realpath %s" % path, lambda: os.path.realpath(path))
            version = versions.library_file([real], "libnvidia-ml")
            if version:
                return version, real
    return None, "no NVML library version in nvidia-smi's output, no libnvidia-ml.so.1 in ldconfig -p"


@check("gpu.driver_module", "NVIDIA kernel module vs user-space driver library (/proc/driver/nvidia/version)",
       requires=(no_gpu_reason,), fast=True)
def driver_module(ctx: Context) -> CheckResult:
    module = versions.nvidia_kernel_module(ctx.read("/proc/driver/nvidia/version") or "")
    library, where = _user_space_library(ctx) if module else (None, "")
    return judge_driver_module(module, library, where, len(snapshot(ctx).pci_gpus or []))
