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
