"""After an install: is every pinned package present at its version? (An explicit lock installs no pip
requirements and nothing says so: https://github.com/conda/conda-lock/issues/161;
https://github.com/conda/conda-lock/issues/285.)

Inputs are text, so the check runs on the host against what an image or node printed:

- ``parse_installed_json(text)``: ``conda list --json`` (conda packages and, with channel ``pypi``, pip ones) or
  ``pip list --format=json`` (pip pins must be there; a conda pin is checked when a package of that name is listed
  — Python packages such as scikit-learn and pillow are — and otherwise reported as not checked, never passed).

Pins come from the unified lock (``lock_pins``: every package, exact) or, before there is one, from the
environment file's own specs (``spec_pins``: ``python=3.10`` → 3.10.*, ``horovod==0.28.1`` exact).
``check_installed(pins, installed, kind)`` → ``InstallReport`` with ``checked``, ``missing``, ``mismatched`` and
``unchecked``; names compare canonicalized (``scikit_learn`` = ``scikit-learn``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from conda_lock.lockfile.v2prelim.models import Lockfile
from conda_lock.models.lock_spec import LockSpecification
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from chexstack.errors import ChexstackError


@dataclass(frozen=True)
class Pin:
    """A required package: ``spec`` is an exact version ("0.16.1"), a prefix ("3.10.*"), a specifier
    ("<10.2", "==1.3.2") or "*" (present in any version)."""

    name: str
    spec: str
    manager: str

    def accepts(self, version: str) -> bool:
        spec = self.spec.strip()
        if spec in ("", "*"):
            return True
        if spec.endswith(".*") and not spec.startswith(("=", "<", ">", "!", "~")):
            return version == spec[:-2] or version.startswith(spec[:-1])
        if spec[0] not in "=<>!~":
            return version == spec or _same_version(version, spec)
        try:
            return SpecifierSet(",".join(s.strip() for s in spec.split(","))).contains(version, prereleases=True)
        except InvalidSpecifier:
            return version == spec.lstrip("=")


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False


@dataclass
class InstallReport:
    """``checked``: pins compared with the listing; ``missing``: pins not installed at all; ``mismatched``: (pin,
    installed version) pairs; ``unchecked``: pins the listing cannot show (conda packages in a pip list)."""

    checked: list[Pin] = field(default_factory=list)
    missing: list[Pin] = field(default_factory=list)
    mismatched: list[tuple[Pin, str]] = field(default_factory=list)
    unchecked: list[Pin] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.mismatched

    def lines(self) -> list[str]:
        """Every pin, once: ``FAIL missing: a, b`` / ``FAIL wrong version: name installed X, pinned Y``; ``PASS every
        pinned package …`` when all are checked and right, else ``PASS k of n pinned packages …: names``; then
        ``NOT CHECKED …`` for the pins the listing cannot show."""
        out = []
        if self.missing:
            out.append("FAIL missing: %s" % ", ".join(sorted(p.name for p in self.missing)))
        for pin, got in sorted(self.mismatched, key=lambda t: t[0].name):
            out.append("FAIL wrong version: %s installed %s, pinned %s" % (pin.name, got, pin.spec))
        wrong = {id(p) for p in self.missing} | {id(p) for p, _ in self.mismatched}
        right = sorted(p.name for p in self.checked if id(p) not in wrong)
        if self.ok and not self.unchecked:
            out.append("PASS every pinned package is installed at its version")
        elif right:
            out.append("PASS %d of %d pinned packages at the pinned version: %s"
                       % (len(right), len(self.checked) + len(self.unchecked), ", ".join(right)))
        if self.unchecked:
            out.append("NOT CHECKED (conda packages a pip list does not show; use `conda list --json`): %s"
                       % ", ".join(sorted(p.name for p in self.unchecked)))
        return out


def _json_list(text: str, what: str) -> list:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ChexstackError("%s: not JSON (line %d: %s)" % (what, e.lineno, e.msg)) from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and "name" in d and "version" in d for d in data):
        raise ChexstackError("%s: expected a JSON list of objects with name and version" % what)
    return data


def parse_installed_json(text: str, what: str = "installed packages") -> tuple[dict[str, str], str]:
    """``({canonical name: version}, kind)`` from ``conda list --json`` (kind "conda": conda packages and, with
    channel ``pypi``, pip ones) or ``pip list --format=json`` (kind "pip": entries have no channel)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ChexstackError("%s: not JSON (line %d: %s)" % (what, e.lineno, e.msg)) from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and "name" in d and "version" in d for d in data):
        raise ChexstackError("%s: expected a JSON list of objects with name and version (conda list --json, "
                             "pip list --format=json)" % what)
    kind = "conda" if any("channel" in d or "build_string" in d for d in data) else "pip"
    return {canonicalize_name(d["name"]): str(d["version"]) for d in data}, kind


def lock_pins(lock: Lockfile, platform: str) -> list[Pin]:
    """Every package the unified lock holds for ``platform``, at its exact version."""
    return [Pin(p.name, p.version, p.manager) for p in lock.package if p.platform == platform]


def spec_pins(spec: LockSpecification, platform: str) -> list[Pin]:
    """The environment file's own requirements (conda-lock's parsed specification) for ``platform``."""
    return [Pin(d.name, getattr(d, "version", "*") or "*", d.manager) for d in spec.dependencies.get(platform, [])]


def check_installed(pins: list[Pin], installed: dict[str, str], kind: str = "conda") -> InstallReport:
    """Compare pins with ``{canonical name: version}`` of a ``kind`` ("conda" or "pip") listing; see
    ``InstallReport``. In a pip listing a conda pin that is absent is unchecked, not missing."""
    report = InstallReport()
    for pin in pins:
        got = installed.get(canonicalize_name(pin.name))
        if got is None and kind == "pip" and pin.manager != "pip":
            report.unchecked.append(pin)
            continue
        report.checked.append(pin)
        if got is None:
            report.missing.append(pin)
        elif not pin.accepts(got):
            report.mismatched.append((pin, got))
    return report
