"""Where the tests find the checkout and the shared read-only material (../shared beside the checkout), and the
``fixture_text`` fixture (a plugin ``tests/conftest.py`` registers)."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = (REPO / ".." / "shared").resolve()
FIXTURES = SHARED / "fixtures"
CASES = SHARED / "cases"
SAMPLE = SHARED / "data" / "chestxray14"
#: The converter's own corpus: ``<name>.Dockerfile`` beside ``tests/golden/convert/<name>.def|.refused``.
CONVERT_CORPUS = REPO / "tests" / "data" / "convert"
#: The field's Dockerfiles (issue 45): real files from public repositories, their README and ``repro/<x>/Dockerfile``.
FIELD_DOCKERFILES = SHARED / "convert-corpus"


@pytest.fixture
def fixture_text():
    """``fixture_text("nvcc-version-10.0.txt")`` -> the text of ../shared/fixtures/<name>."""
    return lambda name: (FIXTURES / name).read_text()
