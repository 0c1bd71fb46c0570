"""The one executor of trainer commands (``launch.executor``): train, evaluate and prepare share its output lock,
process environment and supervision, and no other launch module states them again."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from chexstack.errors import ChexstackError
from launch import executor
from trainer import preflight

LAUNCH = Path(executor.__file__).parent


def _command(**kw) -> executor.Command:
    return executor.Command("cmd.log", lambda outcome: ChexstackError("failed %s" % outcome.returncode, 1), **kw)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_the_command_runs_under_the_lock_with_the_trainers_environment(tmp_path):
    out = tmp_path / "out"
    code = ("import os; print('trainer: env', os.environ.get('PYTHONUNBUFFERED'), bool(os.environ.get(%r)), "
            "os.environ.get('EXTRA'))" % preflight.TOKEN_ENV)
    outcome = executor.execute(_command(), _python(code), {"EXTRA": "x"}, str(out), cwd=str(tmp_path))
    assert outcome.returncode == 0
    assert "trainer: env 1 True x" in (out / "cmd.log").read_text()  # the lock's token reached the process
    assert not (out / ".chexstack.lock").exists()  # released


def test_a_refusal_it_takes_back_leaves_nothing(tmp_path):
    out = tmp_path / "new"
    refuse = _python("import sys; print('trainer: error: no labelled image'); sys.exit(2)")
    with pytest.raises(ChexstackError) as e:
        executor.execute(_command(takes_back=executor.always), refuse, {}, str(out), cwd=str(tmp_path))
    assert str(e.value) == "no labelled image" and e.value.exit_code == 2
    assert not out.exists()  # the log's lines taken back, the folder the lock made removed


def test_a_refusal_it_keeps_is_the_commands_failure_and_keeps_the_log(tmp_path):
    out = tmp_path / "kept"
    refuse = _python("import sys; print('trainer: error: no'); sys.exit(2)")
    with pytest.raises(ChexstackError) as e:
        executor.execute(_command(), refuse, {}, str(out), cwd=str(tmp_path))
    assert str(e.value) == "failed 2" and "trainer: error: no" in (out / "cmd.log").read_text()


def test_a_folder_in_use_is_refused_before_anything_runs(tmp_path):
    out = tmp_path / "busy"
    with preflight.acquire(str(out), "another run"):
        with pytest.raises(ChexstackError) as e:
            executor.execute(_command(), _python("print('ran')"), {}, str(out), cwd=str(tmp_path))
    assert "in use by another run" in str(e.value) and e.value.exit_code == 2
    assert not (out / "cmd.log").exists()


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            names.add("%s.%s" % (getattr(node.func.value, "id", "?"), node.func.attr))
        if isinstance(node, ast.Constant) and node.value in ("PYTHONUNBUFFERED", "TF_CPP_MIN_LOG_LEVEL"):
            names.add(node.value)
    return names


def test_only_the_executor_locks_supervises_and_states_the_environment():
    """D11/D12 of architecture review 3: evaluate, prepare and local each took the lock, ran ``stream.run`` and
    stated ``ENV``; now only ``launch/executor.py`` does (a container's ranks get its TF log level by name)."""
    for path in sorted(LAUNCH.glob("*.py")):
        if path.name == "executor.py":
            continue
        found = _calls(path) & {"preflight.acquire", "stream.run", "PYTHONUNBUFFERED", "TF_CPP_MIN_LOG_LEVEL"}
        if path.name == "container.py":
            found -= {"TF_CPP_MIN_LOG_LEVEL"}
        assert not found, (path.name, found)
