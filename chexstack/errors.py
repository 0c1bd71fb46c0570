"""The one user-facing error type, and the exit codes every command uses.

A ``ChexstackError`` is bad input or an unmet precondition that the user can fix. Its message names the file,
line or field and what was expected; ``tasks.py`` prints it without a traceback and exits with ``exit_code``
(``ExitCode.USAGE`` by default: "could not run"). Anything else that escapes is a bug and keeps its traceback.
"""
from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """Exit statuses of chexstack's commands (NHC / node-problem-detector convention: 0 fine, 1 a problem found,
    other: could not judge). An interrupted run exits ``interrupted(signal)`` = 128 + the signal's number, as a
    shell reports a process killed by that signal."""

    OK = 0
    #: The work ran and found a problem: a FAIL check, a verification mismatch, a failed rank, a drifted lock.
    FAILED = 1
    #: Could not run: bad input, an unmet precondition, a refused launch.
    USAGE = 2
    #: A tool the command needs is not installed here (apptainer/singularity, a solver).
    TOOL_MISSING = 3

    @staticmethod
    def interrupted(signal_number: int) -> int:
        return 128 + signal_number


class ChexstackError(Exception):
    """Bad input or unmet precondition; ``str(err)`` is the whole message shown to the user."""

    def __init__(self, message: str, exit_code: int = ExitCode.USAGE):
        super().__init__(message)
        self.exit_code = int(exit_code)
