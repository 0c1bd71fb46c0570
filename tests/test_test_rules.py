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
