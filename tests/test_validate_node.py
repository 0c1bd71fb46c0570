"""``invoke validate`` on this machine, for real: what exists here (mpirun, /dev/shm, ulimit, horovodrun, the docker
engine) gives real PASS/FAIL; what does not (GPU, InfiniBand) gives a SKIP with its reason. Also: the runner, the
report's exit codes, and that no parser raises on cut-off or garbled output."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from chexstack.errors import ChexstackError
from chexstack.tools import run
from envs.manifest import load_stack
from facts import horovod_gate
from facts.parsers import container as pcontainer
from facts.parsers import dcgm, infiniband, kernel, nccl, nvidia_smi, topology, versions
from facts.parsers.horovod import build_from_api, parse_check_build, parse_requirements
from launch.controller import local_interfaces
from tests.lib import cli as cmd
from tests.lib.paths import FIXTURES, REPO
from tests.lib.readonly import run_with_read_only
from validate.checks import CHECKS, Context, container, horovod, mpi
from validate.checks.registry import check
from validate.report import AREAS, EXIT_CANNOT_RUN, Report, run_checks, select
from validate.result import CheckResult, Status

PARSERS = [nvidia_smi.parse_table, nvidia_smi.parse_version, nvidia_smi.parse_query_csv, nvidia_smi.parse_q_text,
           nvidia_smi.parse_q_xml, nvidia_smi.parse_nvlink_status, topology.parse_topo, infiniband.parse_ibstat,
           infiniband.parse_ibstatus, infiniband.parse_ibv_devinfo, infiniband.parse_sysfs,
           infiniband.parse_ib_write_bw, nccl.parse_all_reduce_perf, nccl.parse_nccl_log, kernel.parse_dmesg,
           dcgm.parse_dcgmi_diag, pcontainer.classify_runtime_error, pcontainer.docker_runtimes, pcontainer.df_size,
           pcontainer.nv_libs, parse_check_build, versions.nvcc, versions.mpirun, versions.ompi_info]


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.iterdir() if p.name != "SOURCES.md"))
def test_no_parser_raises_on_cut_off_or_garbled_output(name):
    text = (FIXTURES / name).read_text()
    for sample in (text[: len(text) // 2], text[len(text) // 3:], text.replace("\t", "").replace(":", ""),
                   "\x1b[4m" + text[:57], ""):
        for parse in PARSERS:
            parse(sample)


def test_garbled_output_is_a_verdict_not_a_traceback():
    from validate.checks.gpu import judge_inventory
    from validate.checks.topology import judge_nvlink

    garbage = "Segmentation fault (core dumped)\n\x00\x01"
    assert judge_inventory(nvidia_smi.parse_table(garbage)).status == Status.FAIL
    assert "could not read" in judge_nvlink(topology.parse_topo(garbage), None).measured
    cut = nccl.parse_all_reduce_perf("#  Rank  0 Group  0 Pid 1 on n device 0 [0x00] NVIDIA H200\n")
    assert cut.problems and not cut.rows


def test_runner_reports_missing_tools_and_timeouts():
    missing = run(["chexstack-no-such-tool", "--version"])
    assert missing.missing and missing.why_not() == "chexstack-no-such-tool not found on PATH"
    slow = run(["sleep", "5"], timeout=0.3)
    assert slow.timed_out and not slow.ok and "timed out" in slow.why_not()
    failing = run(["sh", "-c", "echo boom >&2; exit 3"])
    assert failing.rc == 3 and failing.why_not().endswith("exited 3: boom")


def test_a_crashing_check_is_an_error_exit_2_and_the_others_still_run():
    """Issue 12 item 7: an exception or a missing module in the checker is ERROR (exit 2), never SKIP or FAIL."""
    @check("test.crash", "raises", fast=True)
    def crash(ctx):
        raise RuntimeError("bug")

    @check("test.import", "a module of this tree missing", fast=True)
    def missing_module(ctx):
        import validate.no_such_module  # noqa: F401

    try:
        report = run_checks(Context(), ["test.crash", "test.import", "container.memlock"])
    finally:
        del CHECKS["test.crash"], CHECKS["test.import"]
    crashed, missing, other = report.results
    assert crashed.status == Status.ERROR and crashed.diagnosis == "CHECK_CRASHED" and "RuntimeError: bug" in \
        crashed.measured and any("raise RuntimeError" in line for line in crashed.details)
    assert missing.status == Status.ERROR and "ModuleNotFoundError" in missing.measured
    assert other.id == "container.memlock" and other.status != Status.ERROR and report.exit_code == 2


def test_exit_codes_are_decided_in_one_place():
    ok = Report([CheckResult("a", Status.PASS, "x"), CheckResult("b", Status.SKIP, "y"),
                 CheckResult("c", Status.WARN, "z")], 0.1)
    assert ok.exit_code == 0 and ok.counts() == {"PASS": 1, "SKIP": 1, "WARN": 1, "FAIL": 0, "ERROR": 0}
    assert Report(ok.results + [CheckResult("d", Status.FAIL, "w")], 0.1).exit_code == 1
    assert Report(ok.results + [CheckResult("d", Status.FAIL, "w"), CheckResult("e", Status.ERROR, "v")],
                  0.1).exit_code == 2
    with pytest.raises(ChexstackError) as err:
        select(["gpu.nosuch"], [])
    assert err.value.exit_code == EXIT_CANNOT_RUN and "known:" in str(err.value)
    assert select(["gpu"], ["gpu.dcgm"]) == [c for c in CHECKS if c.startswith("gpu.") and c != "gpu.dcgm"]
    chosen = select(["mpi", "ib", "nccl"], [])
    areas = [c.split(".")[0] for c in chosen]
    assert sorted(chosen) == sorted(c for c in CHECKS if c.split(".")[0] in ("mpi", "ib", "nccl"))
    assert areas == sorted(areas, key=AREAS.index), "checks run area by area in AREAS order, not --only order"
    assert areas[0] == "nccl" and areas[-1] == "ib"


def test_a_gpu_stack_on_this_cpu_node_fails_gpu_inventory():
    gpu_stack = load_stack("cpu").model_copy(update={"gpu": True, "name": "gpu-variant"})
    result = CHECKS["gpu.inventory"].fn(Context(stack=gpu_stack))
    assert result.status == Status.FAIL and "no NVIDIA GPU on the PCI bus" in result.measured


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI not installed (scripts/setup installs it)")
def test_real_mpirun_of_two_ranks():
    ctx = Context()
    version = mpi.mpi_version(ctx)
    assert version.status == Status.PASS and version.measured.startswith("Open MPI ")
    launch = mpi.launch(ctx)
    assert launch.status == Status.PASS, launch
    assert "2 ranks on" in launch.measured and "allreduce sum 3" in launch.measured


def test_real_dev_shm_and_memlock():
    ctx = Context()
    shm = container.shm(ctx)
    assert shm.status in (Status.PASS, Status.FAIL) and shm.measured.startswith(("/dev/shm ", "shm too small"))
    memlock = container.memlock(ctx)
    assert memlock.measured.startswith("memlock ")


@pytest.mark.docker
def test_real_docker_info():
    result = container.docker_engine(Context())
    assert result.status == Status.PASS, result
    assert result.measured.startswith("Docker ") and "runc" in result.measured


def test_real_horovodrun_check_build_agrees_with_the_fast_probe():
    """The project's environment: ``horovodrun --check-build`` (the real command, ~20 s) is PASS for what
    scripts/setup builds, and the one-interpreter probe ``horovod.env`` uses reads the same marks."""
    text = horovod_gate.check_build_text()
    slow = parse_check_build(text)
    assert not slow.problems, text
    required = parse_requirements(horovod_gate.DEFAULT_REQUIRE)
    assert horovod.judge_build(slow, required).status == Status.PASS
    probe = horovod_gate.import_probe()
    fast = build_from_api(probe["horovod"], ["TensorFlow"], probe["built"])
    for kind in ("controller", "tensor_op"):
        assert fast.built[kind] == {k: v for k, v in slow.built[kind].items() if k in fast.built[kind]}
    assert fast.version == slow.version and probe["built_for"] in (None, probe["tensorflow"])


def test_real_loopback_only_namespace_is_reported_for_gloo():
    """../shared/cases/23 for real: in a network namespace with only ``lo`` (as ``docker run --network none``)."""
    code = "from launch.controller import local_interfaces; import json; print(json.dumps(local_interfaces()))"
    p = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up && %s -c '%s'" % (sys.executable, code)],
                       capture_output=True, text=True, cwd=REPO)
    if p.returncode != 0:
        pytest.skip("cannot create a network namespace here: %s" % p.stderr.strip()[-200:])
    interfaces = json.loads(p.stdout)
    assert interfaces == ["lo"]
    assert horovod.judge_controller(interfaces, gloo=True, mpi=True).diagnosis == "GLOO_LOOPBACK_ONLY"
    assert horovod.judge_controller(local_interfaces(), gloo=True, mpi=True).status == Status.PASS


@pytest.mark.docker  # container.docker FAILs where a docker command has no engine to answer it
def test_invoke_validate_end_to_end(tmp_path):
    """The installed command, as a process: every check on this node."""
    out = tmp_path / "report.json"
    p = cmd.invoke("validate", "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(out.read_text())
    by_id = {r["id"]: r for r in report["results"]}
    assert list(by_id) == select([], []) and set(by_id) == set(CHECKS)
    assert report["seconds"] > 0  # recorded; how fast the checks are is a benchmark question, not a test
    for cid in ("gpu.inventory", "gpu.driver_cuda", "topo.nvlink", "nccl.busbw", "ib.ports"):
        assert by_id[cid]["status"] == "SKIP" and by_id[cid]["measured"], by_id[cid]
    assert "not a GPU node" in by_id["gpu.inventory"]["measured"]
    assert "no RDMA device" in by_id["ib.devices"]["measured"]
    for cid in ("mpi.version", "mpi.launch", "container.shm", "container.memlock", "horovod.env",
                "horovod.controller"):
        assert by_id[cid]["status"] == "PASS", by_id[cid]
    assert report["exit_code"] == 0 and report["summary"]["FAIL"] == 0
    assert "mpi.launch" in p.stdout and "exit 0" in p.stdout


def test_real_mpirun_to_unresolvable_hosts_names_ssh_not_the_banner(tmp_path):
    """Review finding 10, for real: the FAIL shows ssh's line, not the first line of Open MPI's banner."""
    out = tmp_path / "r.json"
    p = cmd.run("validate", "--hosts", "node1.invalid,node2.invalid", "--only", "mpi.launch", "--json", str(out))
    assert p.returncode == 1, p.stdout + p.stderr
    [result] = json.loads(out.read_text())["results"]
    assert result["status"] == "FAIL" and result["measured"].startswith("mpirun exited 255: ssh: Could not resolve "
                                                                        "hostname node")
    assert "-----" not in result["measured"] and result["diagnosis"] == "MPI_HOST_UNKNOWN"
    # Open MPI 4.1.4 hands ssh the names cut at the first dot (node1, node2), in the order its daemons start
    # the hosts ssh named before mpirun gave up: both, or under load only the first daemon's (Open MPI aborts the
    # launch at the first failed daemon), in the order the daemons started
    assert result["remedy"].split(" does not resolve from this node")[0] in (
        "node1,node2", "node2,node1", "node1", "node2")


def test_invoke_validate_cannot_run_exits_2():
    p = cmd.run("validate", "--only", "nosuch")
    assert p.returncode == 2 and "--only nosuch: no such check" in p.stderr
    p = cmd.run("validate", "--stack", "nosuch")
    assert p.returncode == 2 and "unknown stack 'nosuch'" in p.stderr


def test_invoke_validate_json_that_cannot_be_written_stops_before_the_checks(tmp_path):
    """Review finding 4: the JSON path's folder is checked first, not after every check ran."""
    p = cmd.run("validate", "--json", "/nonexistent/v.json")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip() == ("error: --json /nonexistent/v.json: folder /nonexistent does not exist; create it "
                                "or choose another path")
    read_only = tmp_path / "ro"
    read_only.mkdir()
    p = run_with_read_only(read_only, [cmd.INVOKE, "validate", "--json", str(read_only / "v.json")])
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert "cannot write in %s (Read-only file system)" % read_only in p.stderr
    assert "mpi.launch" not in p.stdout + p.stderr


@pytest.mark.docker
def test_horovod_inside_the_cpu_stack_image():
    """The in-image probe through the docker SDK when ``chexstack/cpu`` is built; otherwise the SKIP names the
    command that builds it."""
    ctx = Context(stack=load_stack("cpu"))
    image, why = container.stack_image(ctx)
    result = horovod.image(ctx)
    if image is None:
        assert result.status == Status.SKIP and ("invoke build --stack cpu" in result.measured
                                                 or "not reachable" in result.measured)
        return
    assert result.status == Status.PASS, result
    assert "horovod build: all [X]" in result.measured and "horovod built for TF: 2.15.1" in result.measured
