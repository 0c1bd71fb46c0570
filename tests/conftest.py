"""Shared test helpers: where ../shared is, and the golden-file assertion."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared").resolve()
FIXTURES = SHARED / "fixtures"
CASES = SHARED / "cases"
SAMPLE = SHARED / "data" / "chestxray14"


@pytest.fixture
def fixture_text():
    """``fixture_text("nvcc-version-10.0.txt")`` -> the text of ../shared/fixtures/<name>."""
    return lambda name: (FIXTURES / name).read_text()


GOLDEN = REPO / "tests" / "golden"


@pytest.fixture
def golden():
    """``golden("launch/x.sbatch", text)``: assert ``text`` equals tests/golden/launch/x.sbatch.

    ``CHEXSTACK_UPDATE_GOLDEN=1`` rewrites the file instead (then review the diff)."""
    import os

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if os.environ.get("CHEXSTACK_UPDATE_GOLDEN") == "1":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert path.is_file(), "no golden file %s; create it with CHEXSTACK_UPDATE_GOLDEN=1 and review it" % path
        assert text == path.read_text(), "%s differs from the rendered text" % path

    return check
