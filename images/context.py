"""The Docker build context as a tar stream: the rendered Dockerfile plus the files it COPYs, nothing else.

Deterministic (sorted entries, mtime 0, uid/gid 0, modes 0644/0755, no ``__pycache__``/``*.pyc``), so the
builder's COPY cache keys change only when a file's content does: a trainer-only change rebuilds only the layers
from the trainer's COPY on.
"""
from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from chexstack.errors import ChexstackError

_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}
_SKIP_SUFFIXES = (".pyc", ".pyo")


def _files_below(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.endswith(_SKIP_SUFFIXES)
                  and not _SKIP_DIRS.intersection(p.relative_to(root).parts))


def expand(context: dict[str, Path | bytes]) -> dict[str, Path | bytes]:
    """Context path -> file source or bytes, folders expanded to their files. Raises ChexstackError naming a
    source that does not exist."""
    out: dict[str, Path | bytes] = {}
    for name, src in context.items():
        if isinstance(src, bytes) or src.is_file():
            out[name] = src
        elif src.is_dir():
            for f in _files_below(src):
                out["%s/%s" % (name, f.relative_to(src).as_posix())] = f
        else:
            made_by = " (a conda lock: make it with `invoke lock --stack %s`)" % src.parent.name \
                if src.name == "conda-lock.yml" else ""
            raise ChexstackError("build context: %s (for %s) does not exist%s" % (src, name, made_by))
    return out


def folder_digest(root: Path) -> str:
    """SHA-256 (hex) of the files below ``root`` as the build context holds them (relative POSIX path and bytes
    of each, sorted; caches and bytecode left out): equal digests mean the image got exactly these files."""
    h = hashlib.sha256()
    for f in _files_below(root):
        data = f.read_bytes()
        h.update(b"%s\0%d\0" % (f.relative_to(root).as_posix().encode(), len(data)))
        h.update(data)
    return h.hexdigest()


def _add(tar: tarfile.TarFile, name: str, data: bytes, executable: bool) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 0, 0o755 if executable else 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data))


def context_tar(dockerfile: str, context: dict[str, Path | bytes]) -> io.BytesIO:
    """A tar (uncompressed, rewound) with ``Dockerfile`` and every file of ``context``."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "Dockerfile", dockerfile.encode(), False)
        for name, src in sorted(expand(context).items()):
            if isinstance(src, bytes):
                _add(tar, name, src, False)
            else:
                _add(tar, name, src.read_bytes(), bool(src.stat().st_mode & 0o111))
    buf.seek(0)
    return buf


def listing(context: dict[str, Path | bytes]) -> list[tuple[str, int]]:
    """``(context path, size in bytes)`` of every file, sorted (for ``--dry-run``)."""
    return [(name, len(src) if isinstance(src, bytes) else src.stat().st_size)
            for name, src in sorted(expand(context).items())]
