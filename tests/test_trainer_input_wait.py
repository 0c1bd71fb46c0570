"""Each step's input wait (trainer.callbacks.InputWait, throughput mode's --horovod-timeline): one note per batch the
consumer takes, never ahead of it (tf.data's injected prefetch is off), and the wait of a slow input is seen."""
from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from trainer import callbacks, compat


def test_a_note_per_batch_taken_and_a_slow_batch_waited_for():
    slow = 0.2

    def late(x):
        time.sleep(slow)
        return x

    waits = callbacks.InputWait()
    images, labels = np.zeros((8, 4, 4, 1), np.float32), np.zeros((8, 14), np.float32)
    ds = tf.data.Dataset.from_tensor_slices((images, labels)).batch(2).repeat()
    ds = ds.map(lambda x, y: (compat.numpy_function(late, [x], tf.float32), y)).prefetch(1)
    iterator = iter(waits.stamped(ds))
    for step in range(3):
        waits.on_batch_begin(step)
        next(iterator)
    assert len(waits.delivered) == 3  # not 5: nothing ran ahead of the three calls
    # no pause between the steps: every batch is made while the step waits for it (the prefetch holds 1)
    assert all(w >= slow * 0.5 for w in waits.waits()[1:]), waits.waits()


def test_the_timeline_folder_made_by_another_rank_first(tmp_path, monkeypatch):
    """Every rank points Horovod at the timeline before hvd.init: when another rank makes the output folder right
    after this rank looked for it, the rank goes on (a 2-rank study on one file system died of it:
    FileExistsError)."""
    import os

    from trainer import outputs, throughput

    out = tmp_path / "np-2"
    real = os.path.isdir

    def isdir(path):  # this rank's look: not there yet; the other rank makes it right after
        found = real(path)
        if str(path) == str(out) and not found:
            os.mkdir(out)
        return found
    monkeypatch.setattr(os.path, "isdir", isdir)
    monkeypatch.delenv("HOROVOD_TIMELINE", raising=False)
    assert throughput.start_timeline(str(out)) == str(out / outputs.TIMELINE)
    assert os.environ["HOROVOD_TIMELINE"] == str(out / outputs.TIMELINE)


def test_a_step_that_resizes_gets_its_images_and_transforms_stamped_as_they_came():
    waits = callbacks.InputWait()
    images, transforms = np.zeros((4, 8, 8, 1), np.uint8), np.ones((4, 8), np.float32)
    ds = tf.data.Dataset.from_tensor_slices(((images, transforms), np.zeros((4, 14), np.float32))).batch(2)
    (got_images, got_transforms), labels = next(iter(waits.stamped(ds)))
    assert got_images.dtype == tf.uint8 and got_images.shape == (2, 8, 8, 1)
    assert got_transforms.shape == (2, 8) and labels.shape == (2, 14) and len(waits.delivered) == 1
