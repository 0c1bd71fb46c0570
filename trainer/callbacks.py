"""Keras callbacks of our own (Horovod's are in ``runtime.horovod_callbacks``). Only the ``on_batch_*`` /
``on_epoch_*`` hooks are used: they exist from TF 1.12 to 2.15 (TF 2 routes ``on_train_batch_*`` to them)."""
import time

import numpy as np
import tensorflow as tf

from trainer import events


class StepTimer(tf.keras.callbacks.Callback):
    """Wall time of every training step of the current epoch on this rank (seconds).

    Step k's time is the gap between the ends of steps k-1 and k (input waits included); step 0 is timed from
    its own start.
    """

    def __init__(self):
        super(StepTimer, self).__init__()
        self.start = None
        self.ends = []

    def on_epoch_begin(self, epoch, logs=None):
        self.start, self.ends = None, []

    def on_batch_begin(self, batch, logs=None):
        if self.start is None:
            self.start = time.time()

    def on_batch_end(self, batch, logs=None):
        self.ends.append(time.time())

    def step_times(self):
        if not self.ends:
            return []
        return [self.ends[0] - self.start] + list(np.diff(self.ends))

    def images_per_sec(self, batch_size):
        """Images/s of this rank over the epoch, leaving out step 0 (graph tracing, pipeline fill)."""
        if len(self.ends) >= 2:
            return (len(self.ends) - 1) * batch_size / max(self.ends[-1] - self.ends[0], 1e-9)
        if self.ends:
            return batch_size / max(self.ends[0] - self.start, 1e-9)
        return 0.0


class Progress(tf.keras.callbacks.Callback):
    """Rank 0's ``epoch_begin`` and ``step`` events (at most one step event per ``every_s`` seconds, plus the
    last step of each epoch)."""

    def __init__(self, steps, every_s=0.5):
        super(Progress, self).__init__()
        self.steps = steps
        self.every_s = every_s
        self.epoch = 0
        self.last = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch + 1
        self.last = 0.0
        events.emit("epoch_begin", epoch=self.epoch, steps=self.steps)

    def on_batch_end(self, batch, logs=None):
        now = time.time()
        if now - self.last >= self.every_s or batch + 1 == self.steps:
            self.last = now
            loss = (logs or {}).get("loss")
            events.emit("step", epoch=self.epoch, step=batch + 1, steps=self.steps,
                        loss=None if loss is None else float(loss))
