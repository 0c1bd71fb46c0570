"""What of a build context Docker's ``COPY``/``ADD`` can see: the context less what its ``.dockerignore`` excludes.

Docker leaves the paths an ignore file matches out of the context it sends to the builder, so ``COPY . .`` does not
copy them, and a ``COPY`` of an excluded path fails (Dockerfile reference, ".dockerignore file":
https://docs.docker.com/build/concepts/context/#dockerignore-files). The rules: one pattern a line, ``#`` lines are
comments, patterns are cleaned paths relative to the context root matched with Go's ``filepath.Match`` plus ``**``
(any number of folders), a match of a folder excludes everything below it, ``!`` re-includes, the last matching
line wins. A Dockerfile-specific ``<Dockerfile name>.dockerignore`` beside the Dockerfile takes precedence over the
context's ``.dockerignore`` (BuildKit, Docker's default builder since Engine 23.0; same page, "Filename and
location").

Matching is the docker SDK's ``docker.utils.build.PatternMatcher`` (the port of moby's ``fileutils`` the SDK builds
contexts with), without the SDK's own re-inclusion of ``.dockerignore``: that file always reaches the daemon, which
needs it, but ``COPY`` does not copy it when it is excluded (same page). The file is read as moby's
``patternmatcher/ignorefile.ReadAll`` reads it (UTF-8 BOM dropped, a line starting with ``#`` is a comment, then
whitespace trimmed, blank lines skipped).

``Context(root, dockerfile).select(src) -> Selection | None``: for a source relative to the root, what Docker copies
(None: nothing is excluded there, copy the source whole). Raises ``ChexstackError`` for an ignore file that cannot be
read, and ``Excluded`` for a source the ignore file excludes entirely.
"""
from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from docker.utils.build import PatternMatcher

from chexstack.errors import ChexstackError

IGNORE_FILE = ".dockerignore"


class Excluded(ValueError):
    """A ``COPY``/``ADD`` source that the ignore file leaves out of the context entirely (Docker fails that COPY)."""


@dataclass
class Selection:
    """A folder source with excluded members, relative to the context root: ``copy`` are the paths sent whole (files,
    and folders with nothing excluded below them), ``folders`` the folders that are sent without some of their
    members (each made, then filled by ``copy``), ``left_out`` the topmost excluded paths; ``modes`` the permission
    bits of ``folders`` (``stat``), since they are made rather than copied."""

    copy: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    modes: dict[str, int] = field(default_factory=dict)


def read_patterns(path: Path) -> list[str]:
    """The patterns of an ignore file, as moby's ``ReadAll`` reads them (see module)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ChexstackError("%s: cannot read the ignore file (%s)" % (path, getattr(e, "reason", None) or e)) \
            from None
    out = []
    for line in text.removeprefix("\ufeff").splitlines():
        if line.startswith("#"):
            continue
        line = line.strip()
        if line.startswith("!"):
            line = "!" + line[1:].strip()
        if line and line != "!":
            out.append(line)
    return out


def candidates(root: Path, dockerfile: Path) -> tuple[Path, Path]:
    """Where Docker looks for the ignore file of ``dockerfile`` in the context ``root``, first match wins: the
    Dockerfile's own ``<name>.dockerignore``, then the context's ``.dockerignore``."""
    return dockerfile.with_name(dockerfile.name + IGNORE_FILE), root / IGNORE_FILE


def ignore_file(root: Path, dockerfile: Path) -> Path | None:
    """The ignore file Docker applies for ``dockerfile`` in the context ``root`` (see module), or None."""
    for candidate in candidates(root, dockerfile):
        if candidate.is_file():
            return candidate
    return None


class Context:
    """A build context folder and the ignore file that applies to it (``path``: None when there is none)."""

    def __init__(self, root: Path, dockerfile: Path):
        self.root = Path(root)
        self.path = ignore_file(self.root, Path(dockerfile))
        self._sent: set[str] | None = None
        self._holds: set[str] = set()

    def _walk(self) -> set[str]:
        """Every path the context sends (files and folders, relative, ``/``-separated), computed once."""
        if self._sent is None:
            matcher = PatternMatcher(read_patterns(self.path))
            forced = matcher.patterns[-1]  # the SDK's `!.dockerignore`: it reaches the daemon, COPY does not copy it
            if forced.exclusion and forced.cleaned_pattern == IGNORE_FILE:
                matcher.patterns.pop()
            self._sent = {p.replace(os.sep, "/") for p in matcher.walk(str(self.root))}
            for p in self._sent:
                parent = posixpath.dirname(p)
                while parent and parent not in self._holds:
                    self._holds.add(parent)
                    parent = posixpath.dirname(parent)
        return self._sent

    def select(self, src: str) -> Selection | None:
        """What Docker copies of the context path ``src`` ("." or "" for the root): None when it is sent whole (or
        there is no ignore file, or no such path: the caller says so), else the ``Selection``. Raises ``Excluded``
        when nothing of ``src`` is sent."""
        src = "" if src in ("", ".") else src
        here = self.root / src
        if self.path is None or not (here.exists() or here.is_symlink()):
            return None
        sent = self._walk()
        if src and src not in sent and src not in self._holds:
            raise Excluded(src)
        if not here.is_dir() or here.is_symlink():
            return None
        selection = Selection()
        whole = self._cover(src, selection)
        return None if whole and (not src or src in sent) else selection

    def _cover(self, folder: str, out: Selection) -> bool:
        """Adds ``folder``'s members to ``out``; True when nothing below it is excluded."""
        whole = True
        for name in sorted(os.listdir(self.root / folder)):
            path = posixpath.join(folder, name) if folder else name
            full = self.root / path
            if not full.is_dir() or full.is_symlink():
                if path in self._sent:
                    out.copy.append(path)
                else:
                    out.left_out.append(path)
                    whole = False
                continue
            if path not in self._sent and path not in self._holds:
                out.left_out.append(path)
                whole = False
                continue
            inner = Selection()
            if self._cover(path, inner) and path in self._sent:
                out.copy.append(path)
                continue
            whole = False
            out.folders.append(path)
            out.modes[path] = full.stat().st_mode & 0o7777
            for name_ in ("copy", "folders", "left_out"):
                getattr(out, name_).extend(getattr(inner, name_))
            out.modes.update(inner.modes)
        return whole
