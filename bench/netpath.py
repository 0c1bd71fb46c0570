"""The network path of a run's ranks, declared and observed (issue 41: the seed blames the gap between its bare metal
and its Kubernetes runs on IP over IB and flannel's software-defined network, not on the container).

Declared: ``PATHS``, what a study series asks for (``bench.study``: ``mpijob:overlay``, ``mpijob:host``,
``apptainer:host``).

Observed (``observe``): read in the network namespace a rank ran in, never assumed from the declaration: its
interfaces (``ip -d -j addr show``: name, kind, MTU, addresses), the device the kernel sends to a peer rank's address
through (``ip -j route get PEER``), and where that device is a port to a gateway (a pod's default route to its
node's bridge), the same on the node, so that an encapsulating device there (a VXLAN device: its VNI, UDP port,
underlay address) is found where the kernel really puts it. ``transport`` reads the controller's transport from the
ranks' log. Recorded per series in ``bench.results.RunRecord.network``.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from chexstack.tools import run as run_tool
from facts.parsers.nccl import parse_nccl_log
from facts.parsers.network import Link, parse_ip_json, route_device

#: path -> what it is, in the caption's words
PATHS = {
    "host": "the hosts' own network: the ranks in their host's network namespace (bare metal, Slurm's containers, "
            "a pod with hostNetwork: true)",
    "overlay": "the pod overlay: each host's pods on a host-local bridge, traffic between hosts encapsulated in "
               "VXLAN over the hosts' link (flannel's vxlan backend)",
    "bridge": "each pod's namespace plugged straight on the hosts' bridge (one layer-2 network, no overlay)",
}


def _run(prefix: Sequence[str], *argv: str) -> str:
    ran = run_tool([*prefix, *argv], timeout=30)
    return ran.stdout if ran.ok else ""


def _link_dict(link: Link) -> dict:
    out = {"name": link.name, "kind": link.kind, "mtu": link.mtu, "addresses": list(link.addresses)}
    if link.master:
        out["master"] = link.master
    if link.vxlan:
        out["vxlan"] = link.vxlan
    return out


def encapsulation(link: Link | None, where: str) -> str:
    """How ``link`` (the device traffic leaves by) wraps it: ``VXLAN VNI 1, UDP 8472 over 10.213.57.11 (flannel.1
    on chex1, MTU 1450)`` for a VXLAN device, else ``none``."""
    if link is None or not link.vxlan:
        return "none"
    v = link.vxlan
    return "VXLAN VNI %s, UDP %s over %s (%s on %s, MTU %s)" % (v.get("id"), v.get("port"), v.get("local"),
                                                               link.name, where, link.mtu)


def observe(rank: Sequence[str], where: str, peer: str, node: Sequence[str] | None = None,
            node_name: str | None = None) -> dict:
    """The path from a rank's namespace to ``peer`` (another rank's address). ``rank``/``node``: argv prefixes that
    run a command in the rank's and in its node's namespace (``nsenter --net=... --``; ``node`` None: the rank runs
    on its node's network). Returns {"where", "interfaces" (all but loopback), "peer", "device", "mtu",
    "encapsulation", "other_tunnels"}: ``other_tunnels`` names the VXLAN devices of the rank's namespace that the
    route to the peer does not take, which a transport using every interface that is up (Open MPI's TCP) may still
    use; a namespace that could not be read gives no interfaces and device None."""
    links = {link.name: link for link in parse_ip_json(_run(rank, "ip", "-d", "-j", "addr", "show"))}
    dev, gateway = route_device(_run(rank, "ip", "-j", "route", "get", peer))
    hop = links.get(dev) if dev else None
    wrapped = encapsulation(hop, where)
    if wrapped == "none" and gateway and node is not None:
        node_links = {link.name: link for link in parse_ip_json(_run(node, "ip", "-d", "-j", "addr", "show"))}
        node_dev, _ = route_device(_run(node, "ip", "-j", "route", "get", peer))
        wrapped = encapsulation(node_links.get(node_dev) if node_dev else None, node_name or "the node")
    return {"where": where, "interfaces": [_link_dict(link) for link in links.values() if link.name != "lo"],
            "peer": peer, "device": dev, "mtu": hop.mtu if hop else None, "encapsulation": wrapped,
            "other_tunnels": [link.name for link in links.values() if link.vxlan and link.name != dev]}


def summary(observed: Sequence[dict]) -> str:
    """One line per series: each rank namespace's device to its peer, its MTU and the encapsulation, e.g.
    ``chex1: eth0 (veth, MTU 1500) to 10.213.57.12, encapsulation none``."""
    parts = []
    for o in observed:
        kind = next((i["kind"] for i in o["interfaces"] if i["name"] == o["device"]), "?")
        parts.append("%s: %s (%s, MTU %s) to %s, encapsulation %s%s" % (
            o["where"], o["device"] or "no route", kind, o["mtu"], o["peer"], o["encapsulation"],
            " (%s also up: Open MPI's TCP may use it)" % ", ".join(o["other_tunnels"])
            if o.get("other_tunnels") else ""))
    return "; ".join(parts)


#: Open MPI's ``--tag-output`` prefix ``[1,0]<stdout>:`` (jobid, rank) and horovodrun's Gloo prefix ``[0]<stdout>:``
#: (``trainer.events``).
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:", re.M)
_GLOO_TAG = re.compile(r"^\[\d+\]<std(?:out|err)>:", re.M)


def transport(log: str, started_by: str | None = None) -> str:
    """The controller's transport as the ranks' log shows it: NCCL's own choice where it logged one
    (``NCCL_DEBUG=INFO``: ``facts.parsers.nccl``), else the launcher's rank prefixes (Open MPI's ``[job,rank]``:
    started by mpirun, Horovod's controller is MPI; horovodrun's ``[rank]``: Gloo), else what the launch command
    says (``started_by``: ``mpirun``, e.g. an MPIJob's Launcher, whose output has no tags), said to come from there,
    else ``not reported``."""
    nccl = parse_nccl_log(log)
    if nccl.transport:
        return "NCCL %s%s" % (nccl.transport, " over %s" % ", ".join(nccl.socket_ifaces) if nccl.socket_ifaces else "")
    if _MPI_TAG.search(log):
        return "MPI (the ranks' output carries mpirun's [job,rank] tags: Horovod's MPI controller)"
    if _GLOO_TAG.search(log):
        return "Gloo (the ranks' output carries horovodrun's Gloo [rank] tags)"
    if started_by == "mpirun":
        return "MPI (the launch command's mpirun: Horovod's MPI controller; the ranks' log names no transport)"
    return "not reported in the ranks' log"
