"""Submit a Slurm batch script and follow the job to its end: what ``invoke train --launcher slurm --submit`` runs
(under ``launch.local.execute``, which shows rank 0's progress from the lines printed here and explains a failure).

``python -m launch.slurmjob SCRIPT OUTPUT_PATTERN``: ``sbatch --parsable SCRIPT`` (this environment is the job's:
``sbatch`` exports it, https://slurm.schedmd.com/sbatch.html ``--export``), then every line the job writes to
OUTPUT_PATTERN (``%j`` is the job id) as it appears, then one line with the job's final state from ``scontrol show
job`` (``JobState``, ``ExitCode``, ``NodeList``); a job Slurm restarts (``--requeue``: ``scontrol requeue``, a
node failure) is followed on, with a line for each restart (``Restarts``). When the job ends other than COMPLETED,
or is restarted, each node of its allocation that Slurm holds lost (``scontrol -o show node``: State DOWN, FAIL or
NOT_RESPONDING) gets a line with its state and Slurm's reason. Exit status: 0 when the state is COMPLETED, else the
job's exit code, else 1. SIGTERM/SIGINT cancel the job (``scancel``) and keep following it to its end. Lines of
this module start with ``chexstack: `` (``facts.parsers.slurm.PREFIX``); ``scontrol``'s records are read by
``facts.parsers.slurm``.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from chexstack.errors import ChexstackError
from chexstack.tools import run
from facts.parsers.slurm import PREFIX, JobState, parse_nodes, parse_scontrol
from launch import submit

#: how long a job may be unknown to scontrol before following gives up (seconds)
UNKNOWN_S = 60.0


def lost_nodes(node_list: str) -> list[str]:
    """One line per node of ``node_list`` (a Slurm hostlist: ``chex[1-2]``) that Slurm holds lost, naming its
    state and reason; a line saying why the nodes could not be read when ``scontrol`` failed; none for an
    empty list."""
    if not node_list:
        return []
    result = run(["scontrol", "-o", "show", "node", node_list], timeout=60)
    if not result.ok:
        return ["%scould not read the state of nodes %s: %s" % (PREFIX, node_list, result.why_not())]
    return [node.line() for node in parse_nodes(result.stdout) if node.lost]


def job_state(job_id: str) -> JobState | None:
    """The job's state from ``scontrol -o show job``; None when Slurm does not know it (yet, or any more)."""
    result = run(["scontrol", "-o", "show", "job", job_id], timeout=60)
    return parse_scontrol(result.stdout) if result.ok else None


class _Tail:
    """The complete lines appended to a file since the last read."""

    def __init__(self, path: str) -> None:
        self.path, self.offset, self.partial = path, 0, ""

    def read(self, final: bool = False) -> list[str]:
        try:
            with open(self.path, errors="replace") as f:
                if os.fstat(f.fileno()).st_size < self.offset:  # written afresh (a restarted job, truncate mode)
                    self.offset, self.partial = 0, ""
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return []
        lines = (self.partial + text).split("\n")
        self.partial = "" if final else lines.pop()
        return [line for line in lines if line or not final]


def follow(job_id: str, output_path: str, poll_s: float = 1.0, out=sys.stdout) -> JobState:
    """Print the job's output lines as they are written, until the job is in a final state; return that state.
    Raises ChexstackError when Slurm does not know the job for ``UNKNOWN_S`` seconds."""
    tail, unknown_since, restarts, allocated = _Tail(output_path), None, 0, ""
    while True:
        state = job_state(job_id)
        for line in tail.read():
            print(line, file=out, flush=True)
        if state is not None and state.restarts > restarts:
            restarts = state.restarts
            print("%sSlurm job %s requeued (restart %d, now %s): following it on" % (
                PREFIX, job_id, restarts, state.state), file=out, flush=True)
            for line in lost_nodes(allocated):
                print(line, file=out, flush=True)
        if state is not None and state.nodes:
            allocated = state.nodes
        if state is None:
            unknown_since = unknown_since or time.monotonic()
            if time.monotonic() - unknown_since > UNKNOWN_S:
                raise ChexstackError("Slurm job %s: scontrol does not know it (for %.0f s); see %s"
                                     % (job_id, UNKNOWN_S, output_path))
        elif state.final:
            for line in tail.read(final=True):
                print(line, file=out, flush=True)
            return state
        else:
            unknown_since = None
        time.sleep(poll_s)


def main(argv: list[str]) -> int:
    script_path, pattern = argv
    with open(script_path) as f:
        script = f.read()
    os.unlink(script_path)
    try:
        job_id = submit.submit_slurm(script)
    except ChexstackError as e:
        print("%s%s" % (PREFIX, e), flush=True)
        return 2
    print("%ssubmitted Slurm job %s; its output: %s" % (PREFIX, job_id, pattern.replace("%j", job_id)), flush=True)

    def cancel(signum, frame):
        print("%s%s: cancelling Slurm job %s (scancel)" % (PREFIX, signal.Signals(signum).name, job_id), flush=True)
        run(["scancel", job_id], timeout=60)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, cancel)
    try:
        state = follow(job_id, pattern.replace("%j", job_id))
    except ChexstackError as e:
        print("%s%s" % (PREFIX, e), flush=True)
        return 1
    if state.state != "COMPLETED":
        for line in lost_nodes(state.nodes):
            print(line, flush=True)
    print("%sSlurm job %s %s on %s (exit code %s%s)" % (
        PREFIX, job_id, state.state, state.nodes or "no node", state.exit_code,
        "" if state.reason in ("None", "") else ", reason %s" % state.reason), flush=True)
    return state.status()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
