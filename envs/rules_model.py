"""The strict model of ``envs/rules.yaml``: every table, row and field typed, unknown fields refused, every
version a dotted version. ``load_rules(path)`` raises ChexstackError naming the file and the field path
(``cuda_driver.releases.3.driver: ...``), so a typo in the rules stops at load, not in a query.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

VERSION = r"^[0-9]+(\.[0-9]+)*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DriverRelease(_Strict):
    """One row of NVIDIA's Table 3: a toolkit release and the driver it ships with."""

    cuda: str = Field(pattern=VERSION)
    driver: str = Field(pattern=VERSION)
    note: str | None = None
    checked: bool = True


class MvcFamily(_Strict):
    major: int
    driver: str = Field(pattern=VERSION)


class MinorVersionCompatibility(_Strict):
    source: str
    families: list[MvcFamily]


class DriverBranch(_Strict):
    branch: int
    min: str = Field(pattern=VERSION)


class DatacenterExceptionRow(_Strict):
    """An NGC release whose notes allow older driver branches on data-center GPUs."""

    ngc: str = Field(pattern=r"^[0-9]{2}\.[0-9]{2}$")
    cuda: str = Field(pattern=VERSION)
    gpus: str
    branches: list[DriverBranch]
    source: str


class CudaDriver(_Strict):
    source: str
    releases: list[DriverRelease]
    minor_version_compatibility: MinorVersionCompatibility
    forward_compatibility: str
    datacenter_exceptions: list[DatacenterExceptionRow] = Field(default_factory=list)


class TestedBuild(_Strict):
    tensorflow: str = Field(pattern=VERSION)
    python: list[str]
    compiler: str
    cudnn: str
    cuda: str
    note: str | None = None
    checked: bool = True


class TensorflowTested(_Strict):
    source: str
    builds: list[TestedBuild]


class HorovodFeature(_Strict):
    feature: str
    since: str = Field(pattern=VERSION)
    superseded_by: str | None = None
    source: str


class BuildEnvVariable(_Strict):
    name: str = Field(pattern=r"^HOROVOD_[A-Z0-9_]+$")
    since: str = Field(pattern=VERSION)
    until: str | None = Field(default=None, pattern=VERSION)
    documented: bool = False
    note: str | None = None


class HorovodBuildEnv(_Strict):
    source: str
    checked: list[str]
    variables: list[BuildEnvVariable]


class OsGlibcRow(_Strict):
    os: str
    version: str = Field(pattern=VERSION)
    glibc: str = Field(pattern=VERSION)


class OsGlibc(_Strict):
    source: str
    systems: list[OsGlibcRow]


def _specifier_set(value: str) -> str:
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        raise ValueError("expected a PEP 440 specifier set such as '>=3' or '<2.5', got %r" % value) from None
    return value


class KnownBadPair(_Strict):
    """Two packages that install together but fail at run time: ``package`` in ``versions`` (a PEP 440 specifier
    set, ">=3"; ``installed_by: pip``: only a pip-installed one, a wheel built elsewhere) with any of ``against`` in
    ``against_versions``; the ``symptom``, the ``remedy``, an import-and-use
    ``smoke`` test, and the public ``sources``."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    package: str
    versions: str
    installed_by: Literal["pip"] | None = None
    against: list[str] = Field(min_length=1)
    against_versions: str
    symptom: str
    remedy: str
    smoke: str
    sources: list[str] = Field(min_length=1)

    @field_validator("versions", "against_versions")
    @classmethod
    def _specifier(cls, value: str) -> str:
        return _specifier_set(value)


class DeclaredRequirements(_Strict):
    """What a release of ``packages`` (any of those names) in ``versions`` declares it needs: ``requires``
    ``{package: specifier set}``, from ``source``."""

    packages: list[str] = Field(min_length=1)
    versions: str
    requires: dict[str, str] = Field(min_length=1)
    source: str

    @field_validator("versions")
    @classmethod
    def _versions(cls, value: str) -> str:
        return _specifier_set(value)

    @field_validator("requires")
    @classmethod
    def _requires(cls, value: dict[str, str]) -> dict[str, str]:
        for spec in value.values():
            _specifier_set(spec)
        return value


class Rules(_Strict):
    """The whole of ``envs/rules.yaml``."""

    cuda_driver: CudaDriver
    tensorflow_tested: TensorflowTested
    horovod_features: list[HorovodFeature]
    horovod_build_env: HorovodBuildEnv
    os_glibc: OsGlibc
    known_bad_pairs: list[KnownBadPair] = Field(default_factory=list)
    declared_requirements: list[DeclaredRequirements] = Field(default_factory=list)


def load_rules(path: Path) -> Rules:
    """Parse and validate ``path``; ChexstackError naming the file and each bad field otherwise."""
    from envs.manifest import validation_error, yaml_mapping
    data = yaml_mapping(path.read_text(), path, "rule tables")
    try:
        return Rules.model_validate(data)
    except ValidationError as e:
        raise validation_error(path, e) from None
