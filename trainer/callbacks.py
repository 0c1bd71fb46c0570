"""Keras callbacks of our own (Horovod's are in ``runtime.horovod_callbacks``). Only the ``on_batch_*`` /
``on_epoch_*`` hooks are used: they exist from TF 1.12 to 2.15 (TF 2 routes ``on_train_batch_*`` to them)."""
import time

import numpy as np
import tensorflow as tf

from trainer import compat, events


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


class HostWindow(tf.keras.callbacks.Callback):
    """Reads this rank's cores (``trainer.hostload.Window``) at the start of the timed steps (the end of the last of
    ``warmup`` steps, or the first step's start without warm-up) and at the end of step ``total``."""

    def __init__(self, warmup, total):
        super(HostWindow, self).__init__()
        from trainer import hostload
        self.window, self.warmup, self.total, self.done = hostload.Window(), warmup, total, 0

    def on_batch_begin(self, batch, logs=None):
        if self.done == 0 and self.warmup == 0:
            self.window.start()

    def on_batch_end(self, batch, logs=None):
        self.done += 1
        if self.done == self.warmup:
            self.window.start()
        if self.done == self.total:
            self.window.end()


class InputWait(tf.keras.callbacks.Callback):
    """Each step's wait for its batch on this rank (seconds), for ``--horovod-timeline`` throughput runs.

    ``stamped(dataset)`` appends a sequential map after the stream's prefetch whose only effect is to note the
    time (``time.time()``) at which the step's iterator call receives the batch: a map after ``prefetch`` runs in
    the consumer's ``GetNext`` (with tf.data's injected prefetch off, ``compat.without_injected_prefetch``: TF 2.15
    noted 5 batches for 3 calls with it on), so the note comes once the prefetch buffer has a batch. A step's
    input wait is that time minus the step's start (``on_batch_begin``), at least 0: what the step waited for
    decoding and augmentation that the prefetch did not hide (plus the few microseconds from the step's start to
    its iterator call, and the note's own Python call under the GIL).
    """

    def __init__(self):
        super(InputWait, self).__init__()
        self.begins, self.delivered = [], []

    def stamped(self, dataset):
        def note(dummy):
            self.delivered.append(time.time())
            return dummy

        def add(inputs, labels):  # inputs: images, or (images, transforms) for a step that resizes
            tick = compat.numpy_function(note, [tf.constant(0, tf.int64)], tf.int64, stateful=True)
            with tf.control_dependencies([tick]):
                if isinstance(inputs, tuple):
                    return tuple(tf.identity(x) for x in inputs), labels
                return tf.identity(inputs), labels
        return compat.without_injected_prefetch(dataset.map(add))

    def on_batch_begin(self, batch, logs=None):
        self.begins.append(time.time())

    def waits(self):
        """[seconds] per step, in step order (as many as both the steps begun and the batches received)."""
        return [max(0.0, d - b) for b, d in zip(self.begins, self.delivered)]


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
