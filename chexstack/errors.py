"""The one user-facing error type.

A ``ChexstackError`` is bad input or an unmet precondition that the user can fix. Its message names the file,
line or field and what was expected; ``tasks.py`` prints it without a traceback and exits with ``exit_code``
(2 by default: "could not run"). Anything else that escapes is a bug and keeps its traceback.
"""
from __future__ import annotations


class ChexstackError(Exception):
    """Bad input or unmet precondition; ``str(err)`` is the whole message shown to the user."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code
