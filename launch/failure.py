"""Why a training run failed, in one message, from what its launcher (horovodrun, mpirun, ``launch.slurmjob``)
printed: the first rank to exit and its code, then that rank's own reason — its ``trainer: error:`` line, else the
first exception in time that is not a consequence of another rank's failure, else the last exception line of its
output, never horovodrun's own RuntimeError traceback — a host mpirun or Slurm lost (with the ranks the trainer
placed there), the CUDA libraries TensorFlow could not load, and for exit 139 under Gloo the loopback hint
(``launch.controller.GLOO_ON_LOOPBACK``). The output itself is read by ``facts.parsers.horovodrun``; the full output
stays in the log.
"""
from __future__ import annotations

import dataclasses
import signal

from facts.parsers.horovodrun import MISSING_LIBRARY, describe_code, last_exception, without_tracebacks
from launch.controller import GLOO_FIXES, GLOO_ON_LOOPBACK


@dataclasses.dataclass
class Outcome:
    """What a run left: horovodrun's return code, the first failing (rank, exit code), the ranks' ``trainer:
    error:`` lines, the last lines of output, the log path, the last lines of each rank (by rank), the signal
    that interrupted the run (None if none did), the first exception in time that is a cause (rank, line), the host
    whose mpirun daemon was lost, the host of the first failing rank (when mpirun says), each rank's host and the
    first node Slurm held lost."""
    returncode: int
    first_failure: tuple[int, int] | None
    errors: list[str]
    tail: list[str]
    log_path: str
    rank_tails: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    interrupted: int | None = None
    first_exception: tuple[int, str] | None = None
    lost_host: str | None = None
    failure_host: str | None = None
    hosts: list[str] | None = None  # each rank's host (rank order), from the trainer's ``run`` event
    slurm_lost: tuple[str, str] | None = None  # the first node Slurm held lost: (name, "STATE (reason: ...)")


def rank_reason(outcome: Outcome) -> str | None:
    """Why the run failed, in the failing rank's own words: its ``trainer: error:`` line (else any rank's), else
    the first exception in time across all ranks that is not a consequence of another rank's failure (rank 0's
    "Horovod has been shut down" when rank 2 failed first), else the last exception line of a rank's output."""
    failing = outcome.first_failure[0] if outcome.first_failure else None
    prefix = "rank %d:" % failing if failing is not None else None
    mine = [e for e in outcome.errors if prefix and e.startswith(prefix)]
    if mine or outcome.errors:
        return (mine or outcome.errors)[0]
    if outcome.first_exception is not None:  # first in time across ranks, not the first rank to exit
        return "rank %d: %s" % outcome.first_exception
    order = ([failing] if failing in outcome.rank_tails else []) + sorted(r for r in outcome.rank_tails
                                                                          if r != failing)
    for rank in order:
        found = last_exception(outcome.rank_tails[rank])
        if found:
            return "rank %d: %s" % (rank, found)
    return None


def missing_libraries(outcome: Outcome) -> list[str]:
    """The libraries TensorFlow said it could not load (``Could not load dynamic library 'libcudnn.so.8'``), in
    the order first seen across the ranks' last lines."""
    lines = [line for rank in sorted(outcome.rank_tails) for line in outcome.rank_tails[rank]] + outcome.tail
    return list(dict.fromkeys(m.group(1) for line in lines for m in MISSING_LIBRARY.finditer(line)))


def _ranks_on(outcome: Outcome, host: str) -> str:
    """`` (ranks 2, 3)``: the ranks the trainer's ``run`` event placed on ``host`` (short names compared: Slurm's
    node name against a rank's FQDN); empty when unknown."""
    short = host.split(".")[0]
    ranks = [str(r) for r, h in enumerate(outcome.hosts or ()) if h.split(".")[0] == short]
    return " (rank%s %s)" % ("s" if len(ranks) > 1 else "", ", ".join(ranks)) if ranks else ""


def explain_failure(outcome: Outcome, controller: str) -> str:
    """One message: which rank failed with which code, that rank's own error, the loopback hint, the log."""
    parts = ["training failed (horovodrun exit status %d)" % outcome.returncode]
    code = None
    if outcome.interrupted is not None:
        parts.append("interrupted by %s" % signal.Signals(outcome.interrupted).name)
    elif outcome.first_failure:
        rank, code = outcome.first_failure
        parts.append("rank %d%s exited first, with code %d%s" % (
            rank, " on host %s" % outcome.failure_host if outcome.failure_host else "", code, describe_code(code)))
    reason = rank_reason(outcome) if outcome.interrupted is None else None
    if reason:
        parts.append(reason)
    if outcome.lost_host and outcome.interrupted is None:
        parts.append("host %s%s was lost: mpirun's daemon there stopped answering (the host or its network went "
                     "down, or its processes were killed), so every rank on it ended" % (
                         outcome.lost_host, _ranks_on(outcome, outcome.lost_host)))
    if outcome.slurm_lost and outcome.interrupted is None:
        node, how = outcome.slurm_lost
        parts.append("Slurm lost node %s%s, which is %s: every rank on it ended with the job" % (
            node, _ranks_on(outcome, node), how))
    missing = missing_libraries(outcome)
    if missing:
        parts.append("TensorFlow could not load %s" % ", ".join(missing))
    if controller == "gloo" and code in (139, -11):
        parts.append("exit 139 is a segmentation fault; %s: %s" % (GLOO_ON_LOOPBACK, GLOO_FIXES))
    message = "; ".join(parts) + "\nfull log: %s" % outcome.log_path
    if not reason and outcome.interrupted is None:
        failing = outcome.first_failure[0] if outcome.first_failure else None
        lines = outcome.rank_tails.get(failing) or outcome.tail
        shown = without_tracebacks(lines)[-10:]
        if shown:
            message += "\nlast lines%s:\n" % (" of rank %d" % failing if failing in outcome.rank_tails else "") \
                + "\n".join(shown)
    return message
