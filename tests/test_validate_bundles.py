"""Issue 12: recorded nodes are judged anywhere. Every bundle of the corpus (``tests/data/bundles/*.yaml``, built at
test time from ../shared/fixtures and ../shared/cases by ``tests.bundle_corpus``) goes through the ``--from`` loader
and gives its verdict table — every check it does not list is a SKIP (missing evidence is never a PASS) — with the
same JSON and exit code as on the node."""
from __future__ import annotations

import json
import subprocess

import pytest

from chexstack.errors import ChexstackError
from tests.bundle_corpus import build, specs
from tests.conftest import REPO
from validate.checks import CHECKS
from validate.report import findings, validate
from validate.result import CheckResult, Status


@pytest.mark.parametrize("spec", specs(), ids=[p.stem for p in specs()])
def test_bundle_gives_its_verdict_table(spec, tmp_path, capsys):
    want = build(spec, tmp_path / "bundle")
    out = tmp_path / "report.json"
    code = validate(json_path=str(out), from_bundle=str(tmp_path / "bundle"))
    table = capsys.readouterr().out
    report = json.loads(out.read_text())
    got = {r["id"]: r for r in report["results"]}
    assert set(got) == set(CHECKS)
    for cid, result in got.items():
        status, text = want["expect"].get(cid, ["SKIP", ""])
        shown = " | ".join([result["measured"], result["expected"]] + result["details"])
        assert (result["status"], text in shown) == (status, True), result
        if status in ("WARN", "FAIL"):
            assert result["remedy"], result
            cell = findings(CheckResult(**dict(result, status=Status(result["status"]))))
            assert all(line in cell for line in [result["measured"]] + result["details"])  # the table's cell
    assert code == report["exit_code"] == want["exit"]
    assert report["host"] == want.get("host", spec.stem) and report["bundle"] == str(tmp_path / "bundle")
    assert report["summary"] == {s: sum(r["status"] == s for r in report["results"])
                                 for s in ("PASS", "SKIP", "WARN", "FAIL", "ERROR")}


def test_case_04_remedy_is_the_documented_one(tmp_path):
    build(next(p for p in specs() if p.stem.startswith("case04")), tmp_path / "b")
    code = validate(json_path=str(tmp_path / "r.json"), from_bundle=str(tmp_path / "b"), only=["container.shm"])
    [shm] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert code == 1 and "%s; %s" % (shm["measured"], shm["remedy"]) == \
        'shm too small for NCCL (64MiB); start the container with ipc_mode="host" or shm_size>=1g'


def _invoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(REPO / ".venv" / "bin" / "invoke"), "validate", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_collect_on_this_node_then_judge_the_bundle_gives_the_same_report(tmp_path):
    """The README's flow for real: ``--collect`` here, then ``--from`` (as on a laptop): same results, exit code
    and host; the bundle holds the raw outputs with argv, exit status and time."""
    folder = tmp_path / "node01"
    p = _invoke("--collect", str(folder), "--only", "gpu.inventory,mpi.version,container,ib.ports",
                "--json", str(tmp_path / "live.json"))
    assert p.returncode in (0, 1), p.stdout + p.stderr
    live = json.loads((tmp_path / "live.json").read_text())
    assert json.loads((folder / "report.json").read_text())["results"] == live["results"]
    index = json.loads((folder / "bundle.json").read_text())
    tools = [e for e in index["evidence"] if e["kind"] == "tool"]
    mpirun = next(e for e in tools if e["argv"] == ["mpirun", "--version"])
    assert mpirun["rc"] == 0 and "Open MPI" in (folder / mpirun["stdout"]).read_text()
    assert mpirun["started"] and mpirun["seconds"] is not None and index["host"] == live["host"]
    assert index["tools"]["mpirun"]["path"].endswith("mpirun")
    assert any(e["kind"] == "fact" and e["name"] == "RLIMIT_MEMLOCK" for e in index["evidence"])
    assert any(e["kind"] == "glob" and e["pattern"] == "/sys/bus/pci/devices/*" for e in index["evidence"])
    p = _invoke("--from", str(folder), "--only", "gpu.inventory,mpi.version,container,ib.ports",
                "--json", str(tmp_path / "judged.json"))
    judged = json.loads((tmp_path / "judged.json").read_text())
    assert p.returncode == live["exit_code"] == judged["exit_code"], p.stdout + p.stderr
    assert judged["results"] == live["results"] and judged["host"] == live["host"]
    assert "from bundle" in p.stdout


def test_bundle_errors_exit_2_before_any_check(tmp_path):
    p = _invoke("--from", str(tmp_path))
    assert p.returncode == 2 and "no bundle.json there" in p.stderr
    (tmp_path / "bundle.json").write_text('{"schema": "other"}')
    with pytest.raises(ChexstackError, match="field schema: expected 'chexstack.validate.bundle/1'"):
        validate(from_bundle=str(tmp_path))
    with pytest.raises(ChexstackError, match="not empty; give a new or empty folder"):
        validate(collect=str(tmp_path))
    build(specs()[0], tmp_path / "b")
    with pytest.raises(ChexstackError, match="the bundle records its --stack"):
        validate(stack="cpu", from_bundle=str(tmp_path / "b"))
    index = tmp_path / "b" / "bundle.json"
    index.write_text(index.read_text().replace('"tools/001-', '"../../001-'))
    with pytest.raises(ChexstackError, match="field stdout: '../../001-.*' is outside the bundle folder"):
        validate(from_bundle=str(tmp_path / "b"))
