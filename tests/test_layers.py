"""The floors of the house (CONTRIBUTING.md, Layout): each area imports only from areas below it, never up, and no
two areas import each other. Read from the product code's own import statements (ast), no import is executed."""
from __future__ import annotations

import ast

from tests.conftest import REPO

#: area -> floor; an area may import its own modules and areas on lower floors only.
FLOORS = {"chexstack": 0, "trainer": 1, "facts": 1, "envs": 2, "images": 3, "launch": 4, "validate": 5, "bench": 5}
#: Areas that import no other chexstack area at all (the trainer runs inside images).
ALONE = {"trainer"}



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


def test_what_runs_inside_images_imports_only_what_the_image_carries():
    """The probe and the Horovod gate run inside images (``images.payload``): standard library, and of the project
    only the files copied with them — never ``chexstack`` or another host area."""
    from images.payload import BUILD_ONLY_GATE, PAYLOAD

    carried = {rel[:-3].replace("/", ".").replace(".__init__", "") for rel in BUILD_ONLY_GATE}
    for name in [rel for rel in PAYLOAD.values() if rel.endswith(".py")] + list(BUILD_ONLY_GATE):
        for node in ast.walk(ast.parse((REPO / name).read_text(), name)):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                       [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            foreign = [m for m in modules if m.split(".")[0] in FLOORS and m not in carried]
            assert not foreign, (name, foreign)


def test_the_host_enters_the_trainer_through_its_door():
    """Host areas use ``trainer.preflight`` (and ``trainer.errors``), never the trainer's other modules; the
    project's ratio benchmarks (``bench/ratios``) measure trainer internals and are the one exception."""
    allowed = {"trainer", "trainer.preflight", "trainer.errors"}
    bad = []
    for area in [a for a in FLOORS if a != "trainer"]:
        for path in sorted((REPO / area).rglob("*.py")):
            if path.is_relative_to(REPO / "bench" / "ratios"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("trainer"):
                    names = ([node.module] if node.module != "trainer" else
                             ["trainer." + a.name for a in node.names])
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names if a.name.startswith("trainer")]
                else:
                    continue
                bad += ["%s: %s" % (path.relative_to(REPO), n) for n in names if n not in allowed]
    assert not bad, bad


def test_an_own_module_that_does_not_import_is_a_bug_never_a_skip():
    """``pytest.importorskip`` or ``except ImportError`` around a chexstack module would turn a broken module into a
    SKIP; only third-party modules may be optional."""
    found = []
    for path in sorted(REPO.glob("*/**/*.py")):
        if ".venv" in path.parts or path.parts[len(REPO.parts)] not in set(FLOORS) | {"tests"}:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "importorskip" and node.args
                    and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).split(".")[0] in FLOORS):
                found.append("%s:%d importorskip(%r)" % (path.relative_to(REPO), node.lineno, node.args[0].value))
            if isinstance(node, ast.Try) and any(
                    isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                    for h in node.handlers):
                own = [n for n in ast.walk(ast.Module(body=node.body, type_ignores=[]))
                       if isinstance(n, (ast.Import, ast.ImportFrom)) and any(
                           (a.name if isinstance(n, ast.Import) else (n.module or "")).split(".")[0] in FLOORS
                           for a in n.names)]
                found += ["%s:%d except ImportError around an own import" % (path.relative_to(REPO), node.lineno)
                          for _ in own[:1]]
    assert not found, found
