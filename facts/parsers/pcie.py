"""PCIe facts behind GPU peer-to-peer: ACS control on bridges (``lspci -vvv``), the bridges above a GPU (its sysfs
path), the IOMMU (kernel log), and ``nvidia-smi topo -p2p r``.

ACS (PCI Access Control Services) with request/completion redirect on (``ACSCtl: … ReqRedir+ CmpltRedir+``)
routes GPU peer traffic up through the root complex / IOMMU; NCCL's P2P then hangs or crawls (NCCL user guide,
Troubleshooting, "PCI Access Control Services (ACS)"; https://github.com/NVIDIA/nccl/issues/2079).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_DEVICE = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(.*)$")
_PCI_ADDR = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
#: ACSCtl bits that redirect peer traffic upstream (the NCCL guide asks for them off: ``SrcValid-`` etc.).
REDIRECT_BITS = ("SrcValid", "ReqRedir", "CmpltRedir")


@dataclass
class AcsBridge:
    """A device with an ACS capability: ``address`` (``0000:40:03.1``), ``name``, ``flags`` (``{"ReqRedir": True,
    …}``)."""

    address: str
    name: str
    flags: dict[str, bool] = field(default_factory=dict)

    @property
    def redirects(self) -> list[str]:
        return [b for b in REDIRECT_BITS if self.flags.get(b)]


def full_address(addr: str) -> str:
    """``40:03.1`` -> ``0000:40:03.1`` (lspci leaves out domain 0000)."""
    return addr.lower() if addr.count(":") == 2 else "0000:" + addr.lower()


def parse_lspci_acs(text: str) -> list[AcsBridge]:
    """The devices of ``lspci -vvv`` (or its ``grep -E "^[0-9a-f]|ACSCtl"``) that show an ``ACSCtl:`` line."""
    out, current = [], None
    for line in (text or "").splitlines():
        m = _DEVICE.match(line)
        if m:
            current = (full_address(m.group(1)), m.group(2).strip())
            continue
        m = re.search(r"ACSCtl:\s*(.*)", line)
        if m and current:
            flags = {f[:-1]: f.endswith("+") for f in m.group(1).split() if f[-1:] in "+-"}
            out.append(AcsBridge(current[0], current[1], flags))
    return out


def upstream_bridges(sysfs_path: str) -> list[str]:
    """PCI addresses above a device, from its resolved sysfs path
    (``/sys/devices/pci0000:40/0000:40:03.1/0000:41:00.0`` -> ``["0000:40:03.1"]``)."""
    parts = [p for p in (sysfs_path or "").split("/") if _PCI_ADDR.match(p)]
    return parts[:-1]


def iommu_enabled(dmesg_text: str) -> str | None:
    """The kernel log line that shows an active IOMMU (``AMD-Vi: Interrupt remapping enabled``, ``DMAR: IOMMU
    enabled``; else ``Adding to iommu group``), without its timestamp, or None."""
    lines = (dmesg_text or "").splitlines()
    for pattern in (r"AMD-Vi: .*enabled|DMAR: IOMMU enabled", r"Adding to iommu group"):
        for line in lines:
            if re.search(pattern, line):
                return re.sub(r"^\[\s*[\d.]+\]\s*", "", line.strip())
    return None


def parse_p2p(text: str) -> dict[tuple[str, str], str]:
    """``nvidia-smi topo -p2p r`` (or ``w``/``n``…): ``{(GPUa, GPUb): status}`` with status ``OK``, ``NS`` (not
    supported), ``CNS`` (chipset not supported), ``GNS`` (GPU not supported), ``TNS`` (topology not supported),
    ``NS``, ``U`` (unknown); self cells (``X``) left out."""
    rows = [l.split() for l in (text or "").splitlines() if l.strip()]
    header = next((r for r in rows if r and all(c.startswith("GPU") for c in r)), None)
    out = {}
    if not header:
        return out
    for r in rows:
        if r and r[0].startswith("GPU") and r is not header and len(r) >= len(header) + 1:
            for peer, status in zip(header, r[1:]):
                if status != "X":
                    out[(r[0], peer)] = status
    return out
