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
    wrappers (``argv``; ``argv[0]`` reduced to its base name), the environment it ran with (``env``: the
    recorded run's, plus the assignments, ``export``s before it and ``env NAME=value``), and the wrappers taken off,
    each with its options and operands (``wrappers``: ``(("timeout", "-s", "KILL", "600"),)``)."""

    argv: tuple[str, ...]
    env: dict = field(default_factory=dict)
    wrappers: tuple[tuple[str, ...], ...] = ()

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


def _unwrap(words: list[str], env: dict) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """(``words`` without leading assignments (added to ``env``) and wrappers with their options (``timeout``'s
    duration, ``nice``'s ``-N`` too), the wrappers taken off with their words)."""
    wrappers = []
    while words:
        if _ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
            continue
        wrapper = os.path.basename(words[0])
        if wrapper not in _WRAPPERS:
            break
        taken = [wrapper]
        words.pop(0)
        while words and words[0].startswith("-") and words[0] != "--":
            option = words.pop(0)
            taken.append(option)
            if option in _WRAPPERS[wrapper] and words:
                taken.append(words.pop(0))
        if words and words[0] == "--":
            words.pop(0)
        if wrapper in ("timeout", "chrt", "taskset") and words:
            taken.append(words.pop(0))  # timeout's duration, chrt's priority, taskset's CPU mask
        wrappers.append(tuple(taken))
    if words:
        words[0] = os.path.basename(words[0])
    return tuple(words), tuple(wrappers)


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
        simple, wrappers = _unwrap(list(argv), env)
        return [Simple(simple, env, wrappers)]
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
            simple, wrappers = _unwrap(words, mine)
            if simple:
                out.append(Simple(simple, mine, wrappers))
        words = []
    return out


def first_command(argv, env: dict | None = None) -> Simple:
    """The first simple command of a recorded run (``simple_commands``): the program whose output a pipeline
    filters (``sudo dmesg -T | grep NVRM`` -> ``dmesg -T``); ``Simple(())`` for an empty command line."""
    commands = simple_commands(argv, env)
    return commands[0] if commands else Simple(())


#: Signals by which a run is stopped from outside — a user's Ctrl-C (SIGINT), a closed terminal (SIGHUP), Ctrl-\
#: (SIGQUIT), ``timeout``, ``kill`` or a scheduler's time limit (SIGTERM, then SIGKILL), an alarm — as opposed to
#: a crash of its own (SIGSEGV, SIGABRT, SIGBUS). A shell reports such an end as 128 + the signal's number
#: (bash manual, "Exit Status"); Python's subprocess as minus the number.
STOP_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 9: "SIGKILL", 14: "SIGALRM", 15: "SIGTERM"}
#: GNU timeout's exit status when the command timed out (coreutils manual, "timeout invocation": "If the command
#: times out, and --preserve-status is not set, then exit with status 124"; with ``-s KILL`` the status is 137).
TIMEOUT_STATUS = 124
_DURATION = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)([smhd]?)$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
_SIGNAL_NUMBER = {name[3:]: n for n, name in STOP_SIGNALS.items()}


@dataclass(frozen=True)
class Stop:
    """How a run that did not finish on its own was stopped: ``how`` (``timed out``, ```timeout 600`, exit 124``,
    ``SIGKILL, exit 137``) and ``seconds``, how long it ran before, as recorded or as its ``timeout`` wrapper's
    limit says (None: not recorded)."""

    how: str
    seconds: float | None = None

    @property
    def observed(self) -> str:
        """What was observed of its duration, never a limit of the reader's own: ``in 600 s``, or ``killed after an
        unknown time`` where the record gives none."""
        return "in %g s" % self.seconds if self.seconds is not None else "killed after an unknown time"


def _duration(word: str) -> float | None:
    """GNU timeout's DURATION (``600``, ``10m``, ``1.5h``, ``2d``) in seconds, or None."""
    m = _DURATION.match(word or "")
    return float(m.group(1)) * _UNIT_S[m.group(2)] if m else None


def _signal(word: str, default: int) -> int:
    """A signal as ``timeout -s`` takes it (``KILL``, ``SIGKILL``, ``9``) -> its number; ``default`` when unknown."""
    name = word.upper().removeprefix("SIG")
    return int(name) if name.isdigit() else _SIGNAL_NUMBER.get(name, default)


def _timeout_wrapper(argv, env: dict | None = None) -> tuple[str, float | None, int, float | None, bool] | None:
    """The ``timeout`` wrapper of a recorded command line: (its words, its limit in seconds, the signal it sends,
    its ``-k`` kill-after seconds, ``--preserve-status``), or None."""
    for command in simple_commands(argv, env):
        for wrapper in command.wrappers:
            if wrapper[0] != "timeout":
                continue
            words = list(wrapper[1:])
            signal, kill_after, preserve = 15, None, False
            for option, value in zip(words, words[1:] + [""]):
                if option in ("-s", "--signal"):
                    signal = _signal(value, signal)
                elif option.startswith(("--signal=", "-s")):
                    signal = _signal(option.split("=", 1)[1] if "=" in option else option[2:], signal)
                elif option in ("-k", "--kill-after") or option.startswith("--kill-after="):
                    kill_after = _duration(value if "=" not in option else option.split("=", 1)[1])
                elif option == "--preserve-status":
                    preserve = True
            return " ".join(wrapper), _duration(words[-1]) if words else None, signal, kill_after, preserve
    return None


def stopped(run: ToolRun) -> Stop | None:
    """How ``run`` was stopped before it finished, or None when it ended by itself (any exit status, a crash by a
    signal of its own): timed out (the recorder's limit: ``ToolRun.timed_out``), ``timeout``'s exit 124, or a stop
    signal (``STOP_SIGNALS``: exit 128 + N as a shell reports it, -N as Python's subprocess). ``seconds``: the
    recorded duration, else the limit of the ``timeout`` wrapper that stopped it, else None."""
    if run.timed_out:
        return Stop("timed out", run.seconds)
    rc = run.rc
    if rc is None:
        return None
    wrapper = _timeout_wrapper(run.argv)
    if rc == TIMEOUT_STATUS:
        if wrapper is None:
            return Stop("exit %d, `timeout`'s status" % rc, run.seconds)
        return Stop("`%s`, exit %d" % (wrapper[0], rc), run.seconds if run.seconds is not None else wrapper[1])
    signal = rc - 128 if rc > 128 else -rc if rc < 0 else None
    if signal not in STOP_SIGNALS:
        return None
    how = "%s, exit %d" % (STOP_SIGNALS[signal], rc)
    if wrapper is not None and wrapper[1] is not None:
        words, limit, sends, kill_after, preserve = wrapper
        after = limit if signal == sends and (preserve or sends == 9) else (
            limit + kill_after if signal == 9 and kill_after is not None else None)
        if after is not None:
            return Stop("%s from `%s`, exit %d" % (STOP_SIGNALS[signal], words, rc),
                        run.seconds if run.seconds is not None else after)
    return Stop(how, run.seconds)


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
