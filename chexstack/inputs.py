"""Input paths checked before they are read: a folder where a file is expected is called a folder, not "no such
file" (and a missing path is called missing).

- ``input_file(path, what)``: ``path`` is an existing regular file (or a link to one); ChexstackError (exit 2)
  otherwise, starting with ``what`` (the option or argument, e.g. ``--installed conda-list.json``) and ending with
  what was expected.
"""
from __future__ import annotations

from pathlib import Path

from chexstack.errors import ChexstackError


def input_file(path: str | Path, what: str, expected: str = "a file") -> Path:
    """``path`` as a ``Path`` when it is a file; ChexstackError ``"<what>: is a folder; expected <expected>"`` or
    ``"<what>: no such file (expected <expected>)"``."""
    path = Path(path)
    if path.is_dir():
        raise ChexstackError("%s: is a folder; expected %s" % (what, expected))
    if not path.is_file():
        raise ChexstackError("%s: no such file (expected %s)" % (what, expected))
    return path
