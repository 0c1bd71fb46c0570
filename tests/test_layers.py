"""The floors of the house (CONTRIBUTING.md, Layout): each area imports only from areas below it, never up, and no
two areas import each other. Read from the product code's own import statements (ast), no import is executed."""
from __future__ import annotations

import ast

from tests.conftest import REPO

#: area -> floor; an area may import its own modules and areas on lower floors only.
FLOORS = {"trainer": 1, "chexstack": 1, "facts": 1, "envs": 2, "images": 3, "launch": 4, "validate": 5, "bench": 5}
#: Areas that import no other chexstack area at all (they run inside images, or are the ground floor).
ALONE = {"trainer", "facts"}


def _imports() -> dict[tuple[str, str], list[str]]:
    """(area, imported area) -> the files where it happens, for every product module."""
    edges: dict[tuple[str, str], list[str]] = {}
    for area in FLOORS:
        for path in sorted((REPO / area).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in FLOORS and top != area:
                        edges.setdefault((area, top), []).append(str(path.relative_to(REPO)))
    return edges


def test_no_area_imports_upward_or_sideways():
    bad = {"%s -> %s" % edge: files for edge, files in _imports().items()
           if FLOORS[edge[1]] >= FLOORS[edge[0]] or edge[0] in ALONE}
    assert not bad, bad


def test_images_and_launch_get_their_facts_from_facts_not_validate():
    edges = _imports()
    assert ("images", "validate") not in edges and ("launch", "validate") not in edges
    assert ("images", "facts") in edges and ("validate", "facts") in edges
