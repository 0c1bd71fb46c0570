"""Docker's word processing for the instructions it expands (ADD, COPY, ENV, EXPOSE, FROM, LABEL, STOPSIGNAL,
USER, VOLUME, WORKDIR): quotes, backslash escapes and ``$NAME``, ``${NAME}``, ``${NAME:-word}``, ``${NAME-word}``,
``${NAME:+word}``, ``${NAME+word}`` (Dockerfile reference, "Environment replacement"; BuildKit's
``frontend/dockerfile/shell/lex.go``).

``words(text, known, split=True, blank=()) -> list[Word]``: a ``Word`` is a list of parts, each a literal ``str``
or a ``Ref`` to a variable the Dockerfile does not define (Docker takes those from the base image's environment, which
a definition cannot see). ``blank`` holds the names known to be empty or unset without knowing which (the global
scope's: an ARG declared before the first FROM without a value, a name no ARG declares there): ``${NAME:-word}`` is
``word`` and ``${NAME:+word}`` empty for both, so those two are resolved; ``$NAME``, ``${NAME-word}`` and
``${NAME+word}`` stay references. A ``blank`` whose ``unset`` attribute is true holds names known to be unset (a
stage whose base image's config was read: a name neither it nor the Dockerfile defines): every form is resolved.
``literal(word)`` is its text when it has no such reference; ``shell(word)``
writes it for ``/bin/sh`` so that the references are expanded when the shell runs. Other ``${...}`` forms (``:?``,
``#``, ``%``, ``/``) raise ``UnsupportedExpansion``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


class UnsupportedExpansion(ValueError):
    """A ``${...}`` form this conversion does not reproduce."""


@dataclass(frozen=True)
class Ref:
    """``${name}`` (``op`` "") or ``${name<op>word}`` with ``op`` in ``:-``, ``-``, ``:+``, ``+``."""

    name: str
    op: str = ""
    word: tuple = ()


Word = list  # of str | Ref


def words(text: str, known: dict[str, str], split: bool = True, blank=()) -> list[Word]:
    """Docker's processing of ``text``: quotes removed, escapes applied, ``known`` variables substituted (and the
    ``:-``/``:+`` forms of the ``blank`` ones); with ``split``, one ``Word`` per unquoted-whitespace-separated
    word."""
    out: list[Word] = []
    cur: Word = []
    started = False
    i, n = 0, len(text)

    def add(part) -> None:
        if isinstance(part, str) and cur and isinstance(cur[-1], str):
            cur[-1] += part
        elif part != "":
            cur.append(part)

    while i < n:
        ch = text[i]
        if split and ch in " \t\n":
            if started:
                out.append(cur)
                cur, started = [], False
            i += 1
            continue
        started = True
        if ch == "\\":
            add(text[i + 1:i + 2])
            i += 2
        elif ch == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            add(text[i + 1:end])
            i = end + 1
        elif ch == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '"$\\':
                    add(text[i + 1])
                    i += 2
                elif text[i] == "$":
                    part, i = _dollar(text, i, known, blank)
                    for p in part:
                        add(p)
                else:
                    add(text[i])
                    i += 1
            i += 1
        elif ch == "$":
            part, i = _dollar(text, i, known, blank)
            for p in part:
                add(p)
        else:
            add(ch)
            i += 1
    if started or not split:
        out.append(cur)
    return out


def _dollar(text: str, i: int, known: dict[str, str], blank) -> tuple[list, int]:
    """The parts of the ``$`` expression at ``text[i]`` and the index after it."""
    m = _NAME.match(text, i + 1)
    if m:
        return _value(Ref(m.group(0)), known, blank), m.end()
    if not text.startswith("${", i):
        return ["$"], i + 1
    m = _NAME.match(text, i + 2)
    if not m:
        raise UnsupportedExpansion("%s: expected ${NAME...}" % text[i:i + 20])
    j = m.end()
    if text.startswith("}", j):
        return _value(Ref(m.group(0)), known, blank), j + 1
    op = next((o for o in (":-", ":+", "-", "+") if text.startswith(o, j)), None)
    end = _closing(text, j)
    if end < 0:
        raise UnsupportedExpansion("%s: no closing } (Docker refuses it too)" % text[i:i + 40])
    if op is None:
        raise UnsupportedExpansion("%s: only ${NAME}, ${NAME:-word}, ${NAME-word}, ${NAME:+word} and "
                                   "${NAME+word} are converted" % text[i:end + 1])
    inner = words(text[j + len(op):end], known, split=False, blank=blank)[0]
    return _value(Ref(m.group(0), op, tuple(inner)), known, blank), end + 1


def _closing(text: str, j: int) -> int:
    """The index of the ``}`` that closes the ``${`` whose name ends before ``j``, or -1: the word of
    ``${NAME:+word}`` may hold escapes and expansions of its own (``${A:+${A}:}``), which BuildKit's
    ``shell/lex.go`` reads recursively up to the ``}`` at its own level (``processStopOn``)."""
    depth, n = 0, len(text)
    while j < n:
        if text[j] == "\\":
            j += 2
            continue
        if text.startswith("${", j):
            depth += 1
            j += 2
            continue
        if text[j] == "}":
            if depth == 0:
                return j
            depth -= 1
        j += 1
    return -1


def _value(ref: Ref, known: dict[str, str], blank=()) -> list:
    if ref.name not in known:
        unset = getattr(blank, "unset", False)
        if ref.name in blank and (unset or ref.op in (":-", ":+")):  # empty and unset alike for the colon forms
            return list(ref.word) if ref.op in (":-", "-") else []  # (BuildKit's shell/lex.go)
        return [ref]
    value = known[ref.name]
    if ref.op in (":-", "-"):
        return [value] if (value or ref.op == "-") else list(ref.word)
    if ref.op in (":+", "+"):
        return list(ref.word) if (value or ref.op == "+") else []
    return [value]


def unknown(word: Word) -> list[str]:
    """The names ``word`` still refers to."""
    return [p.name for p in word if isinstance(p, Ref)]


def literal(word: Word) -> str | None:
    """The text of ``word``, or None when it refers to a variable the Dockerfile does not define."""
    return None if unknown(word) else "".join(word)


def shell(word: Word) -> str:
    """``word`` as one ``/bin/sh`` word: bare when safe, else double-quoted; references stay ``${NAME...}``."""
    text = literal(word)
    if text is not None and _SAFE.match(text):
        return text
    return '"%s"' % _inner(word)


def _inner(word) -> str:
    out = []
    for p in word:
        if isinstance(p, Ref):
            out.append("${%s%s%s}" % (p.name, p.op, _inner(p.word)))
        else:
            out.append(re.sub(r'([\\"$`])', r"\\\1", p))
    return "".join(out)
