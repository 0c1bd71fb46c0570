"""Kernel log (``dmesg``) lines of the NVIDIA driver: NVRM Xid events, "fallen off the bus", NVSwitch SXid, and the
open kernel module's refusal of a GPU without a GSP.

Xid meanings: NVIDIA's Xid catalog (https://docs.nvidia.com/deploy/xid-errors/). Newer drivers report a GPU
that fell off the bus at probe time as a multi-line message with no Xid number (fixture 53, the multi-line form
gpud matches with RegexNVRMFallenOffBusMultiline); it is recorded as Xid 79.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from facts.parsers.observation import Observation, first_command

#: Xids that need a GPU reset, node reboot or RMA (not an application bug): 48 double-bit ECC, 61/62 internal
#: micro-controller error, 63/64 row-remapping event/failure, 74 NVLink error, 79 fallen off the bus, 92 high
#: single-bit ECC rate, 94/95 contained/uncontained ECC error, 119/120 GSP error, 140 unrecovered ECC error.
#: Source: NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors), "Recommended action" column.
HARDWARE_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})


@dataclass(frozen=True)
class XidEvent:
    """One driver event: ``device`` (PCI address or nvswitch name), ``xid`` number, ``sxid`` (True for NVSwitch
    SXid), ``fatal`` (hardware Xid, or an SXid marked Fatal), ``text`` (the message)."""

    device: str
    xid: int
    text: str
    fatal: bool
    sxid: bool = False


_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+), (.*)$")
_SXID = re.compile(r"(nvidia-nvswitch\d+): SXid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+), (.*)$")
_OFF_BUS = re.compile(r"NVRM: The NVIDIA GPU ([0-9A-Fa-f:.]+)\s.{0,200}?fallen off the bus", re.S)


def parse_dmesg(text: str) -> list[XidEvent]:
    """Every Xid/SXid/fallen-off-bus event in ``text``, in order; an SXid's detail lines (``Severity``,
    ``Data``) are folded into the event they belong to."""
    events: list[XidEvent] = []
    for line in (text or "").splitlines():
        m = _XID.search(line)
        if m:
            xid = int(m.group(2))
            events.append(XidEvent(m.group(1), xid, m.group(3).strip(), xid in HARDWARE_XIDS))
            continue
        m = _SXID.search(line)
        if m:
            if not m.group(4).startswith(("Fatal", "Non-fatal")):
                continue  # detail lines of an SXid already recorded (Severity …, Data {…})
            events.append(XidEvent(m.group(1), int(m.group(3)), m.group(4).strip(), m.group(4).startswith("Fatal"),
                                   sxid=True))
    lost = {e.device.lower() for e in events if e.xid == 79 and not e.sxid}
    for m in _OFF_BUS.finditer(text or ""):
        bus = m.group(1)
        if not any(bus.lower().startswith(d) or d.startswith(bus.lower()) for d in lost):
            events.append(XidEvent(bus, 79, "fallen off the bus (no Xid number printed)", True))
    return events


#: NVIDIA device IDs of Turing start at 0x1e00 (TU102 10de:1e02…; Volta GV100 10de:1db1…, Pascal 10de:15f0-1dxx,
#: Maxwell/Kepler lower): the PCI ID repository, https://pci-ids.ucw.cz/read/PC/10de. The open kernel modules support
#: Turing and later only (NVIDIA driver README, "Open Linux Kernel Modules" and "GSP Firmware").
TURING_FIRST_DEVICE_ID = 0x1E00


@dataclass(frozen=True)
class OpenModuleRefusal:
    """The open nvidia.ko refusing a GPU: ``NVRM: The NVIDIA GPU 0000:03:00.0 (PCI ID: 10de:1bb3) / installed in
    this system is not supported by open / nvidia.ko because it does not include the required GPU / System
    Processor (GSP).`` (open-gpu-kernel-modules kernel-open/nvidia/nv.c;
    https://github.com/NVIDIA/open-gpu-kernel-modules/issues/322). ``device``: the PCI address (lower case),
    ``pci_id``: ``vendor:device`` in hex."""

    device: str
    pci_id: str

    @property
    def pre_turing(self) -> bool:
        """An NVIDIA device ID below Turing's first (``TURING_FIRST_DEVICE_ID``): Maxwell, Pascal, Volta or older."""
        vendor, device = self.pci_id.split(":")
        return vendor == "10de" and int(device, 16) < TURING_FIRST_DEVICE_ID


_REFUSAL = re.compile(r"The NVIDIA GPU ([0-9a-fA-F:.]+) \(PCI ID: ([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\)"
                      r"(?:(?!The NVIDIA GPU).){0,240}?(?:not supported by open|does not include the required GPU|"
                      r"System Processor \(GSP\))")


def parse_open_module_refusals(text: str) -> list[OpenModuleRefusal]:
    """Every GPU the open kernel module refused, once each, in order. The message spans several ``NVRM:`` lines
    (each with its own timestamp in ``dmesg``, indented continuations in a pasted transcript, ``kernel:`` prefixes
    in ``journalctl -k``): the text after each line's ``NVRM:`` is read as one message."""
    joined = " ".join(line.split("NVRM:", 1)[1].strip() for line in (text or "").splitlines() if "NVRM:" in line)
    out: list[OpenModuleRefusal] = []
    for m in _REFUSAL.finditer(joined):
        refusal = OpenModuleRefusal(m.group(1).lower(), "%s:%s" % (m.group(2).lower(), m.group(3).lower()))
        if refusal not in out:
            out.append(refusal)
    return out


#: a kernel log on disk (syslog's, rotated or compressed too)
_KERNEL_LOG_FILE = re.compile(r"^/var/log/(kern\.log|dmesg|messages|syslog)(\.\d+)?(\.gz)?$")


def _kernel_log_run(argv: tuple, env: dict) -> bool:
    """The kernel log in a bundle, however it was read and filtered: ``dmesg`` with any options (``-T``, under
    ``sudo``), ``journalctl -k``/``--dmesg``, or a kernel log file (``/var/log/kern.log``, ``dmesg``, ``messages``,
    ``syslog``), each also filtered (``sh -c "dmesg | grep …"``, https://github.com/NVIDIA/nccl/issues/2079) —
    enough for the lines it kept (IOMMU, NVRM), never for ``gpu.xid`` (a filtered log proves no absence of Xids)."""
    first = first_command(argv, env)
    if first.name == "dmesg":
        return True
    if first.name == "journalctl" and any(a == "--dmesg" or a.startswith("-") and not a.startswith("--") and "k" in a
                                          for a in first.argv[1:]):
        return True
    return any(_KERNEL_LOG_FILE.match(a) for a in first.argv[1:])


#: the kernel log (``dmesg``, also filtered) -> its text
KERNEL_LOG = Observation(("dmesg",), _kernel_log_run, lambda run: run.stdout)
