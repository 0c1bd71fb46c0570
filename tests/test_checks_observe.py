"""A check observes, then judges (``validate/__init__.py``, the contract of a check): which command lines a parser
can read, and how a run's command line chooses the parser, is said once, by an ``Observation`` next to the parser
in ``facts/parsers``; ``validate/checks/`` never looks at a run's argv. Read from the checks' source (ast), nothing is
executed.

What counts as inspecting argv, in any module of ``validate/checks/`` but ``registry.py`` (the ``Context`` that runs
observations):

- reading a command line: any attribute ``.argv`` (``res.argv``, ``res.argv[0]``, ``"-x" in res.argv``);
- a recogniser: a function with a parameter named ``argv`` (the ``(argv, env) -> bool`` of an ``Observation``);
- subscripting or comparing a name ``argv``: ``argv[0]``, ``argv == ("ibstat",)``, ``"--nv" in argv``;
- matching a recorded transcript's command line: a use of ``shell_command``.

Building a command line is not inspecting one: ``argv = ["mpirun"]``, ``argv += [...]``, ``argv + [...]``, ``argv is
None``; nor is running one (``ctx.tool(*argv)``, ``ctx.observe(OBS, *argv)``). A run's command line for a message is
``ToolRun.command`` / ``Observed.command``.
"""
from __future__ import annotations

import ast
from pathlib import Path

from tests.lib.paths import REPO

CHECKS = REPO / "validate" / "checks"
#: the Context itself: it runs an observation's argv
EXEMPT = {"registry.py"}


def argv_inspections(source: str) -> list[tuple[int, str]]:
    """(line, what) for every inspection of argv in ``source`` (the module docstring's list)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "argv":
            found.append((node.lineno, "reads .argv"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and any(
                a.arg == "argv" for a in node.args.args + node.args.kwonlyargs):
            found.append((node.lineno, "a recogniser of argv"))
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "argv":
            found.append((node.lineno, "argv[...]"))
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                   for op in node.ops) and any(
                isinstance(side, ast.Name) and side.id == "argv" for side in [node.left, *node.comparators]):
            found.append((node.lineno, "compares argv"))
        elif isinstance(node, ast.Name) and node.id == "shell_command" or isinstance(node, ast.alias) and (
                node.name == "shell_command"):
            found.append((getattr(node, "lineno", 0), "shell_command"))
    return found


def test_the_detector_finds_each_form_and_spares_building_a_command_line():
    inspecting = {
        "x = res.argv": "reads .argv",
        "ok = '-q' in res.argv": "reads .argv",
        "def docker_run(argv, env):\n    return True": "a recogniser of argv",
        "like = lambda argv, env: True": "a recogniser of argv",
        "tool = argv[0]": "argv[...]",
        "same = argv == ('ibstat',)": "compares argv",
        "nv = '--nv' in argv": "compares argv",
        "from facts.parsers.observation import shell_command": "shell_command",
        "line = shell_command(x)": "shell_command",
    }
    for source, what in inspecting.items():
        assert what in [w for _, w in argv_inspections(source)], source
    building = ("argv = ['mpirun']\nargv += ['-np', '2']\nargv.append('x')\nfull = argv + ['hostname']\n"
                "if argv is None:\n    pass\nres = ctx.tool(*argv)\nseen = ctx.observe(OBS, *argv)\n"
                "print(res.command, seen.command)")
    assert argv_inspections(building) == []


def test_no_check_inspects_argv():
    """Each place is what an ``Observation`` in ``facts/parsers`` should say (``also`` for the recorded forms,
    ``parse`` for the choice of parser by command line)."""
    modules = sorted(p for p in CHECKS.glob("*.py") if p.name not in EXEMPT)
    assert modules, CHECKS
    found = {"%s:%d" % (Path(p).relative_to(REPO), line): what for p in modules
             for line, what in argv_inspections(p.read_text())}
    assert not found, found
