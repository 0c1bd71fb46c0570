"""The pages a newcomer reads, README.md and docs/*.md, name only what this checkout has.

- Every ``invoke …`` (or ``chexstack …``) command in a code block, and in an inline code span, is parsed by invoke's
  own parser over the real tasks (``chexstack.cli.program`` over ``tasks.py``, as the ``chexstack`` command builds
  it): an unknown task, an unknown option or a number option given something else fails, with ``page:line``. In
  a command, ``...``/``…`` stand for options left out, ``[--x VALUE]`` for an optional part and ``<name>`` for a
  value to fill in. An inline span in prose names a task and its options without all their values
  (```invoke train --stack```): there the task and each option named must exist.
- Every relative link resolves: the file or folder exists and, for a ``#anchor`` into a Markdown page, that page has
  the heading (GitHub's anchor of it).
- Every ``make X`` in code names a target of the Makefile, and every ``scripts/X`` on a page exists.

A command that cannot be parsed although it is right (a test runs it) may be exempted only in ``RUN_BY_TESTS``, by
naming the test that runs it; that test must exist.
"""
from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import pytest
from invoke import Collection, Exit
from invoke.exceptions import ParseError
from invoke.parser import Parser

import tasks
from chexstack.cli import program
from tests.lib.paths import REPO

#: The pages checked.
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

#: ``(page relative to the repository, the command as written, up to its first 60 characters)`` -> the test that
#: runs it (``tests/test_x.py::test_name``). Empty: every command on the pages parses.
RUN_BY_TESTS: dict[tuple[str, str], str] = {}

#: The words that start a chexstack command: ``invoke`` (any path to it, e.g. ``.venv/bin/invoke``) and ``chexstack``.
COMMANDS = ("invoke", "chexstack")
#: Shell operators that end a simple command.
OPERATORS = {"&&", "||", ";", "|", "&", ">", ">>", "<", "2>", "(", ")"}
#: A value to fill in: ``<job id>``, ``<tag>``.
PLACEHOLDER = re.compile(r"<[^<>\n]+?>")
#: A Markdown link ``[text](target)``; its target has no spaces.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
#: An inline code span (outside code blocks); a table cell writes ``|`` as ``\\|``.
SPAN = re.compile(r"`([^`]+)`")
#: A path under ``scripts/`` named anywhere on a page.
SCRIPT = re.compile(r"(?<![\w./$-])scripts/[\w.-]*\w")


@dataclasses.dataclass(frozen=True)
class Code:
    """One piece of code on a page: ``text`` starts on ``line`` (1-based); ``block``: a fenced code block's line
    (continuation lines ending in a backslash joined), else an inline code span."""
    page: Path
    line: int
    text: str
    block: bool

    def where(self) -> str:
        return "%s:%d" % (self.page.relative_to(REPO), self.line)


def code_of(page: Path, text: str) -> list[Code]:
    """Every code block line (continuations joined) and every inline code span of ``text``, in order."""
    found: list[Code] = []
    fenced = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            start, joined = pending or (number, "")
            joined += line
            if joined.endswith("\\"):
                pending = (start, joined[:-1] + " ")
            else:
                pending = None
                found.append(Code(page, start, joined, block=True))
        else:
            found += [Code(page, number, m.group(1).replace("\\|", "|"), block=False) for m in SPAN.finditer(line)]
    return found


def prose_of(text: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every line outside code blocks, inline code spans taken out."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, SPAN.sub("", line)))
    return lines


def words(shell: str) -> list[str] | None:
    """The shell words of ``shell`` (a comment dropped, placeholders filled, operators as words of their own);
    None when it is no complete shell line (an unclosed quote)."""
    lexer = shlex.shlex(PLACEHOLDER.sub("X", shell), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


def simple_commands(shell: str) -> list[list[str]]:
    """The simple commands of one shell line, split at its operators."""
    commands: list[list[str]] = [[]]
    for word in words(shell) or []:
        if word in OPERATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def chexstack_argv(command: list[str]) -> list[str] | None:
    """The arguments after ``invoke``/``chexstack`` in ``command`` (``...``/``…`` dropped, ``[`` ``]`` of an
    optional part taken off), or None when it runs neither."""
    for i, word in enumerate(command):
        if Path(word).name == "invoke" or word == "chexstack":
            rest = [w.strip("[]") for w in command[i + 1:]]
            return [w for w in rest if w and w not in ("...", "…")]
    return None


def parser() -> Parser:
    """invoke's parser for the real tasks, as the ``chexstack`` command's Program builds it."""
    collection = Collection.from_module(tasks)
    return Parser(initial=program(collection).initial_context,
                  contexts=collection.to_contexts(ignore_unknown_help=True))


def command_problem(argv: list[str]) -> str | None:
    """Why ``invoke ARGV`` would not parse (invoke's own message), or None. An empty ``argv`` is invoke alone."""
    try:
        parser().parse_argv(argv)
    except ParseError as e:
        return str(e)
    except Exit as e:  # chexstack.cli.NumberOption: a number option given something else
        return "a number option's value does not parse (exit %s)" % e.code
    return None


def names_problem(argv: list[str]) -> str | None:
    """Why ``invoke ARGV`` names a task or option that does not exist, or None. Values are not checked: a word after
    an option that takes one is its value; any other word outside a task is a task's name."""
    real = parser()
    context, value_next = real.initial, False
    for word in argv:
        name = word.split("=", 1)[0]
        if word.startswith("-"):
            known = {**real.initial.flags, **real.initial.inverse_flags, **context.flags, **context.inverse_flags}
            if name not in known:
                return "no option %s" % name
            value_next = name in context.flags and context.flags[name].takes_value and "=" not in word
        elif value_next:
            value_next = False
        elif context is real.initial:
            if word not in real.contexts:
                return "no task %r" % word
            context = real.contexts[word]
    return None


def command_problems(pieces: list[Code]) -> list[str]:
    """``page:line: invoke ARGV: why`` for each chexstack command among ``pieces`` that does not parse."""
    problems = []
    for piece in pieces:
        for command in simple_commands(piece.text):
            argv = chexstack_argv(command)
            if argv is None or not piece.block and command[0] not in COMMANDS:
                continue
            why = command_problem(argv) if piece.block else names_problem(argv)
            if why and (str(piece.page.relative_to(REPO)), piece.text.strip()[:60]) not in RUN_BY_TESTS:
                problems.append("%s: invoke %s: %s" % (piece.where(), " ".join(argv), why))
    return problems


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces -> hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (lines in code blocks are no headings)."""
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(anchor(line.lstrip("#")))
    return found


def link_problem(page: Path, target: str) -> str | None:
    """Why the relative link ``target`` on ``page`` does not resolve, or None (also for an absolute URL)."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return None
    path, _, fragment = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
        return "no such file or folder: %s" % path
    if fragment and file.suffix == ".md" and fragment not in anchors(file):
        return "%s has no heading #%s" % (file.relative_to(REPO), fragment)
    return None


def link_problems(page: Path, text: str) -> list[str]:
    """``page:line: link: why`` for each relative link on the page that does not resolve."""
    return ["%s:%d: (%s): %s" % (page.relative_to(REPO), number, m.group(1), why)
            for number, line in prose_of(text) for m in LINK.finditer(line)
            for why in [link_problem(page, m.group(1))] if why]


def make_targets(makefile: Path = REPO / "Makefile") -> set[str]:
    """The targets of ``makefile`` (``name:`` at a line's start; not ``:=`` assignments)."""
    return set(re.findall(r"^([\w.-]+)\s*:(?!=)", makefile.read_text(), flags=re.M))


def make_problems(pieces: list[Code], targets: set[str]) -> list[str]:
    """``page:line: make X: no such target`` for each ``make X`` in code that the Makefile lacks."""
    problems = []
    for piece in pieces:
        for command in simple_commands(piece.text):
            if command[0] != "make":
                continue
            for goal in command[1:]:
                if "=" not in goal and not goal.startswith("-") and goal not in targets:
                    problems.append("%s: make %s: no such Makefile target" % (piece.where(), goal))
    return problems


def script_problems(page: Path, text: str) -> list[str]:
    """``page:line: scripts/X: no such file`` for each path under ``scripts/`` named on the page that is missing."""
    return ["%s:%d: %s: no such file" % (page.relative_to(REPO), number, m.group(0))
            for number, line in enumerate(text.splitlines(), 1) for m in SCRIPT.finditer(line)
            if not (REPO / m.group(0)).exists()]


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_invoke_command_on_the_page_parses_against_the_real_tasks(page):
    assert command_problems(code_of(page, page.read_text())) == []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_relative_link_on_the_page_resolves(page):
    assert link_problems(page, page.read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_make_target_and_script_the_page_names_exists(page):
    text = page.read_text()
    assert make_problems(code_of(page, text), make_targets()) + script_problems(page, text) == []


def test_the_exempted_commands_name_tests_that_exist():
    for (page, _), test in RUN_BY_TESTS.items():
        module, _, name = test.partition("::")
        assert (REPO / page).is_file() and re.search(r"^def %s\(" % re.escape(name), (REPO / module).read_text(),
                                                     flags=re.M), test


def test_the_quick_start_is_the_makefiles_two_commands():
    """README's quick start is exactly ``make demo`` and ``make test`` (the Makefile's first line and .ci/run
    name them)."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in block.splitlines()] == ["make demo", "make test"]
    assert "exec make test" in (REPO / ".ci" / "run").read_text()


def test_the_readme_is_a_first_read():
    """README.md is the newcomer's page (CONTRIBUTING.md, "Docs"): what it is, the two commands, the task table,
    one picture and links, about 120 lines; dated measurement write-ups live in docs/measurements.md, linked."""
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 130
    assert "(measured)" not in readme and "](docs/measurements.md)" in readme
    assert readme.count("![") == 1


def test_a_wrong_task_option_link_target_or_script_is_named_with_its_line(tmp_path):
    page = REPO / "docs" / "a-page-that-is-not-there.md"
    text = ("# Title\n\n```bash\ninvoke trian --stack cpu\ninvoke train --stack cpu \\\n  --no-such-option 1\n"
            "invoke train --gpus eight\nmake no-such-target\nmake test-fast PYTEST_ARGS=-x\n```\n\n"
            "Run `invoke validate --nope` or `invoke --list`; [here](missing.md), [up](../README.md#no-such-heading), "
            "[ok](../README.md#quick-start), [web](https://example.com/x), `scripts/no-such-script`, "
            "`scripts/setup`.\n")
    pieces = code_of(page, text)
    commands = command_problems(pieces)
    assert [c.split(": invoke")[0] for c in commands] == ["docs/a-page-that-is-not-there.md:%d" % n
                                                           for n in (4, 5, 7, 12)]
    assert "trian" in commands[0] and "--no-such-option" in commands[1] and "--nope" in commands[3]
    assert [p.split(": (")[0] for p in link_problems(page, text)] == ["docs/a-page-that-is-not-there.md:12"] * 2
    assert make_problems(pieces, make_targets()) == [
        "docs/a-page-that-is-not-there.md:8: make no-such-target: no such Makefile target"]
    assert script_problems(page, text) == ["docs/a-page-that-is-not-there.md:12: scripts/no-such-script: no such file"]
