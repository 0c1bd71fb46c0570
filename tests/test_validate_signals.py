"""Issue 40: no PASS over a fault signal nobody explained. Every piece of evidence a check reads is scanned with the
lexicon of ``facts/signals.yaml``; a signal no finding explains makes the check a WARN ``UNEXPLAINED_FAULT_SIGNAL``
naming the line. Planted in the evidence of every check that PASSes on a recorded healthy node, an unknown fault line
turns it from PASS to WARN; the lexicon's own rules are checked on the real outputs of ../shared."""
from __future__ import annotations

import json

import pytest
import yaml

from facts import signals
from tests.lib.bundle_corpus import CORPUS, build, judged, specs
from tests.lib.paths import FIXTURES
from validate import report as report_module
from validate.checks import CHECKS, Context
from validate.evidence import Bundle, Replay
from validate.report import account_signals, findings, run_checks
from validate.result import CheckResult, Status

PLANTED = "ERROR: something nobody has seen before (planted)"


def _passing() -> dict[str, list[str]]:
    """Check id -> the corpus bundles whose verdict table has it PASS."""
    out: dict[str, list[str]] = {}
    for spec in specs():
        for cid, (status, _) in yaml.safe_load(spec.read_text())["expect"].items():
            if status == "PASS":
                out.setdefault(cid, []).append(spec.stem)
    return out


PASSING = _passing()


def test_every_check_that_can_pass_is_planted_into():
    """The parametrised test below covers each check some recorded node PASSes; the others are named here, each
    with what keeps it from a PASS on recorded evidence (it runs something live, or no bundle records its evidence)."""
    never = set(CHECKS) - set(PASSING)
    assert never == set(NEVER_PASS_RECORDED), sorted(never)


#: checks no corpus bundle PASSes (their healthy evidence is a live run: a launch, an image, a measurement, or no
#: healthy fixture records it: gpu.cuda's probe output exists only from a GPU node's live run, tested against a
#: stand-in libcuda in tests/test_validate_cuda.py); the report-level rule is the same for them
#: (test_the_rule_holds_for_every_check)
NEVER_PASS_RECORDED = {"container.apptainer", "container.docker", "container.gpus", "container.memlock",
                       "container.rank_limits", "container.shm", "container.singularity_nv", "gpu.dcgm",
                       "gpu.cuda", "gpu.driver_module", "gpu.peers", "gpu.xid", "horovod.controller", "horovod.image",
                       "ib.ipoib", "ib.write_bw", "input.capacity", "mpi.bandwidth", "mpi.launch", "nccl.version",
                       "topo.pcie_acs"}
#: checks whose PASS rests on directory listings only (the names of /sys entries, no text a fault line could be in)
LISTINGS_ONLY = {"ib.devices"}


def _read_by(spec: str, cid: str, folder) -> dict:
    build(CORPUS / ("%s.yaml" % spec), folder)
    ctx = Context(evidence=Replay(Bundle.load(folder)))
    run_checks(ctx, [cid])
    return ctx.read_by(cid)


@pytest.mark.parametrize("cid", sorted(PASSING), ids=sorted(PASSING))
def test_an_unknown_fault_line_in_a_checks_evidence_turns_its_pass_into_unexplained(cid, tmp_path, monkeypatch):
    monkeypatch.setattr(report_module, "print_table", lambda report: None)
    if cid in LISTINGS_ONLY:
        pytest.skip("%s reads directory listings only" % cid)
    for spec in PASSING[cid]:  # a bundle where the check PASSes on its own (--only): no other check's finding
        before = judged(spec, tmp_path / spec, only=[cid])[cid]
        if before["status"] == "PASS":
            break
    assert before["status"] == "PASS" and before["signals"]["unexplained"] == [], before
    read = _read_by(spec, cid, tmp_path / "probe")
    tools = [key for key in read if key[0] == "tool"]
    files = [key for key in read if key[0] == "read"]
    facts = [key for key in read if key[0] == "fact"]
    assert tools or files or facts, "%s read no tool output, file or fact in %s" % (cid, spec)

    def planted(value):
        """``value`` (a fact) with the line added to its first string."""
        if isinstance(value, str):
            return value + "\n" + PLANTED, True
        if isinstance(value, (list, dict)):
            items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
            for k, v in items:
                new, done = planted(v)
                if done:
                    value[k] = new
                    return value, True
        return value, False

    def plant(entry):
        if tools and entry["kind"] == "tool" and tuple(entry["argv"]) == tools[0][1]:
            entry["stderr"] = (entry.get("stderr") or "") + PLANTED + "\n"
        elif not tools and files and entry["kind"] == "read" and entry["path"] == files[0][1]:
            entry["text"] = (entry.get("text") or "") + PLANTED + "\n"
        elif not tools and not files and entry["kind"] == "fact" and entry["name"] == facts[0][1]:
            entry["value"], done = planted(entry["value"])
            assert done, "fact %s holds no text" % entry["name"]

    def rewrite(entry):
        if entry["kind"] == "tool":  # judged() rewrites bundle.json, where outputs are file names: inline them
            for stream in ("stdout", "stderr"):
                entry[stream] = (tmp_path / "after" / "bundle" / entry[stream]).read_text() if entry[stream] else ""
        plant(entry)
        if entry["kind"] == "tool":
            for n, stream in enumerate(("stdout", "stderr")):
                name = "planted-%d-%s" % (id(entry), stream)
                (tmp_path / "after" / "bundle" / name).write_text(entry[stream])
                entry[stream] = name

    after = judged(spec, tmp_path / "after", rewrite=rewrite, only=[cid])[cid]
    assert after["status"] == "WARN" and after["diagnosis"] == "UNEXPLAINED_FAULT_SIGNAL", after
    assert PLANTED in after["measured"] and after["action"] == "retry"
    assert any(PLANTED in u for u in after["signals"]["unexplained"])
    assert after["signals"]["read"] == after["signals"]["explained"] + len(after["signals"]["unexplained"])


@pytest.mark.parametrize("cid", sorted(CHECKS))
@pytest.mark.parametrize("line", [PLANTED, "Segmentation fault (core dumped)", "FATAL: kernel too old",
                                  "Fatal Python error: Aborted"])
def test_the_rule_holds_for_every_check(cid, line):
    """Whatever the check, a PASS whose evidence (a tool's stderr, here) holds an unknown fault line is a WARN
    UNEXPLAINED_FAULT_SIGNAL naming it; the same line quoted by a FAIL of that check is explained."""
    key = ("tool", ("some-tool",), "stderr", line + "\n")
    evidence = {key: ("tool", "stderr of `some-tool`", line + "\n")}
    [got] = account_signals([CheckResult(cid, Status.PASS, "all well")], {cid: evidence})
    assert (got.status, got.diagnosis) == (Status.WARN, "UNEXPLAINED_FAULT_SIGNAL"), got
    assert line in got.measured and got.signals["unexplained"] and got.signals["read"] == 1
    [fail] = account_signals([CheckResult(cid, Status.FAIL, "broke: %s" % line, diagnosis="TOOL_FAILED")],
                             {cid: evidence})
    assert fail.status == Status.FAIL and fail.signals == {"read": 1, "explained": 1, "unexplained": []}


def test_another_reader_of_the_same_evidence_explains_it():
    """gpu.ecc reads the nvidia-smi output whose MIG line gpu.inventory's FAIL claims: explained for both."""
    line = "<current_mig>Enabled</current_mig>"
    key = ("tool", ("nvidia-smi", "-q", "-x"), "stdout", line)
    evidence = {key: ("nvidia-smi-q", "stdout of `nvidia-smi -q -x`", line)}
    got = account_signals([CheckResult("gpu.inventory", Status.FAIL, "MIG", diagnosis="GPU_MIG_ENABLED"),
                           CheckResult("gpu.ecc", Status.PASS, "ECC on")],
                          {"gpu.inventory": evidence, "gpu.ecc": evidence})
    assert [(r.status, r.signals["explained"]) for r in got] == [(Status.FAIL, 1), (Status.PASS, 1)]


#: the fixtures of ../shared whose output shows a fault (SOURCES.md), with the first signal the lexicon names in it;
#: every other fixture is a healthy node's or a benign tool's output and must give none
FAULTY_FIXTURES = {
    "dcgmi-diag-r1-dcgm3.1.8-h200x8-persistence-fail.txt": "failed-line",
    "dmesg-nvrm-gpu-fallen-off-bus-no-xid.txt": "gpu-fallen-off-bus",
    "dmesg-nvrm-xid79-sxid20034-hgx.txt": "nvrm-xid",
    "docker-compose-gpu-could-not-select-device-driver-nvidia.txt": "error-line",
    "docker-run-gpus-could-not-select-device-driver.txt": "error-line",
    "docker-run-unknown-runtime-nvidia.txt": "error-line",
    "ibstat-a100-ibpanic-exit255.txt": "failed-line",
    "nccl-debug-info-socket-libibverbs-missing-t4-2.8.3.txt": "failed-line",
    "nvidia-smi-gpu-lost-device-handle-legacy-space.txt": "gpu-fallen-off-bus",
    "nvidia-smi-gpu-lost-device-handle.txt": "gpu-fallen-off-bus",
    "nvidia-smi-nvml-driver-library-mismatch-570-with-libversion.txt": "mismatch-line",
    "nvidia-smi-nvml-driver-library-mismatch-legacy.txt": "mismatch-line",
    "nvidia-smi-q-h100x8-535.txt": "clocks-hw-slowdown",  # one GPU's HW Power Brake Slowdown: Active
    "nvidia-smi-q-x-a100-sxm4-mig-v12.xml": "mig-enabled",
}


def _fixture_argv(name: str) -> tuple[str, ...]:
    """The command that printed a fixture, from its name (``nvidia-smi-q-…`` -> ``nvidia-smi -q``)."""
    forms = (("nvidia-smi-q", ("nvidia-smi", "-q")), ("nccl-tests", ("all_reduce_perf",)),
             ("nccl-debug", ("python", "train.py")), ("nvidia-container", ("nvidia-container-runtime", "--version")),
             ("sysfs", ("grep", "-r", "", "/sys/class/infiniband")), ("cuda-version", ("cat", "version.txt")),
             ("cudnn", ("grep", "CUDNN_MAJOR", "cudnn.h")), ("nvidia-smi", ("nvidia-smi",)))
    for prefix, argv in forms:
        if name.startswith(prefix):
            return argv
    return (name.split("-")[0],)


def test_every_fixture_gives_signals_only_where_it_shows_a_fault():
    """The lexicon on every output of ../shared/fixtures, read as the kind of evidence its tool gives: the healthy
    ones give no signal (a benign line taken for a fault gets an exclusion in facts/signals.yaml, with its
    source), the faulty ones the signal of their fault."""
    got = {}
    for path in sorted(FIXTURES.glob("*.*")):
        if path.name == "SOURCES.md":
            continue
        hits = signals.scan(path.read_text(errors="replace"), signals.evidence_kind(_fixture_argv(path.name)))
        if hits:
            got[path.name] = hits[0].signal.id
    assert got == FAULTY_FIXTURES


@pytest.mark.parametrize("line, kind, signal", [
    ("    Fabric\n        State : In Progress\n        Status : N/A", "nvidia-smi-q", "fabric-not-completed"),
    ("<current_mig>Enabled</current_mig>", "nvidia-smi-q", "mig-enabled"),
    ("|                                         |                      |              Enabled |", "nvidia-smi",
     "mig-enabled"),
    ("[ 12.3] NVRM: Xid (PCI:0000:18:00): 79, pid=0, GPU has fallen off the bus.", "kernel-log", "nvrm-xid"),
    ("        HW Slowdown                       : Active", "nvidia-smi-q", "clocks-hw-slowdown"),
    ("            DRAM Uncorrectable            : 3", "nvidia-smi-q", "ecc-uncorrectable-q"),
    ("SymbolErrorCounter:..............12", "ib-counters", "ib-error-counter"),
    ("7", "ib-counters-sysfs", "ib-error-counter-sysfs"),
    ("mlx5_0: async event: IBV_EVENT_PORT_ERR; port 1", "ib-events", "ib-async-event"),
    ("[ 99.1] mlx5_core 0000:3b:00.0: Port module event[error]: module 0, Cable error, Power budget exceeded",
     "kernel-log", "mlx5-health"),
    ("[ 99.2] mlx5_core 0000:3b:00.0 ib0: Link down", "kernel-log", "link-down"),
    ("Error (gpu_burn-drv.cpp:298): system not yet initialized", "tool", "cuda-system-not-ready"),
    ("Segmentation fault (core dumped)", "tool", "segfault"),
    ("FATAL:   container creation failed: mount /proc/self/fd/3->/var/lib/apptainer: no loop devices available",
     "tool", "fatal"),
    ("ERROR: something new", "tool", "error-line"),
    ("the widget failed to frobnicate", "tool", "failed-line"),
])
def test_the_lexicon_names_each_kind_of_fault(line, kind, signal):
    hits = signals.scan(line, kind)
    assert [h.signal.id for h in hits] == [signal], [str(h) for h in hits]


@pytest.mark.parametrize("line, kind", [
    ("        Remapping Failure Occurred        : No", "nvidia-smi-q"),
    ("            SRAM Uncorrectable            : 0", "nvidia-smi-q"),
    ("        State                             : Completed", "nvidia-smi-q"),
    ("        HW Power Brake Slowdown       : Not Active", "nvidia-smi-q"),
    ("SymbolErrorCounter:..............0", "ib-counters"),
    ("gpu-node20:39629:39686 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.", "tool"),
    ("                 MCA btl: parameter \"btl_openib_warn_no_device_params_found\" error", "listing"),
    # TensorFlow's INFO line at import, as the decode program prints it on a healthy node (input.capacity)
    ("2026-12-06 16:30:38.595673: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on. You may see "
     "slightly different numerical results due to floating-point round-off errors from different computation "
     "orders.", "tool"),
])
def test_benign_lines_are_not_signals(line, kind):
    assert signals.scan(line, kind) == []


def test_every_lexicon_entry_is_sourced_and_claimed_by_catalogued_codes():
    from validate.catalogue import CODES

    for s in signals.lexicon():
        assert s.source.startswith("https://"), s.id
        assert set(s.claimed_by) - {"*"} <= set(CODES), s.id
    assert len({s.id for s in signals.lexicon()}) == len(signals.lexicon())


def test_case_47_fabric_manager_down_is_a_fail_with_its_remedy_through_invoke_validate(tmp_path):
    """../shared/cases/47 through ``invoke validate --from BUNDLE`` (the bundle laid out from the transcript:
    tests/data/bundles/case47-…, stack hopper): FAIL, the GPUs not registered with the NVLink fabric because
    nvidia-fabricmanager is not running, CUDA's 802 as its consequence and the other GPUs' "OS call failed" lines as
    following from it; the remedy and next action of its expected.md; never ``gpu.inventory PASS``."""
    from tests.lib import cli as cmd

    build(CORPUS / "case47-fabric-manager-not-running-cuda-802.yaml", tmp_path / "b")
    p = cmd.run("validate", "--from", str(tmp_path / "b"), "--json", str(tmp_path / "r.json"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert p.returncode == report["exit_code"] == 1, p.stdout + p.stderr
    assert report["stack"] == "hopper" and report["action"] == "reconfigure"
    got = {r["id"]: r for r in report["results"]}
    inventory = got["gpu.inventory"]
    assert (inventory["status"], inventory["diagnosis"], inventory["action"]) == ("FAIL", "GPU_FABRIC_NOT_READY",
                                                                                  "reconfigure")
    for said in ("8× NVIDIA H100 80GB HBM3", "not registered with the NVLink fabric", "Fabric State: In Progress",
                 "Status: N/A", "nvidia-fabricmanager: failed", "802 cudaErrorSystemNotReady",
                 "system not yet initialized"):
        assert said in inventory["measured"], said
    for said in ("Fabric Manager package of exactly the driver's version (nvidia-fabricmanager-545.23.08)",
                 "systemctl enable --now nvidia-fabricmanager", "journalctl -u nvidia-fabricmanager",
                 "`State: Completed` / `Status: Success` on every GPU", "keep the node drained"):
        assert said in inventory["remedy"], said
    assert sum("OS call failed" in d and "not a separate fault" in d for d in inventory["details"]) == 3
    assert inventory["signals"]["unexplained"] == [] and inventory["signals"]["read"] >= 5
    wrong = {"GPU_XID", "GPU_MEMORY_ERRORS", "NVML_DRIVER_LIBRARY_MISMATCH", "GPU_LOST", "UNEXPLAINED_FAULT_SIGNAL"}
    assert not wrong & {r["diagnosis"] for r in report["results"]}
    assert "GPU_FABRIC_NOT_READY" in p.stdout and "next action: reconfigure" in p.stdout
    assert "fault signals: " in p.stdout


def test_fabric_states_and_mig_are_read_from_every_form():
    from facts.parsers import nvidia_smi

    text = (FIXTURES / "nvidia-smi-q-h100x8-535.txt").read_text()
    fabric = nvidia_smi.parse_fabric(text)
    assert len(fabric) == 8 and {(f.state, f.status) for f in fabric} == {("Completed", "Success")}
    assert not any(f.registering for f in fabric)
    xml = nvidia_smi.parse_fabric((FIXTURES / "nvidia-smi-q-x-a100-sxm4-mig-v12.xml").read_text())
    assert [(f.state, f.registering) for f in xml] == [("N/A", False)]
    rows, _ = nvidia_smi.parse_query_csv("pci.bus_id, fabric.state, fabric.status\n"
                                         "00000000:18:00.0, In Progress, N/A\n00000000:2A:00.0, Completed, Success\n")
    assert [f.registering for f in nvidia_smi.fabric_from_query(rows)] == [True, False]
    assert nvidia_smi.Fabric("GPU", "Completed", "Failure").registering
    assert [g.mig_enabled for g in nvidia_smi.parse_q_xml(
        (FIXTURES / "nvidia-smi-q-x-a100-sxm4-mig-v12.xml").read_text()).gpus] == [True]
    assert {g.mig_enabled for g in nvidia_smi.parse_q_text(text).gpus} == {False}


def test_a_cuda_802_alone_is_the_fabric_finding_too(tmp_path, monkeypatch):
    """The same kind of node recorded another way: no fabric query, no systemctl, and a PyTorch one-liner instead of
    gpu_burn, failing as pytorch/pytorch#35710 posted it (the text its expected.md quotes): still
    GPU_FABRIC_NOT_READY, saying the fabric state was not recorded; the 802 line is claimed, not unexplained."""
    monkeypatch.setattr(report_module, "print_table", lambda report: None)
    folder = tmp_path / "b" / "bundle"
    error = ("RuntimeError: cudaGetDeviceProperties returned 802 -> system not yet initialized\n"
             "CUDA error at cudaGetDeviceCount: code=802(cudaErrorSystemNotReady)\n")

    def rewrite(entry):
        argv = entry.get("argv") or []
        if argv[:1] == ["gpu_burn"]:
            entry["argv"] = ["python", "-c", "import torch; print(torch.cuda.get_device_properties(0))"]
            (folder / entry["stdout"]).write_text("")
            (folder / entry["stderr"]).write_text(error)
            entry["rc"] = 1
        return not (argv[:1] == ["systemctl"] or argv[:2] == ["sh", "-c"])

    got = judged("case47-fabric-manager-not-running-cuda-802", tmp_path / "b", rewrite=rewrite)
    inventory = got["gpu.inventory"]
    assert (inventory["status"], inventory["diagnosis"]) == ("FAIL", "GPU_FABRIC_NOT_READY"), inventory
    assert "the fabric state is not recorded" in inventory["measured"] and "802" in inventory["measured"]
    assert inventory["signals"]["unexplained"] == [] and inventory["signals"]["read"] == 2


def test_mig_enabled_in_the_table_is_a_fail():
    from facts.parsers import nvidia_smi
    from validate.checks.gpu import judge_usable

    table = (FIXTURES / "nvidia-smi-h100x8-550.txt").read_text()
    assert judge_usable(nvidia_smi.parse_table(table), None) is None
    mig = table.replace("Disabled |", "Enabled |", 1)
    verdict = judge_usable(nvidia_smi.parse_table(mig), None)
    assert (verdict.status, verdict.diagnosis) == (Status.FAIL, "GPU_MIG_ENABLED")
    assert "nvidia-smi -i N -mig 0" in verdict.remedy and "GPU 0" in verdict.measured


def _judge(tools: list[tuple[tuple, str]], only: list[str]) -> dict:
    """``{check id: CheckResult}`` of ``only`` on a bundle of ``tools`` (argv, stdout), as ``--from`` judges it."""
    from chexstack.tools import ToolRun

    bundle = Bundle({"host": "node"})
    for argv, stdout in tools:
        bundle.add_tool(ToolRun(argv, 0, stdout, ""))
    report = run_checks(Context(evidence=Replay(bundle)), only)
    return {r.id: r for r in report.results}


def test_a_whole_q_output_stuck_in_progress_with_the_fabric_managers_log():
    """The fabric state read from a whole ``nvidia-smi -q`` (every GPU In Progress) and the service's journal naming
    why it did not start (its version differs from the driver's, nanoporetech/dorado#1214): the journal's lines are
    quoted in the finding, so no signal is left unexplained on gpu.inventory."""
    q = (FIXTURES / "nvidia-smi-q-h100x8-535.txt").read_text()
    state, status = "State                             : ", "Status                            : "
    stuck = q.replace(state + "Completed", state + "In Progress").replace(status + "Success", status + "N/A")
    assert stuck.count("In Progress") == 8
    journal = ("nv-fabricmanager[2817]: fabric manager NVIDIA GPU driver interface version 535.183.01 don't match "
               "with driver version 535.154.05. Please update with matching NVIDIA driver package.\n"
               "systemd[1]: nvidia-fabricmanager.service: Failed with result 'exit-code'.\n")
    got = _judge([(("nvidia-smi", "-q"), stuck), (("journalctl", "-u", "nvidia-fabricmanager"), journal)],
                 ["gpu.inventory"])["gpu.inventory"]
    assert (got.status, got.diagnosis) == (Status.FAIL, "GPU_FABRIC_NOT_READY"), got
    assert "GPUs not registered with the NVLink fabric (Fabric State: In Progress, Status: N/A)" in got.measured
    assert sum("Fabric State In Progress" in d for d in got.details) == 8
    assert any("don't match with driver version" in d for d in got.details)
    assert "nvidia-fabricmanager-535.183.01" in got.remedy
    assert all("clocks-hw-slowdown" in u for u in got.signals["unexplained"]), got.signals  # the throttle stays


def test_mig_from_a_filtered_q_output():
    table = (FIXTURES / "nvidia-smi-h100x8-550.txt").read_text()
    mig = "    MIG Mode\n        Current                           : Enabled\n        Pending : Enabled\n"
    got = _judge([(("nvidia-smi",), table), (("sh", "-c", "nvidia-smi -q | grep -A 2 'MIG Mode'"), mig)],
                 ["gpu.inventory"])["gpu.inventory"]
    assert (got.status, got.diagnosis) == (Status.FAIL, "GPU_MIG_ENABLED"), got


def test_live_collected_and_recorded_evidence_is_scanned_alike(tmp_path):
    """Live: an mpirun on PATH that prints its version and an unknown error line on stderr makes mpi.version a WARN
    UNEXPLAINED naming it; --collect records the run and --from judges the bundle the same (the rule is the
    report's, whatever the evidence source). The mpirun is a stand-in script made here (a real one that printed
    this line would be judged the same)."""
    from tests.lib import cli as cmd

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "mpirun"
    fake.write_text("#!/bin/sh\necho 'mpirun (Open MPI) 4.1.5'\necho '%s' >&2\n" % PLANTED)
    fake.chmod(0o755)
    env = {"PATH": "%s:%s" % (bin_dir, __import__("os").environ["PATH"])}
    folder = tmp_path / "node"
    p = cmd.run("validate", "--only", "mpi.version", "--collect", str(folder), "--json", str(tmp_path / "live.json"),
                env=env)
    live = json.loads((tmp_path / "live.json").read_text())
    [result] = live["results"]
    assert (result["status"], result["diagnosis"], p.returncode) == ("WARN", "UNEXPLAINED_FAULT_SIGNAL", 0), \
        p.stdout + p.stderr
    assert PLANTED in result["measured"] and "UNEXPLAINED_FAULT_SIGNAL" in p.stdout
    assert findings(CheckResult.from_json(result)).endswith("fault signals: 1 line read, 1 not explained")
    cmd.run("validate", "--from", str(folder), "--only", "mpi.version", "--json", str(tmp_path / "judged.json"),
            expect=0)
    assert json.loads((tmp_path / "judged.json").read_text())["results"] == live["results"]


def test_ib_port_errors_in_a_filtered_kernel_log_are_ib_ports_finding_without_ibstat():
    """A bundle that holds only `dmesg | grep mlx5` with a port's link going down and a module error: ib.ports owns
    those lines (WARN IB_PORT_EVENTS, the port state not recorded), so no other reader of the kernel log is left
    with them unexplained."""
    log = ("[ 8811.412901] mlx5_core 0000:3b:00.0: Port module event[error]: module 0, Cable error, Bus stuck "
           "(I2C or data shorted)\n[ 8811.413120] mlx5_core 0000:3b:00.0 ib0: Link down\n")
    got = _judge([(("sh", "-c", "dmesg | grep mlx5"), log)], ["ib.ports", "gpu.xid"])
    ports = got["ib.ports"]
    assert (ports.status, ports.diagnosis) == (Status.WARN, "IB_PORT_EVENTS"), ports
    assert "port state is not recorded" in ports.measured and len(ports.details) == 2
    assert ports.signals == {"read": 2, "explained": 2, "unexplained": []}
    assert got["gpu.xid"].signals["unexplained"] == []


def test_without_nvidia_smis_list_the_fabric_and_802_still_fail_the_node(tmp_path, monkeypatch):
    """Case 47 recorded without nvidia-smi's table: the fabric query and gpu_burn's 802 are still the finding (never
    a SKIP that leaves the node unjudged while its evidence shows the fault)."""
    monkeypatch.setattr(report_module, "print_table", lambda report: None)
    got = judged("case47-fabric-manager-not-running-cuda-802", tmp_path,
                 rewrite=lambda entry: entry.get("argv") != ["nvidia-smi"])
    inventory = got["gpu.inventory"]
    assert (inventory["status"], inventory["diagnosis"]) == ("FAIL", "GPU_FABRIC_NOT_READY"), inventory
    assert inventory["measured"].startswith("nvidia-smi's GPU list is not recorded; GPU not registered")
    assert inventory["signals"]["unexplained"] == []


def test_mig_devices_listed_by_nvidia_smi_l():
    listing = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
               "  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
               "  MIG 1g.5gb      Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)\n"
               "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-4e2e0a1b-8cbb-4e5e-b2a2-6f1c7b1f2d11)\n")
    got = _judge([(("nvidia-smi", "-L"), listing)], ["gpu.inventory"])["gpu.inventory"]
    assert (got.status, got.diagnosis) == (Status.FAIL, "GPU_MIG_ENABLED"), got
    assert got.measured.startswith("MIG mode enabled on GPU 0: ")
    assert got.signals["unexplained"] == [] and got.signals["read"] == 2
