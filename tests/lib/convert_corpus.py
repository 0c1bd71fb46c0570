"""The convert corpus as the tests read it: our Dockerfiles (``tests/data/convert``: files in a shared context, and
folders with a context of their own) and their names, shared by the converter's tests and the equivalence proof."""
from __future__ import annotations

from pathlib import Path

from tests.lib.paths import CONVERT_CORPUS


def own_pairs() -> list[Path]:
    """Our corpus Dockerfiles: those in the shared context ``tests/data/convert``, then those with a context folder
    of their own."""
    return sorted(CONVERT_CORPUS.glob("*.Dockerfile")) + sorted(CONVERT_CORPUS.glob("*/Dockerfile"))


def pair_name(dockerfile: Path) -> str:
    """A corpus pair's name: the file's name without ``.Dockerfile``, or the context folder's of a ``Dockerfile``."""
    return dockerfile.parent.name if dockerfile.name == "Dockerfile" else dockerfile.name.replace(".Dockerfile", "")
