"""``gpu.cuda``: the GPUs are usable by CUDA, not only listed by nvidia-smi.

nvidia-smi talks to NVML, which answers while CUDA cannot start: on an NVSwitch system (HGX, DGX) whose Fabric
Manager is down it lists every GPU as healthy while every CUDA program fails with 802
``CUDA_ERROR_SYSTEM_NOT_READY`` (../shared/cases/47; https://github.com/pytorch/pytorch/issues/35710). This check
runs ``facts/cuda_probe.py`` (the driver API through ctypes: cuInit, a context and a 1 MiB allocation on every GPU)
live through ``Context.observe``, so that ``--collect`` records its output and ``--from`` judges it, and compares
what CUDA could use with what nvidia-smi lists (``validate.checks.gpu``).

``judge_cuda`` is pure (the parsed probe and nvidia-smi's count in, a ``CheckResult`` out); the codes and their
documented meanings are ``facts.parsers.cuda.CU_RESULTS``, the fix for each cause is ``REMEDY`` here.
"""
from __future__ import annotations

from facts.parsers.cuda import CUDA_PROBE, CUDA_PROGRAM, CudaError, CudaProbe, ProgramError
from validate.checks.gpu import gpu_count, snapshot
from validate.checks.registry import Context, check
from validate.evidence import MissingEvidence
from validate.result import CheckResult, failed, passed, skipped

CID = "gpu.cuda"
#: Seconds the probe may run: cuInit and a context per GPU take seconds; longer is a hang in the driver.
PROBE_TIMEOUT_S = 120.0

#: Fabric Manager: NVIDIA Fabric Manager user guide (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-
#: guide/index.html: the package must match the driver's version exactly; without it CUDA fails with
#: CUDA_ERROR_SYSTEM_NOT_READY and the GPUs' fabric state stays "In Progress"); the field reports of
#: https://github.com/pytorch/pytorch/issues/35710 and https://github.com/wilicc/gpu-burn/issues/92. The package is
#: named by the driver's branch, nvidia-fabricmanager-<branch> (its meta-package cuda-drivers-fabricmanager-<branch>
#: depends on the one of the same version: https://packages.ubuntu.com/jammy/cuda-drivers-fabricmanager-535).
FABRIC_MANAGER = ("an NVSwitch system (HGX/DGX) whose Fabric Manager is not running, so the GPUs are not registered "
                  "with the NVLink fabric: install the Fabric Manager package of exactly the driver's version (%s), "
                  "`systemctl enable --now nvidia-fabricmanager`, read `journalctl -u nvidia-fabricmanager` if it "
                  "fails, and wait for `nvidia-smi -q` to show Fabric State: Completed, Status: Success on every GPU; "
                  "keep the node drained until then")

#: CUresult name as cuda.h documents the code -> (verdict code of validate/catalogue.py, the fix for its cause);
#: meanings: facts.parsers.cuda. Looked up by the numeric code (``CudaError.documented``), never by the name the
#: library returned.
REMEDY = {
    "CUDA_ERROR_SYSTEM_NOT_READY": ("CUDA_SYSTEM_NOT_READY", FABRIC_MANAGER),
    "CUDA_ERROR_NO_DEVICE": ("CUDA_NO_DEVICE",
                             "CUDA sees no GPU that the driver lists: check CUDA_VISIBLE_DEVICES, that /dev/nvidia* "
                             "exist and are readable by this user (in a container: started with the NVIDIA runtime, "
                             "--gpus / --nv), and the kernel log for NVRM errors"),
    "CUDA_ERROR_NOT_INITIALIZED": ("CUDA_NOT_INITIALIZED",
                                   "cuInit failed: check that the nvidia kernel module is loaded and matches "
                                   "libcuda (gpu.driver_module), /dev/nvidia* and the kernel log (dmesg | grep NVRM)"),
    "CUDA_ERROR_STUB_LIBRARY": ("CUDA_STUB_LIBRARY",
                                "the loaded libcuda.so.1 is the CUDA toolkit's link stub (…/lib64/stubs), not the "
                                "driver's: take the stubs folder out of LD_LIBRARY_PATH and the loader configuration"),
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": ("CUDA_DRIVER_MISMATCH",
                                          "libcuda (e.g. a cuda-compat package) differs from the loaded kernel "
                                          "module: use the driver's own libcuda, or reboot after a driver upgrade"),
    "CUDA_ERROR_DEVICE_UNAVAILABLE": ("CUDA_DEVICE_UNAVAILABLE",
                                      "the GPU is in Exclusive_Process compute mode held by another process, or "
                                      "Prohibited: see `nvidia-smi -q -d COMPUTE` and nvidia-smi's process list; stop "
                                      "that process, or `nvidia-smi -c DEFAULT -i N` as root"),
    "CUDA_ERROR_OUT_OF_MEMORY": ("CUDA_OUT_OF_MEMORY",
                                 "a context and a 1 MiB allocation did not fit: another process holds the GPU's "
                                 "memory (nvidia-smi's process list); stop it, or drain the node if none is listed"),
    "CUDA_ERROR_UNKNOWN": ("CUDA_UNKNOWN_ERROR",
                           "the driver failed without a cause: read the kernel log (dmesg | grep -E 'NVRM|Xid'), "
                           "check gpu.driver_module and gpu.xid; reset the GPU or reboot if it persists"),
}
#: the codes a node without GPUs answers cuInit with: no device; the toolkit's stub libcuda (cuda.h, CUresult)
NO_DEVICE, STUB_LIBRARY = 100, 34
OTHER = ("CUDA_CALL_FAILED", "run facts/cuda_probe.py by hand and look the code up in the CUDA driver API's CUresult")


def _remedy(error: CudaError, driver: str | None) -> tuple[str, str]:
    code, remedy = REMEDY.get(error.documented, OTHER)
    if "%s" not in remedy:
        return code, remedy
    version = ("%s: nvidia-fabricmanager-%s" % (driver, driver.split(".")[0]) if driver
               else "see /proc/driver/nvidia/version; nvidia-fabricmanager-<branch>")
    return code, remedy % version


def _cause(error: CudaError) -> str:
    return error.text + (": %s" % error.meaning if error.meaning else "")


def _visible(cvd: str | None, listed: int | None) -> int | None:
    """GPUs CUDA should enumerate: nvidia-smi's count, fewer where CUDA_VISIBLE_DEVICES names fewer. Its entries
    count up to the first invalid index, after which CUDA enumerates none (CUDA programming guide, CUDA Environment
    Variables, CUDA_VISIBLE_DEVICES: https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-
    variables.html; "0,2,-1,1" makes 0 and 2 visible); empty: none."""
    if cvd is None or listed is None:
        return listed
    named = 0
    for entry in cvd.split(","):
        entry = entry.strip()
        if not entry or entry.lstrip("-").isdigit() and not 0 <= int(entry) < listed:
            break
        named += 1
    return min(listed, named)


def _stopped_in(last: str) -> str:
    """The step after the probe's last record (``facts/cuda_probe.py`` runs them in this order)."""
    if last.startswith("gpu "):
        return "GPU %d (its context or allocation)" % (int(last.split()[1]) + 1)
    return {"library": "cuDriverGetVersion or cuInit", "driver": "cuInit", "init": "cuDeviceGetCount",
            "count": "GPU 0 (its context or allocation)"}.get(last, "loading libcuda")


def judge_cuda(probe: CudaProbe, listed: int | None, pci: int = 0, driver: str | None = None,
               how: str = "", smi: str = "nvidia-smi not recorded") -> CheckResult:
    """The probe's report (``facts.parsers.cuda.parse_cuda_probe``) against ``listed``, the GPUs nvidia-smi lists
    (None: not known, ``smi`` says why), and ``pci``, NVIDIA GPUs on the PCI bus. ``driver``: the driver's version
    (the Fabric Manager package must match it); ``how``: why the probe's run ended, where it did not finish
    (``ToolRun.why_not``).

    FAIL, with the ``CUresult`` and the fix for its cause: any GPU CUDA cannot make a context on or allocate on
    (802 names Fabric Manager), cuInit or the device count failing where GPUs are there, fewer GPUs by CUDA than
    nvidia-smi lists (zero too), no loadable libcuda where GPUs are there, a probe cut off inside the driver. SKIP:
    no GPU listed nor on the PCI bus and no libcuda, the toolkit's stub libcuda (34 ``CUDA_ERROR_STUB_LIBRARY``:
    the CUDA toolkit ships it, normal on a node without GPUs), or CUDA and nvidia-smi both find none. Decided by
    the ``CUresult`` code, never the name the library gives it. PASS only when every GPU got a context."""
    gpus = max(listed or 0, pci)
    where = "nvidia-smi lists %d GPU(s)" % listed if listed is not None else (
        "%d NVIDIA GPU(s) on the PCI bus (%s)" % (pci, smi) if pci else smi)
    expected = "a CUDA context and a 1 MiB allocation on every GPU nvidia-smi lists"
    cvd = probe.cuda_visible_devices
    details = ["CUDA_VISIBLE_DEVICES=%s" % cvd] if cvd is not None else []
    if probe.version is None:
        return skipped(CID, "the CUDA probe printed no record%s" % (": %s" % how if how else ""), expected,
                       "TOOL_FAILED")
    if probe.loaded is False:
        what = "libcuda did not load: %s" % probe.load_error
        if gpus:
            return failed(CID, "%s; %s" % (what, where), expected,
                          "install the NVIDIA driver's user-space libraries (libcuda.so.1 of the loaded kernel "
                          "module's version) where the loader finds them; in a container, start it with the NVIDIA "
                          "runtime (--gpus, --nv)", "CUDA_LIBRARY_MISSING", details)
        # the loader's message for an absent optional library, on a node without GPUs: judged, not a fault
        result = skipped(CID, "%s (no GPU listed: CUDA not judged)" % what, expected, "TOOL_MISSING")
        result.explains = [probe.load_error] if probe.load_error else []
        return result
    first = probe.init_error or probe.count_error
    if first is not None:
        if first.code in (NO_DEVICE, STUB_LIBRARY) and not gpus:
            what = ("CUDA finds no GPU" if first.code == NO_DEVICE else
                    "the loaded libcuda is the CUDA toolkit's stub, not a driver's")
            return skipped(CID, "%s (%s) and %s" % (what, first.text, where if listed is not None
                                                    else "%s, no NVIDIA GPU on the PCI bus" % smi),
                           expected, "NOT_APPLICABLE")
        code, remedy = _remedy(first, driver)
        return failed(CID, "%s; %s" % (_cause(first), where), expected, remedy, code, details)
    if not probe.complete:
        probed = ", ".join("GPU %d %s" % (g.index, "ok" if g.ok else g.error.text) for g in probe.gpus)
        return failed(CID, "the CUDA probe did not finish (%s): it stopped in %s, a crash or hang inside the "
                      "driver" % (how or "its output ends", _stopped_in(probe.last)), expected,
            "run `python3 facts/cuda_probe.py` by hand, read the kernel log (dmesg | grep -E 'NVRM|Xid'); reset the "
            "GPU or reboot", "CUDA_PROBE_FAILED", details + ["probed before: %s" % (probed or "no GPU")])
    bad = probe.failed
    if bad:
        e = bad[0].error
        code, remedy = _remedy(e, driver)
        lines = ["GPU %d (%s, %s): %s" % (g.index, g.name or "?", g.pci_bus_id or "?", g.error.text) for g in bad]
        return failed(CID, "CUDA cannot use %d of %d GPU(s): %s%s" % (
            len(bad), len(probe.gpus), lines[0], ": %s" % e.meaning if e.meaning else ""), expected, remedy, code,
            details + lines[1:])
    count = probe.count or 0
    want = _visible(cvd, listed)
    mig = [g for g in probe.gpus if " MIG " in " %s " % (g.name or "")]
    if mig:  # CUDA enumerates MIG instances, not GPUs: the counts do not compare (MIG mode is judged from nvidia-smi)
        details.append("%d MIG instance(s) among the CUDA devices: CUDA's count is not nvidia-smi's GPU count" %
                       len(mig))
    elif want and count < want or not count and gpus:
        return failed(CID, "CUDA enumerates %d GPU(s), %s%s" % (count, where, " (CUDA_VISIBLE_DEVICES=%s)" % cvd
                                                                if cvd is not None else ""), expected,
                      "a GPU the driver lists is hidden from CUDA: check CUDA_VISIBLE_DEVICES, the /dev/nvidia* "
                      "device files of the missing GPUs and the kernel log", "CUDA_GPUS_MISSING", details)
    if not count:
        return skipped(CID, "CUDA finds no GPU and %s" % (where if listed is not None else
                                                           "%s, no NVIDIA GPU on the PCI bus" % smi), expected,
                       "NOT_APPLICABLE")
    names = sorted({g.name or "?" for g in probe.gpus})
    measured = "%d× %s: a context and 1 MiB allocated on each (CUDA %s, %s)" % (
        count, " + ".join(names), probe.cuda_version or "?", where)
    return passed(CID, measured, expected, details)


def judge_program(errors: list[ProgramError], command: str, listed: int | None, driver: str | None = None,
                  smi: str = "nvidia-smi not recorded") -> CheckResult | None:
    """A bundle's recorded CUDA program (``facts.parsers.cuda.CUDA_PROGRAM``: gpu_burn, deviceQuery, a framework's
    one-liner; ``command`` its command line) that printed CUDA errors (``errors``, in output order): FAIL with the
    first — the cause; what followed is named as following from it — and the fix for its cause. None when it
    printed none: a program that ran proves no GPU usable that it did not report on, so the check stays unjudged."""
    if not errors:
        return None
    first = errors[0]
    error = CudaError("`%s`" % command, first.code, first.name)
    code, remedy = _remedy(error, driver)
    where = "nvidia-smi lists %d GPU(s)" % listed if listed is not None else smi
    after = {}  # the other codes, in the order first printed: their first line and how many lines
    for e in errors[1:]:
        if e.code != first.code:
            after.setdefault(e.code, [e, 0])[1] += 1
    then = ["%d %s" % (e.code, e.name) for e, _ in after.values()]
    details = ["then %d line(s) of %d %s, the first at line %d: %s; following from the first" % (
        n, e.code, e.name, e.number, e.line) for e, n in after.values()]
    details.append("from the bundle's `%s` (the CUDA probe, facts/cuda_probe.py, was not recorded)" % command)
    measured = "`%s` failed with %d %s (line %d: %s)%s%s; %s" % (
        command, first.code, first.name, first.number, first.line, ": %s" % error.meaning if error.meaning else "",
        "; then %s" % ", ".join(then) if then else "", where)
    return failed(CID, measured, "a CUDA context and a 1 MiB allocation on every GPU nvidia-smi lists", remedy,
                  code, details)


@check(CID, "GPUs usable by CUDA: a context and a small allocation on each (driver API, facts/cuda_probe.py)",
       fast=True)
def cuda(ctx: Context) -> CheckResult:
    try:
        observed = ctx.observe(CUDA_PROBE, timeout=PROBE_TIMEOUT_S)
    except MissingEvidence:  # a bundle without the probe: a CUDA program it recorded may say why CUDA cannot start
        program = ctx.first(CUDA_PROGRAM)
        if program is None:
            raise
        listed, _, driver, smi = _smi(ctx)
        result = judge_program(program.value, program.command, listed, driver, smi)
        if result is None:
            raise
        return result
    listed, pci, driver, smi = _smi(ctx)
    run = observed.run
    how = run.why_not() if not run.ok else ""
    result = judge_cuda(observed.value, listed, pci, driver, how, smi)
    result.details.append("from `%s`" % observed.command)
    return result


def _smi(ctx: Context) -> tuple[int | None, int, str | None, str]:
    """(GPUs nvidia-smi lists or None, NVIDIA GPUs on the PCI bus, the driver's version, why nvidia-smi's count
    is not known)."""
    listed, pci, driver, smi = gpu_count(ctx), 0, None, "nvidia-smi not recorded"
    try:
        snap = snapshot(ctx)
        pci, driver = len(snap.pci_gpus or []), snap.report.driver_version
        if snap.smi_missing:
            listed, smi = None, "no nvidia-smi on this node"
    except MissingEvidence:
        pass
    return listed, pci, driver, smi
