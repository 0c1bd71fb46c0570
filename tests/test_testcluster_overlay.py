"""Issue 41 part 2: the test cluster's pod overlay (``scripts/testcluster``, ``overlay_up``), as flannel's vxlan
backend builds it: a pod on chex1 reaches a pod on chex2 over their 10.244.K.x addresses, the traffic leaves chex1
encapsulated by the kernel's VXLAN (VNI 1, UDP 8472) over its link on chexbr0, and each host's ``flannel.1`` counts
it. The pods are processes in network namespaces of their own (``unshare --net``), plugged as a CNI plugin would
(``plug --overlay``); no Docker is needed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.lib.testcluster import script

pytestmark = pytest.mark.cluster


def _link(host: str, dev: str) -> dict:
    """``ip -d -s -j link show DEV`` in host's namespace: the device with its details and counters."""
    out = subprocess.run(["ip", "-n", host, "-d", "-s", "-j", "link", "show", dev], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)[0]


def _in(pid: int, *argv: str, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["nsenter", "--net=/proc/%d/ns/net" % pid, "--", *argv], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def pods():
    """Start processes in network namespaces of their own (the pods' sandboxes); kill them after (their veths go with
    their namespaces)."""
    started = []

    def start() -> int:
        p = subprocess.Popen(["unshare", "--net", "sleep", "600"], start_new_session=True)
        started.append(p)
        for _ in range(50):  # until unshare has exec'd sleep in the new namespace
            if os.readlink("/proc/%d/ns/net" % p.pid) != os.readlink("/proc/self/ns/net"):
                return p.pid
            subprocess.run(["sleep", "0.1"])
        raise AssertionError("unshare --net did not give process %d a namespace" % p.pid)

    yield start
    for p in started:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


_ECHO = ("import socket,sys; s=socket.create_server(('0.0.0.0', 7777)); print('ready', flush=True); "
         "c,_=s.accept(); n=0\nwhile True:\n d=c.recv(65536)\n if not d: break\n n+=len(d)\nc.sendall(str(n).encode())")
_SEND = ("import socket,sys; c=socket.create_connection((sys.argv[1], 7777), timeout=20); "
         "c.sendall(b'x' * 4000000); c.shutdown(socket.SHUT_WR); print(c.recv(64).decode())")


def test_a_pod_on_chex1_reaches_a_pod_on_chex2_through_flannel_vxlan(testcluster, pods):
    built = script("overlay")
    assert built.returncode == 0, built.stderr
    assert "overlay up already" in script("overlay").stdout  # idempotent
    eth0, vx = _link("chex1", "eth0"), _link("chex1", "flannel.1")
    info = vx["linkinfo"]["info_data"]
    assert vx["linkinfo"]["info_kind"] == "vxlan" and info["id"] == 1 and info["port"] == 8472, info
    assert info["local"] == "10.213.57.11" and not info.get("learning"), info
    assert vx["mtu"] == eth0["mtu"] - 50 == 1450  # as the kernel gives it: VXLAN's 50 bytes of headers
    assert "10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink" in subprocess.run(
        ["ip", "-n", "chex1", "route"], capture_output=True, text=True).stdout

    one, two = pods(), pods()
    for pid, addr in ((one, "10.244.1.2"), (two, "10.244.2.2")):
        plugged = script("plug", "--overlay", str(pid), addr)
        assert plugged.returncode == 0, plugged.stderr
    pod_eth0 = json.loads(_in(one, "ip", "-d", "-j", "link", "show", "eth0").stdout)[0]
    assert pod_eth0["mtu"] == 1450 and pod_eth0["linkinfo"]["info_kind"] == "veth"
    assert "default via 10.244.1.1" in _in(one, "ip", "route").stdout

    before = {h: _link(h, "flannel.1")["stats64"] for h in ("chex1", "chex2")}
    server = subprocess.Popen(["nsenter", "--net=/proc/%d/ns/net" % two, "--", sys.executable, "-c", _ECHO],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        sent = _in(one, sys.executable, "-c", _SEND, "10.244.2.2")
        assert sent.returncode == 0 and sent.stdout.strip() == "4000000", sent.stderr
    finally:
        server.kill()
        server.wait()
    after = {h: _link(h, "flannel.1")["stats64"] for h in ("chex1", "chex2")}
    assert after["chex1"]["tx"]["bytes"] - before["chex1"]["tx"]["bytes"] > 4000000, (before, after)
    assert after["chex2"]["rx"]["bytes"] - before["chex2"]["rx"]["bytes"] > 4000000, (before, after)

    # this machine reaches a pod through its host (a node reaches its own pods), outside the tunnel
    reach = subprocess.run([sys.executable, "-c", "import socket\ntry:\n socket.create_connection(('10.244.2.2', 9), 5)"
                            "\nexcept ConnectionRefusedError:\n print('refused')"], capture_output=True, text=True)
    assert reach.stdout.strip() == "refused", reach  # the pod's kernel answered: a RST from 10.244.2.2

    # plug --overlay refuses an address of no host's pod subnet, naming what it expects
    wrong = script("plug", "--overlay", str(one), "10.244.7.3")
    assert wrong.returncode == 2 and "host chex7's, which is not up" in wrong.stderr, wrong.stderr
    wrong = script("plug", "--overlay", str(one), "10.213.57.101")
    assert wrong.returncode == 2 and "10.244.K.2 to 10.244.K.254" in wrong.stderr, wrong.stderr
