"""Signals held back while rank 0 commits an epoch.

An epoch ends on rank 0 with three writes: ``metrics.json``, ``predictions.csv``, then the checkpoint (whose
``state.json`` is the commit record). A SIGTERM or SIGINT between them (the launcher's Ctrl-C, a scheduler's kill:
horovodrun passes SIGTERM to every rank) would leave ``metrics.json`` one epoch ahead of the checkpoint. Inside
``held(...)`` such a signal is recorded and delivered again, with the handler it would have met, once the block has
ended: the epoch's files are then all written or none. SIGKILL cannot be held; resume still repeats no epoch (the
history is cut at the checkpoint's epoch).
"""
import contextlib
import os
import signal
import threading

HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held(signals=HELD):
    """Defer ``signals`` for the ``with`` block (main thread only: elsewhere Python cannot install handlers, and
    the block runs unguarded). The first deferred signal is re-sent to this process when the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    previous = {}

    def record(signum, frame):
        if not caught:
            caught.append(signum)

    for sig in signals:
        previous[sig] = signal.signal(sig, record)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            os.kill(os.getpid(), caught[0])
