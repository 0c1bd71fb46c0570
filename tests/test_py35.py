"""Code that runs inside the stack images must be valid Python 3.5 (NGC 19.06 ships Python 3.5.2): vermin with
target 3.5 over trainer/, facts/probe.py, facts/cuda_probe.py (which runs on nodes and in images too) and
facts/horovod_key.py (run in the devel stages), and ASCII messages (no non-ASCII string outside docstrings)."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from tests.lib.paths import REPO

IN_IMAGE = ["trainer", "facts/probe.py", "facts/cuda_probe.py", "facts/horovod_key.py"]


def test_vermin_target_35_reports_no_violation():
    vermin = shutil.which("vermin") or str(Path(sys.executable).parent / "vermin")
    targets = [t for t in IN_IMAGE if (REPO / t).exists()]
    result = subprocess.run([vermin, "-t=3.5-", "--no-tips", "--violations", *targets], cwd=REPO,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Minimum required versions" in result.stdout or result.stdout.strip() == "", result.stdout


def _docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                yield first.value


def test_trainer_messages_are_ascii():
    offenders = []
    for path in sorted((REPO / "trainer").glob("*.py")):
        tree = ast.parse(path.read_text())
        docs = {id(d) for d in _docstrings(tree)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if not node.value.isascii():
                    offenders.append("%s:%d %r" % (path.name, node.lineno, node.value[:40]))
    assert not offenders, offenders
