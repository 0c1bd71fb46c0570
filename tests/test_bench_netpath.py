"""Issue 41: the network path a run's ranks used, read where they ran (``bench.netpath``) from real ``ip -j`` output
recorded on the test cluster's host chex1 (its eth0 on chexbr0, the overlay's cni0 and flannel.1) and real NCCL and
Open MPI output."""
from __future__ import annotations

from pathlib import Path

from bench import netpath
from facts.parsers.network import parse_ip_json, route_device
from tests.lib.paths import REPO

DATA = REPO / "tests" / "data" / "network"
CHEX1 = (DATA / "ip-d-j-addr-testcluster-chex1.json").read_text()


def test_ip_json_gives_each_interface_its_kind_mtu_addresses_and_vxlan():
    links = {link.name: link for link in parse_ip_json(CHEX1)}
    assert list(links) == ["lo", "eth0", "cni0", "flannel.1"]
    assert (links["eth0"].kind, links["eth0"].mtu, links["eth0"].addresses) == ("veth", 1500, ("10.213.57.11/24",))
    assert (links["cni0"].kind, links["cni0"].addresses) == ("bridge", ("10.244.1.1/24",))
    vx = links["flannel.1"]
    assert vx.kind == "vxlan" and vx.mtu == 1450 and vx.addresses == ("10.244.1.0/32",)
    assert vx.vxlan == {"id": 1, "port": 8472, "local": "10.213.57.11", "link": "eth0", "learning": False}
    assert parse_ip_json("") == [] and parse_ip_json("not json") == []
    assert route_device((DATA / "ip-j-route-get-pod-via-flannel.json").read_text()) == ("flannel.1", "10.244.2.0")
    assert route_device("") == (None, None)


def _stub(tmp_path: Path, addr: str, route: str) -> tuple[str, ...]:
    """A namespace prefix whose ``ip`` prints the recorded output: ``addr`` for ``addr show``, ``route`` for
    ``route get``."""
    (tmp_path / "addr.json").write_text(addr)
    (tmp_path / "route.json").write_text(route)
    script = tmp_path / "ns"
    script.write_text('#!/bin/sh\ncase "$*" in *route*) cat %s/route.json;; *) cat %s/addr.json;; esac\n'
                      % (tmp_path, tmp_path))
    script.chmod(0o755)
    return (str(script),)


def test_observe_finds_the_vxlan_device_the_kernel_sends_a_peer_pods_traffic_through(tmp_path):
    route = (DATA / "ip-j-route-get-pod-via-flannel.json").read_text()
    seen = netpath.observe(_stub(tmp_path, CHEX1, route), "chex1", "10.244.2.10")
    assert seen["device"] == "flannel.1" and seen["mtu"] == 1450
    assert seen["encapsulation"] == "VXLAN VNI 1, UDP 8472 over 10.213.57.11 (flannel.1 on chex1, MTU 1450)"
    assert [i["name"] for i in seen["interfaces"]] == ["eth0", "cni0", "flannel.1"]  # loopback left out
    direct = netpath.observe(_stub(tmp_path, CHEX1, '[{"dst":"10.213.57.12","dev":"eth0"}]'), "chex1", "10.213.57.12")
    assert direct["encapsulation"] == "none" and direct["mtu"] == 1500 and direct["other_tunnels"] == ["flannel.1"]
    assert netpath.summary([direct]) == ("chex1: eth0 (veth, MTU 1500) to 10.213.57.12, encapsulation none "
                                         "(flannel.1 also up: Open MPI's TCP may use it)")
    assert seen["other_tunnels"] == []
    unread = netpath.observe(("false",), "chex9", "10.213.57.12")
    assert unread["device"] is None and unread["interfaces"] == [] and unread["encapsulation"] == "none"


def test_transport_as_the_ranks_log_reports_it(fixture_text):
    nccl = fixture_text("nccl-debug-info-socket-no-ib-horovodrun.txt")
    assert netpath.transport(nccl) == "NCCL Socket over enp129s0f0"
    mpi = "[1,0]<stdout>:throughput: 12.3 images/s\n[1,1]<stdout>:ready\n"
    assert netpath.transport(mpi).startswith("MPI (the ranks' output carries mpirun's [job,rank] tags")
    assert netpath.transport("[0]<stdout>:ready\n").startswith("Gloo")
    assert netpath.transport("plain text\n") == "not reported in the ranks' log"
    assert netpath.transport("plain text\n", started_by="mpirun").startswith("MPI (the launch command's mpirun")
