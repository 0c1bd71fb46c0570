"""Which command lines a parser can read: an ``Observation`` names the command a check runs for it (``argv``), the
recorded runs it can read as well (``also``: another form of the command, a filtered transcript, a run of another
image captured by hand) and how it reads a run (``parse``). ``validate.checks.registry.Context.observe`` /
``first`` run or look up an observation and return it ``Observed``; a check then only judges the value.

A recorded run is ``(argv, env)`` as a bundle holds it (``validate.evidence``): a filtered transcript is recorded as
``[sh, -c, "CMD | grep …"]`` (``shell_command`` gives its command line). A user records a command as they typed it:
``simple_commands`` / ``first_command`` read it as the shell would run it (pipelines and lists split, ``sudo``,
``env``, ``timeout`` and other wrappers and ``NAME=value`` assignments taken off), so that every ``also`` accepts the
same command however it was wrapped.
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Callable

from chexstack.tools import ToolRun


def shell_command(argv) -> str:
    """The command line of a recorded ``sh -c "CMD"`` run (a filtered transcript: ``nvcc --version | grep release``),
    else the argv joined: what an observation's ``also`` matches a recorded run against."""
    argv = tuple(argv)
    return argv[2] if argv[:2] == ("sh", "-c") and len(argv) > 2 else " ".join(argv)


@dataclass(frozen=True)
class Simple:
    """One simple command of a recorded command line: its words without leading ``NAME=value`` assignments and
    wrappers (``argv``; ``argv[0]`` reduced to its base name), and the environment it ran with (``env``: the
    recorded run's, plus the assignments, ``export``s before it and ``env NAME=value``)."""

    argv: tuple[str, ...]
    env: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.argv[0] if self.argv else ""


#: Commands that run the command after them: (name, options that take a value). ``sudo -u USER``, ``env -u NAME``,
#: ``timeout -s SIG -k DURATION DURATION``, ``nice -n N``, ``stdbuf -o L``; ``time``, ``nohup``, ``exec``, ``command``.
_WRAPPERS = {"sudo": {"-u", "-g", "-C", "-h", "-p", "-r", "-t", "-U", "-D", "-R", "-T"}, "env": {"-u", "-C", "-S"},
             "timeout": {"-s", "-k", "--signal", "--kill-after"}, "nice": {"-n", "--adjustment"},
             "stdbuf": {"-i", "-o", "-e"}, "time": {"-f", "-o"}, "nohup": set(), "exec": set(), "command": set(),
             "ionice": {"-c", "-n", "-p"}, "chrt": set(), "taskset": set()}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: a redirection of one descriptor to another (``2>&1``, ``>&2``), removed before the line is split
_REDIRECT_FD = re.compile(r"(?<![\w$])\d*>&\d+")
#: a redirection to or from a file (``2>/dev/null``, ``> out.log``: group 2 empty, the file is the next word)
_REDIRECT = re.compile(r"^(\d*(?:>>?|<)|&>)(.*)$")
#: what separates simple commands in a shell command line
_SEPARATORS = {"|", "||", "&&", ";", "&", "|&", "\n"}


def _unwrap(words: list[str], env: dict) -> tuple[str, ...]:
    """``words`` without leading assignments (added to ``env``) and wrappers with their options (``timeout``'s
    duration, ``nice``'s ``-N`` too)."""
    while words:
        if _ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
            continue
        wrapper = os.path.basename(words[0])
        if wrapper not in _WRAPPERS:
            break
        words.pop(0)
        while words and words[0].startswith("-") and words[0] != "--":
            option = words.pop(0)
            if option in _WRAPPERS[wrapper] and words:
                words.pop(0)
        if words and words[0] == "--":
            words.pop(0)
        if wrapper == "timeout" and words:
            words.pop(0)  # the duration
        if wrapper == "chrt" and words:
            words.pop(0)  # the priority
        if wrapper == "taskset" and words:
            words.pop(0)  # the CPU mask
    if words:
        words[0] = os.path.basename(words[0])
    return tuple(words)


def simple_commands(argv, env: dict | None = None) -> list[Simple]:
    """The simple commands a recorded run ran, in order: a ``sh -c``/``bash -c`` script (or a command line recorded
    as one string) split at ``|``, ``||``, ``&&``, ``;``, ``&`` and new lines, each without its wrappers (``sudo``,
    ``env``, ``timeout``, ``nice``, ``time``, ``nohup``, …: ``_WRAPPERS``) and with the environment it saw (``env``,
    inline ``NAME=value`` assignments, earlier ``export NAME=value``). A script that does not split as the shell
    would (an unbalanced quote) is one command of its words split on white space."""
    argv, env = tuple(argv), dict(env or {})
    if len(argv) > 2 and os.path.basename(argv[0]) in ("sh", "bash", "dash") and argv[1] in ("-c", "-lc", "-ec"):
        text = argv[2]
    elif len(argv) == 1 and any(c.isspace() for c in argv[0]):
        text = argv[0]
    else:
        return [Simple(_unwrap(list(argv), env), env)]
    lexer = shlex.shlex(_REDIRECT_FD.sub(" ", text).replace("\n", " ; "), posix=True, punctuation_chars="|&;")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = text.split()
    out, words, target = [], [], False
    for token in tokens + [";"]:
        if target:  # the file of a redirection: `> out.log`
            target = False
            continue
        redirect = _REDIRECT.match(token) if token not in _SEPARATORS else None
        if redirect:
            target = not redirect.group(2)
            continue
        if token not in _SEPARATORS:
            words.append(token)
            continue
        if words and words[0] == "export":
            env.update(w.split("=", 1) for w in words[1:] if _ASSIGNMENT.match(w))
        elif words:
            mine = dict(env)
            simple = _unwrap(words, mine)
            if simple:
                out.append(Simple(simple, mine))
        words = []
    return out


def first_command(argv, env: dict | None = None) -> Simple:
    """The first simple command of a recorded run (``simple_commands``): the program whose output a pipeline
    filters (``sudo dmesg -T | grep NVRM`` -> ``dmesg -T``); ``Simple(())`` for an empty command line."""
    commands = simple_commands(argv, env)
    return commands[0] if commands else Simple(())


@dataclass(frozen=True)
class Observation:
    """What one parser can read.

    ``argv``: the command a check runs for it (None where a check only reads recorded runs: a ``docker run --gpus``
    of another image); ``also(argv, env) -> bool``: the recorded runs the parser reads as well; ``parse(run) ->
    value``: the value of a run (``chexstack.tools.ToolRun``), chosen by the run's own command line where forms
    differ (``nvidia-smi -q -x`` is XML, ``-q`` text). ``parse`` never raises on cut-off output.
    """

    argv: tuple[str, ...] | None
    also: Callable[[tuple, dict], bool]
    parse: Callable[[ToolRun], object]

    @property
    def command(self) -> str:
        """``argv`` as one command line (``ibstat``), for messages."""
        return " ".join(self.argv or ())



@dataclass(frozen=True)
class Observed:
    """An observation's run and its parsed ``value``; ``command`` is the run's command line, for a check's details
    ("from the bundle's `nvidia-smi -q -x`"), ``tool`` its first word as run (``apptainer``, ``/usr/bin/docker``)."""

    run: ToolRun
    value: object

    @property
    def command(self) -> str:
        return self.run.command

    @property
    def tool(self) -> str:
        return self.run.argv[0]
