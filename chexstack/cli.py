"""invoke's machinery for chexstack's tasks, and the ``chexstack`` command.

``tasks.py`` is only a list of tasks; each is declared with ``task`` (numbers checked while parsing, no automatic
short flags) and wrapped in ``user_errors`` (a ``ChexstackError`` is one ``error:`` line on stderr and its exit code,
never a traceback).

The ``chexstack`` command is ``program(collection)``: invoke's ``Program`` over a given collection of tasks, so no
``tasks.py`` is looked for in the current folder (https://docs.pyinvoke.org/en/stable/concepts/library.html). Its
entry point is ``tasks.main`` (pyproject ``[project.scripts]``), which gives the collection: this module imports
no task, so ``tasks.py`` -> ``chexstack.cli`` is the only edge between the two (``tests/test_layers.py``).
"""
from __future__ import annotations

import atexit
import functools
import math
import os
import re
import sys
from importlib import metadata
from typing import NoReturn

import invoke
from invoke import Exit
from invoke.exceptions import ParseError
from invoke.parser import Argument
from rich.markup import escape

from chexstack.console import BROKEN_PIPE_EXIT, drop_closed_outputs, err_console
from chexstack.errors import ChexstackError, ExitCode

NAME = "chexstack"


def fail(error: ChexstackError) -> NoReturn:
    """Print ``error`` as one red ``error:`` message on stderr and exit with its code (no traceback). On stderr so
    that ``invoke render ... > Dockerfile`` never writes an error into the file."""
    err_console.print("[bold red]error:[/] %s" % escape(str(error)), soft_wrap=True)
    raise Exit(code=error.exit_code)


def user_errors(fn):
    """Print a ChexstackError as one red message and exit with its code, instead of a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ChexstackError as e:
            fail(e)

    return wrapper


#: What a number option expects, by its Python type.
_EXPECTED = {int: "a whole number", float: "a number"}


def _finite_float(text) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


class NumberOption(Argument):
    """A number option, converted while parsing: a bad value is a ChexstackError naming the option and what was
    expected (exit 2) before the task runs — invoke's own ``int()`` conversion of an ``int`` default's option
    would escape as a ValueError traceback. ``number``: ``int`` (an ``int`` default), or what the task's body
    declares in ``numbers`` or the task in ``floats`` (shown as INT in ``--help`` for ``int``, as STRING for
    ``float``: invoke names only str and int)."""

    def __init__(self, arg: Argument, number: type):
        super().__init__(names=arg.names, kind=int if number is int else arg.kind, default=arg.default, help=arg.help,
                         positional=arg.positional, optional=arg.optional, incrementable=arg.incrementable,
                         attr_name=arg.attr_name)
        self.number = number

    def set_value(self, value, cast: bool = True) -> None:
        if not cast:
            return super().set_value(value, cast=False)
        try:
            number = (_finite_float if self.number is float else self.number)(value)
        except (TypeError, ValueError):
            fail(ChexstackError("--%s %r: expected %s" % (self.names[0], value, _EXPECTED[self.number])))
        super().set_value(number, cast=False)


class Task(invoke.Task):
    """invoke's Task with number options checked while parsing (``NumberOption``)."""

    def __init__(self, body, floats=(), ints=(), **kwargs):
        super().__init__(body, **kwargs)
        #: the body's own number types (``numbers``: name -> int or float, e.g. the trainer's options a task takes,
        #: ``launch.options.with_trainer_options``), then ``floats`` and ``ints`` (options whose default is None)
        self.numbers = {**getattr(body, "numbers", {}), **{name: float for name in floats},
                        **{name: int for name in ints}}
        self.floats = frozenset(name for name, number in self.numbers.items() if number is float)

    def __call__(self, *args, **kwargs):
        """A task with a positional argument (``bench-report RESULTS``): invoke's parser takes ``-h``/``--help``
        after the task name as that argument's value; here it prints the task's help, as for every other task."""
        if any(kwargs.get(name) in ("-h", "--help") for name in self.positional):
            name = self.body.__name__.replace("_", "-")
            typed = os.path.basename(sys.argv[0])
            binary = "inv[oke]" if typed in ("inv", "invoke") else NAME  # as invoke's own help names itself
            program(invoke.Collection(self), binary).run([typed or NAME, "--help", name], exit=False)
            raise Exit(code=0)
        return super().__call__(*args, **kwargs)

    def get_arguments(self, ignore_unknown_help=None) -> list[Argument]:
        args = []
        for arg in super().get_arguments(ignore_unknown_help):
            number = self.numbers.get(arg.attr_name) or self.numbers.get(arg.name) or (
                int if arg.kind is int else None)
            args.append(NumberOption(arg, number) if number else arg)
        return args


def task(*args, **kwargs):
    """``@invoke.task`` for chexstack: number options (``int`` defaults, the body's ``numbers``, and the names in
    ``floats=`` and ``ints=``) give a clear error for a bad value; no automatic short flags (``-h`` stays invoke's
    help, ``train -h`` is not ``--hybrid`` or ``--launcher``)."""
    return invoke.task(*args, klass=Task, auto_shortflags=False, **kwargs)


def csv_list(value: str | None) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]`` (a comma-separated option; None or empty: ``[]``)."""
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _exit_for_a_closed_pipe() -> NoReturn:
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(BROKEN_PIPE_EXIT)  # nothing more to flush into a pipe nobody reads


def _excepthook(kind, value, tb, previous=None) -> None:
    if issubclass(kind, BrokenPipeError) and drop_closed_outputs():
        _exit_for_a_closed_pipe()
    (previous or sys.__excepthook__)(kind, value, tb)


def _flush_at_exit() -> None:
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        if drop_closed_outputs():
            _exit_for_a_closed_pipe()
    except (OSError, ValueError):
        pass


def end_quietly_on_a_closed_pipe() -> None:
    """A closed pipe (``invoke --help train | head -1``, ``chexstack stacks | head``) ends the process quietly with
    ``BROKEN_PIPE_EXIT`` (141, as a shell reports a tool SIGPIPE ended), whoever was writing: invoke's help and
    ``--list``, a task's ``print``, Python's last flush of stdout at exit (rich's consoles: ``chexstack.console``).
    Installed once per process by ``tasks.py``, which both commands load before they print (invoke's own
    ``Program`` for ``invoke``, ``program`` below for ``chexstack``): an escaping BrokenPipeError goes through
    ``sys.excepthook``, the last flush through ``atexit``. Only when stdout or stderr is closed indeed
    (``chexstack.console.closed_outputs``): a BrokenPipeError of a socket or a child's stdin keeps its traceback."""
    if getattr(sys.excepthook, "chexstack_closed_pipe", False):
        return
    hook = functools.partial(_excepthook, previous=sys.excepthook)
    hook.chexstack_closed_pipe = True
    sys.excepthook = hook
    atexit.register(_flush_at_exit)


#: invoke's parser names an option by its Argument's repr (``Flag <NumberOption: epochs [int]> needed value ...``)
_FLAG = re.compile(r"Flag <\w+: ([\w-]+)[^>]*>")
_PLAIN = (("needed value and was not given one!", "needs a value"), ("doesn't take any value!", "takes no value"))


def parse_error_message(error: ParseError) -> str:
    """invoke's parse error in the user's terms: ``train: --epochs needs a value`` for ``Flag <NumberOption: epochs
    [int]> needed value and was not given one!`` (the task's name from the parser's context, the option as typed);
    other messages as invoke words them."""
    text = _FLAG.sub(lambda m: ("-" if len(m.group(1)) == 1 else "--") + m.group(1), str(error))
    for said, plain in _PLAIN:
        text = text.replace(said, plain)
    context = getattr(error, "context", None)
    name = getattr(context, "name", None)
    return "%s: %s" % (name, text) if name and text.startswith("-") else text


def _usage_on_parse_errors(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except ParseError as e:
            raise Exit("error: %s" % parse_error_message(e), code=ExitCode.USAGE) from e
        except Exit as e:  # a collection or sub-collection not found (``--list foo``); --help and --version are 0
            if e.code in (0, ExitCode.USAGE) or not e.message:
                raise
            raise Exit("error: %s" % e.message, code=ExitCode.USAGE) from e

    wrapper.chexstack_usage = True
    return wrapper


def parse_errors_exit_with_usage() -> None:
    """A command line invoke's parser cannot read (an unknown option ``--fsat``, an option without its value, an
    unknown task) exits with ``ExitCode.USAGE`` (2, "could not run"), as every other refused input does, not with
    invoke's 1, which is ``validate``'s and ``lock --check``'s "ran and found a problem": a script reading the status
    would take a typo for a failed node. invoke's ``Program.run`` turns a ``ParseError`` into ``sys.exit(1)`` with no
    hook (invoke 2.2, program.py), so its parse steps are wrapped here, once per process, to raise invoke's ``Exit``
    with the parser's message (``parse_error_message``) and code 2 instead; so is an ``Exit`` they raise with a
    message and code 1 (``--list foo``: no such sub-collection). Installed by ``tasks.py`` (so for ``invoke``: the task
    part of its command line, which is parsed after ``tasks.py`` loads; for ``chexstack``: all of it)."""
    for name in ("parse_core", "parse_collection", "parse_tasks", "parse_cleanup"):
        method = getattr(invoke.Program, name)
        if not getattr(method, "chexstack_usage", False):
            setattr(invoke.Program, name, _usage_on_parse_errors(method))


def program(namespace: invoke.Collection, binary: str = NAME) -> invoke.Program:
    """invoke's ``Program`` over ``namespace`` (the tasks), named ``chexstack`` (``binary``: the command name its help
    shows)."""
    try:
        version = metadata.version(NAME)
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed (PYTHONPATH)
        version = "unknown"
    return invoke.Program(namespace=namespace, name=NAME, binary=binary, binary_names=[binary], version=version)
