"""The shared cases (``../shared/cases``, rebuilt from public bug reports) as the tests read them."""
from __future__ import annotations

from tests.lib.paths import CASES


def case(prefix: str) -> str:
    """The text of case ``prefix``'s transcript (``NN-*.txt``)."""
    return next(CASES.glob(prefix + "-*.txt")).read_text()
