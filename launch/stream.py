"""Run a horovodrun command: show rank 0's progress with rich, keep the full log, explain a failure, stop it cleanly
on Ctrl-C / SIGTERM.

horovodrun prefixes every rank's line: ``[0]<stdout>:`` (Gloo) or ``[1,0]<stdout>:`` (MPI, ``--tag-output``). The
trainer's rank 0 prints progress events (``trainer.events``); they drive a progress bar. Rank 0's ``trainer:`` info
and warning lines are shown; everything goes to the log file.

The run's Outcome (``launch.failure``) records what the output said — the first failing rank and its code, each
rank's last lines and first causing exception, a lost host (``facts.parsers.horovodrun``), a node Slurm lost
(``facts.parsers.slurm``) — and ``launch.failure.explain_failure`` turns it into one message.

Signals: the command runs in its own session (a terminal's Ctrl-C reaches only the launcher). The first SIGINT,
SIGTERM or SIGHUP sends SIGTERM to the command's process group (horovodrun's Gloo middlemen then stop every rank;
mpirun stops its job; ``docker run`` passes it to the container's init); a second one, or ``GRACE_S`` seconds
without an end, sends SIGKILL and calls ``force_stop`` (e.g. remove the container). The Outcome records the signal.

The process group does not reach everything a run starts: horovodrun's Gloo ranks run in sessions of their own, and
Apptainer starts its SIF mount (``squashfuse_ll``) in a process group of its own, which only Apptainer's own
clean-up stops and which can outlive the command under load (apptainer/apptainer#2361, #2762). So the first signal
also records the command's whole process tree (``psutil``), and an interrupted run returns only when every recorded
process is gone: ``REAP_WAIT_S`` seconds to end on its own, then SIGTERM, then SIGKILL (``reap``).
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

import psutil
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from chexstack.errors import ChexstackError
from facts.parsers.horovodrun import INTERRUPTED, RUN_START
from facts.parsers.slurm import PREFIX
from launch.failure import Outcome, OutputReader

_TRAINER = "trainer: "
_ERROR = "trainer: error: "
GRACE_S = 30.0
REAP_WAIT_S = 5.0  # after an interrupted command ended: for each further step of ``reap`` (end alone, SIGTERM, SIGKILL)
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: what the line at the first signal says is stopped, unless the command says otherwise (``run``'s ``stopping``)
STOPPING = "every rank (again to kill them at once)"


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
        elif kind == "prepare":
            out.print("preparing %d images at %d px into %s: %d shards, %d done before" % (
                e["images"], e["image_size"], e["output"], e["shards"], e["done_shards"]), markup=False,
                highlight=False, soft_wrap=True)
            self.task = self.progress.add_task("images", total=e["images"], completed=e["done_images"], loss="")
        elif kind == "shard" and self.task is not None:
            self.progress.update(self.task, completed=e["images"], loss="shard %d/%d" % (e["shard"], e["shards"]))
        elif kind == "test":
            base, difference = e.get("baseline_mean_auroc"), e.get("difference")
            out.print("test split (best epoch %s): mean AUROC %s%s%s" % (
                e.get("best_epoch"), "undefined" if e.get("mean_auroc") is None else "%.4f" % e["mean_auroc"],
                "" if base is None else ", logistic-regression baseline %.4f" % base,
                "" if difference is None else " (difference %+.3f: %s)" % (difference, e.get("verdict"))))


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


def process_tree(pid: int) -> list[psutil.Process]:
    """``pid`` and its descendants now (``psutil.Process`` objects, which remember each process's start time, so a
    reused pid is never taken for one of them); [] when ``pid`` is gone."""
    try:
        root = psutil.Process(pid)
        return [root] + root.children(recursive=True)
    except psutil.Error:
        return []


def reap(processes: list[psutil.Process], wait_s: float | None = None) -> list[psutil.Process]:
    """Wait until ``processes`` are gone: ``wait_s`` seconds (default ``REAP_WAIT_S``) for them to end alone, then
    SIGTERM and ``wait_s`` more, then SIGKILL to the rest (and ``wait_s`` for the kernel to take them). Returns those
    still alive (none but a process in uninterruptible sleep); a process that is not ours to signal is left as it
    is."""
    wait_s = REAP_WAIT_S if wait_s is None else wait_s
    alive = _wait(processes, wait_s)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not alive:
            break
        for p in alive:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        alive = _wait(alive, wait_s)
    return alive


def _wait(processes: list[psutil.Process], wait_s: float) -> list[psutil.Process]:
    """Up to ``wait_s`` seconds for ``processes`` to end (polled every 0.1 s); those still running."""
    deadline = time.monotonic() + wait_s
    psutil.wait_procs(processes, timeout=0)  # collects the exit status of those that are our own children
    alive = _running(processes)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        psutil.wait_procs(alive, timeout=0)
        alive = _running(alive)
    return alive


def _running(processes: list[psutil.Process]) -> list[psutil.Process]:
    """Those not ended: a zombie (ended, its exit status not yet collected by its parent or init) is not running."""
    running = []
    for p in processes:
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                running.append(p)
        except psutil.Error:
            pass
    return running


class _Stopper:
    """Signal handlers for the duration of a run: the first SIGINT/SIGTERM/SIGHUP records the command's process
    tree and asks its process group to stop (SIGTERM); a second one (or ``GRACE_S`` seconds) kills the group and
    the recorded tree (SIGKILL) and calls ``force_stop``."""

    def __init__(self, proc: subprocess.Popen, force_stop: Callable[[], None] | None,
                 stopping: str = STOPPING) -> None:
        self.proc, self.force_stop, self.stopping = proc, force_stop, stopping
        self.signal: int | None = None
        self.tree: dict[int, psutil.Process] = {}
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
            os.write(2, ("\n%s: stopping %s\n" % (signal.Signals(signum).name, self.stopping)).encode())
            self.record()
            self._send(signal.SIGTERM)
            self._timer = threading.Timer(GRACE_S, self.kill)
            self._timer.daemon = True
            self._timer.start()
        else:
            self.kill()

    def record(self) -> None:
        """Add the command's process tree as it is now to ``tree`` (keyed by pid; the first record of a pid wins)."""
        for p in process_tree(self.proc.pid):
            self.tree.setdefault(p.pid, p)

    def kill(self) -> None:
        self.record()
        self._send(signal.SIGKILL)
        for p in list(self.tree.values()):
            try:
                p.kill()  # psutil checks the start time: a reused pid is not killed
            except psutil.Error:
                pass
        if self.force_stop is not None:
            threading.Thread(target=self.force_stop, daemon=True).start()

    def _send(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)  # its own session: process group id == pid
        except ProcessLookupError:
            pass


def _line_count(path: str) -> int:
    """The lines a log already holds (0 for none)."""
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def run(argv: list[str], env: dict[str, str], log_path: str, console: Console, cwd: str, *,
        force_stop: Callable[[], None] | None = None,
        stopping: str = STOPPING) -> Outcome:
    """Run ``argv`` with ``env`` added to this environment; stream, display, log (appended) and summarise.

    ``force_stop``: called when the command must be killed after a signal (and once more after an interrupted run
    ends), for what SIGKILL of the local process group does not reach (a container). ``stopping``: what the
    line on stderr at the first signal says is stopped, in the command's terms ("SIGINT: stopping every rank …";
    ``invoke prepare`` has no ranks). An interrupted run returns
    when every process of the tree recorded at the signal is gone (``reap``); one that cannot be stopped is named in
    the log. ChexstackError when the log cannot be written.
    """
    try:
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
        before = _line_count(log_path)
        log = open(log_path, "a")
    except OSError as e:
        raise ChexstackError("cannot write the run's log %s: %s" % (log_path, e.strerror or e)) from None
    reader = OutputReader()
    reader.faults.read = before  # a fault's line number is the log's, where earlier runs come first
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[loss]}"),
               TimeElapsedColumn())
    with log, Progress(*columns, console=console, transient=True) as progress:
        log.write("%s%s\n" % (RUN_START, " ".join(argv)))
        log.flush()
        reader.feed("%s%s" % (RUN_START, " ".join(argv)))
        display = _Display(progress)
        proc = subprocess.Popen(argv, env={**os.environ, **env}, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
                                start_new_session=True)
        with _Stopper(proc, force_stop, stopping) as stopper:
            for raw in proc.stdout:
                log.write(raw)
                rank, text, event = reader.feed(raw.rstrip("\n"))
                if event is not None:
                    display.event(event)
                elif text.startswith(_ERROR):  # shown once, in the failure message
                    pass
                elif text.startswith(_TRAINER) and rank in (0, None) or text.startswith(PREFIX) and rank is None:
                    progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
            returncode = proc.wait()
        if stopper.signal is not None:
            log.write(INTERRUPTED % signal.Signals(stopper.signal).name + "\n")
            if force_stop is not None:
                force_stop()
            for p in reap(list(stopper.tree.values())):
                log.write("[chexstack] process %d (%s) is still alive after SIGKILL\n" % (p.pid, _name(p)))
    return reader.outcome(returncode, log_path, stopper.signal)


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return "?"
