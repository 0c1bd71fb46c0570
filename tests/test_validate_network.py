"""A node's network interfaces read from ``ip`` as a bundle records them by hand (../shared/cases/23: a container
started with ``--network none`` has only ``lo``, and Horovod's Gloo controller segfaults there): every layout of
``ip link``/``ip addr`` gives the interfaces that are up (``facts.parsers.network``), and ``validate.checks.network``
takes them where a bundle lacks the ``network interfaces`` fact, for ``horovod.controller``'s judge."""
from __future__ import annotations

import pytest

from chexstack.tools import ToolRun
from facts.parsers.network import IP_LINK, parse_ip, up_interfaces
from validate.checks import Context
from validate.checks.horovod import judge_controller
from validate.checks.network import interfaces
from validate.evidence import Bundle, MissingEvidence, Replay

#: constructed in iproute2's layouts: loopback only (the case's --network none), and a host with eth0 up, eth1 down
LO_ONELINE = ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen "
              "1000\\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n")
HOST_LINK = ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default "
             "qlen 1000\n"
             "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n"
             "2: eth0@if12: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP mode DEFAULT group "
             "default\n    link/ether 02:42:ac:11:00:02 brd ff:ff:ff:ff:ff:ff link-netnsid 0\n"
             "3: eth1: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN mode DEFAULT group default qlen 1000\n"
             "    link/ether 52:54:00:12:34:56 brd ff:ff:ff:ff:ff:ff\n")
HOST_ADDR = ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\n"
             "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00\n"
             "    inet 127.0.0.1/8 scope host lo\n       valid_lft forever preferred_lft forever\n"
             "2: eth0@if12: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue state UP group default\n"
             "    link/ether 02:42:ac:11:00:02 brd ff:ff:ff:ff:ff:ff link-netnsid 0\n"
             "    inet 172.17.0.2/16 brd 172.17.255.255 scope global eth0\n"
             "3: eth1: <BROADCAST,MULTICAST> mtu 1500 qdisc noop state DOWN group default qlen 1000\n")
ADDR_ONELINE = ("1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
                "2: eth0    inet 172.17.0.2/16 brd 172.17.255.255 scope global eth0\\       valid_lft forever\n")
BRIEF_LINK = ("lo               UNKNOWN        00:00:00:00:00:00 <LOOPBACK,UP,LOWER_UP>\n"
              "eth0@if12        UP             02:42:ac:11:00:02 <BROADCAST,MULTICAST,UP,LOWER_UP>\n"
              "eth1             DOWN           52:54:00:12:34:56 <BROADCAST,MULTICAST>\n")
BRIEF_ADDR = "lo               UNKNOWN        127.0.0.1/8 ::1/128\neth0             UP             172.17.0.2/16\n" \
             "eth1             DOWN           \n"


@pytest.mark.parametrize("text, up", [
    (LO_ONELINE, ["lo"]), (HOST_LINK, ["lo", "eth0"]), (HOST_ADDR, ["lo", "eth0"]), (ADDR_ONELINE, ["lo", "eth0"]),
    (BRIEF_LINK, ["lo", "eth0"]), (BRIEF_ADDR, ["lo", "eth0"]), ("", []),
])
def test_every_layout_gives_the_interfaces_that_are_up(text, up):
    assert up_interfaces(parse_ip(text)) == up


@pytest.mark.parametrize("argv", [("ip", "-o", "link", "show"), ("ip", "link"), ("ip", "a"), ("ip", "-o", "addr"),
                                  ("sh", "-c", "sudo ip -br addr show | cat"), ("/sbin/ip", "-4", "addr", "show")])
def test_ip_is_read_however_it_was_typed(argv):
    assert IP_LINK.also(argv, {}), argv


@pytest.mark.parametrize("argv", [("ip", "route"), ("ip", "link", "set", "eth0", "up"), ("ifconfig", "-a"),
                                  ("sh", "-c", "echo ip link")])
def test_and_not_another_command(argv):
    assert not IP_LINK.also(argv, {}), argv


def _context(*runs: ToolRun, facts: dict | None = None) -> Context:
    bundle = Bundle()
    for run in runs:
        bundle.add_tool(run)
    for name, value in (facts or {}).items():
        bundle.add({"kind": "fact", "name": name, "value": value})
    return Context(evidence=Replay(bundle))


@pytest.mark.parametrize("argv, text", [(("ip", "-o", "link", "show"), LO_ONELINE),
                                        (("sh", "-c", "sudo ip -o addr"), ADDR_ONELINE.splitlines()[0] + "\n"),
                                        (("ip", "link"), HOST_LINK.split("2: ")[0])])
def test_case_23_loopback_only_recorded_as_ip_is_the_gloo_warning(argv, text):
    """The case's container (--network none) recorded as ``ip`` instead of the fact: only ``lo`` is up, so with
    both controllers built the verdict is GLOO_LOOPBACK_ONLY and the remedy the MPI controller."""
    names, source = interfaces(_context(ToolRun(argv, 0, text)))
    assert names == ["lo"] and source == " ".join(argv)
    result = judge_controller(names, gloo=True, mpi=True)
    assert (result.status.value, result.diagnosis) == ("WARN", "GLOO_LOOPBACK_ONLY")
    assert "horovodrun --mpi" in result.remedy and "--network host" in result.remedy


def test_the_fact_comes_first_and_neither_is_missing_evidence():
    assert interfaces(_context(ToolRun(("ip", "link"), 0, HOST_LINK), facts={"network interfaces": ["lo"]})) == (
        ["lo"], None)
    names, _ = interfaces(_context(ToolRun(("ip", "link"), 0, HOST_LINK)))
    assert judge_controller(names, gloo=True, mpi=True).status.value == "PASS"
    with pytest.raises(MissingEvidence, match="ip -o link show"):
        interfaces(_context(ToolRun(("ip", "route"), 0, "default via 10.0.0.1 dev eth0\n")))


@pytest.mark.parametrize("argv", [("ip", "-o", "link", "show"), ("sh", "-c", "sudo ip -br link")])
def test_case_23_through_validate_from_with_the_interfaces_recorded_as_ip(tmp_path, argv):
    """Case 23's node with its interfaces as a recorded ``ip`` run instead of the fact: ``invoke validate --from``
    gives the same Gloo warning and names the run it read."""
    import json

    from tests.lib.bundle_corpus import CORPUS, build
    from validate.report import validate

    text = LO_ONELINE if "-o" in argv else "lo               UNKNOWN        00:00:00:00:00:00 <LOOPBACK,UP,LOWER_UP>\n"
    bundle = tmp_path / "bundle"
    build(CORPUS / "case23-gloo-loopback-only.yaml", bundle)
    doc = json.loads((bundle / "bundle.json").read_text())
    doc["evidence"] = [e for e in doc["evidence"] if e.get("name") != "network interfaces"]
    (bundle / "tools").mkdir(exist_ok=True)
    (bundle / "tools" / "900-ip.out").write_text(text)
    (bundle / "tools" / "900-ip.err").write_text("")
    doc["evidence"].append({"kind": "tool", "argv": list(argv), "env": {}, "rc": 0, "missing": False,
                            "timed_out": False, "error": None, "stdout": "tools/900-ip.out",
                            "stderr": "tools/900-ip.err"})
    (bundle / "bundle.json").write_text(json.dumps(doc))
    validate(json_path=str(tmp_path / "r.json"), from_bundle=str(bundle), only=["horovod.controller"])
    [result] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert (result["status"], result["diagnosis"]) == ("WARN", "GLOO_LOOPBACK_ONLY"), result
    assert result["measured"].startswith("only loopback is up (lo)")
    assert "interfaces from the bundle's `%s`" % " ".join(argv) in result["details"], result["details"]
