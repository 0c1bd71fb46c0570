"""ACS on the GPUs' bridges read as the node's transcript records it (../shared/cases/31, NVIDIA/nccl#2079): the
ACS control of ``lspci -vvv`` however typed (``sudo``, one bridge per run with ``-s``, filtered with ``grep``) and
the PCI tree of ``lspci -tv`` (also filtered) where sysfs was not recorded; ``topo.pcie_acs`` is ``ACS_ENABLED``
naming the bridges and the hung all-reduce is attributed to it. A listing limited to some bridges proves nothing of
the others: no PASS on a bridge above a GPU that was not recorded."""
from __future__ import annotations

import pytest

from facts.parsers.pcie import LSPCI_TREE, LSPCI_VERBOSE, Lspci, parse_lspci, parse_lspci_tree
from tests.lib.bundle_corpus import judged
from tests.lib.paths import CASES

TYPED = "case31-acs-recorded-as-typed"
GREP = 'grep -E "^[0-9a-f]|ACSCtl"'
BRIDGES = "ACS redirect enabled on 0000:40:03.1, 0000:40:03.2 (upstream of 0000:41:00.0, 0000:61:00.0)"


def section(command: str) -> str:
    """The output after ``$ command`` in case 31's transcript."""
    text = (CASES / "31-nccl-p2p-hang-pcie-acs.txt").read_text()
    return text.split("$ %s\n" % command)[1].split("\n$ ")[0].split("\n\n")[0] + "\n"


@pytest.mark.parametrize("argv", [
    ("sh", "-c", "sudo lspci -s 40:03.1 -vvv | %s" % GREP), ("lspci", "-vvv"), ("sudo", "lspci", "-vv"),
    ("sh", "-c", "lspci -vvv | grep ACSCtl"), ("sh", "-c", "sudo /usr/bin/lspci -nnvvv 2>&1"),
    ("lspci", "-v", "-v", "-s", "0000:40:03.2"),
])
def test_lspci_verbose_is_read_however_it_was_typed(argv):
    assert LSPCI_VERBOSE.also(argv, {}) and not LSPCI_TREE.also(argv, {}), argv


@pytest.mark.parametrize("argv", [("lspci", "-v"), ("lspci",), ("lspci", "-tv"), ("sh", "-c", "echo lspci -vvv"),
                                  ("setpci", "-s", "40:03.1", "ECAP_ACS+6.w")])
def test_and_not_another_command(argv):
    assert not LSPCI_VERBOSE.also(argv, {}), argv


@pytest.mark.parametrize("argv", [("lspci", "-tv"), ("sh", "-c", "lspci -tv | grep -i -B1 nvidia"),
                                  ("sudo", "lspci", "-tvnn")])
def test_the_pci_tree_is_read_however_it_was_typed(argv):
    assert LSPCI_TREE.also(argv, {}) and not LSPCI_VERBOSE.also(argv, {}), argv
    assert not LSPCI_TREE.also(("lspci", "-t"), {})  # no names: no GPU to find


def test_the_cases_tree_places_each_gpu_under_its_bridge():
    assert parse_lspci_tree(section("lspci -tv | grep -i -B1 nvidia")) == {
        "0000:41:00.0": ["0000:40:03.1"], "0000:61:00.0": ["0000:40:03.2"]}


def test_a_deeper_tree_through_a_switch_and_two_roots():
    """Constructed in lspci -tv's layout: a GPU pair behind a PCIe switch under one root, one GPU (and its audio
    function, not a GPU) under another; the chain is nearest the root first."""
    tree = ("-+-[0000:c0]-+-00.0  Advanced Micro Devices, Inc. [AMD] Root Complex\n"
            " |           +-01.1-[c1-c4]----00.0-[c2-c4]--+-00.0-[c3]----00.0  NVIDIA Corporation GA100 [A100 PCIe]\n"
            " |           |                               \\-01.0-[c4]----00.0  NVIDIA Corporation GA100 [A100 PCIe]\n"
            " |           \\-07.1-[c5]----00.0  Advanced Micro Devices, Inc. [AMD] Function\n"
            " \\-[0000:00]-+-00.0  Advanced Micro Devices, Inc. [AMD] Root Complex\n"
            "             +-03.1-[01]--+-00.0  NVIDIA Corporation TU102 [GeForce RTX 2080 Ti Rev. A]\n"
            "             |            \\-00.1  NVIDIA Corporation TU102 High Definition Audio Controller\n")
    assert parse_lspci_tree(tree) == {
        "0000:c3:00.0": ["0000:c0:01.1", "0000:c1:00.0", "0000:c2:00.0"],
        "0000:c4:00.0": ["0000:c0:01.1", "0000:c1:00.0", "0000:c2:01.0"],
        "0000:01:00.0": ["0000:00:03.1"]}


def test_lspci_forms_parse_to_the_same_bridges():
    one = section('sudo lspci -s 40:03.1 -vvv | %s' % GREP)
    listing = parse_lspci(one, "40:03.1")
    assert [(b.address, b.redirects) for b in listing.bridges] == [
        ("0000:40:03.1", ["SrcValid", "ReqRedir", "CmpltRedir"])]
    assert listing.partial and list(listing.devices) == ["0000:40:03.1"]
    # `lspci -s 40:03.1 -vvv | grep ACSCtl`: the device line filtered out, the address is the -s one
    bare = parse_lspci(one.splitlines()[1] + "\n", "40:03.1")
    assert [b.address for b in bare.bridges] == ["0000:40:03.1"]
    # the NCCL guide's `lspci -vvv | grep ACSCtl` over every device: ACS seen, addresses not recorded
    assert [b.address for b in parse_lspci(one.splitlines()[1] + "\n").bridges] == [""]


def test_a_whole_listing_gives_the_gpus_and_the_bridges_above_them():
    """Constructed in lspci -vvv's layout: the bridge's Bus line and the GPU's class line give the same tree as
    sysfs would."""
    text = ("40:03.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge\n"
            "\tBus: primary=40, secondary=41, subordinate=41, sec-latency=0\n"
            "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
            "41:00.0 VGA compatible controller: NVIDIA Corporation AD102GL [RTX 5880 Ada Generation]\n"
            "41:00.1 Audio device: NVIDIA Corporation AD102 High Definition Audio Controller\n")
    listing = parse_lspci(text)
    assert listing.gpus == ["0000:41:00.0"] and listing.upstream("0000:41:00.0") == ["0000:40:03.1"]
    assert not listing.partial and listing.bridges[0].redirects == []
    merged = Lspci.merged([parse_lspci(text, "40:03.1"), listing])
    assert not merged.partial and len(merged.bridges) == 1


def test_case_31_recorded_as_typed_names_the_bridges_and_the_hang(tmp_path):
    got = judged(TYPED, tmp_path, only=["topo.pcie_acs", "nccl.busbw", "nccl.transport"])
    acs, busbw, transport = got["topo.pcie_acs"], got["nccl.busbw"], got["nccl.transport"]
    assert (acs["status"], acs["diagnosis"], acs["action"]) == ("FAIL", "ACS_ENABLED", "reconfigure"), acs
    assert acs["measured"].startswith(BRIDGES)
    for words in ("pci=noacs", "ECAP_ACS+6.w=0000", "NCCL_P2P_DISABLE=1"):
        assert words in acs["remedy"]
    assert any("lspci -tv | grep -i -B1 nvidia" in d for d in acs["details"])
    assert (busbw["status"], busbw["diagnosis"]) == ("FAIL", "NCCL_HANG")
    assert "likely cause: " + BRIDGES in busbw["measured"] and "no cause in the evidence" not in busbw["measured"]
    assert "pci=noacs" in busbw["remedy"]
    assert (transport["status"], transport["diagnosis"]) == ("FAIL", "NCCL_HANG")


@pytest.mark.parametrize("command", [
    "sudo lspci -vvv | %s" % GREP,  # one run over every device (its device lines kept)
    "lspci -vvv | grep ACSCtl",  # the NCCL guide's: the device lines filtered out
    "sudo lspci -vvv",
])
def test_case_31_with_the_acs_lines_in_one_run(tmp_path, command):
    """Both bridges' lines in one recorded run, however it was typed (the second run dropped)."""
    both = section('sudo lspci -s 40:03.1 -vvv | %s' % GREP) + section('sudo lspci -s 40:03.2 -vvv | %s' % GREP)
    if "grep ACSCtl" in command:
        both = "".join(line + "\n" for line in both.splitlines() if "ACSCtl" in line)

    def rewrite(entry):
        argv = entry.get("argv") or [""]
        if "40:03.2" in argv[-1]:
            return False
        if "40:03.1" in argv[-1]:
            entry["argv"] = ["sh", "-c", command]
            (tmp_path / "bundle" / entry["stdout"]).write_text(both)
        return True

    acs = judged(TYPED, tmp_path, rewrite, ["topo.pcie_acs"])["topo.pcie_acs"]
    assert (acs["status"], acs["diagnosis"]) == ("FAIL", "ACS_ENABLED"), acs
    if "grep ACSCtl" in command:
        assert acs["measured"].startswith("ACS redirect enabled on 2 device(s) whose lspci line was not recorded")
    else:
        assert acs["measured"].startswith(BRIDGES)


def test_a_bridge_above_a_gpu_that_was_not_recorded_is_no_pass(tmp_path):
    """ACS off on 40:03.1 (recorded), 40:03.2 above GPU 61:00.0 not recorded: a WARN naming it, never a PASS."""
    def rewrite(entry):
        argv = entry.get("argv") or [""]
        if "40:03.2" in argv[-1]:
            return False
        if "40:03.1" in argv[-1]:
            path = tmp_path / "bundle" / entry["stdout"]
            path.write_text(path.read_text().replace("+", "-"))
        return True

    acs = judged(TYPED, tmp_path, rewrite, ["topo.pcie_acs"])["topo.pcie_acs"]
    assert (acs["status"], acs["diagnosis"]) == ("WARN", "EVIDENCE_INCOMPLETE"), acs
    assert "not in the recorded lspci: 0000:40:03.2" in acs["measured"] and "lspci" in acs["remedy"]


def test_without_a_gpu_listing_the_check_says_what_is_missing(tmp_path):
    acs = judged(TYPED, tmp_path, lambda e: "lspci -tv" not in " ".join(e.get("argv") or []),
                 ["topo.pcie_acs"])["topo.pcie_acs"]
    assert (acs["status"], acs["diagnosis"]) == ("SKIP", "EVIDENCE_MISSING"), acs
    assert "/sys/bus/pci/devices, or `lspci -tv`" in acs["measured"]
