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
