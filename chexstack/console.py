"""The rich consoles every task prints through: ``console`` (stdout) and ``err_console`` (stderr: warnings that
must not mix into output meant for a pipe, such as a rendered batch script or MPIJob).

Width: a terminal's own; otherwise (a log file, a pipe, CI) ``$COLUMNS`` when set, else ``LOG_WIDTH`` — rich's
default of 80 columns split table titles and sentences in logs.
"""
from __future__ import annotations

import os
import sys

from rich.console import Console
from rich.markup import escape

#: Columns when the output is not a terminal and $COLUMNS is not set.
LOG_WIDTH = 120


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
    return Console(highlight=False, emoji=False, stderr=stderr, width=width_for(sys.stderr if stderr else sys.stdout))


console = make()
err_console = make(stderr=True)


def warn(message: str) -> None:
    """One yellow ``warning:`` line on stderr; ``message`` is plain text (brackets in it are printed, not read as
    rich markup)."""
    err_console.print("[yellow]warning:[/] %s" % escape(message), soft_wrap=True)
