"""Verification logic (no Docker): manifest vs probe, era-aware Horovod rows, the matching rule, the launch
requirements judged on recorded in-image check output."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from envs.manifest import load_stack
from images import horovod
from images.mpijob import parse_report
from images.verify import LAUNCH_ROWS, MATCH, MISMATCH, NOT_JUDGED, ProbeResult, compare, launch_rows, matches
from tests.lib import cli as cmd

CHECK_BUILD_ALL = """Horovod v0.28.1:

Available Frameworks:
    [X] TensorFlow
    [ ] PyTorch
    [ ] MXNet

Available Controllers:
    [X] MPI
    [X] Gloo

Available Tensor Operations:
    [ ] NCCL
    [ ] DDL
    [ ] CCL
    [X] MPI
    [X] Gloo
"""


def _probe(**over) -> dict:
    """A probe JSON as facts/probe.py prints it inside the cpu image (values from a real run)."""
    probe = {
        "probe": 1,
        "python": {"version": "3.11.2 (main, Apr 28 2025, 14:11:48) [GCC 12.2.0]",
                   "executable": "/opt/venv/bin/python"},
        "files": {"/etc/os-release": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
                                     'VERSION_ID="12"\n', "/etc/debian_version": "12.11\n"},
        "commands": {
            "mpirun --version": {"rc": 0, "out": "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"},
            "gcc --version": {"rc": 0, "out": "gcc (Debian 12.2.0-14+deb12u1) 12.2.0\n"},
            "horovodrun --check-build": {"rc": 0, "out": CHECK_BUILD_ALL},
            "nvcc --version": {"rc": None, "error": "FileNotFoundError: nvcc"},
            "nvidia-smi": {"rc": None, "error": "FileNotFoundError: nvidia-smi"},
        },
        "env": {}, "libraries": ["/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.4"],
        "tensorflow": {"version": "2.15.1", "built_with_cuda": False},
        "horovod": {"version": "0.28.1", "built_for": {"tensorflow": "2.15.1", "dummy": "none"},
                    "init": {"size": 1, "rank": 0, "mpi_built": True, "gloo_built": True}},
    }
    probe.update(over)
    return probe


def test_cpu_probe_matches_every_row():
    result = compare(load_stack("cpu"), ProbeResult(output=_probe()))
    verdicts = {r.row: r.verdict for r in result.rows}
    assert result.ok, result.rows
    assert verdicts["cuda_driver"] == NOT_JUDGED
    assert verdicts["horovod build"] == verdicts["horovod built for TF"] == verdicts["python"] == MATCH


def test_missing_controller_and_tf_mismatch_fail():
    partial = CHECK_BUILD_ALL.replace("[X] MPI\n    [X] Gloo\n\nAvailable Tensor",
                                      "[ ] MPI\n    [X] Gloo\n\nAvailable Tensor")
    probe = _probe()
    probe["commands"]["horovodrun --check-build"]["out"] = partial
    probe["horovod"]["built_for"]["tensorflow"] = "2.14.0"  # ../shared/cases/02
    rows = {r.row: r for r in compare(load_stack("cpu"), ProbeResult(output=probe)).rows}
    assert rows["horovod build"].verdict == MISMATCH and rows["horovod build"].found == "missing: controller=MPI"
    assert rows["horovod built for TF"].verdict == MISMATCH and rows["horovod built for TF"].found == "2.14.0"


def test_unexpected_component_is_a_mismatch():
    probe = _probe(env={"CUDA_VERSION": "11.8.0"})
    rows = {r.row: r for r in compare(load_stack("cpu"), ProbeResult(output=probe)).rows}
    assert rows["cuda"].verdict == MISMATCH and rows["cuda"].expected == "none"


def test_probe_that_could_not_run():
    result = compare(load_stack("cpu"), ProbeResult(error="exit 127: exec: \"python\": executable file not found"))
    assert not result.ok and result.probe_error
    assert {r.row for r in result.rows if r.verdict == MISMATCH} >= {"tensorflow", "horovod", "python", "os"}


def test_a_probe_result_is_the_output_or_the_error_and_round_trips_through_json():
    """``ProbeResult.to_json`` is what a node's evidence records (``validate``'s ``horovod.image`` fact): the probe's
    own JSON, or ``{"error", "files"}``; ``from_json`` reads both back."""
    ran, failed = ProbeResult(output=_probe()), ProbeResult(error="exit 127", files={"/etc/os-release": "ID=x\n"})
    assert ProbeResult.from_json(ran.to_json()) == ran and ran.to_json() == _probe()
    assert failed.to_json() == {"error": "exit 127", "files": {"/etc/os-release": "ID=x\n"}}
    assert ProbeResult.from_json(failed.to_json()) == failed and failed.observed() == {"files": failed.files}
    for both_or_neither in ({"output": _probe(), "error": "x"}, {}):
        with pytest.raises(ValueError, match="either the probe's output or the error"):
            ProbeResult(**both_or_neither)


def test_pre_017_horovod_uses_import_and_init():
    stack = load_stack("cpu")
    old = stack.model_copy(update={"components": {**stack.components, "horovod": stack.components["horovod"]
                                                  .model_copy(update={"version": "0.16.1"})}})
    probe = _probe(horovod={"version": "0.16.1", "built_for": None, "init": {"size": 1, "rank": 0}})
    probe["commands"]["horovodrun --check-build"] = {"rc": 2, "out": "unrecognized arguments: --check-build"}
    rows = {r.row: r for r in compare(old, ProbeResult(output=probe)).rows}
    assert rows["horovod build"].verdict == MATCH and rows["horovod build"].expected == "import + hvd.init()"
    assert "horovod built for TF" not in rows  # 0.16 has no metadata.json: skipped, not failed
    probe["horovod"] = {"error": "ImportError: undefined symbol: _ZN10tensorflow8OpKernel"}
    rows = {r.row: r for r in compare(old, ProbeResult(output=probe)).rows}
    assert rows["horovod build"].verdict == MISMATCH and "undefined symbol" in rows["horovod build"].found


def test_matching_rule():
    assert matches("3.11", "3.11.2") and matches("12", "12.11") and matches("4.1.4", "4.1.4")
    assert not matches("3.1", "3.11.2") and not matches("10.1.168", "10.1") and not matches("1.0", "garbage!")


def test_horovod_requirements_from_build_flags():
    assert horovod.required_components(load_stack("cpu").build.horovod_env) == [
        ("framework", "TensorFlow"), ("controller", "MPI"), ("controller", "Gloo")]
    assert horovod.required_components({"HOROVOD_GPU_ALLREDUCE": "NCCL", "HOROVOD_WITH_TENSORFLOW": "1"}) == [
        ("framework", "TensorFlow"), ("tensor_op", "NCCL")]
    assert horovod.has_check_build("0.17.0") and not horovod.has_check_build("0.16.2")


def test_gpu_operations_flag_refused_before_horovod_020():
    from chexstack.errors import ChexstackError
    stack = load_stack("conda")
    wrong = stack.model_copy(update={"build": stack.build.model_copy(update={"horovod_env": {
        "HOROVOD_GPU_OPERATIONS": "NCCL"}})})
    with pytest.raises(ChexstackError, match=r"build.horovod_env.HOROVOD_GPU_OPERATIONS: Horovod 0.16.1"):
        horovod.check_build_flags(wrong)


def test_build_dry_run_prints_the_plan_without_docker():
    from images.naming import image_ref
    p = cmd.run("build", "--stack", "cpu", "--dry-run", env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"},
                inherit=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "FROM docker.io/library/debian:bookworm AS devel" in p.stdout
    assert "build-only/ca-certificates.crt" in p.stdout and "chexstack/trainer/__main__.py" in p.stdout
    assert "would build untagged, verify inside, then tag %s" % image_ref(load_stack("cpu")) in p.stdout


# The launch requirements, judged on the real output of images.mpijob.CHECK_SCRIPT: in the built cpu image
# (launch-check-cpu.txt) and in the bare Debian base the tests build from (launch-check-debian-minbase.txt).
LAUNCH_DATA = Path(__file__).resolve().parent / "data" / "images"


def _launch(name: str, section: str | None = None, pattern: str = "", replacement: str = "") -> dict:
    """The recorded report ``name``; with ``section``, its output edited by ``re.sub(pattern, replacement)``."""
    report = parse_report((LAUNCH_DATA / ("launch-check-%s.txt" % name)).read_text())
    if section:
        out, rc = report[section]
        edited = re.sub(pattern, replacement, out, flags=re.M)
        assert edited != out, pattern
        report[section] = (edited, rc)
    return report


def _launch_verdicts(report: dict) -> dict:
    return {r.row: (r.verdict, r.found) for r in launch_rows(report)}


def test_launch_rows_of_the_built_cpu_image_all_match():
    verdicts = _launch_verdicts(_launch("cpu"))
    assert list(verdicts) == list(LAUNCH_ROWS)
    assert {v for v, _ in verdicts.values()} == {MATCH}, verdicts
    assert verdicts["mpijob sshd"][1] == "StrictModes no, PubkeyAuthentication yes, PermitRootLogin without-password"
    assert verdicts["mpijob ssh client"][1] == "StrictHostKeyChecking false, UserKnownHostsFile /dev/null"
    assert verdicts["mpirun on PATH"][1] == "/usr/bin/mpirun"
    assert verdicts["mpirun over ssh"][1].startswith("rank 0 of 1, ssh 127.0.0.1 ")
    assert verdicts["pmix (pyxis)"][1] == "MCA pmix: ext3x"
    assert verdicts["verbs userspace"][1] == "/lib/x86_64-linux-gnu/libibverbs.so.1; 17 providers (mlx4, mlx5, ...)"
    assert verdicts["python -m trainer"][1].startswith("usage: python -m trainer")


def test_launch_rows_of_a_bare_base_all_fail_and_say_why():
    verdicts = _launch_verdicts(_launch("debian-minbase"))
    assert {v for v, _ in verdicts.values()} == {MISMATCH}
    assert verdicts["mpijob sshd"][1] == "exit 1: sh: 5: /usr/sbin/sshd: not found / /var/run/sshd: missing"
    assert verdicts["mpirun on PATH"][1] == "not found"
    assert verdicts["mpirun over ssh"][1] == "exit 127: sh: 15: ssh-keygen: not found"
    assert verdicts["pmix (pyxis)"][1] == "ompi_info: not found"
    assert verdicts["verbs userspace"][1] == "libibverbs.so.1 not found; no provider in /etc/libibverbs.d"


@pytest.mark.parametrize("row, section, pattern, replacement", [
    ("mpijob sshd", "sshd", r"^strictmodes no$", "strictmodes yes"),
    ("mpijob sshd", "sshd", r"^permitrootlogin .*$", "permitrootlogin no"),
    ("mpijob ssh client", "ssh-client", r"^stricthostkeychecking .*$", "stricthostkeychecking ask"),
    ("mpijob ssh client", "ssh-client", r"^userknownhostsfile .*$", "userknownhostsfile ~/.ssh/known_hosts"),
    ("mpirun over ssh", "ssh-mpirun", r"^rank 0 of 1, ssh .*$", "rank 0 of 1, ssh "),  # not through sshd
    ("pmix (pyxis)", "pmix", r"^\s*MCA pmix: ext3x .*\n", ""),
    ("verbs userspace", "verbs", r"^\S+\.driver\n", ""),
])
def test_each_launch_requirement_fails_on_its_own(row, section, pattern, replacement):
    verdicts = _launch_verdicts(_launch("cpu", section, pattern, replacement))
    assert {r for r, (v, _) in verdicts.items() if v == MISMATCH} == {row}, verdicts


def test_a_failed_launch_row_fails_verification():
    stack = load_stack("cpu")
    probe = ProbeResult(output=_probe())
    assert compare(stack, probe, _launch("cpu")).ok and compare(stack, probe).ok
    bad = compare(stack, probe, _launch("cpu", "sshd", r"^strictmodes no$", "strictmodes yes"))
    assert not bad.ok and [m["row"] for m in bad.mismatches()] == ["mpijob sshd"]
    assert bad.mismatches()[0]["found"] == "StrictModes yes, PubkeyAuthentication yes, PermitRootLogin without-password"
    rows = launch_rows({"error": ("exit 125: no such image", None)})
    assert {r.verdict for r in rows} == {MISMATCH} and rows[0].found == "check could not run: exit 125: no such image"


def test_build_dry_run_prints_the_dockerfile_exactly_when_piped_to_a_narrow_terminal():
    """The Dockerfile between the 'Dockerfile' and 'build context' headers is render()'s text to the byte: no rich
    markup and no re-wrapping at the terminal width (a wrapped comment or RUN line would be a broken Dockerfile)."""
    from images.render import render
    stack = load_stack("ngc")
    p = cmd.run("build", "--stack", "ngc", "--dry-run", env={"PATH": "/usr/bin:/bin", "COLUMNS": "60"},
                inherit=False)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("Dockerfile\n") and "[bold]" not in p.stdout
    lines = p.stdout.splitlines()
    printed = "\n".join(lines[1:lines.index("build context")])
    assert printed.rstrip("\n") == render(stack, "docker", stack.base.reference).rstrip("\n")


def test_singularity_runtime_without_apptainer_is_a_clear_error(tmp_path):
    """A PATH without apptainer and singularity (an empty folder), whatever this machine has installed."""
    p = cmd.run("build", "--stack", "cpu", "--runtime", "singularity", env={"PATH": str(tmp_path)})
    assert p.returncode == 3
    assert "needs apptainer or singularity on PATH" in p.stderr and "Traceback" not in p.stdout + p.stderr


def test_build_without_the_conda_lock_names_the_command_that_makes_it_before_printing_anything():
    from tests.lib.paths import REPO
    lock = REPO / "envs" / "conda" / "conda" / "conda-lock.yml"
    if lock.exists():
        pytest.skip("a conda lock exists here")
    p = cmd.run("build", "--stack", "conda", "--dry-run", env={"PATH": "/usr/bin:/bin", "COLUMNS": "300"},
                inherit=False)
    assert p.returncode == 2
    assert p.stderr == ("error: build context: %s (for build-only/conda-lock.yml) does not exist (a conda lock: make "
                        "it with `invoke lock --stack conda`)\n" % lock)
