"""Which Debian mirror this machine is configured to use: the one place debootstrap's mirror is chosen.

A site with its own Debian mirror has it in its apt sources; a root file system chexstack makes with debootstrap
(the local Debian base image, ``images.local_base``; the Apptainer root file system of ``scripts/setup
--apptainer``) must fetch from that mirror, never from a URL written into this repository.

``debian_mirror(sources=None) -> str | None``: the ``URIs`` of the first enabled ``deb`` source that serves the
host's Debian release (its ``Suites`` hold the codename from ``/etc/os-release``, or any suite when the codename is
unknown) with component ``main``; None when the host has no such source (not Debian, or no apt): the caller then
gives debootstrap no mirror, so debootstrap's own default applies. Both apt formats are read: deb822 ``*.sources``
files (``python-debian``'s ``Deb822``; format in sources.list(5), "DEB822-STYLE FORMAT") and one-line ``*.list``
entries (sources.list(5), "ONE-LINE-STYLE FORMAT"). ``CHEXSTACK_DEBIAN_MIRROR`` overrides all of it.

``python -m facts.apt_sources`` prints the mirror (nothing, exit 0, when there is none), for shell scripts.
"""
from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass

from debian.deb822 import Deb822

OVERRIDE = "CHEXSTACK_DEBIAN_MIRROR"
SOURCES = ("/etc/apt/sources.list", "/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources")


@dataclass(frozen=True)
class Source:
    """One apt source entry: its types (``deb``, ``deb-src``), URIs, suites and components."""
    types: tuple[str, ...]
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]
    enabled: bool = True


def parse_deb822(text: str) -> list[Source]:
    """The entries of a deb822 ``.sources`` file (comment lines are dropped by ``Deb822``)."""
    out = []
    for para in Deb822.iter_paragraphs(text.splitlines()):
        words = {k.lower(): v.split() for k, v in para.items()}
        out.append(Source(tuple(words.get("types", ())), tuple(words.get("uris", ())),
                          tuple(words.get("suites", ())), tuple(words.get("components", ())),
                          (words.get("enabled", ["yes"]) or ["yes"])[0].lower() != "no"))
    return out


def parse_one_line(text: str) -> list[Source]:
    """The entries of a one-line ``sources.list``: ``deb [options] URI SUITE [COMPONENT...]``."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        kind, _, rest = line.partition(" ")
        rest = rest.strip()
        if rest.startswith("["):
            rest = rest.partition("]")[2].strip()
        words = rest.split()
        if kind in ("deb", "deb-src") and len(words) >= 2:
            out.append(Source((kind,), (words[0],), (words[1],), tuple(words[2:])))
    return out


def read_sources(patterns: tuple[str, ...] = SOURCES) -> list[Source]:
    """Every apt source entry of this machine, in apt's file order."""
    out: list[Source] = []
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            out += parse_deb822(text) if path.endswith(".sources") else parse_one_line(text)
    return out


def codename(os_release: str = "/etc/os-release") -> str | None:
    """``VERSION_CODENAME`` of ``/etc/os-release`` (os-release(5)), when the host is Debian; else None."""
    try:
        with open(os_release, encoding="utf-8") as f:
            fields = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    except OSError:
        return None
    if fields.get("ID", "").strip('"') != "debian":
        return None
    return fields.get("VERSION_CODENAME", "").strip('"') or None


def debian_mirror(sources: list[Source] | None = None, release: str | None = None) -> str | None:
    """The mirror debootstrap should use (module docstring); None: let debootstrap choose."""
    override = os.environ.get(OVERRIDE, "").strip()
    if override:
        return override
    if sources is None:
        sources, release = read_sources(), codename()
        if release is None:
            return None
    for src in sources:
        if src.enabled and "deb" in src.types and "main" in src.components and src.uris and (
                release is None or release in src.suites):
            return src.uris[0]
    return None


def main() -> int:
    mirror = debian_mirror()
    if mirror:
        sys.stdout.write(mirror + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
