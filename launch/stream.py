"""Run a horovodrun command: show rank 0's progress with rich, keep the full log, explain a failure, stop it cleanly
on Ctrl-C / SIGTERM.

horovodrun prefixes every rank's line: ``[0]<stdout>:`` (Gloo) or ``[1,0]<stdout>:`` (MPI, ``--tag-output``). The
trainer's rank 0 prints progress events (``trainer.events``); they drive a progress bar. Rank 0's ``trainer:`` info
and warning lines are shown; everything goes to the log file.

A failed run is explained in one message from what horovodrun and mpirun print: the first rank to exit and its code
(Gloo: ``Process 1 exit with status code 139``; mpirun: ``Process name: [[j,1],1]`` / ``Exit code: 2`` or
``process rank 1 ... exited on signal 11``), then that rank's own reason — its ``trainer: error:`` line, else the last
exception line of its output (``OSError: Unable to open file ...``), never horovodrun's own RuntimeError traceback —
and for exit 139 under Gloo the loopback hint (``launch.controller.GLOO_ON_LOOPBACK``). The full output stays in
the log.

Signals: the command runs in its own session (a terminal's Ctrl-C reaches only the launcher). The first SIGINT,
SIGTERM or SIGHUP sends SIGTERM to the command's process group (horovodrun's Gloo middlemen then stop every rank;
mpirun stops its job; ``docker run`` passes it to the container's init); a second one, or ``GRACE_S`` seconds
without an end, sends SIGKILL and calls ``force_stop`` (e.g. remove the container). The Outcome records the signal.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from chexstack.errors import ChexstackError
from launch.controller import GLOO_FIXES, GLOO_ON_LOOPBACK
from launch.slurmjob import LOST_NODE_LINE
from trainer.preflight import parse_event

RANK_LINE = re.compile(r"^\[(?:\d+,)?(\d+)\]<(stdout|stderr)>:(.*)$")
_GLOO_EXIT = re.compile(r"Process (\d+) exit with status code (-?\d+)")
_MPI_SIGNAL = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_PROCESS_NAME = re.compile(r"Process name:\s*(?:\[\[\d+,\d+\],)?(\d+)\]?")
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
#: the last line of a Python traceback (``OSError: ...``, ``tensorflow.python.framework.errors_impl.XError: ...``),
#: CPython's fatal-error line, or an argparse-style ``prog: error: ...`` line
_EXCEPTION_LINE = re.compile(r"^(?:(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)|"
                             r"KeyboardInterrupt|SystemExit)(?::\s.*)?|Fatal Python error: .*|\S[^:]*: error: .*)$")
#: horovodrun's own summary exception, which only restates the first failing rank and its code
_HOROVODRUN_SUMMARY = "RuntimeError: Horovod detected that one or more processes exited"
#: exceptions a rank raises only because another rank failed first (Horovod stops every rank's collectives)
_CONSEQUENCES = (_HOROVODRUN_SUMMARY, "Horovod has been shut down", "HorovodInternalError", "closed by peer")
#: Open MPI's report of a daemon (a host) that stopped answering (ORTE "lost communication with a remote daemon")
_LOST_DAEMON = re.compile(r"Remote daemon:\s*\[\[\d+,\d+\],\d+\] on node (\S+)")
#: TensorFlow's warning for a CUDA library it cannot load (then it registers no GPU:
#: https://github.com/tensorflow/tensorflow/issues/45930)
_MISSING_LIBRARY = re.compile(r"Could not load dynamic library '([^']+)'")
_TRAINER = "trainer: "
_ERROR = "trainer: error: "
#: lines a launcher's own helper prints for the user (``launch.slurmjob``: the job id, its final state)
_LAUNCHER = "chexstack: "
TAIL_LINES = 25
RANK_TAIL_LINES = 60
GRACE_S = 30.0
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclasses.dataclass
class Outcome:
    """What a run left: horovodrun's return code, the first failing (rank, exit code), the ranks' ``trainer:
    error:`` lines, the last lines of output, the log path, the last lines of each rank (by rank) and the signal
    that interrupted the run (None if none did)."""
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


class _Failures:
    """Finds the first failing rank and its exit code in horovodrun/mpirun output."""

    def __init__(self) -> None:
        self.first: tuple[int, int] | None = None
        self._name: int | None = None
        self.host: str | None = None  # where the first failing rank ran, when mpirun says

    def feed(self, line: str) -> None:
        if self.first is not None:
            return
        if m := _GLOO_EXIT.search(line):
            if int(m.group(2)) != 0:
                self.first = (int(m.group(1)), int(m.group(2)))
        elif m := _MPI_SIGNAL.search(line):
            self.first = (int(m.group(1)), 128 + int(m.group(3)))
            self.host = m.group(2)
        elif m := _PROCESS_NAME.search(line):
            self._name = int(m.group(1))
        elif (m := _EXIT_CODE.search(line)) and self._name is not None:
            self.first = (self._name, int(m.group(1)))


class _Display:
    """rich progress bar driven by the trainer's events."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = None
        self.epochs: int | str = "?"
        self.throughput = False

    def event(self, e: dict) -> None:
        kind, out = e["event"], self.progress.console
        if kind == "run":
            self.throughput = e.get("mode") == "throughput"
            out.print(_run_banner(e), markup=False, highlight=False, soft_wrap=True)
            self.epochs = e["epochs"]
        elif kind == "epoch_begin":
            if self.task is not None:
                self.progress.remove_task(self.task)
            title = "steps" if self.throughput else "epoch %d/%s" % (e["epoch"], self.epochs)
            self.task = self.progress.add_task(title, total=e["steps"], loss="")
        elif kind == "step" and self.task is not None:
            loss = "" if e.get("loss") is None else "loss %.4f" % e["loss"]
            self.progress.update(self.task, completed=e["step"], loss=loss)
        elif kind == "epoch_end":
            mean = e.get("mean_auroc")
            out.print("epoch %d: loss %.4f, mean AUROC %s, %.1f images/s" % (
                e["epoch"], e["loss"] if e.get("loss") is not None else float("nan"),
                "undefined" if mean is None else "%.4f" % mean, e["images_per_sec"]))
        elif kind == "test":
            base = e.get("baseline_mean_auroc")
            out.print("test split (best epoch %s): mean AUROC %s%s" % (
                e.get("best_epoch"), "undefined" if e.get("mean_auroc") is None else "%.4f" % e["mean_auroc"],
                "" if base is None else ", logistic-regression baseline %.4f" % base))


def _run_banner(e: dict) -> str:
    """The one line that says what the run does, from its ``run`` event."""
    where = "world size %d (%s), %s" % (e["world_size"], e["device"], e["model"])
    if e.get("mode") == "throughput":
        data = "synthetic images" if e.get("data") == "synthetic" else "%d real training images" % e["n_train"]
        return ("throughput mode: %s, %s, batch %s per rank at %s px%s: %d warm-up + %d timed steps, no evaluation"
                % (where, data, e.get("batch_size", "?"), e.get("image_size", "?"), ", AMP" if e.get("amp") else "",
                   e.get("warmup_steps", 0), e.get("timed_steps", e["steps_per_epoch"])))
    return "%s: %d training / %d validation images, %d steps per epoch, epochs %d..%d" % (
        where, e["n_train"], e["n_val"], e["steps_per_epoch"], e["initial_epoch"] + 1, e["epochs"])


class _Stopper:
    """Signal handlers for the duration of a run: the first SIGINT/SIGTERM/SIGHUP asks the command's process
    group to stop (SIGTERM), a second one (or ``GRACE_S`` seconds) kills it (SIGKILL) and calls ``force_stop``."""

    def __init__(self, proc: subprocess.Popen, force_stop: Callable[[], None] | None) -> None:
        self.proc, self.force_stop = proc, force_stop
        self.signal: int | None = None
        self._previous: dict[int, object] = {}
        self._timer: threading.Timer | None = None

    def __enter__(self) -> "_Stopper":
        if threading.current_thread() is threading.main_thread():  # handlers can only be set there
            for sig in _STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if self._timer is not None:
            self._timer.cancel()

    def _handle(self, signum: int, frame) -> None:
        if self.signal is None:
            self.signal = signum
            os.write(2, ("\n%s: stopping every rank (again to kill them at once)\n"
                         % signal.Signals(signum).name).encode())
            self._send(signal.SIGTERM)
            self._timer = threading.Timer(GRACE_S, self.kill)
            self._timer.daemon = True
            self._timer.start()
        else:
            self.kill()

    def kill(self) -> None:
        self._send(signal.SIGKILL)
        if self.force_stop is not None:
            threading.Thread(target=self.force_stop, daemon=True).start()

    def _send(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)  # its own session: process group id == pid
        except ProcessLookupError:
            pass


def run(argv: list[str], env: dict[str, str], log_path: str, console: Console, cwd: str, *,
        force_stop: Callable[[], None] | None = None) -> Outcome:
    """Run ``argv`` with ``env`` added to this environment; stream, display, log (appended) and summarise.

    ``force_stop``: called when the command must be killed after a signal (and once more after an interrupted run
    ends), for what SIGKILL of the local process group does not reach (a container). ChexstackError when the log
    cannot be written.
    """
    try:
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        log = open(log_path, "a")
    except OSError as e:
        raise ChexstackError("cannot write the run's log %s: %s" % (log_path, e.strerror or e)) from None
    failures, errors, tail = _Failures(), [], collections.deque(maxlen=TAIL_LINES)
    rank_tails: dict[int, collections.deque] = {}
    first_exception, lost_host, hosts, slurm_lost = None, None, None, None
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[loss]}"),
               TimeElapsedColumn())
    with log, Progress(*columns, console=console, transient=True) as progress:
        log.write("$ %s\n" % " ".join(argv))
        log.flush()
        display = _Display(progress)
        proc = subprocess.Popen(argv, env={**os.environ, **env}, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
                                start_new_session=True)
        with _Stopper(proc, force_stop) as stopper:
            for raw in proc.stdout:
                line = raw.rstrip("\n")
                log.write(raw)
                tail.append(line)
                failures.feed(line)
                m = RANK_LINE.match(line)
                rank, text = (int(m.group(1)), m.group(3)) if m else (None, line)
                if rank is not None:
                    rank_tails.setdefault(rank, collections.deque(maxlen=RANK_TAIL_LINES)).append(text)
                    if first_exception is None and _is_cause(text):
                        first_exception = (rank, text.strip())
                elif lost_host is None and (m := _LOST_DAEMON.search(line)):
                    lost_host = m.group(1)
                elif slurm_lost is None and (m := LOST_NODE_LINE.match(line)):
                    slurm_lost = (m.group(1), m.group(2))
                if (event := parse_event(text)) is not None:
                    display.event(event)
                    if event["event"] == "run" and isinstance(event.get("hosts"), list):
                        hosts = [str(h) for h in event["hosts"]]
                elif text.startswith(_ERROR):  # shown once, in the failure message
                    errors.append("rank %s: %s" % (rank, text[len(_ERROR):]) if rank is not None else text)
                elif text.startswith(_TRAINER) and rank in (0, None) or text.startswith(_LAUNCHER) and rank is None:
                    progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
            returncode = proc.wait()
        if stopper.signal is not None:
            log.write("[chexstack] interrupted by %s\n" % signal.Signals(stopper.signal).name)
            if force_stop is not None:
                force_stop()
    return Outcome(returncode, failures.first, errors, list(tail), log_path,
                   {r: list(lines) for r, lines in rank_tails.items()}, stopper.signal, first_exception,
                   lost_host, failures.host, hosts, slurm_lost)


def _describe_code(code: int) -> str:
    number = -code if code < 0 else code - 128 if code > 128 else None
    try:
        return " (%s)" % signal.Signals(number).name if number else ""
    except ValueError:
        return ""


def _is_cause(text: str) -> bool:
    """An exception line that is not the mere consequence of another rank's failure (``_CONSEQUENCES``)."""
    text = text.strip()
    return bool(_EXCEPTION_LINE.match(text)) and not any(c in text for c in _CONSEQUENCES)


def _last_exception(lines: list[str]) -> str | None:
    """The last exception line in a rank's output (horovodrun's summary excepted), or None."""
    for line in reversed(lines):
        text = line.strip()
        if _EXCEPTION_LINE.match(text) and not text.startswith(_HOROVODRUN_SUMMARY):
            return text
    return None


def without_tracebacks(lines: list[str]) -> list[str]:
    """``lines`` with every Python traceback reduced to its exception line (frames and chaining text dropped)."""
    out, inside = [], False
    for line in lines:
        if line.startswith("Traceback (most recent call last)"):
            inside = True
        elif inside and (line.startswith((" ", "\t")) or not line.strip() or line.startswith(
                ("During handling of the above exception", "The above exception was the direct cause"))):
            continue
        else:
            inside = False
            if not line.startswith(_HOROVODRUN_SUMMARY):
                out.append(line)
    return out


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
        found = _last_exception(outcome.rank_tails[rank])
        if found:
            return "rank %d: %s" % (rank, found)
    return None


def missing_libraries(outcome: Outcome) -> list[str]:
    """The libraries TensorFlow said it could not load (``Could not load dynamic library 'libcudnn.so.8'``), in
    the order first seen across the ranks' last lines."""
    lines = [line for rank in sorted(outcome.rank_tails) for line in outcome.rank_tails[rank]] + outcome.tail
    return list(dict.fromkeys(m.group(1) for line in lines for m in _MISSING_LIBRARY.finditer(line)))


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
            rank, " on host %s" % outcome.failure_host if outcome.failure_host else "", code, _describe_code(code)))
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
