"""PCIe facts behind GPU peer-to-peer: ACS control on bridges (``lspci -vvv``), the bridges above a GPU (its sysfs
path), the IOMMU (kernel log), and ``nvidia-smi topo -p2p r``.

ACS (PCI Access Control Services) with request/completion redirect on (``ACSCtl: … ReqRedir+ CmpltRedir+``)
routes GPU peer traffic up through the root complex / IOMMU; NCCL's P2P then hangs or crawls (NCCL user guide,
Troubleshooting, "PCI Access Control Services (ACS)"; https://github.com/NVIDIA/nccl/issues/2079).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from facts.parsers.observation import Observation, first_command

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


@dataclass
class Lspci:
    """What ``lspci -vv``/``-vvv`` (or its filtered lines) shows of the PCI devices: ``bridges``, the devices with
    an ``ACSCtl:`` line (one whose device line was filtered out has address ``""``); ``devices``, ``{address:
    description}`` of every device line; ``gpus``, the NVIDIA display controllers among them (VGA or 3D controller,
    as sysfs's class 0x0300/0x0302); ``buses``, ``{bridge: (secondary, subordinate)}`` of its ``Bus:`` line;
    ``partial``: the listing was limited to some devices (``-s``/``-d``), so a device it does not show was not
    observed."""

    bridges: list[AcsBridge] = field(default_factory=list)
    devices: dict[str, str] = field(default_factory=dict)
    gpus: list[str] = field(default_factory=list)
    buses: dict[str, tuple[int, int]] = field(default_factory=dict)
    partial: bool = False

    def upstream(self, address: str) -> list[str] | None:
        """The bridges above ``address`` by the bus ranges of their ``Bus:`` lines, nearest the root first; None
        when no bridge's range holds its bus (not observed)."""
        domain, bus = address.rsplit(":", 2)[0], int(address.rsplit(":", 2)[1], 16)
        above = [(sub - sec, b) for b, (sec, sub) in self.buses.items()
                 if b.rsplit(":", 2)[0] == domain and sec <= bus <= sub and b != address]
        return [b for _, b in sorted(above, reverse=True)] or None

    @classmethod
    def merged(cls, listings: list["Lspci"]) -> "Lspci":
        """Several recorded runs (one per bridge: ``lspci -s 40:03.1 -vvv``) as one listing; partial unless one of
        them lists every device."""
        out = cls(partial=all(x.partial for x in listings))
        for x in listings:
            out.bridges += [b for b in x.bridges if not b.address or b.address not in {y.address for y in out.bridges}]
            out.devices.update(x.devices)
            out.gpus += [g for g in x.gpus if g not in out.gpus]
            out.buses.update(x.buses)
        return out


#: a device line's description of an NVIDIA GPU: ``VGA compatible controller: NVIDIA …``, ``3D controller [0302]:
#: NVIDIA …`` (the classes sysfs's 0x0300/0x0302 name; an NVSwitch is a bridge)
_GPU_CLASS = re.compile(r"^(?:VGA compatible controller|3D controller)(?: \[030[02]\])?: NVIDIA", re.I)
_BUS = re.compile(r"Bus: primary=[0-9a-fA-F]{2}, secondary=([0-9a-fA-F]{2}), subordinate=([0-9a-fA-F]{2})")


def parse_lspci(text: str, selected: str | None = None) -> Lspci:
    """``lspci -vv``/``-vvv`` output, whole or filtered (``grep -E "^[0-9a-f]|ACSCtl"``, ``grep ACSCtl``).
    ``selected``: the device of ``lspci -s ADDR`` (the listing is then partial), to which ``ACSCtl`` lines belong
    when its device line was filtered out."""
    out = Lspci(partial=selected is not None)
    current = full_address(selected) if selected and _SLOT.match(selected) else None
    for line in (text or "").splitlines():
        m = _DEVICE.match(line)
        if m:
            current = full_address(m.group(1))
            out.devices[current] = m.group(2).strip()
            if _GPU_CLASS.match(m.group(2).strip()):
                out.gpus.append(current)
            continue
        m = re.search(r"ACSCtl:\s*(.*)", line)
        if m:
            flags = {f[:-1]: f.endswith("+") for f in m.group(1).split() if f[-1:] in "+-"}
            out.bridges.append(AcsBridge(current or "", out.devices.get(current or "", ""), flags))
            continue
        m = _BUS.search(line)
        if m and current:
            out.buses[current] = (int(m.group(1), 16), int(m.group(2), 16))
    return out


def parse_lspci_acs(text: str) -> list[AcsBridge]:
    """The devices of ``lspci -vvv`` (or its ``grep -E "^[0-9a-f]|ACSCtl"``) that show an ``ACSCtl:`` line."""
    return [b for b in parse_lspci(text).bridges if b.address]


#: ``lspci -s`` takes ``[[[[domain]:]bus]:][slot][.[func]]``; only a whole address names one device
_SLOT = re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def _lspci_words(argv, env: dict | None = None) -> tuple[str, ...] | None:
    """The words of the ``lspci`` a recorded command line runs first (``sudo lspci -s 40:03.1 -vvv | grep …``), or
    None."""
    command = first_command(argv, env)
    return command.argv if command.name == "lspci" else None


def _flags(words: tuple[str, ...]) -> str:
    """lspci's short options run together (``-vvv``, ``-tv``, ``-nnvvv``), the values of ``-s``/``-d``/``-i``/
    ``-p``/``-A``/``-O``/``-F`` left out."""
    out, skip = "", False
    for w in words[1:]:
        if skip:
            skip = False
            continue
        if w.startswith("-") and not w.startswith("--"):
            letters = w[1:]
            for i, c in enumerate(letters):
                if c in "sdipAOFH":
                    skip = i == len(letters) - 1  # the value is the next word
                    break
                out += c
    return out


def _option(words: tuple[str, ...], name: str) -> str | None:
    """The value of lspci's ``-s``/``-d`` (``-s 40:03.1`` or ``-s40:03.1``), or None."""
    for w, value in zip(words, words[1:] + ("",)):
        if w == name:
            return value or None
        if w.startswith(name) and len(w) > 2 and not w.startswith("--"):
            return w[2:]
    return None


def _lspci_verbose(argv, env) -> bool:
    """``lspci -vv``/``-vvv`` however recorded: under ``sudo``, for one device (``-s``), filtered (``| grep -E
    "^[0-9a-f]|ACSCtl"``, the NCCL guide's ``| grep ACSCtl``); not the tree (``-t``)."""
    words = _lspci_words(argv, env)
    return words is not None and _flags(words).count("v") >= 2 and "t" not in _flags(words)


def _lspci_tree(argv, env) -> bool:
    """``lspci -tv`` (``-t`` with the devices' names), also filtered (``| grep -i -B1 nvidia``)."""
    words = _lspci_words(argv, env)
    return words is not None and "t" in _flags(words) and "v" in _flags(words)


def _lspci_run(run) -> Lspci:
    words = _lspci_words(run.argv) or ()
    listing = parse_lspci(run.output, _option(words, "-s"))
    listing.partial = listing.partial or _option(words, "-d") is not None
    return listing


#: ``lspci -vvv`` -> ``Lspci`` (the ACS control of each bridge, the GPUs, the bridges' bus ranges); also as recorded
#: per device and filtered (https://github.com/NVIDIA/nccl/issues/2079's ``sudo lspci -s 40:03.1 -vvv | grep …``)
LSPCI_VERBOSE = Observation(("lspci", "-vvv"), _lspci_verbose, _lspci_run)


#: a node of ``lspci -tv``'s tree: a root ``[0000:40]``, or a device ``03.1`` with the bus behind it ``-[41]``
_TREE_NODE = re.compile(r"\[(?P<domain>[0-9a-fA-F]{4}):(?P<bus>[0-9a-fA-F]{2})\]"
                        r"|(?P<dev>[0-9a-fA-F]{2}\.[0-7])(?:-\[(?:[0-9a-fA-F]{4}:)?(?P<sec>[0-9a-fA-F]{2})"
                        r"(?:-[0-9a-fA-F]{2})?\])?")
#: where a device's name starts: two spaces after its function number
_TREE_NAME = re.compile(r"(?<=\.[0-7])\s{2,}(?=\S)")
#: NVIDIA functions that are not GPUs (the audio function, USB-C, an NVSwitch, a bridge)
_NOT_GPU = re.compile(r"audio|usb|ucsi|serial|nvswitch|bridge", re.I)


def parse_lspci_tree(text: str) -> dict[str, list[str]]:
    """``lspci -tv`` (whole or filtered: ``| grep -i -B1 nvidia``) -> ``{GPU address: the bridges above it, nearest
    the root first}``. A line continues the bus whose devices start at its first device's column; a device named
    NVIDIA that is not an audio, USB or NVSwitch function is a GPU. ``--`` (grep's gap) forgets the columns: a GPU
    whose parent line was filtered out is left out, never placed under another bridge."""
    gpus: dict[str, list[str]] = {}
    columns: dict[int, tuple[str, str, list[str]]] = {}  # column -> (domain, bus, bridges above the bus)
    for raw in (text or "").splitlines():
        if raw.strip() == "--":
            columns.clear()
            continue
        named = _TREE_NAME.search(raw)
        structure, name = (raw[:named.start()], raw[named.end():].strip()) if named else (raw, "")
        context, last = None, None
        for i, node in enumerate(_TREE_NODE.finditer(structure)):
            col = node.start()
            if i == 0:
                for c in [c for c in columns if c > col]:
                    del columns[c]
            if node.group("domain"):
                context = (node.group("domain").lower(), node.group("bus").lower(), [])
                continue
            if context is None:
                parent = max((c for c in columns if c <= col), default=None)
                if parent is None:
                    break
                context = columns[parent]
            columns[col] = context
            domain, bus, above = context
            address = "%s:%s:%s" % (domain, bus, node.group("dev").lower())
            last = (address, above)
            if node.group("sec"):
                context = (domain, node.group("sec").lower(), above + [address])
        if last and name and "nvidia" in name.lower() and not _NOT_GPU.search(name):
            gpus[last[0]] = last[1]
    return gpus


#: a recorded ``lspci -tv`` (the case's ``lspci -tv | grep -i -B1 nvidia``) -> ``{GPU: bridges above it}``; a check
#: only reads it from a bundle (on the node sysfs gives the same)
LSPCI_TREE = Observation(None, _lspci_tree, lambda run: parse_lspci_tree(run.output))


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
