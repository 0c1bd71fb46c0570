"""Issue 40, a fresh user's trial: a fault line nothing explains is never under a PASS nor under an "all fine" SKIP,
whichever checks run. A line is explained only by a finding (a WARN or FAIL whose code claims it, that quotes it or
names it in ``explains``); another check's SKIP or PASS, or a line merely listed in another result's details, never
explains it. Judged through ``invoke validate --from BUNDLE``, with every check and with ``--only``: the same
verdict both ways."""
from __future__ import annotations

import json

import pytest

from tests.lib import cli as cmd
from tests.lib.paths import REPO
from validate.evidence import Bundle

APPTAINER = REPO / "tests" / "data" / "apptainer"
#: an Xid 79 as the kernel logs it (NVIDIA Xid errors, https://docs.nvidia.com/deploy/xid-errors/index.html),
#: here on nvidia-smi's stderr
XID = "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus."


def tool(argv, rc=0, stdout="", stderr="", missing=False) -> dict:
    return {"kind": "tool", "argv": list(argv), "env": {}, "rc": rc, "missing": missing, "timed_out": False,
            "error": None, "stdout": stdout, "stderr": stderr}


def apptainer_node(folder, stderr: str) -> str:
    """A bundle of a node with the real ``apptainer version``/``buildcfg`` of Apptainer 1.4.5 (tests/data/apptainer)
    where container.apptainer PASSes (user namespaces work), ``stderr`` on ``apptainer version``."""
    version = (APPTAINER / "apptainer-1.4.5-debian-sid.version.txt").read_text()
    cfg = (APPTAINER / "apptainer-1.4.5-debian-sid.buildcfg.txt").read_text()
    entries = [tool(["apptainer", "version"], stdout=version, stderr=stderr),
               tool(["apptainer", "buildcfg"], stdout=cfg),
               {"kind": "read", "path": "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "text": None},
               {"kind": "read", "path": "/proc/sys/user/max_user_namespaces", "text": "96363\n"},
               {"kind": "read", "path": "/proc/sys/kernel/unprivileged_userns_clone", "text": None},
               {"kind": "read", "path": "/etc/apparmor.d/apptainer", "text": None},
               {"kind": "read", "path": "/etc/apptainer/apptainer.conf", "text": "allow setuid = yes\n"},
               {"kind": "read", "path": "/etc/subuid", "text": ""},
               {"kind": "fact", "name": "stat /usr/lib/x86_64-linux-gnu/apptainer/bin/starter-suid", "value": None},
               {"kind": "fact", "name": "user", "value": {"uid": 1000, "name": "alice"}},
               tool(["unshare", "--user", "--map-root-user", "true"])]
    Bundle({"host": "recorded", "stack": None, "hosts": []}, entries).save(folder)
    return str(folder)


def judge(tmp_path, bundle: str, *only: str) -> tuple[int, dict]:
    """``invoke validate --from bundle [--only …]``: (exit status, {check id: result})."""
    report = tmp_path / ("report-%d.json" % len(list(tmp_path.glob("report-*.json"))))
    args = ["validate", "--from", bundle, "--json", str(report)] + (["--only", ",".join(only)] if only else [])
    ran = cmd.run(*args)
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr
    return ran.returncode, {r["id"]: r for r in json.loads(report.read_text())["results"]}


def test_the_apptainer_bundle_passes_without_the_line(tmp_path):
    _, alone = judge(tmp_path, apptainer_node(tmp_path / "b", ""), "container.apptainer")
    assert alone["container.apptainer"]["status"] == "PASS", alone


@pytest.mark.parametrize("line", ["widget: fatal error: the frobnicator failed", "ERROR: widget failed to start"])
def test_a_line_another_checks_skip_lists_is_no_explanation_for_a_pass(tmp_path, line):
    """container.singularity_nv reads the same `apptainer version` and SKIPs: its SKIP (listing the line among its
    details) explained the line for container.apptainer's PASS when every check ran, never with --only."""
    bundle = apptainer_node(tmp_path / "b", line + "\n")
    for only in ((), ("container.apptainer",)):
        _, results = judge(tmp_path, bundle, *only)
        r = results["container.apptainer"]
        assert (r["status"], r["diagnosis"]) == ("WARN", "UNEXPLAINED_FAULT_SIGNAL"), (only, r)
        assert line in r["measured"] and r["signals"]["explained"] == 0 and r["signals"]["read"] == 1, r
        assert any(line in u for u in r["signals"]["unexplained"])
        for other in results.values():  # nobody else counts it as explained either
            if other.get("signals") and other["signals"]["read"]:
                assert other["signals"]["explained"] == 0, other


def _no_gpu_node_with_xid(tmp_path) -> str:
    """A bundle collected on this node by ``invoke validate --collect`` with no nvidia-smi on PATH and no libcuda
    (the conditions made explicit), then the Xid planted into nvidia-smi's recorded stderr."""
    empty = tmp_path / "empty"
    empty.mkdir()
    folder = tmp_path / "node"
    cmd.run("validate", "--only", "gpu.inventory,gpu.persistence,gpu.ecc,gpu.cuda", "--collect", str(folder),
            env={"PATH": str(empty) + ":/usr/bin:/bin", "CHEXSTACK_LIBCUDA": str(tmp_path / "no-libcuda.so.1")},
            expect=0)
    index = json.loads((folder / "bundle.json").read_text())
    smi = [e for e in index["evidence"] if e["kind"] == "tool" and e["argv"] == ["nvidia-smi"]]
    assert smi and smi[0]["missing"], smi
    name = smi[0]["stderr"] or "tools/planted-nvidia-smi.err"
    (folder / name).write_text(XID + "\n")
    smi[0]["stderr"] = name
    (folder / "bundle.json").write_text(json.dumps(index))
    return str(folder)


def test_an_xid_every_reader_skips_over_is_a_warn_with_every_check_and_with_only(tmp_path):
    """On a node where nvidia-smi is absent every gpu.* check SKIPs; an Xid in what nvidia-smi said is no "all
    fine": the first check that read it is a WARN naming it, the same whether all checks run or only it."""
    bundle = _no_gpu_node_with_xid(tmp_path)
    code, every = judge(tmp_path, bundle)
    readers = {cid: r for cid, r in every.items() if r.get("signals") and r["signals"]["read"]}
    assert readers and all(any(XID in u for u in r["signals"]["unexplained"]) for r in readers.values()), readers
    assert code == 0 and "gpu.inventory" in readers  # a WARN: next action retry, the node not proven fit
    warned = [cid for cid, r in readers.items() if r["status"] == "WARN"]
    assert warned, readers
    first = warned[0]
    assert every[first]["diagnosis"] == "UNEXPLAINED_FAULT_SIGNAL" and XID in every[first]["measured"]
    assert any(XID in d for d in every[first]["details"])
    _, alone = judge(tmp_path, bundle, first)
    assert (alone[first]["status"], alone[first]["diagnosis"]) == ("WARN", "UNEXPLAINED_FAULT_SIGNAL"), alone
    for cid in readers:  # each reader judged alone is a WARN over it too, never a SKIP
        _, one = judge(tmp_path, bundle, cid)
        assert one[cid]["status"] == "WARN", one[cid]
