"""docs/extending.md's recipes, followed on toy examples: what the page says to touch is all it takes. (The
scheduler recipe's toy is in tests/test_launch_schedulers.py.)"""
from __future__ import annotations

from convert.lint import lint_definition
from envs.check import stack_findings
from envs.manifest import STACKS_DIR, known_stacks, load_stack
from images.render import render
from tests.lib.paths import REPO

PAGE = REPO / "docs" / "extending.md"


def test_a_stack_of_a_known_family_is_one_manifest(tmp_path):
    """A manifest in its own folder is a stack: it loads, `invoke stacks --check`'s judges find nothing of ours to
    fix, and both formats render (the definition passes the one lint of rendered definitions)."""
    (tmp_path / "toy.yaml").write_text((STACKS_DIR / "cpu.yaml").read_text().replace("name: cpu\n", "name: toy\n", 1))
    assert known_stacks(tmp_path) == ["toy"]
    toy = load_stack("toy", tmp_path)
    assert toy.name == "toy" and toy.family == "cpu"
    assert [f for f in stack_findings(toy) if f.severity == "error"] == []
    dockerfile, definition = render(toy, "docker"), render(toy, "singularity")
    assert "edit envs/stacks/toy.yaml" in dockerfile and "horovod==0.28.1" in dockerfile
    assert lint_definition(definition, "toy.def") == definition


def test_the_page_names_files_that_exist():
    """Every path the recipes name in code spans exists; one with a placeholder (``envs/stacks/<name>.yaml``, a file
    the recipe makes) names a folder that exists."""
    import re

    missing = []
    for span in re.findall(r"`([\w./<>-]+\.(?:py|yaml|yml|md|json|def|Dockerfile))`", PAGE.read_text()):
        if "/" not in span:
            continue
        path = REPO / span
        # a file the recipe makes: its folder exists (a placeholder folder filled with the cpu stack's name)
        exists = (REPO / re.sub(r"<\w+>", "cpu", str(path.parent.relative_to(REPO)))).is_dir() if "<" in span \
            else path.exists()
        if not exists:
            missing.append(span)
    assert missing == []


def test_a_check_is_a_function_a_code_and_its_evidence(tmp_path, monkeypatch):
    """A toy check (an observation, a judge, a code) registered alone: its recorded evidence is replayed through
    `invoke validate --from`, it PASSes on a healthy uptime and FAILs past its floor with its code; a fault line in
    the same evidence that nothing claims turns its PASS into WARN UNEXPLAINED_FAULT_SIGNAL."""
    import json
    import re

    import yaml

    from facts.parsers.observation import Observation
    from tests.lib import cli as cmd
    from tests.lib.bundle_corpus import build
    from validate import catalogue
    from validate.checks import registry
    from validate.result import failed, passed

    uptime = Observation(argv=("uptime",), also=lambda argv, env: tuple(argv[:1]) == ("uptime",),
                         parse=lambda run: float(re.search(r"load average: ([\d.]+)", run.stdout).group(1)))
    monkeypatch.setitem(catalogue.CODES, "TOY_LOAD_HIGH", catalogue.Code("the node is busy", catalogue.Action.RETRY))
    # registered where every check is, and taken out again at the end (the registry refuses an id twice)
    monkeypatch.setitem(registry.CHECKS, "toy.load", None)
    del registry.CHECKS["toy.load"]

    @registry.check("toy.load", "the 1-minute load average", fast=True)
    def toy_load(ctx):
        load = ctx.observe(uptime).value
        if load > 4:
            return failed("toy.load", "load average %.2f" % load, "at most 4", "wait, or drain the node",
                          "TOY_LOAD_HIGH")
        return passed("toy.load", "load average %.2f" % load, "at most 4")

    def judged(stdout: str) -> dict:
        spec = tmp_path / ("toy-%d.yaml" % len(list(tmp_path.glob("*.yaml"))))
        spec.write_text(yaml.safe_dump({"about": "a toy", "evidence": [{"tool": ["uptime"], "stdout": stdout}]}))
        folder = tmp_path / spec.stem
        build(spec, folder)
        ran = cmd.run("validate", "--from", str(folder), "--only", "toy.load", "--json", str(folder / "r.json"))
        assert (folder / "r.json").is_file(), ran.stderr
        result = json.loads((folder / "r.json").read_text())["results"][0]
        return {"exit": ran.returncode, "status": result["status"], "code": result["diagnosis"]}

    line = " 10:00:00 up 3 days,  2 users,  load average: %s, 0.50, 0.40\n"
    assert judged(line % "0.42") == {"exit": 0, "status": "PASS", "code": None}
    assert judged(line % "7.10") == {"exit": 1, "status": "FAIL", "code": "TOY_LOAD_HIGH"}
    assert judged(line % "0.42" + "ERROR: uptime: cannot read /proc/loadavg of cpu 3\n") == {
        "exit": 0, "status": "WARN", "code": "UNEXPLAINED_FAULT_SIGNAL"}


def test_a_fault_is_a_table_entry_and_a_pattern(tmp_path, monkeypatch):
    """A toy fault, added in this test alone as docs/extending.md's "Add a fault" says: an entry of the table of
    faults (code, meaning, action, remedy) and a known cause with its own message's pattern and source (a new kind of
    fault line). `invoke train --explain` of a log holding the line names it first, with its code and the table's
    remedy, and exits 1 (a failure explained)."""
    from facts import faults_table
    from facts.parsers import faults
    from tests.lib import cli as cmd

    fix = "free space on the scratch file system the run writes to (df -h /scratch), or point --output elsewhere"
    monkeypatch.setitem(faults_table.CODES, "TOY_SCRATCH_FULL", faults_table.Code(
        "the file system a rank writes to is full", faults_table.Action.RECONFIGURE, remedy=fix))
    kind = faults.Kind("disk_full", "a file system filled up", faults._rx(r"No space left on device"),
                       "the kernel's ENOSPC message (errno 28: man 3 errno)")
    monkeypatch.setattr(faults, "KINDS", faults.KINDS + (kind,))
    monkeypatch.setitem(faults.KIND, kind.name, kind)
    cause = faults._cause("TOY_SCRATCH_FULL", "disk_full",
                          (r"\[Errno 28\] No space left on device: '(?P<path>[^']+)'",),
                          "the file system of %(path)s is full", "Python's OSError for ENOSPC (errno 28)")
    monkeypatch.setattr(faults, "CAUSES", (cause,) + faults.CAUSES)
    monkeypatch.setitem(faults.CAUSE, cause.code, cause)
    log = tmp_path / "launch.log"
    log.write_text("[1,0]<stdout>:epoch 1/3\n"
                   "[1,1]<stderr>:OSError: [Errno 28] No space left on device: '/scratch/run/ckpt-1.h5'\n"
                   "[1,0]<stderr>:horovod.common.exceptions.HorovodInternalError: Horovod has been shut down. This was "
                   "caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a "
                   "tensor after one of the ranks finished execution.\n")
    ran = cmd.run("train", "--explain", str(log))
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert ("the first fault (rank 1, line 2): `OSError: [Errno 28] No space left on device: "
            "'/scratch/run/ckpt-1.h5'`, a file system filled up: the file system of /scratch/run/ckpt-1.h5 is full "
            "[TOY_SCRATCH_FULL]; " + fix) in ran.stdout, ran.stdout
