"""``ruff check .`` from the checkout's root is clean (``make lint``; the rules are pyproject.toml's [tool.ruff]:
pyflakes, import order, 120 columns, complexity <= 18), so a lint fault fails the unit lane, not only ``make test``."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.lib.paths import REPO


def test_ruff_check_is_clean():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed in this Python (pip install -e '.[test]', or `make setup`)")
    # --no-cache: the check writes no .ruff_cache into the checkout
    p = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
