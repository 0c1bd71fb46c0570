"""The trainer's usage errors: one ``trainer: error:`` line and exit 2, for ``python -m trainer`` and
``python -m trainer evaluate`` alike (Python 3.5 syntax, no TensorFlow).

``Parser`` is argparse whose usage errors are ``UsageError``s (argparse's own handler prints the usage block and the
error once per rank); ``reporting_errors(body, command)`` runs a command's body and turns a ``TrainerError`` into
that line and ``TrainerError.exit_code``.
"""
import argparse

from trainer import events
from trainer.errors import TrainerError


class UsageError(TrainerError):
    """An unknown option or a value of the wrong type (argparse's message)."""


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are TrainerErrors: one ``trainer: error:`` line and exit 2 like every other bad
    input (argparse's own handler prints the usage block and the error once per rank)."""

    def error(self, message):
        raise UsageError(message)


def reporting_errors(body, command="python -m trainer"):
    """``body()``'s exit status, or 2 after one ``trainer: error:`` line for a TrainerError (usage errors point to
    ``COMMAND --help``)."""
    try:
        return body()
    except UsageError as e:
        events.error("%s (%s --help lists the options)" % (e, command))
        return TrainerError.exit_code
    except TrainerError as e:
        if not e.quiet:
            events.error(str(e))
        return TrainerError.exit_code
