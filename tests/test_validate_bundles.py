"""Issue 12: recorded nodes are judged anywhere. Every bundle of the corpus (``tests/data/bundles/*.yaml``, built at
test time from ../shared/fixtures and ../shared/cases by ``tests.lib.bundle_corpus``) goes through the ``--from`` loader
and gives its verdict table — every check it does not list is a SKIP (missing evidence is never a PASS) — with the
same JSON and exit code as on the node."""
from __future__ import annotations

import functools
import json

import pytest
import yaml

from chexstack.errors import ChexstackError
from tests.lib import cli as cmd
from tests.lib.bundle_corpus import build, specs
from tests.lib.paths import CASES, FIXTURES
from validate import report as report_module
from validate.checks import CHECKS
from validate.report import findings, validate
from validate.result import CheckResult


@pytest.mark.parametrize("spec", specs(), ids=[p.stem for p in specs()])
def test_bundle_gives_its_verdict_table(spec, tmp_path, monkeypatch):
    """The table's cells are checked through ``findings`` (what print_table shows); laying out the rich table is
    nine tenths of the time, and the CLI tests below print it."""
    monkeypatch.setattr(report_module, "print_table", lambda report: None)
    want = build(spec, tmp_path / "bundle")
    out = tmp_path / "report.json"
    code = validate(json_path=str(out), from_bundle=str(tmp_path / "bundle"))
    report = json.loads(out.read_text())
    got = {r["id"]: r for r in report["results"]}
    assert set(got) == set(CHECKS)
    for cid, result in got.items():
        status, text = want["expect"].get(cid, ["SKIP", ""])
        shown = " | ".join([result["measured"], result["expected"]] + result["details"])
        assert (result["status"], text in shown) == (status, True), result
        if status in ("WARN", "FAIL"):
            assert result["remedy"], result
            cell = findings(CheckResult.from_json(result))
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


def test_collect_on_this_node_then_judge_the_bundle_gives_the_same_report(tmp_path):
    """docs/validate.md's flow for real: ``--collect`` here, then ``--from`` (as on a laptop): same results, exit code
    and host; the bundle holds the raw outputs with argv, exit status and time."""
    folder = tmp_path / "node01"
    p = cmd.run("validate", "--collect", str(folder), "--only", "gpu.inventory,mpi.version,container,ib.ports",
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
    p = cmd.run("validate", "--from", str(folder), "--only", "gpu.inventory,mpi.version,container,ib.ports",
                "--json", str(tmp_path / "judged.json"))
    judged = json.loads((tmp_path / "judged.json").read_text())
    assert p.returncode == live["exit_code"] == judged["exit_code"], p.stdout + p.stderr
    assert judged["results"] == live["results"] and judged["host"] == live["host"]
    assert "from bundle" in p.stdout


def test_bundle_errors_exit_2_before_any_check(tmp_path):
    p = cmd.run("validate", "--from", str(tmp_path))
    assert p.returncode == 2 and "no bundle.json there" in p.stderr
    p = cmd.run("validate", "--from", str(tmp_path / "nonexist"), expect=2)
    assert p.stderr.startswith("error: --from %s: no such folder (expected a bundle folder" % (tmp_path / "nonexist"))
    (tmp_path / "file").write_text("x")
    p = cmd.run("validate", "--from", str(tmp_path / "file"), expect=2)
    assert p.stderr.startswith("error: --from %s: not a folder" % (tmp_path / "file")), p.stderr
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


# Issue 12, done when: every shared fixture gives its documented verdict through --from. A fixture is either in a
# bundle of the corpus or in NOT_VALIDATE_INPUT with the reason no check reads it — a new fixture cannot be skipped
# silently. DOCUMENTED holds the verdict ../shared/fixtures/SOURCES.md writes for it (row number), per check; a
# fixture whose row names no verdict (a parser/layout note) has none. Where the bundle judges otherwise because the
# documented verdict rests on something the fixture does not record, JUDGED_BY_WHAT_IT_PROVES says what and why.

NOT_VALIDATE_INPUT = {
    "docker-compose-gpu-could-not-select-device-driver-nvidia.txt":
        "docker compose's error for a service's GPU request (#60): no check runs docker compose; the same daemon "
        "error from `docker run --gpus` (#59) is judged by container.gpus",
    "nvidia-smi-version-590.txt":
        "`nvidia-smi --version` (#9): the bundle's tools table records it (validate.evidence.VERSION_ARGV); no check "
        "judges it, and no GPU of that node is recorded (its values: test_validate_fixtures VALUES)",
    "nvcc-version-10.1-no-build-line.txt":
        "nvcc output alone (#48, k2-fsa/k2#584): a toolkit version without the driver of its node to judge it "
        "against (parsed in test_validate_fixtures VALUES; nvcc 10.0 of #47 is judged in its node's bundle)",
    "nvcc-version-11.1-with-build-line.txt":
        "nvcc output alone (#49, pytorch/builder#580): as #48",
    "cudnn-h-grep-major-7.5.txt":
        "cuDNN header grep (#51): no validate check reads cuDNN (the image verifier does, facts.versions)",
    "cudnn_version-h-defines-8.0.4.txt": "cuDNN ≥ 8 header defines (#52): as #51",
    "nvidia-container-runtime-version-1.13.5.txt":
        "the toolkit's version line (#63, docker/for-linux#1531): container.gpus only shows it beside its verdict; "
        "no docker run of that node is recorded",
}

DOCUMENTED = {
    "nvidia-smi-h100x8-550.txt": {"gpu.inventory": "PASS"},  # 1
    "nvidia-smi-h200x8-550-persistence-off.txt": {"gpu.inventory": "PASS", "gpu.persistence": "WARN"},  # 2
    "nvidia-smi-dgx1-v100x8-384.txt": {"gpu.driver_cuda": "FAIL", "gpu.inventory": "PASS"},  # 3 (with #47)
    "nvidia-smi-query-gpu-csv-h200x8-units.txt": {"gpu.inventory": "PASS"},  # 8
    "dcgmi-diag-r1-dcgm3.1.8-h200x8-persistence-fail.txt": {"gpu.dcgm": "FAIL"},  # 10
    "nvidia-smi-nvlink-status-a100x8.txt": {"gpu.nvlink_links": "PASS"},  # 11
    "nvidia-smi-topo-dgx1-like-v100-sxm2-8gpu.txt": {"topo.nvlink": "PASS"},  # 12
    "nvidia-smi-topo-4x-v100-sxm2-nv2-dell-c4140-tabs.txt": {"topo.nvlink": "PASS"},  # 13
    "nvidia-smi-topo-h200x8-nv18-8nic-legend-tabs.txt": {"topo.nvlink": "PASS", "topo.gpu_nic": "PASS"},  # 14
    "nvidia-smi-topo-h200-vm-1gpu-ansi-header.txt": {"topo.nvlink": "SKIP"},  # 15: N/A
    "nvidia-smi-topo-3gpu-partial-nv4-2nic-legend.txt": {"topo.nvlink": "WARN"},  # 16
    "nvidia-smi-topo-pcie-5gpu-2numa-sys-phb-node.txt": {"topo.nvlink": "WARN"},  # 17
    "ibstat-h100-ndr400-all-active.txt": {"ib.ports": "PASS"},  # 19
    "ibstat-a100-hdr200-all-active.txt": {"ib.ports": "PASS"},  # 21
    "ibstat-a100-ibpanic-exit255.txt": {"ib.ports": "FAIL"},  # 22
    "ibstat-edr100-connectx4-active.txt": {"ib.ports": "PASS"},  # 23
    "ibstat-hdr200-state-down-linkup-no-sm-lid65535.txt": {"ib.ports": "FAIL"},  # 24
    "ibstat-mlx5-port-down-polling-redacted-guids.txt": {"ib.ports": "FAIL"},  # 25
    "ibstat-mlx5-port-down-disabled-truncated.txt": {"ib.ports": "FAIL"},  # 26: "FAIL/ignore"
    "ibstatus-a100-hdr200-all-active.txt": {"ib.ports": "PASS"},  # 27
    "ibv_devinfo-azure-ndv5-mlx5_ib-8x-ndr-plus-an0-eth.txt": {"ib.ports": "PASS"},  # 29
    "sysfs-infiniband-ports-grep-edr-active.txt": {"ib.ports": "PASS"},  # 30
    "nccl-tests-all_reduce_perf-2node-16x-a100-roce-healthy.txt": {"nccl.busbw": "PASS"},  # 31
    "nccl-tests-all_reduce_perf-8x-h200-8G-nvls.txt": {"nccl.busbw": "PASS"},  # 32
    "nccl-tests-all_reduce_perf-2node-independent-runs-interleaved-excerpt.txt": {"nccl.busbw": "FAIL"},  # 33
    "nccl-debug-info-socket-no-ib-horovodrun.txt": {"nccl.transport": "FAIL"},  # 35: "for an IB cluster"
    "nccl-debug-info-socket-libibverbs-missing-t4-2.8.3.txt": {"nccl.transport": "FAIL"},  # 36: "on IB nodes"
    "nccl-debug-info-net-ib-mlx5-ib-2.4.7.txt": {"nccl.transport": "PASS"},  # 37
    "nccl-debug-info-net-ib-roce-h100-2.19.3.txt": {"nccl.transport": "PASS"},  # 38
    "nccl-debug-info-ibext-sharp-plugin-h100.txt": {"nccl.transport": "PASS"},  # 39
    "nccl-debug-info-mixed-ib-roce-rank-prefix-2.5.6.txt": {"nccl.transport": "WARN"},  # 40
    "horovodrun-check-build-0.22.1-tf-torch-mpi-gloo-nccl.txt": {"horovod.env": "PASS"},  # 41
    "horovodrun-check-build-0.18.1-nothing-built-mlsl.txt": {"horovod.env": "FAIL"},  # 42
    "ompi_info-parsable-cuda-support-false.txt": {"mpi.version": "WARN"},  # 44
    "dmesg-nvrm-gpu-fallen-off-bus-no-xid.txt": {"gpu.xid": "FAIL"},  # 53
    "dmesg-nvrm-xid79-sxid20034-hgx.txt": {"gpu.xid": "FAIL"},  # 54
    "nvidia-smi-gpu-lost-device-handle.txt": {"gpu.inventory": "FAIL"},  # 55
    "nvidia-smi-gpu-lost-device-handle-legacy-space.txt": {"gpu.inventory": "FAIL"},  # 56: as 55
    "nvidia-smi-nvml-driver-library-mismatch-570-with-libversion.txt": {"gpu.inventory": "FAIL"},  # 57
    "nvidia-smi-nvml-driver-library-mismatch-legacy.txt": {"gpu.inventory": "FAIL"},  # 58: as 57
    "docker-run-gpus-could-not-select-device-driver.txt": {"container.gpus": "FAIL"},  # 59
    "docker-run-unknown-runtime-nvidia.txt": {"container.gpus": "FAIL"},  # 62
    "ib_write_bw-roce100g-oci-98gbps.txt": {"ib.write_bw": "PASS"},  # 64
}

#: (fixture, check) -> (the bundle's status, why it is not SOURCES.md's): the documented verdict assumes what the
#: fixture does not record, and a check never judges on evidence it did not observe.
JUDGED_BY_WHAT_IT_PROVES = {
    ("nccl-tests-all_reduce_perf-2node-16x-a100-roce-healthy.txt", "nccl.busbw"):
        ("WARN", "PASS is against the source's own ~180 GB/s; the nodes' GPUs and RoCE ports are not recorded, so "
                 "no sourced floor applies and the number is shown as a WARN"),
    ("nccl-debug-info-socket-no-ib-horovodrun.txt", "nccl.transport"):
        ("PASS", "FAIL holds \"for an IB cluster\" between nodes; the log is a one-node horovodrun (-H localhost:4, "
                 "every rank on node01) whose channels are all shared memory: its Socket selection carried nothing, "
                 "and no HCA of the node is recorded (../shared/cases/35: not a Socket fallback)"),
    ("nccl-debug-info-socket-libibverbs-missing-t4-2.8.3.txt", "nccl.transport"):
        ("WARN", "FAIL holds \"on IB nodes\"; the log records no HCA of the node"),
    ("ib_write_bw-roce100g-oci-98gbps.txt", "ib.write_bw"):
        ("WARN", "PASS is >= 90 % of a 100G port's line rate; the port's rate is not in the fixture"),
}


def _fixtures_of(source) -> set[str]:
    if isinstance(source, dict):
        return {source["fixture"]} if "fixture" in source else set().union(*map(_fixtures_of, source.values()))
    if isinstance(source, list):
        return set().union(*map(_fixtures_of, source)) if source else set()
    return set()


@functools.lru_cache(maxsize=1)
def _corpus() -> dict[str, list[dict]]:
    """fixture name -> the specs of the bundles that hold it."""
    out: dict[str, list[dict]] = {}
    for path in specs():
        spec = yaml.safe_load(path.read_text())
        for name in _fixtures_of(spec["evidence"]):
            out.setdefault(name, []).append(spec)
    return out


def test_every_shared_fixture_is_judged_through_a_bundle_or_says_why_not():
    on_disk = {p.name for p in FIXTURES.iterdir() if p.suffix in (".txt", ".xml")}
    bundled = set(_corpus())
    assert bundled <= on_disk, "a bundle names a fixture that does not exist"
    assert set(NOT_VALIDATE_INPUT) <= on_disk and set(DOCUMENTED) <= on_disk
    neither = sorted(on_disk - bundled - set(NOT_VALIDATE_INPUT))
    assert not neither, "fixtures with no bundle and no NOT_VALIDATE_INPUT entry: %s" % neither
    both = sorted(bundled & set(NOT_VALIDATE_INPUT))
    assert not both, "in a bundle and said not to be a validate input: %s" % both
    assert set(DOCUMENTED) <= bundled


@pytest.mark.parametrize("fixture", sorted(DOCUMENTED))
def test_bundle_verdicts_are_the_documented_ones(fixture):
    """Some bundle holding the fixture gives, for each check SOURCES.md names, the documented status (or the one
    JUDGED_BY_WHAT_IT_PROVES explains); each bundle's table itself is checked by test_bundle_gives_its_verdict_table."""
    holders = _corpus()[fixture]
    for cid, status in DOCUMENTED[fixture].items():
        want = JUDGED_BY_WHAT_IT_PROVES.get((fixture, cid), (status,))[0]
        got = [spec["expect"].get(cid, ["SKIP"])[0] for spec in holders]
        assert want in got, "%s %s: documented %s, bundles give %s" % (fixture, cid, status, got)


#: ../shared/cases/NN -> the bundle judging it through --from, or why invoke validate does not judge it.
CASES_JUDGED = {
    "01": "case01-horovod-check-build-partial", "04": "case04-shm-64mib-in-container",
    "05": "case05-nccl-socket-fallback-hca-active", "06": "case06-cuda-driver-too-old",
    "08": "case08-cuda-version-field", "21": "case21-singularity-nv-missing-libcuda",
    "23": "case23-gloo-loopback-only", "31": "case31-acs-redirect-p2p-hang",
    "35": "case35-nccl-duplicate-gpu-local-rank-zero", "36": "case36-docker-gpus-libnvidia-ml-load-failed",
    "39": "case39-open-kernel-module-pre-turing-gpu", "47": "case47-fabric-manager-not-running-cuda-802",
}
CASES_NOT_VALIDATE = {
    "02": "an image build that must fail at its Horovod/TF check (images/); its runtime import error, quoted only in "
          "its expected.md, is judged as the import probe's fact by test_validate_case_kinds",
    "09": "Singularity recipe conversion (images/)", "10": "Singularity recipe conversion (images/)",
    "11": "Singularity recipe conversion (images/)", "12": "Singularity recipe conversion (images/)",
    "14": "conda lock content (envs/)", "15": "conda lock content (envs/)",
    "16": "training metric across ranks (trainer/)", "17": "learning-rate scaling and broadcast (trainer/)",
    "18": "label parsing (trainer/)", "27": "Singularity recipe conversion (images/)",
    "28": "Dockerfile syntax (images/)", "29": "the Slurm launcher's image argument (launch/)",
    "32": "the launcher/trainer stopping a GPU run that sees no GPU (launch/, trainer/)",
    "41": "conda installed-environment check (envs/)", "42": "Dockerfile conversion (images/)",
    "45": "a hybrid job's log through invoke train --explain (launch/: tests/test_launch_first_fault.py)",
    "50": "a hung run's log through invoke train --explain (launch/: tests/test_launch_first_fault.py)",
    "52": "Dockerfile conversion reading the base image (convert/)",
    "54": "conda installed-environment check (envs/, lock --installed)",
}


def test_every_validate_case_is_judged_through_a_bundle_or_says_why_not():
    cases = {p.name[:2] for p in CASES.glob("*.expected.md")}
    assert set(CASES_JUDGED) | set(CASES_NOT_VALIDATE) == cases and not set(CASES_JUDGED) & set(CASES_NOT_VALIDATE)
    stems = {p.stem for p in specs()}
    assert set(CASES_JUDGED.values()) <= stems
