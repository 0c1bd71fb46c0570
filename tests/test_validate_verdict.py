"""Issue 24, part 2: a verdict a person can act on. Every non-PASS result carries a catalogued code and its next
action on one ladder (``validate/catalogue.py``); the JSON report has a published schema naming its catalogue
(``validate/schema/report-v1.json``, the model ``validate/report_schema.py``); measured checks repeat a noisy
shortfall and report each try (``validate/tries.py``); ``--fast`` selects only checks that launch nothing."""
from __future__ import annotations

import ast
import json
import os
import re

import jsonschema
import pytest

from chexstack.errors import ChexstackError
from chexstack.tools import ToolRun
from facts.parsers.nccl import parse_all_reduce_perf
from tests.lib import cli as cmd
from tests.lib.bundle_corpus import build, specs
from tests.lib.paths import FIXTURES, REPO
from validate import catalogue, report_schema
from validate import report as report_module
from validate.catalogue import CODES, Action
from validate.checks import CHECKS, Context
from validate.checks.nccl import Floor, judge_busbw
from validate.evidence import Bundle, MissingEvidence, Replay
from validate.report import run_checks, select
from validate.result import CheckResult, Status, failed, passed
from validate.tries import TRIES, until_pass

CHECK_MODULES = sorted((REPO / "validate" / "checks").glob("*.py"))
#: The classifiers whose codes checks pass on as their verdict's (``failed(..., cause)``).
CLASSIFIERS = [REPO / "facts" / "parsers" / name for name in ("nccl.py", "mpi.py", "container.py", "nvidia_smi.py")]
#: Upper-case literals of those modules that are environment variables, not codes.
NOT_CODES = {"NCCL_DEBUG"}
CODE = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")
#: (function, index of its code argument) of every way a check makes a non-PASS result.
VERDICTS = {"failed": 4, "warned": 4, "skipped": 3, "CheckResult": 5, "Reason": 1}


def test_the_ladder_runs_from_cheapest_to_most_drastic():
    assert [a.word for a in sorted(Action)] == ["none", "retry", "reconfigure", "reload_module", "reboot",
                                                "replace_hardware"]
    assert max(Action.RETRY, Action.REBOOT, Action.RECONFIGURE) == Action.REBOOT
    assert all(isinstance(c.action, Action) and c.meaning for c in CODES.values())
    assert {code for code, c in CODES.items() if c.noisy} == {"NCCL_BUSBW_LOW", "MPI_BANDWIDTH_LOW",
                                                               "IB_BANDWIDTH_LOW"}


def _verdict_calls(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in VERDICTS:
            yield node


def test_every_non_pass_path_of_every_check_names_a_catalogued_code():
    """Every ``failed``/``warned``/``skipped``/``CheckResult``/``Reason`` in a check module: a code given as a literal
    is in the catalogue; a FAIL or WARN without a code, or a SKIP whose reason is a literal text without one, is
    named. A code given as an expression (a classifier's cause) is the next test's and the corpus's."""
    bad = []
    for path in CHECK_MODULES:
        for call in _verdict_calls(path):
            where = "%s:%d %s" % (path.relative_to(REPO), call.lineno, call.func.id)
            pos = VERDICTS[call.func.id]
            code = call.args[pos] if len(call.args) > pos else next(
                (k.value for k in call.keywords if k.arg in ("code", "diagnosis")), None)
            if isinstance(code, ast.Constant):
                if code.value not in CODES:
                    bad.append("%s: %r is not in validate/catalogue.py" % (where, code.value))
            elif code is None and call.func.id in ("failed", "warned"):
                bad.append("%s: no code" % where)
            elif code is None and call.func.id == "skipped" and isinstance(call.args[1], (ast.Constant, ast.BinOp,
                                                                                         ast.JoinedStr)):
                bad.append("%s: a SKIP reason without a code" % where)
    assert not bad, "\n".join(bad)


def test_every_code_a_classifier_returns_is_catalogued():
    found = {}
    for path in CLASSIFIERS:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.match(node.value):
                found.setdefault(node.value, path.name)
    missing = {code: where for code, where in found.items() if code not in CODES and code not in NOT_CODES}
    assert not missing, missing


def test_a_result_without_a_catalogued_code_is_an_error_that_keeps_its_verdict():
    from validate.checks.registry import check

    @check("test.uncoded", "returns a FAIL without a code", fast=True)
    def uncoded(ctx):
        return failed("test.uncoded", "broken", "fine", "fix it")

    try:
        [result] = run_checks(Context(), ["test.uncoded"]).results
    finally:
        del CHECKS["test.uncoded"]
    assert result.status == Status.ERROR and result.diagnosis == "CHECK_CRASHED"
    assert "FAIL without a catalogued code (None)" in result.measured
    assert result.details == ["the check's verdict: FAIL broken", "remedy: fix it"]


@pytest.fixture(scope="module")
def corpus_reports(tmp_path_factory):
    """Every bundle of the corpus judged in full and with --fast: {spec: (bundle folder, full report, fast
    report)}."""
    saved = report_module.print_table
    report_module.print_table = lambda report: None
    out = {}
    try:
        for spec in specs():
            folder = tmp_path_factory.mktemp(spec.stem)
            build(spec, folder / "bundle")
            for name, fast in (("full", False), ("fast", True)):
                report_module.validate(json_path=str(folder / (name + ".json")), from_bundle=str(folder / "bundle"),
                                       fast=fast)
            out[spec.stem] = (folder / "bundle",) + tuple(json.loads((folder / (n + ".json")).read_text())
                                                          for n in ("full", "fast"))
    finally:
        report_module.print_table = saved
    return out


def test_every_result_of_the_corpus_carries_its_code_and_action_and_the_reports_validate(corpus_reports):
    """The real reports of every recorded node (tests/data/bundles) against the published schema; each non-PASS
    result's code is catalogued with the action the report gives, and the node's action is its FAILs' worst."""
    schema = json.loads(report_schema.REPORT_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    seen = set()
    for stem, (_, *reports) in corpus_reports.items():
        for report in reports:
            errors = sorted(validator.iter_errors(report), key=lambda e: list(e.path))
            assert not errors, "%s: %s" % (stem, errors[0])
            assert report["catalogue"] == {"name": catalogue.CATALOGUE, "sha256": catalogue.digest(CHECKS)}
            fails = []
            for r in report["results"]:
                if r["status"] == "PASS":
                    assert r["diagnosis"] is None and r["action"] is None, r
                    continue
                assert r["diagnosis"] in CODES and r["action"] == CODES[r["diagnosis"]].action.word, (stem, r)
                seen.add(r["diagnosis"])
                if r["status"] == "FAIL":
                    fails.append(CODES[r["diagnosis"]].action)
            assert report["action"] == (max(fails).word if fails else None), stem
    assert len(seen) >= 30 and {"NOT_APPLICABLE", "EVIDENCE_MISSING"} <= seen  # not vacuous: 37 codes today


def test_a_non_pass_result_without_a_code_does_not_validate():
    schema = json.loads(report_schema.REPORT_FILE.read_text())
    report = report_module.Report([passed("a.b", "fine")], 0.1).to_json()
    report["results"].append(dict(report["results"][0], status="FAIL", measured="bad"))
    with pytest.raises(jsonschema.ValidationError, match="'string'"):
        jsonschema.validate(report, schema)
    with pytest.raises(ValueError, match="a FAIL result needs a diagnosis code"):
        report_schema.Report.model_validate(report)


def test_the_published_files_are_the_model_and_the_catalogue():
    """validate/schema/*.json are generated: the model's schema and the catalogue's document, byte for byte
    (regenerate both with the two lines of the message, and review the diff)."""
    regenerate = ("regenerate: .venv/bin/python -c \"from validate import report_schema as s, catalogue as c; "
                  "from validate.checks import CHECKS; s.REPORT_FILE.write_text(s.schema_text()); "
                  "s.CATALOGUE_FILE.write_text(c.text(CHECKS))\"")
    assert report_schema.REPORT_FILE.read_text() == report_schema.schema_text(), regenerate
    assert report_schema.CATALOGUE_FILE.read_text() == catalogue.text(CHECKS), regenerate
    doc = json.loads(report_schema.REPORT_FILE.read_text())
    assert doc["$id"] == report_schema.SCHEMA == "chexstack.validate.report/1"
    assert doc["properties"]["schema"]["const"] == report_schema.SCHEMA
    assert set(json.loads(report_schema.CATALOGUE_FILE.read_text())["codes"]) == set(CODES)


# --- measured checks repeat a noisy shortfall --------------------------------------------------------------------

def _h200_run():
    return parse_all_reduce_perf((FIXTURES / "nccl-tests-all_reduce_perf-8x-h200-8G-nvls.txt").read_text())


def test_a_shortfall_is_measured_again_and_each_try_reported():
    """nccl.busbw's verdict on a real 8× H200 run, judged first against a floor it misses (a noisy try), then one
    it meets: PASS on the second try, both tries in ``tries`` and in the details."""
    run = _h200_run()
    busbw = run.avg_busbw
    floors = [Floor(busbw + 50, "8× H200", "test: above the run"), Floor(busbw - 50, "8× H200", "test: below")]
    result = until_pass(lambda n: judge_busbw(run, floors[n - 1]))
    assert result.status == Status.PASS and [t["status"] for t in result.tries] == ["FAIL", "PASS"]
    assert result.tries[0]["diagnosis"] == "NCCL_BUSBW_LOW" and result.tries[1]["diagnosis"] is None
    assert result.details[:2] == ["try 1 of %d: FAIL %s" % (TRIES, result.measured),
                                  "try 2 of %d: PASS %s" % (TRIES, result.measured)]


def test_a_shortfall_in_every_try_fails_and_a_proven_fault_is_never_retried():
    run = _h200_run()
    low = Floor(run.avg_busbw + 50, "8× H200", "test: above the run")
    calls = []
    result = until_pass(lambda n: calls.append(n) or judge_busbw(run, low))
    assert result.status == Status.FAIL and result.diagnosis == "NCCL_BUSBW_LOW" and calls == [1, 2, 3]
    assert len(result.tries) == TRIES and sum(d.startswith("try ") for d in result.details) == TRIES
    calls.clear()
    wrong = until_pass(lambda n: calls.append(n) or failed("nccl.busbw", "3 wrong values", "0", "drain",
                                                           "NCCL_WRONG_RESULTS"))
    assert calls == [1] and wrong.diagnosis == "NCCL_WRONG_RESULTS" and len(wrong.tries) == 1
    assert not any(d.startswith("try ") for d in wrong.details)  # one try: the details stay as they were


def test_a_bundle_replays_each_try_and_one_with_fewer_tries_says_so():
    argv = ("all_reduce_perf", "-b", "1G")
    bundle = Bundle()
    for out in ("first", "second"):
        bundle.add_tool(ToolRun(argv, 0, out, ""))
    ctx = Context(evidence=Replay(bundle))
    assert [ctx.tool(*argv, attempt=n).stdout for n in (1, 2)] == ["first", "second"]
    with pytest.raises(MissingEvidence, match=r"\(try 3\)"):
        ctx.tool(*argv, attempt=3)

    def attempt(n):
        res = ctx.tool(*argv, attempt=n)
        return failed("mpi.bandwidth", "low (%s)" % res.stdout, "high", "tune", "MPI_BANDWIDTH_LOW")

    result = until_pass(attempt)
    assert [t["measured"] for t in result.tries] == ["low (first)", "low (second)"]
    assert result.details[-1].startswith("try 3 of 3 not in the bundle (`all_reduce_perf -b 1G` (try 3))")


# --- --fast: a Slurm prolog's selection ------------------------------------------------------------------------------

#: Command lines that launch work: ranks, containers, a measurement between hosts, a sampling loop.
LAUNCHERS = {"mpirun", "mpiexec", "srun", "horovodrun", "all_reduce_perf", "ib_write_bw", "iperf3", "ssh"}
CONTAINER_RUNS = {("docker", "run"), ("docker", "exec"), ("apptainer", "exec"), ("apptainer", "run"),
                  ("apptainer", "shell"), ("singularity", "exec"), ("singularity", "run"), ("singularity", "shell")}
LOOP_FLAGS = {"-l", "--loop", "-lms", "--loop-ms", "dmon", "pmon"}
#: A launcher asked only for its version or help starts nothing (``mpirun --version``).
QUERIES = {"--version", "-V", "--help", "-h"}


def launches(argv) -> bool:
    names = [os.path.basename(a) for a in argv]
    if names and names[0] in LAUNCHERS and names[1:] and set(names[1:]) <= QUERIES:
        return False
    return bool(LAUNCHERS & set(names) or tuple(names[:2]) in CONTAINER_RUNS
                or ("nvidia-smi" in names and LOOP_FLAGS & set(argv)))


class Recording:
    """Evidence that records every command line a check asks for, and answers from ``inner``."""

    def __init__(self, inner):
        self.inner, self.host, self.argvs = inner, inner.host, []

    def tool(self, argv, timeout, env, **kw):
        self.argvs.append(tuple(argv))
        return self.inner.tool(argv, timeout, env, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_every_check_says_whether_it_is_fast_and_fast_leaves_out_the_launching_ones():
    fast = select([], [], fast=True)
    assert fast == [c for c in select([], []) if CHECKS[c].fast] and 0 < len(fast) < len(CHECKS)
    launching = {"mpi.launch", "mpi.bandwidth", "nccl.busbw", "nccl.transport", "nccl.init", "ib.write_bw",
                 "container.gpus", "container.singularity_nv", "container.rank_limits", "horovod.image"}
    assert not launching & set(fast)
    assert select(["gpu"], ["gpu.dcgm"], fast=True) == [c for c in fast if c.startswith("gpu.") and c != "gpu.dcgm"]
    with pytest.raises(ChexstackError, match="--fast --only mpi.launch: selects no check"):
        select(["mpi.launch"], [], fast=True)


def test_fast_asks_for_no_launch_on_any_recorded_node(corpus_reports):
    """Every bundle of the corpus judged with the --fast selection: no check asks for a command line that launches
    ranks, a container, a measurement between hosts or a sampling loop; the full selection does (the recorder sees
    them), and the fast report holds only fast checks."""
    seen_full = []
    for stem, (folder, _, _) in corpus_reports.items():
        bundle = Replay(Bundle.load(folder))
        for fast, sink in ((True, None), (False, seen_full)):
            evidence = Recording(bundle)
            run_checks(Context(hosts=list(bundle.bundle.meta.get("hosts") or []), evidence=evidence),
                       select([], [], fast))
            launched = [a for a in evidence.argvs if launches(a)]
            if sink is None:
                assert not launched, (stem, launched)
            else:
                sink += launched
    assert seen_full, "the recorder sees the full selection's launches"
    for _, full, fast in corpus_reports.values():
        assert fast["selection"] == "fast" and full["selection"] == "full"
        assert [r["id"] for r in fast["results"]] == [r["id"] for r in full["results"] if CHECKS[r["id"]].fast]


def test_fast_on_this_node_launches_nothing():
    """--fast live on this machine: every tool a fast check runs is recorded before it runs; none launches."""
    from validate.evidence import Live

    evidence = Recording(Live())
    report = run_checks(Context(evidence=evidence), select([], [], fast=True))
    assert evidence.argvs and not [a for a in evidence.argvs if launches(a)], evidence.argvs
    assert {r.id for r in report.results} == {c for c in CHECKS if CHECKS[c].fast}


def test_validate_fast_on_the_command_line(tmp_path):
    p = cmd.run("validate", "--fast", "--only", "gpu,container,mpi", "--json", str(tmp_path / "r.json"))
    assert p.returncode in (0, 1), p.stdout + p.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["selection"] == "fast" and report["schema"] == "chexstack.validate.report/1"
    assert {r["id"] for r in report["results"]} == {c for c in CHECKS if CHECKS[c].fast and
                                                    c.split(".")[0] in ("gpu", "container", "mpi")}
    jsonschema.validate(report, json.loads(report_schema.REPORT_FILE.read_text()))
    for r in report["results"]:
        if r["status"] != "PASS":  # the table shows each code under its status
            assert r["diagnosis"] in p.stdout


def test_the_table_puts_the_action_before_the_remedy():
    from validate.report import remedy_cell

    fail = failed("gpu.xid", "Xid 79", "none", "drain the node", "GPU_XID")
    assert remedy_cell(fail) == "reboot: drain the node"
    assert remedy_cell(passed("gpu.xid", "none")) == ""
    assert remedy_cell(CheckResult("x.y", Status.SKIP, "n/a", diagnosis="NOT_APPLICABLE")) == ""


def test_the_table_never_breaks_a_check_id_or_a_code_across_lines(monkeypatch):
    """On an 80-column terminal (a pipe, CI's log) the longest check ID and diagnosis code stay whole, so a user
    can search for them; the other cells wrap, and nothing of the measured line is cut."""
    from chexstack.console import console
    longest = max(CODES, key=len)
    measured = "docker engine not reachable: " + "word " * 40 + "the end of the line"
    result = failed("container.apptainer", measured, "a running dockerd", "start it", longest)
    monkeypatch.setattr(console, "width", 80)
    with console.capture() as captured:
        report_module.print_table(report_module.Report([result], 0.1))
    lines = captured.get().splitlines()
    assert any(longest in line for line in lines) and any("container.apptainer" in line for line in lines)
    top = next(line for line in lines if line.startswith("┏"))
    left, right = [i for i, c in enumerate(top) if c in "┏┳┓"][2:4]  # the measured column's borders
    column = "".join(line[left + 1:right] for line in lines if line.startswith("│"))
    assert "".join(column.split()) == "".join(measured.split())  # folded, not cut
