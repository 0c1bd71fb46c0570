"""The table of faults (``facts/faults_table.py``) is the only place a fault's code, meaning, action and remedy are
kept: no other module of the product holds a dict of codes to remedy texts, every code the product names (a
result's diagnosis, a known cause, a lexicon entry's claim, a remedy looked up) is in it, and its views
(``validate.catalogue``, ``launch.failure``'s remedy tables, ``facts.parsers.faults.CAUSES``) read it."""
from __future__ import annotations

import ast
import re

import pytest
import yaml

from facts import faults_table, signals
from facts.parsers import faults
from launch import failure
from tests.lib.paths import REPO
from validate import catalogue

#: the product's packages (tests/, scripts/ and docs are not)
AREAS = ("chexstack", "facts", "validate", "launch", "convert", "envs", "images", "bench", "trainer")
TABLE = REPO / "facts" / "faults_table.py"
#: a catalogue code's shape: upper case words joined by underscores
CODE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")


def _modules():
    for area in AREAS:
        for path in sorted((REPO / area).rglob("*.py")):
            if path != TABLE:
                yield path, ast.parse(path.read_text(), str(path))


def _is_text(node: ast.AST) -> bool:
    """A string literal, an f-string, or a concatenation or %-format of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and _is_text(node.left)


def test_no_other_module_keeps_a_table_of_codes_to_remedies():
    """A dict literal whose keys are catalogue codes and whose values are texts is a second table of remedies."""
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                pairs = [(k.value, v) for k, v in zip(node.keys, node.values)
                         if isinstance(k, ast.Constant) and k.value in catalogue.CODES]
                if any(_is_text(v) for _, v in pairs):
                    found.append("%s:%d (%s)" % (path.relative_to(REPO), node.lineno, ", ".join(c for c, _ in pairs)))
    assert not found, "code -> remedy tables outside facts/faults_table.py: %s" % found


def _codes_named() -> dict[str, str]:
    """Every code the product names, with where: a ``diagnosis=`` keyword, the code argument of a result
    (``failed``/``warned``: the fifth; ``skipped``: the fourth), a known cause (``_cause``), a remedy looked up
    (``remedy``, ``remedy_or``, ``run_fix``, ``remedies``) and a lexicon entry's ``claimed_by``."""
    named = {}
    for path, tree in _modules():
        where = str(path.relative_to(REPO))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            args: list[ast.AST] = []
            if name in ("failed", "warned") and len(node.args) >= 5:
                args.append(node.args[4])
            elif name == "skipped" and len(node.args) >= 4:
                args.append(node.args[3])
            elif name in ("_cause", "remedy", "table_remedy", "remedy_or", "run_fix") and node.args:
                args.append(node.args[0])
            elif name == "remedies" and node.args and isinstance(node.args[0], (ast.Tuple, ast.List)):
                args += node.args[0].elts
            args += [k.value for k in node.keywords if k.arg in ("diagnosis", "code")]
            for arg in args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and CODE.match(arg.value):
                    named.setdefault(arg.value, "%s:%d" % (where, node.lineno))
    for entry in yaml.safe_load(signals.LEXICON_FILE.read_text()):
        for code in entry.get("claimed_by") or []:
            if code != "*":
                named.setdefault(code, "facts/signals.yaml: %s" % entry["id"])
    return named


def test_every_code_the_product_names_is_in_the_table():
    named = _codes_named()
    assert len(named) > 100  # the scan reads the product's results, causes and lexicon
    missing = {code: where for code, where in named.items() if code not in faults_table.CODES}
    assert not missing, "codes named but not in facts/faults_table.py: %s" % missing


def test_the_catalogue_is_the_table():
    """validate.catalogue publishes the table itself: the same entries, the same ladder."""
    assert catalogue.CODES is faults_table.CODES and catalogue.Action is faults_table.Action
    assert catalogue.Code is faults_table.Code


@pytest.mark.parametrize("name", ["LAUNCH_REMEDY", "NCCL_REMEDY", "RUNTIME_REMEDY", "PYXIS_REMEDY", "FAULT_REMEDY"])
def test_launch_remedy_tables_are_views_of_the_table(name):
    table = getattr(failure, name)
    assert table and all(fix == faults_table.remedy(code) for code, fix in table.items())
    assert failure.GPU_LAUNCH_REMEDY == {"MPI_NOT_ENOUGH_SLOTS": faults_table.CODES["MPI_NOT_ENOUGH_SLOTS"].gpu_remedy}


def test_every_known_cause_takes_its_remedy_from_the_table():
    for cause in faults.CAUSES:
        assert cause.code in faults_table.CODES
        assert cause.remedy == faults_table.run_fix(cause.code), cause.code


def test_a_remedy_template_names_only_keys_its_readers_fill():
    """A remedy is a text or a %-template of the keys ``launch.failure`` fills (hosts, command, image, name, stem)."""
    for code, entry in faults_table.CODES.items():
        for text in (entry.remedy, entry.gpu_remedy, entry.run_remedy):
            if text:
                keys = set(re.findall(r"%\((\w+)\)s", text))
                assert keys <= {"hosts", "command", "image", "name", "stem"}, (code, keys)


def test_a_code_without_a_remedy_is_refused_by_name():
    with pytest.raises(KeyError, match="NOT_APPLICABLE has no remedy"):
        faults_table.remedy("NOT_APPLICABLE")
    assert faults_table.remedy_or("NOT_APPLICABLE", "x") == "x" and faults_table.remedy_or(None, "y") == "y"


def test_the_generic_fault_lines_of_a_run_are_the_lexicons():
    """FATAL, Aborted, Segmentation fault and out-of-memory lines: the node reading (``facts/signals.yaml``'s
    entries) and a run's reading (``facts.parsers.faults.KINDS``) are kept in one file, each entry with its source."""
    for entry in ("fatal", "aborted", "segfault", "oom"):
        assert signals.by_id(entry).source.startswith("https://")
    assert faults.KIND["crash"].patterns == signals.run_log_patterns("crash")
    assert faults.KIND["out_of_memory"].patterns == signals.run_log_patterns("out_of_memory")
    assert set(signals.run_log_patterns("container_start")) <= set(faults.KIND["container_start"].patterns)
    for line, kind in [("Fatal Python error: Aborted", "crash"), ("Segmentation fault (core dumped)", "crash"),
                       ("FATAL:   container creation failed: no loop devices available", "container_start"),
                       ("Out of memory: Killed process 4242 (python)", "out_of_memory")]:
        assert faults.classify_line(line)[0] == kind, line
        assert signals.scan(line, "tool"), line  # the node reading names it too


def test_a_run_log_kind_the_runs_do_not_read_is_refused_by_name(tmp_path, monkeypatch):
    lexicon = tmp_path / "signals.yaml"
    lexicon.write_text("- id: toy\n  run_log:\n    disk_full: ['No space left']\n")
    monkeypatch.setattr(signals, "LEXICON_FILE", lexicon)
    signals.run_log_patterns.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"signals.yaml: entry 1 \(toy\): run_log: unknown run-log kind"):
            signals.run_log_patterns("crash")
    finally:
        monkeypatch.undo()
        signals.run_log_patterns.cache_clear()


#: Check modules that still read another check module's reading (issue 40: "checks import each other for shared
#: readings"): GPU snapshot per context (``validate.checks.gpu.snapshot``, ``gpu_count``, ``no_gpu_reason``), the HCAs
#: (``validate.checks.infiniband.hcas``, ``ports_report``, ``DOCKER_RDMA_FLAGS``), mpirun's argv
#: (``validate.checks.mpi.mpirun_argv``) and the stack's image (``validate.checks.container.stack_image``). A new edge
#: is a reading to put in ``validate/checks/readings.py`` (or a facts/ parser); this list only shrinks.
REMAINING_CHECK_IMPORTS = {
    ("container", "gpu"), ("container", "infiniband"), ("container", "mpi"), ("horovod", "container"),
    ("input_capacity", "gpu"), ("mpi", "gpu"), ("topology", "gpu"), ("cuda", "gpu"), ("nccl", "gpu"),
    ("nccl", "infiniband"), ("nccl", "mpi")}
#: modules of validate/checks/ that hold shared readings or the registry, not checks
SHARED = {"registry", "readings", "network", "__init__"}


def test_checks_read_shared_readings_from_their_home_not_from_each_other():
    edges = set()
    for path in sorted((REPO / "validate" / "checks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("validate.checks."):
                other = node.module.split(".")[2]
                if other not in SHARED and path.stem not in SHARED:
                    edges.add((path.stem, other))
    assert edges <= REMAINING_CHECK_IMPORTS, edges - REMAINING_CHECK_IMPORTS
    assert edges == REMAINING_CHECK_IMPORTS, "an edge went away: take it off the list %s" % (
        REMAINING_CHECK_IMPORTS - edges)
