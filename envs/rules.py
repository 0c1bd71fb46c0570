"""Compatibility rules with their sources: CUDA ↔ Linux driver, TensorFlow's tested builds, Horovod features.

The facts live in ``envs/rules.yaml`` (each table with its source URL), validated by the strict model of
``envs/rules_model.py`` (a typo stops at load, naming file and field); this module loads them once and answers
questions. Versions compare with ``packaging.version`` (driver "535.216.03" and toolkit "10.1.168" both parse).

Queries (stable API; ``validate`` uses the driver ones):

- ``min_driver_for_cuda("10.2") -> DriverFloor(driver="440.33", ...)``: the oldest Linux driver that runs a toolkit
  at all. Before CUDA 11 that is the toolkit release's own driver (Table 3 of NVIDIA's release notes); from CUDA 11
  on it is the family's minor-version-compatibility floor (11.x 450.80.02, 12.x 525.60.13, 13.x 580), and
  ``native_driver`` says which driver gives the full feature set.
- ``max_cuda_for_driver("535.216.03") -> DriverCeiling(cuda="12.2", ...)``: the newest toolkit release that driver
  supports natively — what ``nvidia-smi`` prints as "CUDA Version"
  (https://github.com/devcontainers/features/issues/1295), not an installed toolkit.
- ``check_driver(driver, cuda) -> Verdict``: PASS, WARN (runs only through minor-version compatibility) or FAIL
  (https://github.com/NVIDIA/nvidia-docker/issues/745: 390.48 vs 9.2.88 → FAIL, needs >= 396.26).
- ``horovod_has(version, feature) -> bool`` for ``horovodrun``, ``check_build``, ``nccl_built``,
  ``gpu_allreduce_env``, ``gpu_operations_env``.
- ``horovod_build_variable(version, "HOROVOD_WITH_GLOO") -> BuildVariable``: whether that release's build reads
  a ``HOROVOD_*`` environment variable (from its sdist's setup.py/CMake files).
- ``tf_tested(version) -> TfTested | None``: tensorflow.org's tested build configuration of that release.
- ``glibc_for_os(name, version) -> str | None``: the base OS's glibc (the ``__glibc`` a conda lock must declare).
- ``check_pairs({name: version}) -> PairReport``: the known-bad package pairs (``known_bad_pairs``: h5py 3 with
  TensorFlow < 2.5's Keras, ...) an installed environment holds, the pairs it holds that are fine, and which
  packages a rule judged.
- ``check_requirements({name: version}) -> RequirementReport``: the installed packages outside what an installed
  TensorFlow release declares it needs (``declared_requirements``: its setup.py's REQUIRED_PACKAGES).

Errors: a malformed version string raises ``ChexstackError`` naming the argument and what was expected.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from chexstack.errors import ChexstackError
from envs.rules_model import (
    BuildEnvVariable,
    DriverRelease,
    HorovodBuildEnv,
    HorovodFeature,
    KnownBadPair,
    MvcFamily,
    Rules,
    load_rules,
)

RULES_FILE = Path(__file__).resolve().parent / "rules.yaml"

Status = Literal["PASS", "WARN", "FAIL"]


def parse_version(text: str, what: str = "version") -> Version:
    """``packaging`` Version of a dotted version ("418.40.04", "10.1"); ChexstackError naming ``what`` if not one."""
    try:
        return Version(str(text).strip())
    except InvalidVersion:
        raise ChexstackError("%s: expected a dotted version like 10.1.168, got %r" % (what, text)) from None


def same_release(a: str, b: str) -> bool:
    """True when the shorter of two dotted versions is a leading part of the longer ("3.5" vs "3.5.2")."""
    pa, pb = parse_version(a).release, parse_version(b).release
    n = min(len(pa), len(pb))
    return pa[:n] == pb[:n]


def _major_minor(v: str) -> tuple[int, int]:
    rel = parse_version(v).release + (0,)
    return rel[0], rel[1]


@dataclass(frozen=True)
class DriverFloor:
    """Minimum Linux x86_64 driver for a CUDA toolkit version.

    ``driver``: oldest driver that runs it at all; ``native_driver``: the driver its release ships with (full
    feature set), None when the release is not in the table; ``via``: "release" (before CUDA 11) or
    "minor-version-compatibility"; ``source``: where the numbers come from.
    """

    cuda: str
    driver: str
    native_driver: str | None
    via: Literal["release", "minor-version-compatibility"]
    source: str


@dataclass(frozen=True)
class DriverCeiling:
    """Newest CUDA toolkit release a driver supports natively: ``cuda`` as major.minor, ``release`` in full."""

    driver: str
    cuda: str
    release: str
    source: str


@dataclass(frozen=True)
class Verdict:
    """Outcome of a driver/toolkit check: ``status`` PASS, WARN or FAIL, a one-line ``message``, its ``source``."""

    status: Status
    message: str
    source: str


@dataclass(frozen=True)
class TfTested:
    """One row of tensorflow.org's tested GPU build configurations."""

    tensorflow: str
    python: tuple[str, ...]
    compiler: str
    cudnn: str
    cuda: str
    source: str
    note: str | None = None

    def python_ok(self, python: str) -> bool:
        """True when ``python`` (e.g. "3.6.8") falls in one of the tested ranges ("2.7", "3.3-3.6")."""
        mm = _major_minor(python)
        for rng in self.python:
            lo, _, hi = rng.partition("-")
            if _major_minor(lo) <= mm <= _major_minor(hi or lo):
                return True
        return False


@lru_cache(maxsize=None)
def _rules() -> Rules:
    return load_rules(RULES_FILE)


def _releases() -> list[tuple[Version, DriverRelease]]:
    rows = _rules().cuda_driver.releases
    return sorted(((Version(r.cuda), r) for r in rows), key=lambda t: t[0])


def _table3_source() -> str:
    return _rules().cuda_driver.source


def _release_row(cuda: str) -> DriverRelease | None:
    """The Table 3 row for this toolkit: the newest release of the same major.minor not newer than it (9.2.148 →
    the 9.2.148 row, 10.1.168 → 10.1.105), else the first release of that major.minor (9.2 → 9.2.88)."""
    v = parse_version(cuda, "CUDA version")
    same = [(rv, r) for rv, r in _releases() if rv.release[:2] == (v.release + (0,))[:2]]
    if not same:
        return None
    older = [t for t in same if t[0] <= v]
    return (older[-1] if older else same[0])[1]


def _family_floor(major: int) -> MvcFamily | None:
    for fam in _rules().cuda_driver.minor_version_compatibility.families:
        if fam.major == major:
            return fam
    return None


def min_driver_for_cuda(cuda: str) -> DriverFloor:
    """Oldest Linux driver that can run CUDA toolkit ``cuda`` ("10.2", "9.2.88", "12.4.1").

    Raises ChexstackError when the version is malformed or outside the rules (listing what is known).
    """
    v = parse_version(cuda, "CUDA version")
    row = _release_row(cuda)
    native = row.driver if row else None
    fam = _family_floor(v.release[0]) if v.release[0] >= 11 else None
    if fam is not None:
        mvc = _rules().cuda_driver.minor_version_compatibility
        return DriverFloor(cuda, fam.driver, native, "minor-version-compatibility", mvc.source)
    if row is None:
        known = ", ".join(sorted({"%d.%d" % rv.release[:2] for rv, _ in _releases()}, key=Version))
        raise ChexstackError("CUDA version %r: no driver rule; known toolkits: %s" % (cuda, known))
    return DriverFloor(cuda, row.driver, native, "release", _table3_source())


def max_cuda_for_driver(driver: str) -> DriverCeiling:
    """Newest toolkit release whose own driver is not newer than ``driver`` (390.48 → 9.1, 535.216.03 → 12.2).

    Raises ChexstackError for a malformed driver or one older than every release in the table.
    """
    d = parse_version(driver, "driver version")
    fitting = [(rv, r) for rv, r in _releases() if Version(r.driver) <= d]
    if not fitting:
        raise ChexstackError("driver %s: older than every CUDA release in the rules (oldest needs %s)"
                             % (driver, _releases()[0][1].driver))
    rv, row = fitting[-1]
    return DriverCeiling(driver, "%d.%d" % rv.release[:2], row.cuda, _table3_source())


@dataclass(frozen=True)
class DatacenterException:
    """An NGC release whose container also runs on older driver branches on data-center (Tesla) GPUs, through
    the CUDA compatibility package it carries: ``branches`` ``{major: minimum driver}``."""

    ngc: str
    cuda: str
    gpus: str
    branches: dict
    source: str

    def allows(self, driver: str) -> bool:
        d = parse_version(driver, "driver version")
        low = self.branches.get(d.release[0])
        return low is not None and d >= Version(low)

    def describe(self) -> str:
        return " or ".join("R%d (>= %s)" % (b, m) if "." in m else "R%d" % b for b, m in self.branches.items())


def datacenter_exception(ngc_release: str | None) -> DatacenterException | None:
    """The NGC release notes' data-center driver exception for ``ngc_release`` ("19.06"), or None."""
    for row in _rules().cuda_driver.datacenter_exceptions:
        if ngc_release and row.ngc == ngc_release:
            return DatacenterException(row.ngc, row.cuda, row.gpus, {b.branch: b.min for b in row.branches},
                                       row.source)
    return None


def check_driver(driver: str, cuda: str, ngc_release: str | None = None, datacenter: bool | None = None) -> Verdict:
    """Can a host with Linux driver ``driver`` run a CUDA ``cuda`` toolkit (image, conda env, wheel)?

    PASS: the driver supports that release natively. WARN: only through CUDA >= 11 minor-version compatibility
    (same major family, driver at or above the family floor): PTX JIT of newer PTX and features that need the
    newer driver fail. FAIL: below the floor (the message says which driver is needed, and the ways out).
    ``ngc_release``: the NGC container release the CUDA comes from; its release notes' data-center exception
    (``datacenter_exception``) turns a FAIL into a PASS on data-center GPUs (``datacenter`` True) and is named in
    the FAIL otherwise (``datacenter`` False or None: not known to be one).
    """
    verdict = _check_driver(driver, cuda)
    exc = datacenter_exception(ngc_release) if verdict.status == "FAIL" else None
    if exc is None or not exc.allows(driver):
        return verdict
    if datacenter:
        return Verdict("PASS", "driver %s runs NGC %s (CUDA %s) on data-center GPUs: the release notes allow %s "
                               "there through the container's CUDA compatibility package"
                       % (driver, exc.ngc, cuda, exc.describe()), exc.source)
    return Verdict("FAIL", verdict.message + "; NGC %s allows %s only on %s" % (exc.ngc, exc.describe(), exc.gpus),
                   "%s; %s" % (verdict.source, exc.source))


def _check_driver(driver: str, cuda: str) -> Verdict:
    floor = min_driver_for_cuda(cuda)
    d = parse_version(driver, "driver version")
    ceiling = max_cuda_for_driver(driver) if d >= Version(_releases()[0][1].driver) else None
    if floor.native_driver is not None:
        native_ok = d >= Version(floor.native_driver)
    else:  # a release missing from Table 3 (e.g. 12.7): compare with what the driver supports natively
        native_ok = ceiling is not None and _major_minor(cuda) <= _major_minor(ceiling.cuda)
    if native_ok:
        return Verdict("PASS", "driver %s supports CUDA %s (needs >= %s)"
                       % (driver, cuda, floor.native_driver or floor.driver), floor.source)
    if floor.via == "minor-version-compatibility" and d >= Version(floor.driver):
        newer = "driver >= %s" % floor.native_driver if floor.native_driver else "a newer driver"
        return Verdict("WARN", "driver %s (max CUDA %s) runs CUDA %s only through minor-version compatibility "
                               "(>= %s): PTX JIT of newer PTX and features that need %s will fail"
                       % (driver, ceiling.cuda if ceiling else "?", cuda, floor.driver, newer), floor.source)
    ways = "upgrade the driver to >= %s, or pick an image with CUDA <= %s" % (
        floor.driver, ceiling.cuda) if ceiling else "upgrade the driver to >= %s" % floor.driver
    if floor.via == "minor-version-compatibility":
        ways += ", or use the cuda-compat forward-compatibility package (data-center GPUs only)"
    return Verdict("FAIL", "driver %s too old for CUDA %s (needs >= %s); %s" % (driver, cuda, floor.driver, ways),
                   floor.source)


def horovod_feature_names() -> list[str]:
    """Names ``horovod_has`` knows."""
    return [f.feature for f in _rules().horovod_features]


def _horovod_feature(feature: str) -> HorovodFeature:
    for f in _rules().horovod_features:
        if f.feature == feature:
            return f
    raise ChexstackError("unknown Horovod feature %r; known: %s" % (feature, ", ".join(horovod_feature_names())))


def horovod_has(version: str, feature: str) -> bool:
    """True when Horovod ``version`` has ``feature`` (see ``horovod_feature_names``)."""
    return parse_version(version, "Horovod version") >= Version(_horovod_feature(feature).since)


def horovod_feature_source(feature: str) -> str:
    """Source and first release of a Horovod feature, for messages."""
    f = _horovod_feature(feature)
    return "%s (since %s)" % (f.source, f.since)


@dataclass(frozen=True)
class BuildVariable:
    """What Horovod ``version``'s build makes of environment variable ``name``.

    ``status``: "read" (the build reads it), "documented" (docs/install.rst lists it, the build does not read it),
    "unknown" (neither: a typo or another release's variable), "unchecked" (the rules cannot tell: a release
    outside the checked ones, or between two checked releases that differ); ``message`` says which releases read
    it; ``source`` where that comes from."""

    name: str
    status: Literal["read", "documented", "unknown", "unchecked"]
    message: str
    source: str


def _build_env() -> HorovodBuildEnv:
    return _rules().horovod_build_env


def horovod_build_variables() -> list[str]:
    """Every HOROVOD_* build variable of any checked Horovod release."""
    return [v.name for v in _build_env().variables]


def _read_in(entry: BuildEnvVariable, v: Version) -> bool:
    return Version(entry.since) <= v and (entry.until is None or v < Version(entry.until))


def _releases_reading(entry: BuildEnvVariable) -> str:
    return "%s%s" % (entry.since, ", no longer from %s" % entry.until if entry.until else " on")


def horovod_build_variable(version: str, name: str) -> BuildVariable:
    """Does Horovod ``version``'s build know the environment variable ``name`` (a ``HOROVOD_*`` name)?

    Answered from the checked releases in rules.yaml (``horovod_build_env``): exact for a checked release; for a
    release between two checked ones, the answer of both when they agree, else "unchecked"."""
    v = parse_version(version, "Horovod version")
    table = _build_env()
    source = table.source
    checked = sorted(Version(r) for r in table.checked)
    entry = next((e for e in table.variables if e.name == name), None)
    if v < checked[0] or v > checked[-1]:
        return BuildVariable(name, "unchecked", "Horovod %s is outside the checked releases %s..%s"
                             % (version, checked[0], checked[-1]), source)
    if entry is None:
        return BuildVariable(name, "unknown", "%s is not a build variable of any checked Horovod release" % name,
                             source)
    before, after = max(r for r in checked if r <= v), min(r for r in checked if r >= v)
    if _read_in(entry, before) != _read_in(entry, after):
        return BuildVariable(name, "unchecked", "Horovod %s lies between the checked releases %s and %s; %s is "
                             "read from %s" % (version, before, after, name, _releases_reading(entry)), source)
    if _read_in(entry, v):
        return BuildVariable(name, "read", "Horovod %s reads %s" % (version, name), source)
    status = "documented" if entry.documented and v >= Version(entry.since) else "unknown"
    note = "; %s" % entry.note if entry.note else ""
    return BuildVariable(name, status, "Horovod %s's build does not read %s (read from %s)%s"
                         % (version, name, _releases_reading(entry), note), source)


def tf_tested(version: str) -> TfTested | None:
    """tensorflow.org's tested GPU build for TensorFlow ``version`` (same major.minor), or None if not listed."""
    mm = _major_minor(version)
    table = _rules().tensorflow_tested
    for b in table.builds:
        if _major_minor(b.tensorflow) == mm:
            return TfTested(b.tensorflow, tuple(b.python), b.compiler, b.cudnn, b.cuda, table.source, b.note)
    return None


def glibc_for_os(name: str, version: str) -> str | None:
    """glibc of OS ``name`` ``version`` ("CentOS", "7" → "2.17"), matched on the leading version parts."""
    for s in _rules().os_glibc.systems:
        if s.os.lower() == name.lower() and same_release(s.version, version):
            return s.glibc
    return None


def glibc_source() -> str:
    return _rules().os_glibc.source


@dataclass(frozen=True)
class PairConflict:
    """A known-bad pair an environment holds: ``rule`` (its row of ``known_bad_pairs``), the installed ``package``
    at ``version`` and the ``other`` package at ``other_version`` it fails with."""

    rule: KnownBadPair
    package: str
    version: str
    other: str
    other_version: str

    def pair(self) -> str:
        return "%s %s with %s %s" % (self.package, self.version, self.other, self.other_version)


@dataclass(frozen=True)
class PairReport:
    """``conflicts``: the known-bad pairs installed; ``held``: (rule id, "a 1.0 with b 2.0") of each rule whose two
    sides are installed outside its bad ranges; ``covered``: the canonical names of the installed packages some rule
    judged (both of its sides installed, versions readable)."""

    conflicts: list[PairConflict]
    held: list[tuple[str, str]]
    covered: frozenset[str]


def _parsed(version: str | None) -> Version | None:
    try:
        return Version(version) if version else None
    except InvalidVersion:
        return None


def known_bad_pairs() -> list[KnownBadPair]:
    """Every row of ``known_bad_pairs`` in rules.yaml."""
    return list(_rules().known_bad_pairs)


def check_pairs(installed: dict[str, str | None], pip: frozenset[str] = frozenset()) -> PairReport:
    """Judge ``{canonical name: version}`` of an installed environment by every known-bad pair: a rule applies where
    its ``package`` and at least one of its ``against`` packages are installed with readable versions (a version
    packaging cannot read, or None, leaves that package out); it is a conflict where the package is in ``versions``
    and such an ``against`` package (the first, in the rule's order) in ``against_versions``. ``pip``: the canonical
    names pip installed (a rule with ``installed_by: pip`` applies to those only)."""
    conflicts, held, covered = [], [], set()
    for rule in known_bad_pairs():
        name = canonicalize_name(rule.package)
        version = _parsed(installed.get(name))
        others = [(canonicalize_name(o), _parsed(installed.get(canonicalize_name(o)))) for o in rule.against]
        others = [(o, v) for o, v in others if v is not None]
        if version is None or not others or (rule.installed_by == "pip" and name not in pip):
            continue
        covered.update([name] + [o for o, _ in others])
        bad = [(o, v) for o, v in others if SpecifierSet(rule.against_versions).contains(v, prereleases=True)]
        if bad and SpecifierSet(rule.versions).contains(version, prereleases=True):
            conflicts.append(PairConflict(rule, name, str(installed[name]), bad[0][0], str(installed[bad[0][0]])))
        else:
            held.append((rule.id, "%s %s with %s %s" % (name, installed[name], others[0][0],
                                                        installed[others[0][0]])))
    return PairReport(conflicts, held, frozenset(covered))


@dataclass(frozen=True)
class RequirementMiss:
    """An installed ``package`` at ``version`` outside ``spec``, which the installed ``requirer`` at
    ``requirer_version`` declares it needs (``source``)."""

    package: str
    version: str
    requirer: str
    requirer_version: str
    spec: str
    source: str


@dataclass(frozen=True)
class RequirementReport:
    """``outside``: the declared requirements the environment misses; ``held``: (requirer with its version, the
    required packages that meet it, source); ``covered``: the canonical names judged (requirers and the required
    packages installed, where at least one required package is installed to judge)."""

    outside: list[RequirementMiss]
    held: list[tuple[str, list[str], str]]
    covered: frozenset[str]


def check_requirements(installed: dict[str, str | None]) -> RequirementReport:
    """Judge ``{canonical name: version}`` by ``declared_requirements``: for each row whose package (any of its
    names, the first installed in range) is installed in ``versions``, every required package that is installed
    with a readable version must be in its range. A required package that is not installed is not judged here
    (the pins or the lock say what must be installed)."""
    outside, held, covered = [], [], set()
    for row in _rules().declared_requirements:
        names = [canonicalize_name(n) for n in row.packages]
        present = [n for n in names if _parsed(installed.get(n)) is not None
                   and SpecifierSet(row.versions).contains(_parsed(installed.get(n)), prereleases=True)]
        if not present:
            continue
        requirer = present[0]
        fine, judged = [], []
        for need, spec in row.requires.items():
            need = canonicalize_name(need)
            version = _parsed(installed.get(need))
            if version is None:
                continue
            judged.append(need)
            if SpecifierSet(spec).contains(version, prereleases=True):
                fine.append("%s %s" % (need, installed[need]))
            else:
                outside.append(RequirementMiss(need, str(installed[need]), requirer, str(installed[requirer]), spec,
                                               row.source))
        if judged:
            covered.update(present + judged)
            held.append(("%s %s" % (requirer, installed[requirer]), fine, row.source))
    return RequirementReport(outside, held, frozenset(covered))
