"""Convert an existing Dockerfile to a Singularity/Apptainer definition with spython, repairing what spython
0.3.14/0.3.15 gets wrong (each verified against ../shared/cases):

- 09 ARG in FROM: ``${VAR}``/``$VAR`` in FROM are resolved from the ARGs before it (``--build-arg`` overrides);
  an ARG with no value is an error naming it, never a ``From:`` with a ``$`` in it. As in Docker, ARGs declared
  before FROM are not visible in the stage unless re-declared.
- 10 ENV during %post: every ENV pair is ``export``ed in ``%post`` where the ENV stood (spython writes bare
  assignments, which child processes such as pip never see), and ``%post`` first sources the base image's
  environment like hpccm does.
- 11 COPY into a WORKDIR: relative destinations are resolved against the WORKDIR in effect, and the destination
  folders are created in ``%setup`` (``%files`` runs before ``%post``).
- 12 USER: never ``su -``; a comment says it is ignored, and the commands after it run as that user through
  ``su USER -c '...'``. Names that merely contain USER (``$NB_USER``) are left alone.

``convert_file(path, build_args) -> str``; ``convert(path, build_args) -> Conversion`` also returns warnings.
Errors: ``ChexstackError`` naming the file and the instruction.
"""
from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from spython.logger import bot
from spython.logger.message import QUIET
from spython.main.parse.parsers.docker import DockerParser
from spython.main.parse.writers.singularity import SingularityWriter

from chexstack.errors import ChexstackError
from chexstack.inputs import input_file

DOCKER_ENV = ". /.singularity.d/env/10-docker*.sh"
#: Dockerfile instructions spython cannot map, with what to do instead.
_DOCKER_ONLY = {
    "SHELL": "write the RUN commands for /bin/sh, which %post uses",
    "ONBUILD": "it only affects images built FROM this one",
}
_VAR = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)")


def substitute(text: str, values: dict[str, str | None]) -> tuple[str, list[str]]:
    """Replace ``${A}``, ``$A`` and ``${A:-default}`` from ``values``; returns the text and the names that had no
    value (left in place)."""
    missing: list[str] = []

    def repl(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        if values.get(name) is not None:
            return values[name]
        if m.group(2) is not None:
            return m.group(2)
        missing.append(name)
        return m.group(0)

    return _VAR.sub(repl, text), missing


class _RepairingParser(DockerParser):
    """spython's DockerParser with the four repairs (see the module docstring)."""

    def __init__(self, filename: str, build_args: dict[str, str]):
        self.build_args = dict(build_args)
        self.global_args: dict[str, str | None] = {}
        self.stage_vars: dict[str, str | None] = {}
        self.workdir, self.user, self.seen_from = "/", None, False
        self.setup_dirs: dict[str, list[str]] = {}
        self.warnings: list[str] = []
        self._pending: list[str] = []
        super().__init__(filename, load=True)

    @property
    def layer(self):
        return self.recipe[self.active_layer]

    def _fail(self, instruction: str, why: str) -> None:
        text = instruction.strip()
        raise ChexstackError("%s%s: %s: %s" % (self.filename, self._line_of(text), text, why))

    def _line_of(self, text: str) -> str:
        """``:N`` for the first line of the Dockerfile that starts with ``text`` (spython keeps no numbers)."""
        head = text.splitlines()[0][:60] if text else ""
        with open(self.filename, errors="replace") as f:
            for number, line in enumerate(f, 1):
                if head and line.strip().startswith(head):
                    return ":%d" % number
        return ""

    def _get_mapping(self, line, parser=None, previous=None):
        if isinstance(line, str) and re.match(r"^\s*USER\s", line, re.I):
            return self._user
        return super()._get_mapping(line, parser, previous)

    def _default(self, line):
        """spython copies any line it does not know into %post as a shell command; only comments may land here."""
        if not line.strip():
            return None
        if line.strip().startswith("#"):
            return self._comment(line)
        word = line.split(None, 1)[0].upper()
        if word in _DOCKER_ONLY:
            self._fail(line, "%s has no Singularity/Apptainer equivalent in this conversion (%s)"
                       % (word, _DOCKER_ONLY[word]))
        self._fail(line, "not a Dockerfile instruction (expected FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, "
                   "LABEL, CMD, ENTRYPOINT, EXPOSE, VOLUME, HEALTHCHECK, STOPSIGNAL or MAINTAINER)")

    def _from(self, line):
        header = self._setup("FROM", line)[0]
        m = re.match(r"^(\S+)(?:\s+AS\s+(\S+))?\s*$", header, re.I)
        if not m:
            self._fail(line, "expected FROM IMAGE [AS NAME]")
        image, name = m.group(1), m.group(2)
        if not name and self.seen_from:
            name = "stage%d" % (len(self.recipe) + 1)
        self._multistage("%s AS %s" % (image, name) if name else image)
        resolved, missing = substitute(image, {**self.global_args, **self.build_args})
        if missing or "$" in resolved:
            self._fail(line, "ARG %s has no value; pass it as a build argument (--build-arg %s=VALUE)"
                       % (", ".join(missing) or "?", (missing or ["NAME"])[0]))
        self.layer.fromHeader = resolved
        self.seen_from, self.workdir, self.user, self.stage_vars = True, "/", None, {}

    def _arg(self, line):
        for item in self._setup("ARG", line):
            for decl in shlex.split(item):
                name, eq, default = decl.partition("=")
                if not self.seen_from:
                    self.global_args[name] = default if eq else None
                    continue
                value = self.build_args.get(name, default if eq else self.global_args.get(name))
                self.stage_vars[name] = value
                if value is None:
                    self.warnings.append("ARG %s has no value: empty in the stage, as in Docker" % name)
                else:
                    self.layer.install.append("export %s=%s" % (name, shlex.quote(value)))

    def _env(self, line):
        pairs = self.parse_env(self._setup("ENV", line))
        for pair in pairs:
            name, _, value = pair.partition("=")
            self.stage_vars[name] = value.strip("\"'")
            self.layer.install.append("export %s" % pair)
        self.layer.environ += pairs

    def _workdir(self, line):
        path, _ = substitute(self._setup("WORKDIR", line)[0], self.stage_vars)
        self.workdir = posixpath.normpath(posixpath.join(self.workdir, path))
        self.layer.install += ["mkdir -p %s" % self.workdir, "cd %s" % self.workdir]
        self.layer.workdir = self.workdir

    def _copy(self, lines):
        for line in self._setup("COPY", lines):
            words = [w for w in line.split(" ") if w]
            for opt in [w for w in words if w.startswith("--chown") or w.startswith("--chmod")]:
                self.warnings.append("COPY %s ignored: files belong to the user who builds the SIF" % opt)
            words = [w for w in words if not (w.startswith("--chown") or w.startswith("--chmod"))]
            super()._copy(" ".join(words))

    def _add_files(self, source, dest, layer=None):
        dest, _ = substitute(dest, self.stage_vars)
        if not dest.startswith("/"):
            as_dir = dest.endswith("/") or dest in (".", "..")
            dest = posixpath.normpath(posixpath.join(self.workdir, dest)) + ("/" if as_dir else "")
        if layer is None and not (Path(self.filename).parent / source).exists():
            self.warnings.append("COPY source %s is not next to the Dockerfile; it must exist when the SIF is built"
                                 % source)
        folder = dest.rstrip("/") if dest.endswith("/") else posixpath.dirname(dest)
        dirs = self.setup_dirs.setdefault(self.active_layer, [])
        if folder not in ("", "/") and folder not in dirs:
            dirs.append(folder)
        super()._add_files(source, dest, layer)

    def _user(self, line):
        name, _ = substitute(re.sub(r"^\s*USER\s+", "", line, flags=re.I).strip(), self.stage_vars)
        name = name.split(":")[0]
        self.user = None if name in ("root", "0") else name
        self.layer.install.append("# USER %s (ignored: Singularity/Apptainer runs as the invoking host user)" % name)
        if self.user:
            self.warnings.append("USER %s: the commands after it run through `su %s -c`; the SIF itself runs as "
                                 "the invoking host user" % (name, name))

    def _run(self, line):
        if self.user is None:
            return super()._run(line)
        text = " ".join(self._setup("RUN", line))
        self._pending.append(text.rstrip("\\").strip())
        if text.rstrip().endswith("\\"):
            return None
        command = " ".join(self._pending)
        self._pending = []
        if command.startswith("["):
            command = shlex.join(json.loads(command))
        self.layer.install.append("su %s -c %s" % (self.user, shlex.quote(command)))
        return None


class _Writer(SingularityWriter):
    """spython's writer plus, in each stage: a first ``%post`` that sources the base image's environment, and a
    ``%setup`` that creates every ``%files`` destination folder. Singularity concatenates same-named sections in
    order, so the sourcing still runs before every converted command; when nothing stands between the two ``%post``
    sections they are written as one."""

    def __init__(self, recipe, setup_dirs: dict[str, list[str]]):
        super().__init__(recipe)
        self.setup_dirs = setup_dirs
        self._post_open = False

    def _create_section(self, attribute, name=None, stage=None):
        section = [l for l in super()._create_section(attribute, name, stage) if l.strip()]
        if attribute == "files":
            dirs = self.setup_dirs.get(self.stage)
            setup = ["%setup"] + ["mkdir -p ${SINGULARITY_ROOTFS}%s" % d for d in dirs] if dirs else []
            self._post_open = not (setup or section or self.recipe[self.stage].layer_files)
            return ["%post", DOCKER_ENV] + setup + section
        if attribute == "labels" and section:
            self._post_open = False
        if attribute == "install":
            if self._post_open and section[:1] == ["%post"]:
                section = section[1:]
            self._post_open = False
        return section


@dataclass
class Conversion:
    text: str
    warnings: list[str] = field(default_factory=list)


def convert(dockerfile: str | Path, build_args: dict[str, str] | None = None) -> Conversion:
    """The repaired Singularity definition of ``dockerfile`` and the warnings of the conversion."""
    path = input_file(dockerfile, str(dockerfile), "a Dockerfile")
    quiet, bot.level = bot.level, QUIET  # our warnings replace spython's (which resolve paths against $PWD)
    try:
        parser = _RepairingParser(str(path), build_args or {})
        if not parser.seen_from:
            raise ChexstackError("%s: no FROM instruction: not a Dockerfile (or an empty one)" % path)
        text = _Writer(parser.recipe, parser.setup_dirs).convert() + "\n"
    except UnicodeDecodeError as e:
        raise ChexstackError("%s: not a text file (%s)" % (path, e.reason)) from None
    finally:
        bot.level = quiet
    for line in text.splitlines():
        if line.startswith("From:") and "$" in line:
            raise ChexstackError("%s: converted %r still holds a variable" % (path, line))
        if re.match(r"^\s*su\s+-", line):
            raise ChexstackError("%s: converted %r: USER must not become `su -`" % (path, line))
    return Conversion(text, parser.warnings)


def parse_build_args(items: list[str] | None) -> dict[str, str]:
    """``["CUDA_VERSION=11.8.0", ...]`` -> ``{"CUDA_VERSION": "11.8.0"}``; an item without ``=`` is an error."""
    out = {}
    for item in items or []:
        name, eq, value = item.partition("=")
        if not eq or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise ChexstackError("--build-arg %r: expected NAME=VALUE" % item)
        out[name] = value
    return out


def convert_file(dockerfile: str | Path, build_args: dict[str, str] | None = None) -> str:
    """Like ``convert``, the warnings printed to stderr."""
    import sys

    result = convert(dockerfile, build_args)
    for w in result.warnings:
        print("warning: %s" % w, file=sys.stderr)
    return result.text
