"""``nvidia-smi topo -m`` -> the GPU/NIC connection matrix.

Layouts seen in real output (fixtures 12-18): tab- or space-separated; ``" X "`` self cells; a header row that
may carry ANSI underline escapes (``ESC[4m … ESC[0m``, fixture 15); NICs named directly (``mlx5_0``) or as
``NIC0`` with a "NIC Legend" (``NIC0: mlx5_0``); trailing affinity columns (``CPU Affinity``, ``NUMA Affinity``,
``GPU NUMA ID``) with empty cells; NIC rows ending in empty tab cells.

Connection codes, best to worst (nvidia-smi's legend): ``NV#`` (a bonded set of # NVLinks), ``PIX`` (at most one
PCIe bridge), ``PXB`` (several PCIe bridges), ``PHB`` (a PCIe host bridge, typically the CPU), ``NODE`` (between
PCIe host bridges within a NUMA node), ``SYS`` (across the SMP interconnect between NUMA nodes).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: PCIe codes from nearest to farthest (NVLink ``NV#`` is nearer than all of them).
PCIE_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
_CODE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
_AFFINITY_HEADINGS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


@dataclass
class Topology:
    """``gpus``: ``["GPU0", …]``; ``nics``: NIC names as the legend gives them (``mlx5_0``); ``link[(a, b)]``:
    the code between two devices (``"NV2"``, ``"PIX"``, ``"X"`` for self); ``cpu_affinity[gpu]``; ``problems``:
    rows or cells that could not be read."""

    gpus: list[str] = field(default_factory=list)
    nics: list[str] = field(default_factory=list)
    link: dict[tuple[str, str], str] = field(default_factory=dict)
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def nvlinks(self, gpu: str) -> dict[str, int]:
        """``{peer GPU: number of bonded NVLinks}`` for one GPU."""
        out = {}
        for peer in self.gpus:
            code = self.link.get((gpu, peer), "")
            if code.startswith("NV"):
                out[peer] = int(code[2:])
        return out

    def nearest_nic(self, gpu: str) -> tuple[str, str] | None:
        """(NIC, code) of the NIC with the nearest PCIe path to ``gpu``, or None without NICs."""
        cands = [(PCIE_ORDER.index(c) if c in PCIE_ORDER else len(PCIE_ORDER), nic, c)
                 for nic in self.nics for c in [self.link.get((gpu, nic), "?")]]
        return min(cands)[1:] if cands else None


def _cells(line: str) -> list[str]:
    return [c for c in re.split(r"\t| {2,}", line.strip()) if c.strip() != ""]


def parse_topo(text: str) -> Topology:
    """Parse ``nvidia-smi topo -m``; rows not understood are listed in ``problems`` (never raised)."""
    topo = Topology()
    lines = [_ANSI.sub("", l).rstrip("\n") for l in (text or "").splitlines()]
    header_at = next((i for i, l in enumerate(lines) if re.match(r"^\s*GPU0\b", l.replace("\t", " ").strip())
                      and not re.match(r"^GPU0\s+(X|NV|PIX|PXB|PHB|NODE|SYS)", l.strip())), None)
    if header_at is None:
        topo.problems.append("no header row starting with GPU0")
        return topo
    heads = [c.strip() for c in _cells(lines[header_at])]
    devices = [h for h in heads if h not in _AFFINITY_HEADINGS]
    legend = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", "\n".join(lines), re.M))
    names = [legend.get(d, d) for d in devices]
    topo.gpus = [n for n in names if re.match(r"^GPU\d+$", n)]
    topo.nics = [n for n in names if n not in topo.gpus]
    for line in lines[header_at + 1:]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        tokens = line.split()
        row = legend.get(tokens[0], tokens[0])
        cells = tokens[1:1 + len(devices)]
        if row not in names or len(cells) < len(devices) or not all(_CODE.match(c) for c in cells):
            topo.problems.append("row %r: expected %d connection codes" % (tokens[0], len(devices)))
            continue
        for col, code in zip(names, cells):
            topo.link[(row, col)] = code
        if row in topo.gpus and len(tokens) > 1 + len(devices):
            topo.cpu_affinity[row] = tokens[1 + len(devices)]
    missing = [g for g in topo.gpus if (g, g) not in topo.link]
    if missing:
        topo.problems.append("no row for %s (output cut off?)" % ", ".join(missing))
    return topo
