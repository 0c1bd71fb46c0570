"""trainer.signals.held: a SIGTERM/SIGINT during an epoch's commit is delivered after it, never in the middle."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from tests.lib.paths import REPO


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_a_signal_in_the_block_arrives_after_every_write(tmp_path):
    """SIGTERM sent between the first and the last write: all writes happen, then the process dies of SIGTERM."""
    run = _run("""
        import os, signal
        from trainer import signals
        with signals.held():
            open(%r, "w").write("metrics")
            os.kill(os.getpid(), signal.SIGTERM)
            open(%r, "w").write("checkpoint")
        open(%r, "w").write("after")
    """ % (str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "c")))
    assert run.returncode == -signal.SIGTERM, run.stderr
    assert (tmp_path / "a").exists() and (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_ctrl_c_becomes_keyboard_interrupt_after_the_block_and_handlers_are_restored():
    run = _run("""
        import os, signal
        from trainer import signals
        # Python's Ctrl-C handler, also where this process came in with SIGINT ignored (started by a background job
        # of a non-interactive shell, which ignores SIGINT: held() then rightly keeps it ignored)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        before = signal.getsignal(signal.SIGINT)
        try:
            with signals.held():
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGTERM)  # only the first is delivered again
                print("block done")
        except KeyboardInterrupt:
            print("interrupted after the block")
        print(signal.getsignal(signal.SIGINT) is before, signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
    """)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:3] == ["block done", "interrupted after the block", "True True"]


def test_no_signal_no_change():
    from trainer import signals
    before = signal.getsignal(signal.SIGTERM)
    with signals.held():
        pass
    assert signal.getsignal(signal.SIGTERM) is before and os.getpid()
