"""Input paths checked before they are read: a folder where a file is expected is called a folder, not "no such
file" (and a missing path is called missing).

- ``input_file(path, what)``: ``path`` is an existing regular file (or a link to one); ChexstackError (exit 2)
  otherwise, starting with ``what`` (the option or argument, e.g. ``--installed conda-list.json``) and ending with
  what was expected.
- ``read_text(path, what, expected, replace=False)``: the text of that file, line breaks as written; ChexstackError
  (exit 2) naming the byte when it is not text (a NUL byte; with ``replace`` False, bytes that are not UTF-8).
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


def read_text(path: str | Path, what: str, expected: str = "a text file", replace: bool = False) -> str:
    """The text of the file at ``path`` (``input_file``'s checks first), decoded as UTF-8 with its line breaks as
    written (``\\r\\n`` stays). ChexstackError ``"<what>: not a text file (...); expected <expected>"`` naming the
    offset of the first NUL byte, or, unless ``replace`` (undecodable bytes become U+FFFD: a log whose program
    printed a few), of the first byte that is not UTF-8."""
    data = input_file(path, what, expected).read_bytes()
    nul = data.find(b"\0")
    if nul >= 0:
        raise ChexstackError("%s: not a text file (a NUL byte at offset %d); expected %s" % (what, nul, expected))
    try:
        return data.decode("utf-8", "replace" if replace else "strict")
    except UnicodeDecodeError as e:
        raise ChexstackError("%s: not a text file (byte 0x%02x at offset %d is not UTF-8); expected %s"
                             % (what, data[e.start], e.start, expected)) from None
