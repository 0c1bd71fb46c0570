"""The floors of the house (CONTRIBUTING.md, Layout): each area imports only from areas below it, never up, and no
two areas import each other; ``tasks.py`` is the top floor, which only the ``chexstack`` entry point imports; and no
area's files import each other in a circle. Read from the product code's own import statements (ast), no import is
executed."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.lib.paths import REPO

#: area -> floor; an area may import its own modules and areas on lower floors only. ``tasks`` is ``tasks.py``.
FLOORS = {"chexstack": 0, "trainer": 1, "facts": 1, "envs": 2, "convert": 2, "images": 3, "launch": 4, "validate": 5,
          "bench": 5, "tasks": 6}
#: Areas that import no other chexstack area at all (the trainer runs inside images).
ALONE = {"trainer"}
#: The one file that may import ``tasks``: ``python -m chexstack`` (the console script is ``tasks:main`` itself).
ENTRY_POINT = "chexstack/__main__.py"
#: Circles of files inside an area that are known, each with the change that removes it; the test fails when one
#: is gone too, so the entry goes with it.
KNOWN_CIRCLES: dict[frozenset[str], str] = {}


def _files(area: str) -> list[Path]:
    return [REPO / "tasks.py"] if area == "tasks" else sorted((REPO / area).rglob("*.py"))


def _imports() -> dict[tuple[str, str], list[str]]:
    """(area, imported area) -> the files where it happens, for every product module."""
    edges: dict[tuple[str, str], list[str]] = {}
    for area in FLOORS:
        for path in _files(area):
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
    assert bad.pop("chexstack -> tasks", None) in (None, [ENTRY_POINT])
    assert not bad, bad


def test_only_the_entry_point_imports_tasks_and_the_plumbing_imports_no_area():
    """``chexstack/cli.py`` once imported ``tasks`` to build its Program, while ``tasks.py`` imports
    ``chexstack.cli``: a circle across the floors. ``chexstack`` is the floor below every area."""
    edges = _imports()
    assert [edge for edge in edges if edge[1] == "tasks"] == [("chexstack", "tasks")]
    assert edges[("chexstack", "tasks")] == [ENTRY_POINT]
    assert [edge for edge in edges if edge[0] == "chexstack" and edge[1] != "tasks"] == []


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _file_graph(area: str) -> dict[str, set[str]]:
    """module -> the modules of the same area its file imports (anywhere in the file: a function's import is an
    edge too); ``from pkg import name`` is an edge to ``pkg.name`` where that is a module, else to ``pkg``."""
    modules = {_module(path): path for path in _files(area)}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets |= {resolve(base + "." + a.name) if base + "." + a.name in modules else resolve(base)
                            for a in node.names}
        graph[module] = targets - {None, module}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_circle_of_files_inside_an_area():
    """Five trainer files once imported each other in a circle (``trainer.cli`` starts the runs, and the runs took
    ``REQUIRE_GPU_ENV`` and the usage errors from ``trainer.cli``)."""
    circles = {circle for area in FLOORS for circle in _circles(_file_graph(area))}
    assert circles - KNOWN_CIRCLES.keys() == set(), sorted(sorted(c) for c in circles - KNOWN_CIRCLES.keys())
    assert KNOWN_CIRCLES.keys() - circles == set(), "gone, remove from KNOWN_CIRCLES: %s" % [
        sorted(c) for c in KNOWN_CIRCLES.keys() - circles]


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    assert _circles({"a": {"b"}, "b": set()}) == []


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
        for path in _files(area):
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
