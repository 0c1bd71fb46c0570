"""Slurm's one-line records and what chexstack's Slurm follower prints about them: text in, values out (never run
tools).

``scontrol -o show job ID`` -> ``JobState`` (``parse_scontrol``), ``scontrol -o show node [NODELIST]`` -> ``NodeState``
per node (``parse_nodes``; https://slurm.schedmd.com/scontrol.html, ``-o``/``--oneliner``: one record a line of
``Key=Value`` words). A node Slurm has lost (``LOST_NODE_STATES``) is reported by ``launch.slurmjob`` as
``NodeState.line()``, which ``LOST_NODE_LINE`` reads back. Observed with Slurm 22.05 (Debian bookworm).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

#: Slurm's final job states (squeue(1), JOB STATE CODES).
FINAL = frozenset(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                   "BOOT_FAIL", "DEADLINE", "REVOKED"))
#: what every line of chexstack's own launcher helpers starts with (``launch.slurmjob``: the job id, its lost nodes,
#: its final state); ``launch.stream`` shows such lines to the user
PREFIX = "chexstack: "
#: one ``Key=value`` of a one-line ``scontrol show`` record (``AllocNode:Sid=``, ``CPUs/Task=`` are keys too); a
#: value may hold spaces (a node's ``Reason=Not responding [root@2026-12-01T23:16:17]``): it runs to the next
#: `` Key=``
_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w:/]*)=(.*?)(?=\s+[A-Za-z][\w:/]*=|\s*$)")
#: node state words (scontrol(1) "NODE STATE") under which Slurm has lost the node: it stopped answering
#: (``NOT_RESPONDING``, SlurmdTimeout), was set DOWN, or is failing
LOST_NODE_STATES = frozenset(("DOWN", "NOT_RESPONDING", "FAIL", "FAILING"))
#: the line ``launch.slurmjob.lost_nodes`` prints for a node (``NodeState.line``), read back by ``launch.stream``:
#: group 1 the node's name, 2 its state and reason
LOST_NODE_LINE = re.compile(r"^%sSlurm node (\S+) is (.+)$" % re.escape(PREFIX))


@dataclass(frozen=True)
class JobState:
    """``state``: JobState (``CANCELLED by 0`` -> ``CANCELLED``); ``exit_code``: ExitCode ``status:signal``;
    ``restarts``: how often Slurm restarted the job (``Restarts``, the job's ``SLURM_RESTART_COUNT``)."""

    state: str
    exit_code: str = "0:0"
    nodes: str = ""
    reason: str = "None"
    restarts: int = 0

    @property
    def final(self) -> bool:
        return self.state in FINAL

    def status(self) -> int:
        """0 for COMPLETED; else the job's exit status when non-zero, else 128 + its signal, else 1."""
        if self.state == "COMPLETED":
            return 0
        code, _, sig = self.exit_code.partition(":")
        if code.isdigit() and int(code):
            return int(code)
        return 128 + int(sig) if sig.isdigit() and int(sig) else 1


def _fields(text: str) -> dict[str, str]:
    """The ``Key=value`` fields of one ``scontrol -o show`` record; Slurm's ``(null)`` (no value) becomes ``""``."""
    return {key: "" if value == "(null)" else value for key, value in _FIELD.findall(text.strip())}


def parse_scontrol(text: str) -> JobState | None:
    """The JobState of ``scontrol -o show job ID`` output (one line of ``Key=Value`` words), None without one.
    ``nodes`` is empty while the job has no allocation (``NodeList=(null)``)."""
    fields = _fields(text)
    if not fields.get("JobState"):
        return None
    restarts = fields.get("Restarts", "0")
    return JobState(fields["JobState"].split()[0], fields.get("ExitCode", "0:0"), fields.get("NodeList", ""),
                    fields.get("Reason", "None"), int(restarts) if restarts.isdigit() else 0)


@dataclass(frozen=True)
class NodeState:
    """One node of ``scontrol -o show node``: ``name`` (NodeName), ``state`` (State, base state and flags joined
    by ``+``: ``DOWN+NOT_RESPONDING``), ``reason`` (Reason: Slurm's or an admin's words and ``[user@time]``)."""

    name: str
    state: str
    reason: str = ""

    @property
    def lost(self) -> bool:
        """Slurm has lost the node (LOST_NODE_STATES)."""
        return bool(set(self.state.split("+")) & LOST_NODE_STATES)

    def line(self) -> str:
        """``chexstack: Slurm node chex2 is DOWN+NOT_RESPONDING (reason: ...)`` (LOST_NODE_LINE)."""
        return "%sSlurm node %s is %s%s" % (PREFIX, self.name, self.state,
                                            " (reason: %s)" % self.reason if self.reason else "")


def parse_nodes(text: str) -> list[NodeState]:
    """The nodes of ``scontrol -o show node [NODELIST]`` output, one record per line (lines without
    ``NodeName=``, such as an error, are skipped)."""
    records = [_fields(line) for line in text.splitlines()]
    return [NodeState(f["NodeName"], f.get("State", ""), f.get("Reason", "")) for f in records if f.get("NodeName")]
