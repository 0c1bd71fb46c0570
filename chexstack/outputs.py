"""Output paths checked before the work that fills them: a sweep, a node check or a training run must not end in
a traceback (or be lost) because its result cannot be written.

- ``output_file(path, option[, create_folder])``: the folder that will hold the file exists (or is created) and
  takes a new file; ``path`` is not a folder.
- ``output_folder(path, option)``: the folder exists or is created, and takes a new file.

Both probe by creating (and removing) a temporary file, so read-only file systems (EROFS), permissions, a missing
parent and a file in the way are all found — also for root, whom permission bits do not stop. Errors are
``ChexstackError`` naming the option, the path and the operating system's reason (exit 2).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from chexstack.errors import ChexstackError


def _why(e: OSError) -> str:
    return e.strerror or str(e)


def _probe(folder: Path, option: str, path: Path) -> None:
    """Create and remove a temporary file in ``folder``; ChexstackError naming ``option`` when that fails."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".chexstack-write-test.")
    except OSError as e:
        raise ChexstackError("%s %s: cannot write in %s (%s)" % (option, path, folder, _why(e))) from None
    os.close(fd)
    os.unlink(tmp)


def output_file(path: str | Path, option: str, create_folder: bool = False) -> Path:
    """``path`` as a file this process can create or replace; ``create_folder``: make its folder when missing.
    Raises ChexstackError when its folder is missing (or cannot be made), is not a folder or takes no new file, or
    when ``path`` is a folder."""
    path = Path(path)
    if path.is_dir():
        raise ChexstackError("%s %s: is a folder; expected a file path" % (option, path))
    folder = path.parent
    if create_folder:
        output_folder(folder, option, path)
        return path
    if not folder.exists():
        raise ChexstackError("%s %s: folder %s does not exist; create it or choose another path"
                             % (option, path, folder))
    if not folder.is_dir():
        raise ChexstackError("%s %s: %s is not a folder" % (option, path, folder))
    _probe(folder, option, path)
    return path


def output_folder(path: str | Path, option: str, given: str | Path | None = None) -> Path:
    """``path`` as a folder this process can write in, created (with its parents) when missing. ``given``: what
    the user gave, when ``path`` is its folder (for messages). Raises ChexstackError when it cannot be created, is
    a file or takes no new file."""
    path = Path(path)
    head, folder = "%s %s:" % (option, path if given is None else given), "" if given is None else " %s" % path
    if path.exists() and not path.is_dir():
        raise ChexstackError("%s%s is a file; expected a folder" % (head, folder or " it"))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ChexstackError("%s cannot create the folder%s (%s)" % (head, folder, _why(e))) from None
    _probe(path, option, Path(given) if given is not None else path)
    return path
