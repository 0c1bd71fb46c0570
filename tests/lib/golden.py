"""Golden-text assertions for every rendered recipe, manifest and table.

``assert_golden("envs/stacks.txt", text)`` compares ``text`` with ``tests/golden/envs/stacks.txt``. With
``CHEXSTACK_UPDATE_GOLDEN=1`` in the environment it (re)writes the file instead; review the diff before committing.
"""
from __future__ import annotations

import difflib
import os

from tests.lib.paths import REPO

GOLDEN_DIR = REPO / "tests" / "golden"


def assert_golden(name: str, text: str) -> None:
    """Fail with a unified diff unless ``text`` equals the golden file ``tests/golden/<name>``."""
    path = GOLDEN_DIR / name
    if os.environ.get("CHEXSTACK_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.is_file():
        raise AssertionError("no golden file %s; create it with CHEXSTACK_UPDATE_GOLDEN=1 and review it" % path)
    want = path.read_text()
    if text != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                            "golden/%s" % name, "rendered"))
        raise AssertionError("rendered text differs from golden/%s (regenerate with CHEXSTACK_UPDATE_GOLDEN=1 "
                             "if intended):\n%s" % (name, diff))
