"""``launch.stream``: an interrupted run returns only when every process it had started is gone, also those that
its process group does not hold (horovodrun's Gloo ranks run in sessions of their own; Apptainer's squashfuse_ll
runs in a process group of its own and can outlive the command, the CI failure of 9f382da)."""
from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time

import psutil
from rich.console import Console

from launch import stream

# The command: a parent that, like Apptainer's starter, exits at once on SIGTERM and leaves its children behind.
# Child "session" runs in a session of its own and ends on SIGTERM; child "group" runs in a process group of its
# own and ignores SIGTERM (only SIGKILL stops it). Neither is in the command's process group, nor holds its output
# open (a process that did would keep the run going until GRACE_S, when the recorded tree is killed).
_COMMAND = r'''
import os, signal, subprocess, sys, time
py = sys.executable
session = subprocess.Popen([py, "-c", "import time; time.sleep(300)"], start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
group = subprocess.Popen([py, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "print('ignoring', flush=True); time.sleep(300)"], process_group=0, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
group.stdout.readline()  # its SIGTERM handler is set
with open(sys.argv[1], "w") as f:
    f.write("%d %d\n" % (session.pid, group.pid))
print("children started", flush=True)
time.sleep(300)
'''


def _interrupt_when_ready(pids_file: str, sig: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (os.path.exists(pids_file) and open(pids_file).read().endswith("\n")):
        time.sleep(0.05)
    os.kill(os.getpid(), sig)  # handled by stream's handler in the main thread, as a terminal's Ctrl-C is


def test_an_interrupted_run_leaves_no_process_of_its_tree_alive(tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "REAP_WAIT_S", 1.0)
    pids_file = str(tmp_path / "pids")
    sender = threading.Thread(target=_interrupt_when_ready, args=(pids_file, signal.SIGINT), daemon=True)
    sender.start()
    outcome = stream.run([sys.executable, "-c", _COMMAND, pids_file], {}, str(tmp_path / "launch.log"),
                         Console(file=io.StringIO()), cwd=str(tmp_path))
    sender.join()
    session_pid, group_pid = (int(x) for x in open(pids_file).read().split())
    assert outcome.interrupted == signal.SIGINT
    for pid in (session_pid, group_pid):  # zombies of an exited parent are init's to reap: count them as gone
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid
    log = (tmp_path / "launch.log").read_text()
    assert "children started" in log and "[chexstack] interrupted by SIGINT" in log and "still alive" not in log


def test_reap_signals_only_what_is_still_running(tmp_path):
    """reap: a process that ends alone is not signalled; one that ignores SIGTERM gets SIGKILL; [] is returned."""
    import subprocess
    ends = subprocess.Popen([sys.executable, "-c", "pass"])
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); print(1, flush=True); time.sleep(300)"], stdout=subprocess.PIPE)
    stubborn.stdout.readline()
    tree = [psutil.Process(ends.pid), psutil.Process(stubborn.pid)]
    ends.wait()
    assert stream.reap(tree, wait_s=0.5) == []
    assert not psutil.pid_exists(stubborn.pid)  # reap waited for it (psutil reaps a child of ours)
    stubborn.stdout.close()
