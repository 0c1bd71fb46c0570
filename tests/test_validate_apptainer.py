"""Issue 22 item 6: ``container.apptainer`` judges the container runtime's version and whether this user can run
containers (user namespaces, the setuid starter, fakeroot), live and from a bundle alike.

tests/data/apptainer/ holds real outputs of this project's build machine: ``apptainer version`` and ``apptainer
buildcfg`` of Apptainer 1.4.5 (Debian sid's package, started through scripts/apptainer-userns; no setuid install:
APPTAINER_SUID_INSTALL=0). The node settings around them (/proc/sys files, the setuid starter's stat, unshare's
result) vary per test: they are what the check reads, each in the form the kernel or util-linux gives it."""
from __future__ import annotations

import json
import shutil
import stat

import pytest

from chexstack.tools import ToolRun
from facts.parsers.container import buildcfg, conf_setting, release, subid_count
from tests.lib.cases import case
from tests.lib.paths import REPO
from validate.checks.container import apptainer, judge_apptainer, setuid_mode, userns_mode
from validate.checks.registry import Context
from validate.evidence import Bundle, Replay
from validate.report import validate

DATA = REPO / "tests" / "data" / "apptainer"
VERSION = (DATA / "apptainer-1.4.5-debian-sid.version.txt").read_text()
BUILDCFG = (DATA / "apptainer-1.4.5-debian-sid.buildcfg.txt").read_text()
STARTER = "/usr/lib/x86_64-linux-gnu/apptainer/bin/starter-suid"
#: util-linux unshare's message when unshare(CLONE_NEWUSER) fails with ENOSPC, which the kernel returns when
#: /proc/sys/user/max_user_namespaces is 0 (unshare(2), ERRORS).
UNSHARE_ENOSPC = "unshare: unshare failed: No space left on device\n"


def tool(argv, rc=0, stdout="", stderr="", missing=False) -> dict:
    return {"kind": "tool", "argv": list(argv), "env": {}, "rc": rc, "missing": missing, "timed_out": False,
            "error": None, "stdout": stdout, "stderr": stderr}


def node(max_userns="96363\n", unshare=(0, ""), starter=None, apparmor=None, profile=None, subuid="") -> Context:
    """A recorded node with this machine's ``apptainer version`` and ``buildcfg`` and the given settings."""
    entries = [tool(["apptainer", "version"], stdout=VERSION), tool(["apptainer", "buildcfg"], stdout=BUILDCFG),
               {"kind": "read", "path": "/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "text": apparmor},
               {"kind": "read", "path": "/proc/sys/user/max_user_namespaces", "text": max_userns},
               {"kind": "read", "path": "/proc/sys/kernel/unprivileged_userns_clone", "text": None},
               {"kind": "read", "path": "/etc/apparmor.d/apptainer", "text": profile},
               {"kind": "read", "path": "/etc/apptainer/apptainer.conf", "text": "allow setuid = yes\n"},
               {"kind": "read", "path": "/etc/subuid", "text": subuid},
               {"kind": "fact", "name": "stat %s" % STARTER, "value": starter},
               {"kind": "fact", "name": "user", "value": {"uid": 1000, "name": "alice"}}]
    if unshare is not None:
        entries.append(tool(["unshare", "--user", "--map-root-user", "true"], rc=unshare[0], stderr=unshare[1]))
    else:
        entries.append(tool(["unshare", "--user", "--map-root-user", "true"], rc=None, missing=True))
    return Context(evidence=Replay(Bundle({"host": "recorded"}, entries)))


def test_buildcfg_of_apptainer_1_4_5_names_the_package_and_the_starter_folder():
    cfg = buildcfg(BUILDCFG)
    assert cfg["PACKAGE_NAME"] == "apptainer" and cfg["PACKAGE_VERSION"] == "1.4.5"
    assert cfg["LIBEXECDIR"] == "/usr/lib/x86_64-linux-gnu" and cfg["APPTAINER_SUID_INSTALL"] == "0"
    assert release("1.4.5") == (1, 4, 5) and release("3.4.2-1.1.el7")[:3] == (3, 4, 2)


def test_conf_and_subuid_parsers():
    assert conf_setting("# allow setuid = yes\nallow setuid = NO\n", "allow setuid") == "no"
    assert conf_setting("", "allow setuid") is None
    assert subid_count("alice:100000:65536\nbob:165536:65536\n1000:231072:10\n", "alice", 1000) == 65546


def test_user_namespaces_observed_with_unshare_pass():
    result = apptainer(node())
    assert result.status.value == "PASS", result
    assert "apptainer 1.4.5" in result.measured and "through user namespaces" in result.measured
    assert any("`unshare --user --map-root-user true` ran" in d for d in result.details)
    assert any("no setuid starter at %s (APPTAINER_SUID_INSTALL=0)" % STARTER in d for d in result.details)


def test_user_namespaces_off_and_no_setuid_starter_fail_with_each_reason():
    result = apptainer(node(max_userns="0\n", unshare=(1, UNSHARE_ENOSPC)))
    assert result.status.value == "FAIL" and result.diagnosis == "APPTAINER_NO_USERNS", result
    assert "alice cannot run containers" in result.measured and result.remedy
    shown = " | ".join(result.details)
    assert "/proc/sys/user/max_user_namespaces is 0" in shown
    assert "no setuid starter at %s" % STARTER in shown and "needs user namespaces" in shown


def test_a_failed_unshare_is_the_reason_when_the_settings_allow_user_namespaces():
    result = apptainer(node(unshare=(1, UNSHARE_ENOSPC)))
    assert result.status.value == "FAIL" and "No space left on device" in " ".join(result.details)


def test_ubuntu_apparmor_restriction_needs_a_profile_for_apptainer():
    denied = "unshare: write failed /proc/self/uid_map: Operation not permitted\n"
    result = apptainer(node(apparmor="1\n", unshare=(1, denied)))
    assert result.status.value == "FAIL" and "no /etc/apparmor.d/apptainer" in " ".join(result.details)
    profile = "abi <abi/4.0>,\ninclude <tunables/global>\nprofile apptainer /usr/bin/apptainer flags=(unconfined) {\n" \
              "  userns,\n}\n"
    result = apptainer(node(apparmor="1\n", unshare=(1, denied), profile=profile))
    assert result.status.value == "PASS" and "judged from settings" in " ".join(result.details)


def test_setuid_starter_runs_containers_without_user_namespaces():
    result = apptainer(node(max_userns="0\n", unshare=(1, UNSHARE_ENOSPC),
                            starter={"mode": stat.S_IFREG | stat.S_ISUID | 0o755, "uid": 0}))
    assert result.status.value == "PASS" and "through the setuid starter" in result.measured
    assert setuid_mode("apptainer", {}, STARTER, {"mode": stat.S_IFREG | 0o755, "uid": 0}, None)[0] is False
    assert setuid_mode("apptainer", {}, STARTER, {"mode": stat.S_IFREG | stat.S_ISUID | 0o755, "uid": 0},
                       "no") == (False, "%s is setuid root but the configuration says allow setuid = no" % STARTER)


def test_settings_alone_are_said_to_be_settings():
    works, why = userns_mode("96363\n", None, None, None, None)
    assert works and "judged from settings" in why
    assert userns_mode(None, None, None, None, None)[0] is False


def test_old_singularity_of_case_21_warns_with_its_limits():
    version = case("21").split("$ singularity version\n")[1].splitlines()[0] + "\n"
    ran = ToolRun(("singularity", "version"), 0, version, "")
    result = judge_apptainer("singularity", ran, {}, (True, "observed"), (False, "none"), 0, "alice")
    assert result.status.value == "WARN" and result.diagnosis == "APPTAINER_TOO_OLD", result
    assert "singularity 3.4.2" in result.measured and "https://github.com/sylabs/singularity/releases" in result.remedy


def _verdict(report_path):
    [r] = json.loads(report_path.read_text())["results"]
    return r["status"], r["measured"], r["details"]


def test_collect_then_from_gives_the_same_verdict(tmp_path, monkeypatch):
    """On this machine, whatever it has: the bundle holds what the check read and judges the same."""
    import validate.report as report_module

    monkeypatch.setattr(report_module, "print_table", lambda report: None)
    validate(json_path=str(tmp_path / "live.json"), only=["container.apptainer"], collect=str(tmp_path / "b"))
    validate(json_path=str(tmp_path / "from.json"), only=["container.apptainer"], from_bundle=str(tmp_path / "b"))
    assert _verdict(tmp_path / "live.json") == _verdict(tmp_path / "from.json")


@pytest.mark.skipif(not (shutil.which("apptainer") or shutil.which("singularity")),
                    reason="neither apptainer nor singularity on PATH: the check SKIPs here, nothing to record")
def test_collect_records_the_runtime_and_the_user_namespace_probe(tmp_path, monkeypatch):
    import validate.report as report_module

    monkeypatch.setattr(report_module, "print_table", lambda report: None)
    validate(json_path=str(tmp_path / "live.json"), only=["container.apptainer"], collect=str(tmp_path / "b"))
    status, measured, _details = _verdict(tmp_path / "live.json")
    assert status != "SKIP", measured
    argvs = [e["argv"] for e in json.loads((tmp_path / "b" / "bundle.json").read_text())["evidence"]
             if e["kind"] == "tool"]
    assert argvs[0][1:] == ["version"] and argvs[1][1:] == ["buildcfg"]
    assert ["unshare", "--user", "--map-root-user", "true"] in argvs
