"""One run per output folder (trainer/runlock.py): the flock, the holder's record, the launcher's token, the
output folder checks. Real locks: flock conflicts between two open files even in one process."""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
import subprocess
import sys

import pytest

from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import LABELS_FILE as LABELS
from trainer import outputs, runlock
from trainer.errors import TrainerError


def test_second_lock_is_refused_with_the_holder_named(tmp_path):
    out = tmp_path / "run"
    with runlock.acquire(str(out), "invoke train --output run") as first:
        assert out.is_dir() and (out / runlock.LOCK_FILE).is_file() and first.problem is None
        with pytest.raises(runlock.OutputInUse) as err:
            runlock.acquire(str(out), "invoke train --output run")
        message = str(err.value)
        assert "--output %s is in use by another run" % out in message
        assert "pid %d on host " % os.getpid() in message and "UTC: invoke train --output run" in message
        assert "choose another --output" in message
        assert err.value.holder["token"] == first.token
    with runlock.acquire(str(out), "next") as again:  # released: the next run gets it
        assert runlock.read_holder(str(out))["command"] == "next" and again.token != first.token


def test_lock_dies_with_its_process(tmp_path):
    code = "from trainer import runlock; runlock.acquire(%r, 'child'); import os; os._exit(0)" % str(tmp_path)
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
    with runlock.acquire(str(tmp_path), "after") as lock:  # no stale lock although the child never released it
        assert lock.problem is None


def test_rank0_accepts_the_lock_its_launcher_holds(tmp_path, monkeypatch):
    with runlock.acquire(str(tmp_path), "launcher") as launcher:
        monkeypatch.setenv(runlock.TOKEN_ENV, launcher.token)
        assert runlock.acquire_unless_held_for_us(str(tmp_path), "rank 0") is None
        monkeypatch.setenv(runlock.TOKEN_ENV, "0" * 32)  # someone else's run: refused
        with pytest.raises(runlock.OutputInUse):
            runlock.acquire_unless_held_for_us(str(tmp_path), "rank 0")
        monkeypatch.delenv(runlock.TOKEN_ENV)
        with pytest.raises(runlock.OutputInUse):
            runlock.acquire_unless_held_for_us(str(tmp_path), "rank 0")
    monkeypatch.setenv(runlock.TOKEN_ENV, launcher.token)  # launcher gone: rank 0 takes the lock itself
    lock = runlock.acquire_unless_held_for_us(str(tmp_path), "rank 0")
    assert lock is not None and lock.problem is None
    lock.release()


def test_file_system_without_locks_warns_and_goes_on(tmp_path, monkeypatch):
    def no_locks(fd, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")
    monkeypatch.setattr(fcntl, "flock", no_locks)
    lock = runlock.acquire(str(tmp_path), "x")
    assert "cannot lock" in lock.problem and "make sure no other run uses it" in lock.problem


def test_output_folder_checks(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(TrainerError, match="is a file, not a folder"):
        runlock.check_output_folder(str(tmp_path / "file"))
    with pytest.raises(TrainerError, match="cannot create it, .*/file is a file"):
        runlock.check_output_folder(str(tmp_path / "file" / "sub"))
    with pytest.raises(TrainerError, match="is a file, not a folder"):
        runlock.acquire(str(tmp_path / "file"), "x")
    runlock.check_output_folder(str(tmp_path / "new" / "deeper"))  # creatable
    assert not (tmp_path / "new").exists()


@pytest.fixture
def read_only_dir(tmp_path):
    """A read-only tmpfs mount (root and mount(8) needed; skipped otherwise)."""
    target = tmp_path / "ro"
    target.mkdir()
    if not shutil.which("mount") or subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs",
                                                    str(target)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here")
    yield target
    subprocess.run(["umount", str(target)], check=True)


def test_read_only_file_system_is_a_clear_error(read_only_dir):
    with pytest.raises(TrainerError, match=r"cannot write in .*/ro \(read-only file system or no permission\)"):
        runlock.check_output_folder(str(read_only_dir / "run"))
    with pytest.raises(TrainerError, match="cannot write in"):
        runlock.acquire(str(read_only_dir), "x")


def test_stale_temp_files_are_removed(tmp_path):
    (tmp_path / "checkpoint").mkdir()
    for name in (".tmp-123-metrics.json", "checkpoint/.tmp-123-epoch-0002.h5.h5", "metrics.json"):
        (tmp_path / name).write_text("x")
    outputs.remove_stale_temp_files(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "metrics.json"]
    assert os.listdir(tmp_path / "checkpoint") == []


def test_the_lock_file_lives_as_long_as_the_lock(tmp_path):
    """A failed start (data the trainer refuses after rank 0 took the lock) left a folder holding only the lock
    file. Release removes the file, and the folder when the lock made it and nothing else is in it; a user's folder
    and a run's files stay."""
    made = tmp_path / "made"
    runlock.acquire(str(made), "x").release()
    assert not made.exists()
    given = tmp_path / "given"
    given.mkdir()
    (given / "notes.txt").write_text("keep")
    runlock.acquire(str(given), "x").release()
    assert os.listdir(given) == ["notes.txt"]
    used = tmp_path / "used"
    with runlock.acquire(str(used), "x"):
        (used / "train.log").write_text("trainer: error: ...\n")
    assert os.listdir(used) == ["train.log"]
    code = "from trainer import runlock; runlock.acquire(%r, 'killed'); import os; os._exit(0)" % str(tmp_path / "k")
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
    assert os.listdir(tmp_path / "k") == [runlock.LOCK_FILE]  # a killed run's file stays, unlocked
    with runlock.acquire(str(tmp_path / "k"), "next") as lock:
        assert runlock.read_holder(str(tmp_path / "k"))["token"] == lock.token


def test_a_lock_on_a_removed_lock_file_is_not_kept(tmp_path, monkeypatch):
    """Run B opened the lock file just before run A, having written nothing, removed it: B's flock then succeeds on
    a file no one else can see, and a run C would lock a new file beside it. B opens the path again instead."""
    out = tmp_path / "run"
    first = runlock.acquire(str(out), "A")
    stale = open(str(out / runlock.LOCK_FILE))  # B's open ...
    first.release()  # ... then A's release: the file and the folder A made are gone
    assert not out.exists()
    real_open, opened = runlock._open, []

    def b_opens(path, option, folder):
        opened.append(path)
        return stale if len(opened) == 1 else real_open(path, option, folder)

    monkeypatch.setattr(runlock, "_open", b_opens)
    with runlock.acquire(str(out), "B") as second:
        assert len(opened) == 2 and runlock.read_holder(str(out))["token"] == second.token
        monkeypatch.setattr(runlock, "_open", real_open)
        with pytest.raises(runlock.OutputInUse):
            runlock.acquire(str(out), "C")
    assert stale.closed


def _trainer(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainer", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})


def test_a_command_refusing_its_input_after_the_lock_leaves_no_trace(tmp_path):
    """``python -m trainer`` whose data rank 0 refuses after it took the output's lock (no image for any row), and
    ``python -m trainer evaluate`` of a file that is no Keras model, exit 2 and leave no folder holding only
    ``.chexstack.lock`` (a fresh user's findings); into a folder of the user's, they leave its files alone."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "Data_Entry_2017.csv").write_text(
        "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,View Position\n"
        "00000001_000.png,Cardiomegaly,0,1,58,M,PA\n")
    run = _trainer("--data", str(data), "--output", str(tmp_path / "out"))
    assert run.returncode == 2 and "trainer: error: none of the 1 rows" in run.stderr, run.stderr[-2000:]
    assert not (tmp_path / "out").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert _trainer("--data", str(data), "--output", str(tmp_path / "mine")).returncode == 2
    assert os.listdir(tmp_path / "mine") == ["notes.txt"]
    (tmp_path / "model.h5").write_text("not a model")
    run = _trainer("evaluate", "--model", str(tmp_path / "model.h5"), "--images", str(SAMPLE / "images-64"),
                   "--labels", str(LABELS), "--output", str(tmp_path / "scores"))
    assert run.returncode == 2 and "not a readable Keras model" in run.stderr, run.stderr[-2000:]
    assert not (tmp_path / "scores").exists()
