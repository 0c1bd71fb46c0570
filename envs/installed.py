"""After an install: is every pinned package present at its version and build? (An explicit lock installs no pip
requirements and nothing says so: https://github.com/conda/conda-lock/issues/161;
https://github.com/conda/conda-lock/issues/285. A ``conda update`` can swap a GPU TensorFlow for the CPU build of
the same version, ``gpu_py36…`` → ``mkl_py36…``: https://github.com/ContinuumIO/anaconda-issues/issues/13063.)

Inputs are text, so the check runs on the host against what an image or node printed:

- ``parse_installed_json(text)``: ``conda list --json`` (conda packages and, with channel ``pypi``, pip ones; each
  with its ``build_string``) or ``pip list --format=json`` (pip pins must be there; a conda pin is checked when a
  package of that name is listed — Python packages such as scikit-learn and pillow are — and otherwise reported as
  not checked, never passed; a pip list has no build strings, so a pinned build is reported as not checked).

Pins come from the unified lock (``lock_pins``: every package, exact version, and a conda package's exact build
string) or, before there is one, from the environment file's own specs (``spec_pins``: ``python=3.10`` → 3.10.*,
``horovod==0.28.1`` exact, ``tensorflow-base=1.12.0=gpu_*`` → version 1.12.0, build ``gpu_*``).
A pinned build is matched as conda matches it, by conda's own ``MatchSpec`` (conda-lock's vendored copy of conda:
an exact string, a glob with ``*``, or a ``^…$`` regular expression;
https://docs.conda.io/projects/conda/en/stable/user-guide/concepts/pkg-specs.html#package-match-specifications).
- ``pip freeze`` output (kind "pip freeze", judged as a pip listing): ``name==version`` lines; a ``name @ URL`` line
  (what pip freeze prints for a package conda installed) is present with its version unknown, so it is never
  compared, and is reported as such.

``check_installed(pins, installed, kind)`` → ``InstallReport`` with ``checked``, ``missing``, ``mismatched``,
``wrong_build``, ``unchecked`` and ``build_unchecked``; names compare canonicalized (``scikit_learn`` =
``scikit-learn``).

Pins are not the environment: a package nothing pins (h5py under a TensorFlow 1.12 pin) can still break it. So every
installed package is accounted for: by a pin (the lock pins every package), else by the compatibility rules' known-bad
pairs (``envs.rules.check_pairs``: h5py 3 with TensorFlow < 2.5, ...; a known-bad pair FAILs, with the rule's symptom,
remedy, smoke test and source), else it is listed as not checked (``not_covered``), never folded into a PASS.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from conda_lock.interfaces.vendored_conda import MatchSpec
from conda_lock.lockfile.v2prelim.models import Lockfile
from conda_lock.models.lock_spec import LockSpecification
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from chexstack.errors import ChexstackError
from envs.rules import PairConflict, RequirementMiss, check_pairs, check_requirements


@dataclass(frozen=True)
class Pin:
    """A required package: ``spec`` is an exact version ("0.16.1"), a prefix ("3.10.*"), a specifier
    ("<10.2", "==1.3.2") or "*" (present in any version); ``build`` a conda build string spec ("gpu_*",
    "h0371630_0") or None (any build; pip packages have none)."""

    name: str
    spec: str
    manager: str
    build: str | None = None

    def accepts_build(self, build: str) -> bool:
        """Whether an installed build string satisfies ``build``, as conda's MatchSpec decides (see module)."""
        if not self.build:
            return True
        return MatchSpec(name=self.name, build=self.build).match(
            {"name": self.name, "version": "0", "build": build, "build_number": 0})

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


@dataclass(frozen=True)
class Installed:
    """One package of a listing: its version and, where the listing has one (``conda list --json``), its build
    string; None where it has none (``pip list``). ``version`` None: installed, version not shown (``pip freeze``'s
    ``name @ URL``). ``name``: as the listing spells it (for messages; lookups use the canonical name); ``pip``: pip
    installed it (a pip listing, or channel ``pypi`` in ``conda list --json``)."""

    version: str | None
    build: str | None = None
    name: str | None = field(default=None, compare=False)
    pip: bool = field(default=False, compare=False)


@dataclass
class InstallReport:
    """``checked``: pins compared with the listing; ``missing``: pins not installed at all; ``mismatched``: (pin,
    installed version) pairs; ``wrong_build``: (pin, installed) pairs whose build string the pin's build rejects;
    ``unchecked``: pins the listing cannot show (conda packages in a pip list); ``build_unchecked``: pins with a
    build whose package the listing shows without a build string (a pip list); ``version_unknown``: pins whose
    package the listing shows without a version (``pip freeze``'s ``name @ URL``); ``conflicts``: known-bad pairs
    installed (``envs.rules.check_pairs``); ``held``: (rule id, pair) of the rules judged and not violated;
    ``outside``: installed packages outside an installed TensorFlow's declared requirements (a WARN: no known
    failure, but an environment its installer would not have solved; ``envs.rules.check_requirements``);
    ``requirements_held``: (requirer, the packages meeting its requirements, source);
    ``not_covered``: (name, version) of the installed packages neither pinned nor judged by a rule; ``unpinned``:
    (name, version) of every installed package no pin names (judged by the rules at most); ``listed``: how
    many packages the listing has."""

    checked: list[Pin] = field(default_factory=list)
    missing: list[Pin] = field(default_factory=list)
    mismatched: list[tuple[Pin, str]] = field(default_factory=list)
    wrong_build: list[tuple[Pin, Installed]] = field(default_factory=list)
    unchecked: list[Pin] = field(default_factory=list)
    build_unchecked: list[Pin] = field(default_factory=list)
    version_unknown: list[Pin] = field(default_factory=list)
    conflicts: list[PairConflict] = field(default_factory=list)
    held: list[tuple[str, str]] = field(default_factory=list)
    outside: list[RequirementMiss] = field(default_factory=list)
    requirements_held: list[tuple[str, list[str], str]] = field(default_factory=list)
    not_covered: list[tuple[str, str | None]] = field(default_factory=list)
    unpinned: list[tuple[str, str | None]] = field(default_factory=list)
    listed: int = 0

    @property
    def ok(self) -> bool:
        return not self.missing and not self.mismatched and not self.wrong_build and not self.conflicts

    def lines(self) -> list[str]:
        """Every pin and every installed package, once. FAIL lines: ``FAIL missing: a, b`` / ``FAIL wrong version:
        name installed X, pinned Y`` / ``FAIL wrong build: name V installed as B, pinned build G`` / ``FAIL known-bad
        pair: a V with b W: symptom (rule ID)`` followed by indented ``remedy:``, ``smoke test:`` and ``source:``
        lines; ``WARN outside a declared requirement: …``. PASS lines say what they cover: ``PASS all n pinned
        packages at their pinned version[ and build]`` when every pin is checked and right, else ``PASS k of n pinned
        packages …: names``; ``PASS compatibility rules held for: <pair> (rule ids), …`` (the pairs a rule judged
        and found within it, not a claim that no pair is bad: a known-bad pair has its own FAIL line); ``PASS
        declared requirements of …``. Then ``NOT CHECKED …`` for the pins (or pinned builds, or versions) the
        listing cannot show, ``NOT PINNED …`` for the installed packages no pin names, and last ``NOT CHECKED n
        of N installed packages …`` for those neither pinned nor judged by a rule; ``PASS the whole environment …``
        ends the report only when every installed package was checked and found right."""
        out = []
        if self.missing:
            out.append("FAIL missing: %s" % ", ".join(sorted(p.name for p in self.missing)))
        for pin, got in sorted(self.mismatched, key=lambda t: t[0].name):
            out.append("FAIL wrong version: %s installed %s, pinned %s" % (pin.name, got, pin.spec))
        for pin, got in sorted(self.wrong_build, key=lambda t: t[0].name):
            out.append("FAIL wrong build: %s %s installed as %s, pinned build %s"
                       % (pin.name, got.version, got.build, pin.build))
        for c in self.conflicts:
            out += ["FAIL known-bad pair: %s: %s (rule %s)" % (c.pair(), c.rule.symptom, c.rule.id),
                    "  remedy: %s" % c.rule.remedy, "  smoke test: %s" % c.rule.smoke,
                    "  source: %s" % "; ".join(c.rule.sources)]
        wrong = {id(p) for p in self.missing} | {id(p) for p, _ in self.mismatched} | {
            id(p) for p, _ in self.wrong_build} | {id(p) for p in self.version_unknown}
        right = sorted(p.name for p in self.checked if id(p) not in wrong)
        pins_whole = not (self.missing or self.mismatched or self.wrong_build or self.unchecked
                          or self.build_unchecked or self.version_unknown)
        if pins_whole and self.checked:
            out.append("PASS all %d pinned packages at their pinned version%s"
                       % (len(self.checked), " and build" if any(p.build for p in self.checked) else ""))
        elif right:
            out.append("PASS %d of %d pinned packages at the pinned version: %s"
                       % (len(right), len(self.checked) + len(self.unchecked), ", ".join(right)))
        for m in self.outside:
            out.append("WARN outside a declared requirement: %s %s with %s %s, which requires %s %s (not what pip "
                       "or conda would have installed: reinstall it at a version in that range; source: %s)"
                       % (m.package, m.version, m.requirer, m.requirer_version, m.package, m.spec, m.source))
        if self.held:
            by_pair: dict[str, list[str]] = {}
            for rid, pair in self.held:
                by_pair.setdefault(pair, []).append(rid)
            out.append("PASS compatibility rules held for: %s"
                       % ", ".join("%s (%s)" % (pair, ", ".join(rids)) for pair, rids in by_pair.items()))
        for requirer, fine, source in self.requirements_held:
            if fine:
                out.append("PASS declared requirements of %s: %s (%s)" % (requirer, ", ".join(fine), source))
        if self.unchecked:
            out.append("NOT CHECKED (conda packages a pip list does not show; use `conda list --json`): %s"
                       % ", ".join(sorted(p.name for p in self.unchecked)))
        if self.build_unchecked:
            out.append("NOT CHECKED build (a pip list has no build strings; use `conda list --json`): %s"
                       % ", ".join("%s (pinned build %s)" % (p.name, p.build)
                                   for p in sorted(self.build_unchecked, key=lambda p: p.name)))
        if self.version_unknown:
            out.append("NOT CHECKED version (the listing names no version: pip freeze's `name @ URL`; use `conda "
                       "list --json` or `pip list --format=json`): %s"
                       % ", ".join(sorted(p.name for p in self.version_unknown)))
        if self.unpinned and self.not_covered != self.unpinned:
            out.append("NOT PINNED %d of %d installed packages (no pin names them; only the compatibility rules "
                       "above judged them, where one applies): %s" % (len(self.unpinned), self.listed, ", ".join(
                           "%s %s" % (n, v) if v else n for n, v in self.unpinned)))
        if self.not_covered:
            out.append("NOT CHECKED %d of %d installed packages (neither pinned nor judged by a compatibility rule "
                       "of envs/rules.yaml; a right pin elsewhere does not vouch for them): %s"
                       % (len(self.not_covered), self.listed, ", ".join(
                           "%s %s" % (n, v) if v else n for n, v in sorted(self.not_covered))))
        elif self.ok and pins_whole and self.listed and not self.outside:
            out.append("PASS the whole environment: each of its %d installed packages pinned or judged by a "
                       "compatibility rule" % self.listed)
        return out


#: How a report names each kind of listing ``parse_installed_json`` reads.
LISTING_NAMES = {"conda": "conda list", "pip": "pip list", "pip freeze": "pip freeze"}


def parse_installed_json(text: str, what: str = "installed packages") -> tuple[dict[str, Installed], str]:
    """``({canonical name: Installed(version, build)}, kind)`` from ``conda list --json`` (kind "conda": conda
    packages and, with channel ``pypi``, pip ones; build from ``build_string``), ``pip list --format=json`` (kind
    "pip": entries have no channel and no build string, so every build is None) or ``pip freeze`` text (kind "pip
    freeze", ``parse_pip_freeze``; judged as a pip listing). ChexstackError naming ``what`` for an empty file, text
    that is none of these, and an empty JSON list (an environment that lists no packages is not one to pass)."""
    if not text.strip():
        raise ChexstackError("%s: the file is empty; expected `conda list --json`, `pip list --format=json` or "
                             "`pip freeze` output" % what)
    if not text.lstrip().startswith(("[", "{")):
        return parse_pip_freeze(text, what), "pip freeze"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ChexstackError("%s: not JSON (line %d: %s)" % (what, e.lineno, e.msg)) from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and "name" in d and "version" in d for d in data):
        raise ChexstackError("%s: expected a JSON list of objects with name and version (conda list --json, "
                             "pip list --format=json)" % what)
    if not data:
        raise ChexstackError("%s: lists no packages (an empty JSON list); expected the listing of an installed "
                             "environment (`conda list --json` or `pip list --format=json` inside it)" % what)
    kind = "conda" if any("channel" in d or "build_string" in d for d in data) else "pip"
    return {canonicalize_name(d["name"]): Installed(str(d["version"]), _build_string(d, kind, what), d["name"],
                                                    kind == "pip" or d.get("channel") == "pypi")
            for d in data}, kind


_FREEZE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:===?\s*([^\s;]+)|\s*@\s*\S+)\s*(?:;.*)?$")


def parse_pip_freeze(text: str, what: str = "installed packages") -> dict[str, Installed]:
    """``{canonical name: Installed(version)}`` of ``pip freeze`` output: ``name==version`` (or ``===``), and ``name
    @ URL`` (a package conda or a local build installed: version None); comments, blank lines, ``-e``/``--`` option
    lines are skipped (an editable checkout has no released version). ChexstackError naming the line otherwise."""
    found = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "-")):
            continue
        m = _FREEZE.match(line)
        if not m:
            raise ChexstackError("%s:%d: %r: expected `conda list --json`, `pip list --format=json` or `pip freeze` "
                                 "output (name==version or name @ URL)" % (what, number, line))
        found[canonicalize_name(m.group(1))] = Installed(m.group(2), None, m.group(1), True)
    return found


def _build_string(entry: dict, kind: str, what: str) -> str | None:
    if kind == "pip":
        return None
    build = entry.get("build_string")
    if not isinstance(build, str) or not build:
        raise ChexstackError("%s: package %s has no build_string (expected `conda list --json` output, where every "
                             "package has one)" % (what, entry["name"]))
    return build


def lock_pins(lock: Lockfile, platform: str) -> list[Pin]:
    """Every package the unified lock holds for ``platform``, at its exact version and (conda packages) build."""
    return [Pin(p.name, p.version, p.manager, p.build if p.manager == "conda" else None)
            for p in lock.package if p.platform == platform]


def spec_pins(spec: LockSpecification, platform: str) -> list[Pin]:
    """The environment file's own requirements (conda-lock's parsed specification) for ``platform``, with the
    build of a ``name=version=build`` spec."""
    return [Pin(d.name, getattr(d, "version", "*") or "*", d.manager, getattr(d, "build", None) or None)
            for d in spec.dependencies.get(platform, [])]


def check_installed(pins: list[Pin], installed: dict[str, Installed], kind: str = "conda") -> InstallReport:
    """Compare pins with ``{canonical name: Installed}`` of a ``kind`` ("conda" or "pip") listing, then judge every
    installed package no pin names by the compatibility rules' known-bad pairs (``envs.rules.check_pairs``, on the
    whole listing: a pair FAILs whether or not its packages are pinned); see ``InstallReport``. In a pip listing a
    conda pin that is absent is unchecked, not missing, and a pinned build of a listed package is unchecked (version
    compared, build not: pip has no build strings); "pip freeze" is a pip listing."""
    report = InstallReport(listed=len(installed))
    for pin in pins:
        got = installed.get(canonicalize_name(pin.name))
        if got is None and kind != "conda" and pin.manager != "pip":
            report.unchecked.append(pin)
            continue
        report.checked.append(pin)
        if got is None:
            report.missing.append(pin)
            continue
        if got.version is None:
            report.version_unknown.append(pin)
            continue
        if not pin.accepts(got.version):
            report.mismatched.append((pin, got.version))
        if not pin.build:
            continue
        if got.build is None:
            report.build_unchecked.append(pin)
        elif not pin.accepts_build(got.build):
            report.wrong_build.append((pin, got))
    pairs = check_pairs({name: got.version for name, got in installed.items()},
                        frozenset(name for name, got in installed.items() if got.pip))
    report.conflicts, report.held = pairs.conflicts, pairs.held
    requirements = check_requirements({name: got.version for name, got in installed.items()})
    report.outside, report.requirements_held = requirements.outside, requirements.held
    pinned = {canonicalize_name(p.name) for p in report.checked if p not in report.version_unknown}
    report.unpinned = sorted((got.name or name, got.version) for name, got in installed.items() if name not in pinned)
    report.not_covered = sorted((got.name or name, got.version) for name, got in installed.items()
                                if name not in pinned | pairs.covered | requirements.covered)
    return report
