"""The test house's rules that a reader cannot see fail (CONTRIBUTING.md, "Tests"), checked over the test modules'
own syntax trees: tests never import each other (what several modules share lives in ``tests/lib``)."""
from __future__ import annotations

import ast

from tests.lib.paths import REPO

MODULES = sorted((REPO / "tests").glob("test_*.py"))


def imported_modules(tree: ast.AST) -> list[str]:
    """Every module an ``import`` or ``from … import`` of ``tree`` names (relative imports as ``.name``)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return names


def test_no_test_module_imports_another():
    found = ["%s imports %s" % (p.name, name) for p in MODULES
             for name in imported_modules(ast.parse(p.read_text()))
             if name.split(".")[-1].startswith("test_") or name.startswith("tests.test_")]
    assert found == []


def test_the_import_rule_finds_an_import_of_a_test_module():
    tree = ast.parse("from tests.test_convert import own_pairs\nimport tests.lib.cli\nfrom .test_x import y\n")
    assert imported_modules(tree) == ["tests.test_convert", "tests.lib.cli", ".test_x"]


#: What runs a command: ``tests.lib.cli``'s ``run``/``invoke`` (as ``cmd.run``), ``subprocess``' runners, and the
#: read-only mount's runner.
RUNNERS = {("cmd", "run"), ("cmd", "invoke"), ("subprocess", "run"), ("subprocess", "Popen"),
           ("subprocess", "check_output"), ("subprocess", "call")}
#: What states the exit status: a comparison of ``returncode``, ``expect=`` (``tests.lib.cli.expected``), or a
#: runner that raises on any other status than 0.
STATED = ("returncode", "expect=", "check=True", "check_output", "check_call", ".wait(")


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def _called(fn: ast.AST) -> set[str]:
    """The functions ``fn`` calls by their bare name (its module's, or imported from tests/lib by name)."""
    return {c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}


def _runs_directly(fn: ast.AST) -> bool:
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
               and (c.func.value.id, c.func.attr) in RUNNERS or isinstance(c, ast.Call)
               and isinstance(c.func, ast.Name) and c.func.id == "run_with_read_only" for c in ast.walk(fn))


def _closure(funcs: dict[str, ast.FunctionDef], seeds: set[str]) -> set[str]:
    """``seeds`` and every function of ``funcs`` that calls one of them, transitively."""
    group, grew = set(seeds), True
    while grew:
        grew = False
        for n, f in funcs.items():
            if n not in group and _called(f) & group:
                group.add(n)
                grew = True
    return group


def _flags(funcs: dict[str, ast.FunctionDef], runs: set[str] = frozenset(), states: set[str] = frozenset()):
    """(the functions that run a command, those that state an exit status), each closed over calls."""
    return (_closure(funcs, {n for n, f in funcs.items() if _runs_directly(f)} | set(runs)),
            _closure(funcs, {n for n, f in funcs.items() if any(s in ast.unparse(f) for s in STATED)} | set(states)))


def silent_commands(modules: dict[str, str], helpers: dict[str, str]) -> list[str]:
    """``modules``: test module name -> source; ``helpers``: tests/lib module name (``cli``) -> source. Every
    ``test_*`` function that runs a command (itself, or through a helper of its module or one it imports from
    tests/lib) must state the exit status it expects, itself or in a helper it calls (Apptainer's e2e rule:
    ``ExpectExit`` is always required). Returns ``module:line name`` of each that does not."""
    lib = {}
    for name, source in helpers.items():
        funcs = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}
        lib[name] = _flags(funcs)
    # tests/lib/cli.py's own runners state nothing: the status is stated where they are called (expect=)
    lib["cli"] = ({"run", "invoke"}, set())
    found = []
    for name, source in sorted(modules.items()):
        tree = ast.parse(source)
        imported_runs, imported_states = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests.lib."):
                runs, states = lib.get(node.module.rsplit(".", 1)[1], (set(), set()))
                for a in node.names:
                    imported_runs |= {a.asname or a.name} if a.name in runs else set()
                    imported_states |= {a.asname or a.name} if a.name in states else set()
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        runs, states = _flags(funcs, imported_runs, imported_states)
        found += ["%s:%d %s" % (name, f.lineno, n) for n, f in funcs.items()
                  if n.startswith("test_") and n in runs and n not in states]
    return found


def test_every_test_that_runs_a_command_states_its_exit_status():
    modules = {p.name: p.read_text() for p in MODULES}
    helpers = {p.stem: p.read_text() for p in sorted((REPO / "tests" / "lib").glob("*.py"))}
    assert silent_commands(modules, helpers) == []


def test_the_exit_rule_finds_a_command_whose_exit_nobody_states():
    module = ("from tests.lib import cli as cmd\n\n"
              "def _explain(log):\n    return cmd.run('train', '--explain', log).stdout\n\n"
              "def test_silent():\n    assert 'cause' in _explain('x')\n\n"
              "def test_stated():\n    assert cmd.run('stacks', expect=0).stdout\n\n"
              "def test_through_a_stating_helper():\n    assert _ok()\n\n"
              "def _ok():\n    r = cmd.run('stacks')\n    return r.returncode == 0\n")
    assert silent_commands({"test_x.py": module}, {}) == ["test_x.py:6 test_silent"]
