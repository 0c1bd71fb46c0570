"""Issue 40, item 2: GPUs are usable, not only listed. ``facts/cuda_probe.py`` (the CUDA driver API through ctypes)
run for real against a stand-in libcuda built here with the system C compiler (``tests/lib/libcuda_standin.c``:
its behaviour is ``CHEXSTACK_CUDA_STANDIN``), its output read by ``facts.parsers.cuda``, and ``gpu.cuda`` judged
live and from a ``--collect`` bundle with ``--from``, through ``invoke validate`` (tests/lib/cli.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from facts.parsers.cuda import CUDA_PROBE, CUDA_PROGRAM, PROBE_SCRIPT, parse_cuda_probe, program_errors
from tests.lib import cli as cmd
from tests.lib.bundle_corpus import build
from tests.lib.cuda_standin import LIBRARY, SCENARIO, built
from tests.lib.paths import FIXTURES
from validate.catalogue import CODES
from validate.checks.cuda import judge_cuda
from validate.result import Status

#: a real nvidia-smi table of an HGX H100 node (8 GPUs, driver 550.90.07; ../shared/fixtures/SOURCES.md #1)
SMI_H100X8 = FIXTURES / "nvidia-smi-h100x8-550.txt"


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    return built(tmp_path_factory.mktemp("libcuda"))


def probe(library, scenario: str = "", *args: str, env: dict | None = None,
          expect: int | None = None) -> subprocess.CompletedProcess:
    """The probe as a node runs it: ``python facts/cuda_probe.py --library LIB`` with the stand-in's scenario;
    ``expect``: its exit status (0 every GPU usable, 1 a CUDA error, 2 no library, 3 bad usage, -6 an abort)."""
    lib = ("--library", str(library)) if library is not None else ()
    return cmd.expected(subprocess.run([sys.executable, PROBE_SCRIPT, *lib, *args], capture_output=True, text=True,
                                       timeout=60, env={**os.environ, SCENARIO: scenario, **(env or {})}), expect)


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


# --- the probe's output, scenario by scenario --------------------------------------------------------------------


def test_every_gpu_usable_prints_one_ok_record_per_gpu_and_exits_0(standin):
    p = probe(standin, "devices=3")
    assert p.returncode == 0, p.stderr
    out = records(p.stdout)
    assert [r["record"] for r in out] == ["probe", "library", "driver", "init", "count", "gpu", "gpu", "gpu", "end"]
    assert out[0] == {"record": "probe", "format": "chexstack.cuda_probe", "version": 1, "library": str(standin),
                      "cuda_visible_devices": None, "python": sys.version.split()[0]}
    assert out[1] == {"record": "library", "loaded": True, "path": str(standin)}
    assert out[5] == {"record": "gpu", "index": 0, "status": "ok", "name": "NVIDIA H100 80GB HBM3",
                      "pci_bus_id": "0000:18:00.0", "bytes": 1 << 20}
    assert out[-1] == {"record": "end", "ok": True}


def test_a_gpu_whose_context_fails_is_named_with_the_libraries_code_name_and_string(standin):
    p = probe(standin, "devices=3 ctx=1:802")
    assert p.returncode == 1
    gpus = [r for r in records(p.stdout) if r["record"] == "gpu"]
    assert [g["status"] for g in gpus] == ["ok", "error", "ok"]
    assert gpus[1] == {"record": "gpu", "index": 1, "status": "error", "step": "cuCtxCreate_v2", "code": 802,
                       "error_name": "CUDA_ERROR_SYSTEM_NOT_READY", "error_string": "system not yet initialized",
                       "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "0000:2A:00.0"}


def test_cuinit_failing_ends_the_probe_after_the_init_record(standin):
    p = probe(standin, "init=100")
    assert p.returncode == 1
    assert records(p.stdout)[-2:] == [
        {"record": "init", "status": "error", "code": 100, "error_name": "CUDA_ERROR_NO_DEVICE",
         "error_string": "no CUDA-capable device is detected"}, {"record": "end", "ok": False}]


def test_no_library_and_a_library_without_the_driver_api_exit_2_saying_why(tmp_path):
    p = probe(tmp_path / "libcuda.so.1")
    assert p.returncode == 2
    lib = records(p.stdout)[1]
    assert lib["loaded"] is False and "libcuda.so.1" in lib["error"] and lib["missing"] == []
    p = probe("libm.so.6")  # a real library that is not a CUDA driver
    lib = records(p.stdout)[1]
    assert p.returncode == 2 and lib["loaded"] is False and "cuInit" in lib["missing"]


def test_the_library_is_chosen_by_option_else_environment_else_libcuda_so_1(standin, tmp_path):
    by_env = records(probe(None, env={LIBRARY: str(standin)}).stdout)[0]
    assert by_env["library"] == str(standin)
    by_option = records(probe(tmp_path / "other.so", env={LIBRARY: str(standin)}).stdout)[0]
    assert by_option["library"] == str(tmp_path / "other.so")
    default = records(probe(None, env={LIBRARY: ""}).stdout)[0]
    assert default["library"] == "libcuda.so.1"
    bad = probe(None, "--device", "0")
    assert bad.returncode == 3 and "usage: cuda_probe.py [--library PATH]" in bad.stderr


def test_a_crash_inside_the_library_leaves_the_records_before_it(standin):
    p = probe(standin, "devices=4 abort=2")
    assert p.returncode < 0 or p.returncode > 128
    out = records(p.stdout)
    assert out[-1]["record"] == "gpu" and out[-1]["index"] == 1


# --- the parser ------------------------------------------------------------------------------------------------


def test_the_parser_reads_every_record(standin):
    got = parse_cuda_probe(probe(standin, "devices=3 ctx=1:802", expect=1,
                                 env={"CUDA_VISIBLE_DEVICES": "0,1,2"}).stdout)
    assert (got.version, got.loaded, got.count, got.complete, got.driver_version, got.cuda_version) == (
        1, True, 3, True, 12040, "12.4")
    assert got.cuda_visible_devices == "0,1,2" and got.problems == [] and got.last == "end"
    assert [g.ok for g in got.gpus] == [True, False, True]
    error = got.gpus[1].error
    assert (error.step, error.code, error.name, error.string) == (
        "cuCtxCreate_v2", 802, "CUDA_ERROR_SYSTEM_NOT_READY", "system not yet initialized")
    assert error.text == '802 CUDA_ERROR_SYSTEM_NOT_READY ("system not yet initialized") at cuCtxCreate_v2'
    assert "all required driver daemons are actively running" in error.meaning
    init = parse_cuda_probe(probe(standin, "init=999", expect=1).stdout)
    assert init.init_error.name == "CUDA_ERROR_UNKNOWN" and init.count is None and init.complete


def test_the_parser_never_raises_on_cut_off_or_foreign_output(standin):
    text = probe(standin, "devices=2", expect=0).stdout
    cut = parse_cuda_probe(text[: text.index('"index": 1') - 10])
    assert not cut.complete and cut.last == "gpu 0" and len(cut.problems) == 1
    assert parse_cuda_probe("Traceback (most recent call last):\n  ...").problems
    other = parse_cuda_probe('{"record": "probe", "format": "chexstack.cuda_probe", "version": 9}\n{"record": "end"}')
    assert other.version is None and not other.complete and "version 9" in other.problems[0]
    assert parse_cuda_probe("").version is None


def test_the_observation_reads_recorded_runs_of_the_probe_however_started():
    also = CUDA_PROBE.also
    assert also(("python3", "facts/cuda_probe.py"), {})
    assert also(("sh", "-c", "sudo timeout 60 /usr/bin/python3 /opt/chexstack/facts/cuda_probe.py --library x"), {})
    assert not also(("python3", "facts/probe.py"), {}) and not also(("nvidia-smi",), {})


# --- the judge, code by code: the probe for real, nvidia-smi's count given -----------------------------------------


@pytest.mark.parametrize("scenario, diagnosis, cause", [
    ("devices=8 ctx=*:802", "CUDA_SYSTEM_NOT_READY", "nvidia-fabricmanager"),
    ("init=802", "CUDA_SYSTEM_NOT_READY", "systemctl enable --now nvidia-fabricmanager"),
    ("init=999", "CUDA_UNKNOWN_ERROR", "dmesg"),
    ("init=100", "CUDA_NO_DEVICE", "CUDA_VISIBLE_DEVICES"),
    ("init=3", "CUDA_NOT_INITIALIZED", "kernel module"),
    ("init=34", "CUDA_STUB_LIBRARY", "stubs"),
    ("init=803", "CUDA_DRIVER_MISMATCH", "kernel module"),
    ("devices=8 ctx=3:46", "CUDA_DEVICE_UNAVAILABLE", "nvidia-smi -c DEFAULT"),
    ("devices=8 alloc=5:2", "CUDA_OUT_OF_MEMORY", "another process"),
    ("devices=8 ctx=0:700", "CUDA_CALL_FAILED", "CUresult"),
    ("devices=0", "CUDA_GPUS_MISSING", "CUDA_VISIBLE_DEVICES"),
    ("devices=6", "CUDA_GPUS_MISSING", "/dev/nvidia*"),
    ("devices=8 abort=4", "CUDA_PROBE_FAILED", "dmesg"),
])
def test_a_gpu_listed_but_unusable_by_cuda_fails_with_its_code_and_the_fix_for_its_cause(standin, scenario,
                                                                                      diagnosis, cause):
    run = probe(standin, scenario)
    result = judge_cuda(parse_cuda_probe(run.stdout), 8, driver="545.23.08",
                        how="" if run.returncode in (0, 1) else "exited %d" % run.returncode)
    assert result.status == Status.FAIL and result.diagnosis == diagnosis, result
    assert cause in result.remedy and diagnosis in CODES
    code = scenario.split(":")[-1] if ":" in scenario else scenario.partition("init=")[2]
    if code.isdigit():
        assert (" %s " % code) in " " + result.measured  # the CUresult, by number


def test_a_probe_cut_off_names_the_step_it_stopped_in(standin):
    crashed = judge_cuda(parse_cuda_probe(probe(standin, "devices=4 abort=2", expect=-6).stdout), 4, how="exited -6")
    assert crashed.measured == ("the CUDA probe did not finish (exited -6): it stopped in GPU 2 (its context or "
                                "allocation), a crash or hang inside the driver")
    assert crashed.details == ["probed before: GPU 0 ok, GPU 1 ok"]
    text = probe(standin, "devices=4", expect=0).stdout
    hung = parse_cuda_probe(text[:text.index('{"record": "init"')])
    assert "it stopped in cuInit" in judge_cuda(hung, 4, how="`python3 cuda_probe.py` timed out").measured


def test_the_fabric_manager_fix_names_the_drivers_version_and_every_failed_gpu(standin):
    result = judge_cuda(parse_cuda_probe(probe(standin, "devices=8 ctx=*:802", expect=1).stdout), 8, driver="545.23.08")
    assert result.measured.startswith("CUDA cannot use 8 of 8 GPU(s): GPU 0 (NVIDIA H100 80GB HBM3, 0000:18:00.0): "
                                      "802 CUDA_ERROR_SYSTEM_NOT_READY")
    assert "exactly the driver's version (545.23.08: nvidia-fabricmanager-545)" in result.remedy
    assert len(result.details) == 7 and result.details[-1].startswith("GPU 7 (NVIDIA H100 80GB HBM3, 0000:DB:00.0)")


def test_pass_only_when_every_listed_gpu_got_a_context(standin):
    ok = judge_cuda(parse_cuda_probe(probe(standin, "devices=8", expect=0).stdout), 8)
    assert ok.status == Status.PASS
    assert ok.measured == ("8× NVIDIA H100 80GB HBM3: a context and 1 MiB allocated on each (CUDA 12.4, nvidia-smi "
                           "lists 8 GPU(s))")
    hidden = parse_cuda_probe(probe(standin, "devices=2", expect=0, env={"CUDA_VISIBLE_DEVICES": "2,5"}).stdout)
    assert judge_cuda(hidden, 8).status == Status.PASS  # CUDA_VISIBLE_DEVICES asks for 2 of the 8


@pytest.mark.parametrize("visible, devices, status", [
    ("0,2,-1,1", 2, Status.PASS),  # entries after an invalid index are not enumerated (CUDA programming guide)
    ("0,2,-1,1", 1, Status.FAIL),
    ("3,9,1", 1, Status.PASS),  # 9: no such GPU among 8
    ("GPU-8932f937,GPU-1234", 2, Status.PASS),
    ("", 0, Status.FAIL),  # every GPU hidden from CUDA: unusable by this run
])
def test_cuda_visible_devices_sets_how_many_gpus_cuda_must_enumerate(standin, visible, devices, status):
    run = probe(standin, "devices=%d" % devices, env={"CUDA_VISIBLE_DEVICES": visible}, expect=0)
    result = judge_cuda(parse_cuda_probe(run.stdout), 8)
    assert result.status == status, result
    assert result.details[0] == "CUDA_VISIBLE_DEVICES=%s" % visible
    if status == Status.FAIL:
        assert result.diagnosis == "CUDA_GPUS_MISSING"


def test_mig_instances_are_not_counted_as_gpus(standin):
    result = judge_cuda(parse_cuda_probe(probe(standin, "devices=1 mig=1", expect=0).stdout), 8)
    assert result.status == Status.PASS and "NVIDIA A100-SXM4-40GB MIG 1g.5gb" in result.measured
    assert result.details == ["1 MIG instance(s) among the CUDA devices: CUDA's count is not nvidia-smi's GPU count"]


def test_no_gpu_is_a_skip_with_the_reason_never_a_pass(standin, tmp_path):
    missing = parse_cuda_probe(probe(tmp_path / "libcuda.so.1", expect=2).stdout)
    result = judge_cuda(missing, 0)
    assert (result.status, result.diagnosis) == (Status.SKIP, "TOOL_MISSING")
    assert "libcuda did not load" in result.measured and "cannot open shared object file" in result.measured
    listed = judge_cuda(missing, 8)
    assert (listed.status, listed.diagnosis) == (Status.FAIL, "CUDA_LIBRARY_MISSING")
    none = judge_cuda(parse_cuda_probe(probe(standin, "init=100", expect=1).stdout), 0)
    assert (none.status, none.diagnosis) == (Status.SKIP, "NOT_APPLICABLE")
    on_bus = judge_cuda(parse_cuda_probe(probe(standin, "init=100", expect=1).stdout), None, pci=4)
    assert (on_bus.status, on_bus.diagnosis) == (Status.FAIL, "CUDA_NO_DEVICE")
    assert judge_cuda(parse_cuda_probe("Segmentation fault"), 8, how="exited 139").status == Status.SKIP


# --- through the product's entry: live (the probe for real against the stand-in), then the bundle --------------


@pytest.fixture
def smi_bin(tmp_path):
    """A folder with an ``nvidia-smi`` that prints the real table of an 8× H100 node (and fails every query)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text('#!/bin/sh\n[ $# -eq 0 ] && exec cat %s\necho "not recorded: $*" >&2; exit 2\n' % SMI_H100X8)
    smi.chmod(0o755)
    return folder


def _validate(tmp_path, name: str, *args: str, env: dict) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / (name + ".json")
    p = cmd.run("validate", "--only", "gpu.cuda", "--json", str(report), *args, env=env)
    return p, next(r for r in json.loads(report.read_text())["results"] if r["id"] == "gpu.cuda")


def test_live_validate_fails_a_node_whose_gpus_cuda_cannot_use_and_the_bundle_judges_the_same(standin, smi_bin,
                                                                                            tmp_path):
    env = {LIBRARY: str(standin), SCENARIO: "devices=8 ctx=*:802", "PATH": "%s:%s" % (smi_bin, os.environ["PATH"])}
    p, live = _validate(tmp_path, "live", "--collect", str(tmp_path / "node"), env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    assert (live["status"], live["diagnosis"]) == ("FAIL", "CUDA_SYSTEM_NOT_READY")
    assert "802 CUDA_ERROR_SYSTEM_NOT_READY" in live["measured"] and "8 of 8 GPU(s)" in live["measured"]
    assert "(550.90.07: nvidia-fabricmanager-550)" in live["remedy"]
    index = json.loads((tmp_path / "node" / "bundle.json").read_text())
    runs = [e for e in index["evidence"] if e["kind"] == "tool" and e["argv"][-1].endswith("cuda_probe.py")]
    assert len(runs) == 1 and runs[0]["rc"] == 1
    # judged elsewhere: no stand-in, no nvidia-smi; the bundle alone
    p, judged = _validate(tmp_path, "judged", "--from", str(tmp_path / "node"), env={LIBRARY: None, SCENARIO: None})
    assert p.returncode == 1 and judged == live


def test_live_validate_passes_usable_gpus_and_skips_a_node_without_libcuda(standin, smi_bin, tmp_path):
    path = "%s:%s" % (smi_bin, os.environ["PATH"])
    p, ok = _validate(tmp_path, "ok", "--collect", str(tmp_path / "ok"),
                      env={LIBRARY: str(standin), SCENARIO: "devices=8", "PATH": path})
    assert p.returncode == 0 and ok["status"] == "PASS" and "nvidia-smi lists 8" in ok["measured"]
    p, judged = _validate(tmp_path, "judged", "--from", str(tmp_path / "ok"), env={LIBRARY: None})
    assert p.returncode == 0 and judged == ok
    # the conditions made explicit, whatever this machine has: no libcuda there, a PATH without nvidia-smi
    absent, empty = str(tmp_path / "no-libcuda.so.1"), tmp_path / "empty"
    empty.mkdir()
    p, skip = _validate(tmp_path, "absent", env={LIBRARY: absent, "PATH": str(empty)})
    assert (skip["status"], skip["diagnosis"]) == ("SKIP", "TOOL_MISSING") and p.returncode == 0
    p, alone = _validate(tmp_path, "alone", env={LIBRARY: str(standin), SCENARIO: "devices=2", "PATH": str(empty)})
    assert alone["status"] == "PASS" and alone["measured"].endswith("(CUDA 12.4, no nvidia-smi on this node)")
    p, listed = _validate(tmp_path, "listed", env={LIBRARY: absent, "PATH": path})
    assert (listed["status"], listed["diagnosis"]) == ("FAIL", "CUDA_LIBRARY_MISSING") and p.returncode == 1


def test_a_bundle_without_the_probe_is_not_judged_fit(tmp_path, smi_bin, standin):
    env = {LIBRARY: str(standin), "PATH": "%s:%s" % (smi_bin, os.environ["PATH"])}
    cmd.run("validate", "--only", "gpu.inventory", "--collect", str(tmp_path / "b"), env=env, expect=0)
    p, result = _validate(tmp_path, "judged", "--from", str(tmp_path / "b"), env={})
    assert result["status"] == "SKIP" and result["diagnosis"] == "EVIDENCE_MISSING" and p.returncode == 0, result


# --- a bundle without the probe: a CUDA program it recorded (../shared/cases/47) -----------------------------------


def test_program_errors_reads_the_ways_cuda_programs_print_an_error_in_order():
    text = ("GPU 0: NVIDIA H100 80GB HBM3 ...\n"
            "  what():  Error (gpu_burn-drv.cpp:298): system not yet initialized\n"
            "  what():  Error (gpu_burn-drv.cpp:298): OS call failed or operation not supported on this OS\n"
            "cudaGetDeviceCount returned 100 -> cudaErrorNoDevice\n"
            "RuntimeError: CUDA driver initialization failed: CUDA_ERROR_UNKNOWN\n"
            "an unknown error\n")
    assert [(e.code, e.name, e.number) for e in program_errors(text)] == [
        (802, "CUDA_ERROR_SYSTEM_NOT_READY", 2), (304, "CUDA_ERROR_OPERATING_SYSTEM", 3),
        (100, "CUDA_ERROR_NO_DEVICE", 4), (999, "CUDA_ERROR_UNKNOWN", 5)]
    assert program_errors("") == [] and program_errors("Burning for 60 seconds.\n100.0%  proc'd: 8") == []


def test_the_program_observation_reads_cuda_programs_and_framework_one_liners_only():
    also = CUDA_PROGRAM.also
    assert also(("gpu_burn", "-d", "60"), {}) and also(("sh", "-c", "./deviceQuery | tail"), {})
    assert also(("python3", "-c", "import torch; torch.cuda.init()"), {})
    assert not also(("python3", "train.py"), {}) and not also(("nvidia-smi",), {}) and CUDA_PROGRAM.argv is None


CASE47 = """about: ../shared/cases/47 as recorded by hand (nvidia-smi, then gpu_burn)
evidence:
  - tool: [nvidia-smi]
    stdout: {case: "47", after: "$ nvidia-smi", until: "$ "}
  - tool: [gpu_burn, -d, "60"]
    stderr: {case: "47", after: "$ gpu_burn -d 60", until: "$ "}
    rc: 134
expect: {}
exit: 1
"""


def test_case_47_judged_from_its_bundle_names_802_the_fabric_manager_and_what_followed(tmp_path):
    """An HGX H100 whose Fabric Manager is down: nvidia-smi lists 8 healthy GPUs, gpu_burn fails with "system not
    yet initialized" and then "OS call failed" on the other GPUs. The bundle holds no probe: gpu.cuda reads
    gpu_burn's run and names 802 as the cause, the 304 lines as following from it, and the Fabric Manager fix for
    the driver's branch (expected.md: FAIL, reconfigure a service, never a PASS)."""
    (tmp_path / "case47.yaml").write_text(CASE47)
    build(tmp_path / "case47.yaml", tmp_path / "bundle")
    p, result = _validate(tmp_path, "case47", "--from", str(tmp_path / "bundle"), env={})
    assert p.returncode == 1, p.stdout + p.stderr
    assert (result["status"], result["diagnosis"], result["action"]) == ("FAIL", "CUDA_SYSTEM_NOT_READY",
                                                                        "reconfigure")
    assert result["measured"].startswith("`gpu_burn -d 60` failed with 802 CUDA_ERROR_SYSTEM_NOT_READY (line 7: "
                                         "what():  Error (gpu_burn-drv.cpp:298): system not yet initialized)")
    assert result["measured"].endswith("; then 304 CUDA_ERROR_OPERATING_SYSTEM; nvidia-smi lists 8 GPU(s)")
    assert "(545.23.08: nvidia-fabricmanager-545), `systemctl enable --now nvidia-fabricmanager`" in result["remedy"]
    assert result["details"][0].startswith("then 3 line(s) of 304 CUDA_ERROR_OPERATING_SYSTEM, the first at line 9")


def test_a_recorded_program_without_a_cuda_error_proves_nothing(tmp_path):
    (tmp_path / "ok.yaml").write_text(CASE47.replace('stderr: {case: "47", after: "$ gpu_burn -d 60", until: "$ "}',
                                                     'stdout: {case: "47", after: "$ gpu_burn -d 60", until: "..."}'))
    build(tmp_path / "ok.yaml", tmp_path / "bundle")
    p, result = _validate(tmp_path, "ok", "--from", str(tmp_path / "bundle"), env={})
    assert (result["status"], result["diagnosis"], p.returncode) == ("SKIP", "EVIDENCE_MISSING", 0), result


# --- a node without GPUs, and a library that names its codes wrongly (a fresh user's trial, issue 40) -------------


def test_a_usage_error_exits_3_naming_the_argument_and_prints_no_record():
    p = probe(None, "", "--libary", "x", expect=3)
    assert p.stdout == "" and "--libary: unknown argument" in p.stderr and "3 a usage error" in p.stderr
    assert "3 a usage error" in open(PROBE_SCRIPT).read()  # among the documented exit statuses


def _init_error(code: int, name: str, string: str) -> str:
    """The probe's output where cuInit returned ``code`` and the library named it ``name``."""
    return "\n".join(json.dumps(r) for r in [
        {"record": "probe", "format": "chexstack.cuda_probe", "version": 1, "library": "libcuda.so.1",
         "cuda_visible_devices": None, "python": "3.11.2"},
        {"record": "library", "loaded": True, "path": "/usr/lib/x86_64-linux-gnu/libcuda.so.1"},
        {"record": "init", "status": "error", "code": code, "error_name": name, "error_string": string},
        {"record": "end", "ok": False}]) + "\n"


@pytest.mark.parametrize("code, name, skip, fail", [
    (100, "CUDA_ERROR_UNKNOWN", "NOT_APPLICABLE", "CUDA_NO_DEVICE"),
    (34, "CUDA_ERROR_UNKNOWN", "NOT_APPLICABLE", "CUDA_STUB_LIBRARY"),
    (999, "CUDA_ERROR_NO_DEVICE", None, "CUDA_UNKNOWN_ERROR"),
])
def test_the_verdict_goes_by_the_curesult_code_never_the_name_the_library_gives_it(code, name, skip, fail):
    probe_ = parse_cuda_probe(_init_error(code, name, "whatever it says"))
    listed = judge_cuda(probe_, 8)
    assert (listed.status, listed.diagnosis) == (Status.FAIL, fail), listed
    assert listed.measured.startswith("%d CUDA_ERROR_" % code) and "(the library names it %s)" % name in \
        listed.measured
    none = judge_cuda(probe_, None, smi="no nvidia-smi on this node")
    if skip:
        assert (none.status, none.diagnosis) == (Status.SKIP, skip), none
    else:
        assert none.status == Status.FAIL
    assert "node GPU(s)" not in none.measured and none.measured.endswith("no nvidia-smi on this node"
                                                                      + (", no NVIDIA GPU on the PCI bus" if skip
                                                                         else "")), none.measured


def test_the_toolkits_stub_libcuda_on_a_cpu_node_is_a_skip_and_a_fail_where_gpus_are(standin, smi_bin, tmp_path):
    """cuInit returns 34 CUDA_ERROR_STUB_LIBRARY from the CUDA toolkit's link stub (cuda.h, CUresult): normal on a
    node without GPUs, where the toolkit is installed for building; a fault where GPUs are listed."""
    empty = tmp_path / "empty"
    empty.mkdir()
    p, cpu = _validate(tmp_path, "cpu", "--collect", str(tmp_path / "cpu"),
                       env={LIBRARY: str(standin), SCENARIO: "init=34", "PATH": str(empty)})
    assert (cpu["status"], cpu["diagnosis"]) == ("SKIP", "NOT_APPLICABLE") and p.returncode == 0, cpu
    assert "stub" in cpu["measured"] and "34 CUDA_ERROR_STUB_LIBRARY" in cpu["measured"]
    assert cpu["measured"].endswith("no nvidia-smi on this node, no NVIDIA GPU on the PCI bus"), cpu["measured"]
    p, judged = _validate(tmp_path, "cpu-judged", "--from", str(tmp_path / "cpu"), env={LIBRARY: None})
    assert judged == cpu and p.returncode == 0
    path = "%s:%s" % (smi_bin, os.environ["PATH"])
    p, gpus = _validate(tmp_path, "gpus", env={LIBRARY: str(standin), SCENARIO: "init=34", "PATH": path})
    assert (gpus["status"], gpus["diagnosis"]) == ("FAIL", "CUDA_STUB_LIBRARY") and p.returncode == 1, gpus
    assert gpus["measured"].endswith("; nvidia-smi lists 8 GPU(s)")


def test_no_libcuda_on_a_cpu_node_judges_the_loaders_message_it_quotes(tmp_path):
    """The SKIP for an absent libcuda quotes the loader's "cannot open shared object file": explained, never an
    unexplained fault line (the check judged it: no GPU, no driver library to load)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    p, skip = _validate(tmp_path, "absent", env={LIBRARY: str(tmp_path / "libcuda.so.1"), "PATH": str(empty)})
    assert (skip["status"], skip["diagnosis"]) == ("SKIP", "TOOL_MISSING") and p.returncode == 0, skip
    assert "cannot open shared object file" in skip["measured"]
    assert skip["signals"]["unexplained"] == [] and skip["signals"]["read"] == skip["signals"]["explained"], skip
    assert "not explained" not in p.stdout
