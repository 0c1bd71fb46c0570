"""Run a command with a folder on a read-only file system (EROFS), as the reviewer's read-only --output had.

A private mount namespace (``unshare -m``) bind-mounts the folder onto itself read-only, so only the command sees
it read-only; skips where mount namespaces cannot be made (not root, no unshare)."""
from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.lib.paths import REPO


def run_with_read_only(folder: Path, argv: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare, "-m", "true"], capture_output=True) if unshare else None
    if probe is None or probe.returncode != 0:
        pytest.skip("cannot create a mount namespace here (unshare -m)")
    f = shlex.quote(str(folder))
    script = "mount --bind %s %s && mount -o remount,bind,ro %s && exec %s" % (f, f, f, shlex.join(argv))
    return subprocess.run([unshare, "-m", "sh", "-c", script], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)
