"""Rank-0 output: human log lines and machine-readable progress events.

Only rank 0 prints (``configure(rank)`` decides); errors are printed by every rank. A progress event is one line
``@chexstack {json}`` on stdout; the host launcher (``launch/local.py``) finds it behind horovodrun's rank prefix
(``[0]<stdout>:`` with Gloo, ``[1,0]<stdout>:`` with MPI) and draws a progress bar from it.

Events (``event`` field): ``run`` (world_size, epochs, initial_epoch, steps_per_epoch, n_train, n_val; in throughput
mode also ``mode: "throughput"``, warmup_steps, timed_steps, batch_size, image_size, amp, data synthetic|real),
``epoch_begin`` (epoch, steps), ``step`` (epoch, step, steps, loss), ``epoch_end`` (epoch, loss, mean_auroc,
images_per_sec), ``test`` (mean_auroc, best_epoch, auroc, baseline_mean_auroc, difference, verdict), ``done``
(output; of a prepare also images, skipped). ``python -m trainer prepare``: ``prepare`` (images, shards,
done_shards, done_images, image_size, output), ``shard`` (shard, shards, images done, total), ``done``.
"""
import json
import sys

PREFIX = "@chexstack "

_state = {"rank": 0}


def configure(rank):
    """Set this process's Horovod rank; only rank 0 prints info, warnings and events."""
    _state["rank"] = int(rank)


def is_chief():
    return _state["rank"] == 0


def _write(stream, text):
    """Write ``text``; characters the stream's encoding lacks (a non-ASCII path under Python 3.5 in a C locale)
    become backslash escapes instead of a UnicodeEncodeError."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        text = text.encode("ascii", "backslashreplace").decode("ascii")
    stream.write(text)
    stream.flush()


def info(message):
    if is_chief():
        _write(sys.stdout, "trainer: %s\n" % message)


def warn(message):
    if is_chief():
        _write(sys.stderr, "trainer: warning: %s\n" % message)


def error(message):
    """Every rank prints its error (the launcher shows the first one)."""
    _write(sys.stderr, "trainer: error: %s\n" % message)


def emit(event, **fields):
    """Print one progress event (rank 0 only)."""
    if not is_chief():
        return
    fields["event"] = event
    _write(sys.stdout, PREFIX + json.dumps(fields, sort_keys=True) + "\n")


def parse(line):
    """The event dict in ``line`` (a raw or rank-prefixed output line), or None if it holds none."""
    at = line.find(PREFIX)
    if at < 0:
        return None
    try:
        value = json.loads(line[at + len(PREFIX):])
    except ValueError:
        return None
    return value if isinstance(value, dict) and "event" in value else None
