"""Stack manifests: one YAML file per stack in ``envs/stacks/``, validated by the models below.

A stack is data. Each component holds the version the built artifact must contain (``version``, compared inside
the image by ``images.verify``), where that value comes from (``source``), and, for the two columns of the seed's
Table 1, the text the paper reported (``reported``) — which may differ from what the artifact really ships (the
NGC column's CUDA 10.2 vs NVIDIA's 10.1.168): ``invoke stacks --check`` shows such differences, never hides them.

Errors: ``load_stack`` raises ``ChexstackError`` naming the file, the field path and what was expected, or, for
an unknown stack, listing the known ones.
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from chexstack.errors import ChexstackError

STACKS_DIR = Path(__file__).resolve().parent / "stacks"

#: The rows of the seed's Table 1, in its order; every manifest has every one of them.
COMPONENTS = ("tensorflow", "horovod", "mpi", "cuda", "cuda_driver", "nccl", "cudnn", "python", "os", "gcc")

_VERSION = re.compile(r"^[0-9]+(\.[0-9A-Za-z]+)*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Component(_Strict):
    """One Table 1 row of a stack.

    ``version``: dotted version the artifact must contain, ``None`` where the stack has no such component (CUDA in
    the cpu stack) or it is a host property (``cuda_driver``: use ``Stack.min_driver``). A shorter expected version
    matches a longer actual one with the same leading parts ("3.5" matches "3.5.2").
    ``name``: product where the row needs one ("Open MPI", "Ubuntu", "RHEL").
    ``reported``: the Table 1 cell as published, for stacks that are a Table 1 column.
    ``source``: where ``version`` comes from (release notes URL, pin in this repository).
    ``package``: the PyPI distribution a recipe installs for this row (``tensorflow-cpu``, ``horovod``), whose pin
    is derived from ``version`` (``Stack.pin``): the version is written once.
    """

    version: str | None
    name: str | None = None
    reported: str | None = None
    source: str = Field(min_length=3)
    package: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

    @field_validator("version")
    @classmethod
    def _dotted(cls, v: str | None) -> str | None:
        if v is not None and not _VERSION.match(v):
            raise ValueError("expected a dotted version like 10.1.168, got %r" % v)
        return v


class BaseImage(_Strict):
    """The image a stack's recipe starts FROM; ``digest`` pins it (``sha256:`` + 64 hex) once known."""

    image: str = Field(pattern=r"^[a-z0-9./_:@-]+$")
    digest: str | None = Field(default=None, pattern=r"^sha256:[0-9a-f]{64}$")

    @property
    def reference(self) -> str:
        """``image@digest`` when pinned, else ``image``."""
        return "%s@%s" % (self.image.split("@")[0], self.digest) if self.digest else self.image


class Build(_Strict):
    """How the stack's software is built: environment for Horovod's build and pip pins installed before it."""

    horovod_env: dict[str, str] = Field(default_factory=dict)
    python_packages: list[str] = Field(default_factory=list)

    @field_validator("python_packages")
    @classmethod
    def _pinned(cls, pkgs: list[str]) -> list[str]:
        for p in pkgs:
            if not re.match(r"^[A-Za-z0-9_.\-\[\],]+==[0-9][0-9A-Za-z.+\-]*$", p):
                raise ValueError("expected an exact pin NAME==VERSION, got %r" % p)
        return pkgs


class Stack(_Strict):
    """One stack manifest (``envs/stacks/<name>.yaml``)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    family: Literal["ngc", "conda", "cpu"]
    table1_column: Literal["ngc", "conda"] | None = None
    gpu: bool
    base: BaseImage
    components: dict[str, Component]
    min_driver: str | None = Field(default=None, pattern=r"^[0-9]+(\.[0-9]+)*$")
    build: Build = Field(default_factory=Build)
    notes: list[str] = Field(default_factory=list)

    @field_validator("components")
    @classmethod
    def _all_rows(cls, comps: dict[str, Component]) -> dict[str, Component]:
        missing = [c for c in COMPONENTS if c not in comps]
        unknown = [c for c in comps if c not in COMPONENTS]
        if missing or unknown:
            raise ValueError(
                "expected exactly the Table 1 rows %s%s%s" % (
                    ", ".join(COMPONENTS),
                    "; missing: " + ", ".join(missing) if missing else "",
                    "; unknown: " + ", ".join(unknown) if unknown else "")
            )
        return {c: comps[c] for c in COMPONENTS}

    @model_validator(mode="after")
    def _pins_once(self) -> "Stack":
        packaged = {c.package.lower(): row for row, c in self.components.items() if c.package}
        for pin in self.build.python_packages:
            name = pin.split("==")[0].split("[")[0].lower()
            if name in packaged:
                raise ValueError("build.python_packages pins %s, the package of components.%s: its version is "
                                 "components.%s.version (remove the pin)" % (pin, packaged[name], packaged[name]))
        for row, c in self.components.items():
            if c.package and not c.version:
                raise ValueError("components.%s names package %s but has no version to pin" % (row, c.package))
        return self

    def version(self, component: str) -> str | None:
        return self.components[component].version

    def pin(self, component: str) -> str:
        """``package==version`` of a component that names its package. Raises ChexstackError otherwise."""
        c = self.components[component]
        if not c.package:
            raise ChexstackError("stack %s: components.%s names no package to pin (field package)"
                                 % (self.name, component))
        return "%s==%s" % (c.package, c.version)

    def pip_pins(self) -> list[str]:
        """Every pip pin the stack's recipe installs: the components' (``pin``) then ``build.python_packages``."""
        return [self.pin(row) for row, c in self.components.items() if c.package] + list(self.build.python_packages)


def _field_path(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def yaml_mapping(text: str, path: Path, what: str = "stack fields") -> dict:
    """Parse YAML text whose top level must be a mapping; ChexstackError naming ``path`` (and line) otherwise."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = "%s:%d" % (path, mark.line + 1) if mark else str(path)
        raise ChexstackError("%s: not valid YAML: %s" % (where, getattr(e, "problem", e))) from None
    if not isinstance(data, dict):
        raise ChexstackError("%s: expected a mapping of %s at the top level" % (path, what))
    return data


def validation_error(path: Path, err: ValidationError) -> ChexstackError:
    """One ChexstackError line per pydantic error: ``<path>: field <a.b.c>: <what was expected>``."""
    lines = ["%s: field %s: %s" % (path, _field_path(e["loc"]), e["msg"]) for e in err.errors()]
    return ChexstackError("\n".join(lines))


def parse_stack(text: str, path: Path) -> Stack:
    """Parse and validate one manifest's YAML text; ``path`` is only used in error messages."""
    data = yaml_mapping(text, path)
    try:
        stack = Stack.model_validate(data)
    except ValidationError as e:
        raise validation_error(path, e) from None
    if stack.name != path.stem:
        raise ChexstackError("%s: field name: expected %r (the file's name), got %r" % (path, path.stem, stack.name))
    return stack


def known_stacks(stacks_dir: Path = STACKS_DIR) -> list[str]:
    """Names of the stacks that have a manifest, sorted."""
    return sorted(p.stem for p in stacks_dir.glob("*.yaml"))


@lru_cache(maxsize=None)
def load_stack(name: str, stacks_dir: Path = STACKS_DIR) -> Stack:
    """Load ``<stacks_dir>/<name>.yaml``. Raises ChexstackError for an unknown name (listing the known ones) or
    an invalid manifest (naming file and field)."""
    if not name:
        raise ChexstackError("no stack given: add --stack NAME; known stacks: %s"
                             % (", ".join(known_stacks(stacks_dir)) or "none"))
    path = stacks_dir / ("%s.yaml" % name)
    if not path.is_file():
        raise ChexstackError("unknown stack %r; known stacks: %s"
                             % (name, ", ".join(known_stacks(stacks_dir)) or "none"))
    return parse_stack(path.read_text(), path)
