"""Which command lines a parser can read: an ``Observation`` names the command a check runs for it (``argv``), the
recorded runs it can read as well (``also``: another form of the command, a filtered transcript, a run of another
image captured by hand) and how it reads a run (``parse``). ``validate.checks.registry.Context.observe`` /
``first`` run or look up an observation and return it ``Observed``; a check then only judges the value.

A recorded run is ``(argv, env)`` as a bundle holds it (``validate.evidence``): a filtered transcript is recorded as
``[sh, -c, "CMD | grep …"]`` (``shell_command`` gives its command line).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from chexstack.tools import ToolRun


def shell_command(argv) -> str:
    """The command line of a recorded ``sh -c "CMD"`` run (a filtered transcript: ``nvcc --version | grep release``),
    else the argv joined: what an observation's ``also`` matches a recorded run against."""
    argv = tuple(argv)
    return argv[2] if argv[:2] == ("sh", "-c") and len(argv) > 2 else " ".join(argv)


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
