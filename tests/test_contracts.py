"""CONTRIBUTING.md's "Contracts between areas" is a map, and the contracts themselves are docstrings: this keeps
both true.

- The layer diagram (the fenced block under that heading, ``floor N  area area``) is ``tests/test_layers.py``'s
  ``FLOORS``, and its ``(alone)`` marks are that module's ``ALONE`` (both read from its syntax tree: a test module
  never imports another).
- Every contract's home (a ``.py`` path on a ``- **area**`` line of that section) exists and has a module docstring of
  substance (at least ``MIN_LINES`` lines).
- Every name in backticks in CONTRIBUTING.md and in those docstrings resolves: a dotted name whose first part is an
  area of the house (``launch.executor.execute``, ``facts.parsers.slurm.LOST_NODE_LINE``) imports and has the
  attribute, and a path that starts with a folder or file of the checkout (``facts/signals.yaml``,
  ``envs/stacks/*.yaml``; ``<name>`` stands for any name) exists. A renamed module, function or file therefore
  fails here with the place that still names it, which is the drift prose reference used to collect.
"""
from __future__ import annotations

import ast
import importlib
import re

import pytest

from tests.lib.paths import REPO

CONTRIBUTING = REPO / "CONTRIBUTING.md"
SECTION = "## Contracts between areas"
#: A contract's docstring has at least this many lines.
MIN_LINES = 5
#: The first part of a dotted name that must resolve: the areas of the house and the tests' shared code.
ROOTS = {"chexstack", "trainer", "facts", "envs", "convert", "images", "launch", "validate", "bench", "tasks", "tests"}
#: A dotted name at the start of a code span (``launch.where(launcher, …)`` names ``launch.where``).
DOTTED = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/.-])")
#: What ends a file's name rather than a dotted name (``tasks.py``, ``launch.log``).
FILE_TYPES = {"py", "yaml", "yml", "json", "md", "sh", "txt", "csv", "log", "h5", "toml", "def", "sif"}
#: A relative path at the start of a code span: at least one ``/``, ``<name>`` placeholders and ``*`` globs allowed;
#: a ``:line`` or ``::test`` after it is dropped.
PATH = re.compile(r"([\w.*<>-]+(?:/[\w.*<>|-]+)+/?)")


def section(text: str, heading: str) -> str:
    """The text of ``heading``'s section of a Markdown page, up to the next heading of the same level."""
    start = text.index(heading + "\n")
    level = heading.split(" ")[0] + " "
    end = text.find("\n" + level, start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def markdown_spans(text: str) -> list[str]:
    """Every inline code span of a Markdown text (fenced blocks left out)."""
    outside = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.findall(r"`([^`\n]+)`", outside)


def docstring_spans(text: str) -> list[str]:
    """Every ``literal`` of a reStructuredText docstring."""
    return re.findall(r"``(.+?)``", text, flags=re.S)


def dotted_names(span: str) -> list[str]:
    """The dotted name a span starts with, where its first part is an area (``chexstack.prepared/1``, a schema
    name, and ``org.chexstack.bom``, a label, are not names)."""
    found = DOTTED.match(span.strip())
    if not found or found.group(1).split(".")[0] not in ROOTS or found.group(1).rsplit(".")[-1] in FILE_TYPES:
        return []
    return [found.group(1)]


#: the checkout's output folders (.gitignore's root entries: build/, runs/, ...): made by runs, there or not
OUTPUTS = {line.strip().strip("/") for line in (REPO / ".gitignore").read_text().splitlines()
           if line.startswith("/") or line.strip() in (".venv",)}


def paths(span: str) -> list[str]:
    """The checkout path a span starts with, as a glob, where its first part is a folder or file at the root of the
    checkout (``/opt/chexstack/trainer`` is in an image, ``checkpoint/state.json`` in a run's output)."""
    found = PATH.match(span.strip())
    if not found or " " in span.strip()[:found.end()].strip():
        return []
    path = found.group(1)
    root = path.split("/")[0]
    if root in (".", "..") or root in OUTPUTS or not (REPO / root).exists():
        return []
    return [re.sub(r"<[^<>]+>", "*", alternative) for alternative in _alternatives(path)]


def _alternatives(path: str) -> list[str]:
    """``a/b.def|.refused`` -> ``a/b.def``, ``a/b.refused``."""
    head, _, tail = path.partition("|")
    if not tail:
        return [path]
    stem = head.rsplit(".", 1)[0]
    return [head] + [stem + alt if alt.startswith(".") else alt for alt in tail.split("|")]


def resolves(name: str) -> bool:
    """``a.b.c``: the longest importable module prefix, then each further part an attribute (a dataclass's,
    pydantic model's or NamedTuple's field counts as one)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as error:
            if error.name and not ".".join(parts[:cut]).startswith(error.name):
                raise
            continue
        for attribute in parts[cut:]:
            if hasattr(value, attribute):
                value = getattr(value, attribute)
            elif isinstance(value, type) and attribute in fields_of(value):
                return attribute == parts[-1]
            else:
                return False
        return True
    return False


def fields_of(cls: type) -> set[str]:
    """The fields of a dataclass, pydantic model or NamedTuple, which the class itself may not hold as attributes."""
    found = set(getattr(cls, "__dataclass_fields__", {})) | set(getattr(cls, "model_fields", {}) or {})
    for klass in cls.__mro__:
        found |= set(vars(klass).get("__annotations__", {})) | set(vars(klass).get("_fields", ()))
    return found


def exists(glob: str) -> bool:
    return any(REPO.glob(glob.rstrip("/"))) if "*" in glob else (REPO / glob).exists()


def area_lines() -> dict[str, str]:
    """``- **area**: ...`` entries of the contracts section (continuation lines joined): area -> its text."""
    entries: dict[str, str] = {}
    area = None
    for line in section(CONTRIBUTING.read_text(), SECTION).splitlines():
        found = re.match(r"- \*\*(\w+)\*\*", line)
        if found:
            area = found.group(1)
            entries[area] = line
        elif area and line.startswith("  "):
            entries[area] += " " + line.strip()
        else:
            area = None
    return entries


def homes() -> list[str]:
    """The contracts' homes: every ``.py`` path in backticks followed by `` (`` (what it holds) on an area's line;
    the other paths on the line are what the contract points to."""
    return [path for text in area_lines().values() for path in re.findall(r"`([^`]+\.py)` \(", text)]


def docstring(path: str) -> str:
    return ast.get_docstring(ast.parse((REPO / path).read_text(), path), clean=True) or ""


def unresolved(spans: list[str]) -> list[str]:
    bad = [name for span in spans for name in dotted_names(span) if not resolves(name)]
    return bad + [glob for span in spans for glob in paths(span) if not exists(glob)]


def test_the_layer_diagram_is_the_floors_the_layout_test_enforces():
    tree = ast.parse((REPO / "tests" / "test_layers.py").read_text())
    declared = {target.id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                for target in node.targets if isinstance(target, ast.Name)}
    block = re.search(r"^```\n(.*?)^```", section(CONTRIBUTING.read_text(), SECTION), flags=re.S | re.M).group(1)
    drawn, alone = {}, set()
    for line in block.splitlines():
        found = re.match(r"floor (\d+)\s+(.*)", line)
        if found:
            for word in re.findall(r"[\w.]+(?: \(alone\))?", found.group(2)):
                area = word.split(" ")[0].removesuffix(".py")
                drawn[area] = int(found.group(1))
                alone |= {area} if word.endswith("(alone)") else set()
    assert drawn == declared["FLOORS"]
    assert alone == declared["ALONE"]


def test_every_area_names_a_home_whose_docstring_holds_its_contract():
    tree = ast.parse((REPO / "tests" / "test_layers.py").read_text())
    floors = next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                  and any(getattr(target, "id", None) == "FLOORS" for target in node.targets))
    assert set(area_lines()) == set(floors) - {"tasks"}  # tasks.py is a list of tasks: its contract is their help
    assert all(path.split("/")[0] == area for area, text in area_lines().items()
               for path in re.findall(r"`([^`]+\.py)` \(", text))
    thin = {path: len(docstring(path).splitlines()) for path in homes()
            if not (REPO / path).is_file() or len(docstring(path).splitlines()) < MIN_LINES}
    assert thin == {}


def test_every_name_and_path_contributing_gives_resolves():
    assert unresolved(markdown_spans(CONTRIBUTING.read_text())) == []


@pytest.mark.parametrize("path", homes())
def test_every_name_and_path_a_contract_gives_resolves(path):
    assert unresolved(docstring_spans(docstring(path))) == []


def test_the_resolver_tells_a_stale_name_and_path_from_a_real_one():
    assert resolves("launch.executor.execute") and resolves("launch.schedulers.SCHEDULERS")
    assert resolves("launch.request.TrainRequest.argv")  # a dataclass field
    assert not resolves("launch.stream.no_such_function") and not resolves("launch.no_such_module.run")
    assert dotted_names("launch.where(launcher, given) -> Where") == ["launch.where"]
    assert dotted_names("chexstack.prepared/1") == [] and dotted_names("org.chexstack.bom") == []
    assert paths("tests/data/convert/<name>.Dockerfile") == ["tests/data/convert/*.Dockerfile"]
    assert paths("tests/golden/convert/<name>.def|.refused") == ["tests/golden/convert/*.def",
                                                                 "tests/golden/convert/*.refused"]
    assert dotted_names("tasks.py") == [] and paths("../shared/fixtures") == []
    assert paths("launch/cluster.py:243") == ["launch/cluster.py"] and paths("checkpoint/state.json") == []
    assert unresolved(["launch/no_such_file.py", "facts/signals.yaml", "envs/stacks/*.yaml"]) == [
        "launch/no_such_file.py"]
