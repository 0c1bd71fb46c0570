"""One model of a Singularity/Apptainer definition file: what ``convert.dockerfile`` writes and what the tests'
Apptainer harness (``tests/harness/equivalence.py``) reads (spython's ``Recipe`` lesson: one model, a writer and a
parser over it, instead of each reader splitting the text its own way).

A definition (Apptainer user guide, "Definition Files": https://apptainer.org/docs/user/main/definition_files.html)
is a preamble, then one or more stages, each a header (``Bootstrap:``, ``From:``, ``Stage:`` of a multi-stage build)
followed by sections (``%post``, ``%files [from STAGE]``, ``%environment``, ``%labels``, ``%runscript``, ...), each a
``%name [args]`` line at the start of a line and the body below it.

``Definition.parse(text) -> Definition`` and ``Definition.text() -> str`` are inverse: ``parse(t).text() == t`` for
every definition this project renders (hpccm's stack recipes, converted Dockerfiles; ``tests/test_convert.py``
checks both). Blank lines and indentation stay in the section bodies as written; a blank line separates the
preamble from the first stage and each stage from the next; ``#`` lines right above a header (hpccm's ``# NOTE``)
are that stage's ``comments``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from chexstack.errors import ChexstackError

_HEADER = re.compile(r"^(\w+)\s*:\s*(.*?)\s*$")
_BOOTSTRAP = re.compile(r"^\s*bootstrap\s*:", re.I)


@dataclass(frozen=True)
class Section:
    """``%name args`` and its ``body``: the lines below it, as written (indentation and blank lines kept)."""

    name: str
    args: str = ""
    body: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [("%%%s %s" % (self.name, self.args)) if self.args else "%" + self.name] + list(self.body)


@dataclass(frozen=True)
class Stage:
    """One ``Bootstrap:`` header and its sections. ``bootstrap``: the agent (``docker``, ``docker-daemon``,
    ``docker-archive``...); ``image``: ``From:``; ``name``: ``Stage:`` (None: none written); ``keyword``: the header
    word as written (hpccm writes ``BootStrap``; Apptainer reads either); ``comments``: ``#`` lines right above it."""

    bootstrap: str
    image: str
    name: str | None = None
    sections: tuple[Section, ...] = ()
    keyword: str = "Bootstrap"
    comments: tuple[str, ...] = ()

    def section(self, name: str) -> list[Section]:
        """This stage's sections called ``name`` (``post``, ``files``...), in order; Apptainer runs repeated
        ``%post`` sections one after the other."""
        return [s for s in self.sections if s.name == name]

    def lines(self) -> list[str]:
        header = ["%s: %s" % (self.keyword, self.bootstrap), "From: %s" % self.image]
        header += ["Stage: %s" % self.name] if self.name is not None else []
        return list(self.comments) + header + [line for s in self.sections for line in s.lines()]


@dataclass(frozen=True)
class Definition:
    """``preamble``: the lines before the first stage (comments; blank lines kept, not the separating one)."""

    stages: tuple[Stage, ...]
    preamble: tuple[str, ...] = ()

    def text(self) -> str:
        """The definition file's text, ending in a newline."""
        blocks = (["\n".join(self.preamble)] if self.preamble else []) + ["\n".join(s.lines()) for s in self.stages]
        return "\n\n".join(blocks) + "\n"

    def bootstrapped(self, old: str, new: str) -> Definition:
        """This definition with each stage bootstrapped by ``old`` (lower case, e.g. ``docker``; matched in any
        case) bootstrapped by ``new`` (e.g. ``docker-daemon``: the same ``From:`` image from the local engine), the
        rest unchanged. ChexstackError when no stage uses ``old``."""
        if not any(s.bootstrap.lower() == old for s in self.stages):
            raise ChexstackError("definition: no `Bootstrap: %s` header" % old)
        return replace(self, stages=tuple(replace(s, bootstrap=new) if s.bootstrap.lower() == old else s
                                          for s in self.stages))

    @classmethod
    def parse(cls, text: str) -> Definition:
        """The definition in ``text``. ChexstackError naming the line when there is no ``Bootstrap:`` header, a
        header line is not ``From:``/``Stage:``, a stage has no ``From:``, or no blank line separates a stage from
        what comes before it."""
        lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
        starts = [i for i, line in enumerate(lines) if _BOOTSTRAP.match(line)]
        if not starts:
            raise ChexstackError("definition: no `Bootstrap:` header")
        tops = [_comments_above(lines, i) for i in starts]
        preamble = _before(lines, 0, tops[0])
        stages = [_stage(lines, top, start, _before(lines, start, nxt) if nxt is not None else len(lines))
                  for top, start, nxt in zip(tops, starts, tops[1:] + [None])]
        return cls(tuple(stages), tuple(lines[:preamble]))


def _comments_above(lines: list[str], start: int) -> int:
    """The index of the first of the ``#`` lines right above the header at ``start`` (``start`` when none)."""
    top = start
    while top > 0 and lines[top - 1].startswith("#"):
        top -= 1
    return top


def _before(lines: list[str], begin: int, top: int) -> int:
    """The end of the block from ``begin`` that a stage starting at ``top`` follows: before the separating blank
    line (none needed at the start of the text)."""
    if top == 0:
        return 0
    if top - 1 < begin or lines[top - 1] != "":
        raise ChexstackError("definition line %d: %r: a blank line must separate a stage from what comes before it"
                             % (top + 1, lines[top]))
    return top - 1


def _stage(lines: list[str], top: int, start: int, end: int) -> Stage:
    keyword, bootstrap = _HEADER.match(lines[start]).groups()
    header, i = {}, start + 1
    while i < end and not lines[i].startswith("%"):
        match = _HEADER.match(lines[i])
        if not match or match.group(1) not in ("From", "Stage") or match.group(1) in header:
            raise ChexstackError("definition line %d: %r: expected From: or Stage: (once each) before the first "
                                 "section" % (i + 1, lines[i]))
        header[match.group(1)] = match.group(2)
        i += 1
    if "From" not in header:
        raise ChexstackError("definition line %d: %r: the stage has no From:" % (start + 1, lines[start]))
    sections = []
    for j in range(i, end):
        if lines[j].startswith("%"):
            name, _, args = lines[j][1:].partition(" ")
            sections.append(Section(name, args, ()))
        else:
            sections[-1] = replace(sections[-1], body=sections[-1].body + (lines[j],))
    return Stage(bootstrap, header["From"], header.get("Stage"), tuple(sections), keyword, tuple(lines[top:start]))
