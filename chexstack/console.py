"""The rich consoles every task prints through: ``console`` (stdout) and ``err_console`` (stderr: warnings that
must not mix into output meant for a pipe, such as a rendered batch script or MPIJob).

Width: a terminal's own; otherwise (a log file, a pipe, CI) ``$COLUMNS`` when set, else ``LOG_WIDTH`` — rich's
default of 80 columns split table titles and sentences in logs.
"""
from __future__ import annotations

import os
import select
import signal
import sys

from rich.console import Console
from rich.markup import escape

#: Columns when the output is not a terminal and $COLUMNS is not set.
LOG_WIDTH = 120
#: The exit status of a command whose reader went away (``chexstack --help train | head -1``): 128 + SIGPIPE, what a
#: shell reports for a tool SIGPIPE ended. Python ignores SIGPIPE and raises BrokenPipeError instead; its advice is
#: to point the output at /dev/null and exit (https://docs.python.org/3/library/signal.html#note-on-sigpipe).
BROKEN_PIPE_EXIT = 128 + signal.SIGPIPE


def closed_outputs() -> list[int]:
    """Of this process's stdout and stderr (descriptors 1 and 2), those whose reader is gone: poll(2) reports
    POLLERR on a pipe's write end once its read end is closed (POLLHUP/POLLERR on a socket whose peer left); a file
    or a terminal never."""
    poller = select.poll()
    for fd in (1, 2):
        poller.register(fd, 0)  # no events asked: POLLERR, POLLHUP and POLLNVAL are reported anyway
    try:
        return sorted(fd for fd, event in poller.poll(0) if event & (select.POLLERR | select.POLLHUP))
    except OSError:
        return []


def drop_closed_outputs() -> bool:
    """Point each of stdout and stderr whose reader is gone at /dev/null, so that nothing more is written into them
    (Python's last flush at exit, a traceback); whether there was one."""
    closed = closed_outputs()
    if closed:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in closed:
            os.dup2(devnull, fd)
        os.close(devnull)
    return bool(closed)


class _Console(Console):
    """rich's Console, which ends the process with exit status 1 on a BrokenPipeError; here with
    ``BROKEN_PIPE_EXIT``, as every chexstack command does (``chexstack.cli.end_quietly_on_a_closed_pipe``), and only
    when stdout or stderr is closed indeed (else the error stays an error)."""

    def on_broken_pipe(self) -> None:
        if not drop_closed_outputs():
            raise  # the BrokenPipeError rich is handling: not this process's output
        self.quiet = True
        raise SystemExit(BROKEN_PIPE_EXIT)


def width_for(stream) -> int | None:
    """None (rich measures the terminal) for a terminal, else $COLUMNS or ``LOG_WIDTH``."""
    if stream.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else LOG_WIDTH


def make(stderr: bool = False) -> Console:
    """A console for this process's stdout (``stderr``: stderr) as it is now, as every task prints through. Emoji
    codes are off: tool output quoted in a message holds words between colons that rich would turn into emoji
    (NCCL's ``host:1234:1234`` became ``host🔢1234``)."""
    return _Console(highlight=False, emoji=False, stderr=stderr, width=width_for(sys.stderr if stderr else sys.stdout))


console = make()
err_console = make(stderr=True)


def warn(message: str) -> None:
    """One yellow ``warning:`` line on stderr; ``message`` is plain text (brackets in it are printed, not read as
    rich markup)."""
    err_console.print("[yellow]warning:[/] %s" % escape(message), soft_wrap=True)
