"""Steps of the runs on the Slurm test cluster that several cluster-lane modules share: the small training run's
arguments, the trainer ranks on a host, killing chex2's ranks and the bounded end that must follow, and waiting
for an epoch's commit."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from tests.lib.paths import SAMPLE
from tests.lib.runs import FAST_MODEL

SAMPLE_ARGS = ("--images", str(SAMPLE / "images-64"), "--labels", str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"),
               *FAST_MODEL, "--image-size", "32", "--batch-size", "64", "--val-fraction", "0.2",
               "--test-fraction", "0")


def ranks_on(host: str) -> list[int]:
    """Process ids of the trainer ranks running on ``host`` (its network namespace)."""
    pids = subprocess.run(["ip", "netns", "pids", host], capture_output=True, text=True).stdout.split()
    found = []
    for pid in pids:
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if b"-m\0trainer\0" in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def kill_chex2_and_expect_a_bounded_end(proc) -> str:
    """SIGKILL every trainer rank on chex2; the job (``proc``: invoke train --submit) must end within 3 minutes,
    exit 1, naming chex2's rank and SIGKILL, the Slurm job FAILED. Kills ``proc`` if it is still running. Returns
    ``proc``'s output."""
    import signal
    import time

    try:
        killed = ranks_on("chex2")
        assert killed, "no trainer rank on chex2"
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        text, _ = proc.communicate(timeout=180)
        assert time.monotonic() - killed_at < 180
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, text
    assert re.search(r"rank [23] on host chex2 exited first, with code 137 \(SIGKILL\)", text), text
    assert re.search(r"Slurm job \d+ FAILED on chex\[1-2\]", text), text
    return text


def when_epoch_committed(out, epoch: int, proc) -> str:
    """The Slurm job id, once ``out``'s checkpoint/state.json commits ``epoch`` (the trainer's commit record)."""
    import time

    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        state = out / "checkpoint" / "state.json"
        if state.exists() and json.loads(state.read_text() or "{}").get("epoch") == epoch:
            logs = sorted(out.glob("slurm-*.out"))
            return re.match(r"slurm-(\d+)\.out", logs[0].name).group(1)
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.5)
    pytest.fail("epoch %d was not committed within 10 minutes" % epoch)
