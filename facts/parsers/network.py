"""A node's network interfaces from iproute2's ``ip`` output, as a bundle records them by hand (``ip -o link show``,
``ip link``, ``ip addr``, ``ip -o addr``, ``ip -br link``/``addr``): which interfaces are up, for Horovod's
controller (``launch.controller.pick_controller``: Gloo needs one that is not loopback, ../shared/cases/23).

Layouts (iproute2, ``ip-link(8)``/``ip-address(8)``): ``ip link``/``ip addr`` head each interface with ``N: NAME:
<FLAGS> mtu … state STATE …`` (``NAME@PEER`` for a veth or VLAN); ``-o`` puts an interface's record on one line, its
continuation lines joined by a backslash; ``-br`` prints ``NAME STATE ADDRESSES`` (``ip -br link``: the MAC, then
``<FLAGS>``). An interface is up when its flags hold ``UP`` (what ``psutil.net_if_stats().isup`` reads, the
administrative state: loopback's operational state is ``UNKNOWN``). ``ip -o addr`` shows no flags: an interface
listed there has an address, which is what Gloo binds to; its state is not shown, so it counts as listed, not up.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from facts.parsers.observation import Observation, first_command

_HEADER = re.compile(r"^\d+:\s+([^:\s@]+)(?:@\S+)?:\s+<([^>]*)>")
_ADDR_ONLY = re.compile(r"^\d+:\s+([^:\s@]+)(?:@\S+)?\s+inet6?\s")
_BRIEF = re.compile(r"^([^\s@]+)(?:@\S+)?\s+(UP|DOWN|UNKNOWN|DORMANT|LOWERLAYERDOWN|NOTPRESENT|TESTING)\b(.*)$")


@dataclass(frozen=True)
class Interface:
    """``name``; ``up``: its flags hold UP (None: the layout shows no flags, ``ip -o addr``)."""

    name: str
    up: bool | None


def parse_ip(text: str) -> list[Interface]:
    """Every interface of ``ip`` output in the layouts above, once each, in order."""
    found: dict[str, Interface] = {}
    for line in (text or "").splitlines():
        m = _HEADER.match(line.strip())
        if m:
            found.setdefault(m.group(1), Interface(m.group(1), "UP" in m.group(2).split(",")))
            continue
        m = _ADDR_ONLY.match(line.strip())
        if m:
            found.setdefault(m.group(1), Interface(m.group(1), None))
            continue
        m = _BRIEF.match(line.strip())
        if m:
            flags = re.search(r"<([^>]*)>", m.group(3))
            up = "UP" in flags.group(1).split(",") if flags else m.group(2) in ("UP", "UNKNOWN")
            found.setdefault(m.group(1), Interface(m.group(1), up))
    return list(found.values())


def up_interfaces(interfaces: list[Interface]) -> list[str]:
    """The names of the interfaces that are up or, where the layout shows no state, listed with an address."""
    return [i.name for i in interfaces if i.up is not False]


_IP_OBJECTS = ("link", "addr", "address", "a", "l", "li", "lin", "ad", "add", "addre", "addres")


def _ip_run(argv: tuple, env: dict) -> bool:
    """``ip link``/``ip addr`` (``show``/``list`` or nothing) however recorded: ``ip -o link show``, ``ip a``,
    ``sudo ip -br addr``, ``ip link show | cat``; not ``ip route``, nor ``ip link set``."""
    words = first_command(argv, env).argv
    if not words or words[0] != "ip":
        return False
    rest = [w for w in words[1:] if not w.startswith("-")]
    return bool(rest) and rest[0] in _IP_OBJECTS and (len(rest) == 1 or rest[1] in ("show", "list", "ls", "lst"))


#: the interfaces that are up (``up_interfaces``) from a recorded ``ip link``/``ip addr``; the node's own is a fact
#: (``launch.controller.local_interfaces``, psutil), so a check only reads this from a bundle
IP_LINK = Observation(None, _ip_run, lambda run: up_interfaces(parse_ip(run.output)))


@dataclass(frozen=True)
class Link:
    """One interface of ``ip -d -j addr show`` (or ``ip -d -j link show``; iproute2 >= 4.13 prints JSON): ``name``,
    ``kind`` (``linkinfo.info_kind``: ``veth``, ``vxlan``, ``bridge``; ``device`` for a plain device such as
    loopback), ``mtu`` (bytes), ``addresses`` (``inet`` ones, ``A.B.C.D/len``), ``master`` (the bridge it is a port
    of), and for a VXLAN device ``vxlan``: ``id`` (the VNI), ``port`` (UDP), ``local``, ``link`` (the underlay
    device), ``learning``, as ``linkinfo.info_data`` gives them (ip-link(8), "VXLAN Type Support")."""

    name: str
    kind: str
    mtu: int | None
    addresses: tuple[str, ...] = ()
    master: str | None = None
    vxlan: dict | None = None


def parse_ip_json(text: str) -> list[Link]:
    """The interfaces of ``ip -d -j addr show`` output, in order; [] for empty or unreadable output (a namespace
    that could not be entered gives none)."""
    import json

    try:
        entries = json.loads(text or "[]")
    except ValueError:
        return []
    out = []
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, dict) or "ifname" not in e:
            continue
        info = e.get("linkinfo") or {}
        data = info.get("info_data") or {}
        vxlan = None
        if info.get("info_kind") == "vxlan":
            vxlan = {k: data.get(k) for k in ("id", "port", "local", "link", "learning") if k in data}
        out.append(Link(name=e["ifname"], kind=info.get("info_kind") or "device", mtu=e.get("mtu"),
                        addresses=tuple("%s/%s" % (a["local"], a.get("prefixlen")) for a in e.get("addr_info", [])
                                        if a.get("family") == "inet"),
                        master=e.get("master"), vxlan=vxlan))
    return out


def route_device(text: str) -> tuple[str | None, str | None]:
    """(device, gateway) of ``ip -j route get ADDRESS`` output: the interface the kernel sends to that address
    through, and the next hop when it is not on-link; (None, None) for empty or unreadable output."""
    import json

    try:
        routes = json.loads(text or "[]")
    except ValueError:
        return None, None
    route = routes[0] if isinstance(routes, list) and routes and isinstance(routes[0], dict) else {}
    return route.get("dev"), route.get("gateway")
