"""N8: Keras' "`on_train_batch_end` is slow" warning, caused by Horovod's broadcast in the first batch's hook, is
dropped by a filter on the ``tensorflow`` logger — that message only (real Keras ``fit``; TF 1.x wording too)."""
from __future__ import annotations

import logging
import time
import warnings

import numpy as np

from trainer import compat


class _Records(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _fit_with_a_slow_first_batch_end():
    """``model.fit`` whose first ``on_train_batch_end`` takes 0.3 s, as Horovod's broadcast does; returns the
    tensorflow logger's messages."""
    import tensorflow as tf

    class Broadcast(tf.keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 0:
                time.sleep(0.3)

    model = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(2,))])
    model.compile(optimizer="sgd", loss="mse")
    handler = _Records()
    logger = logging.getLogger("tensorflow")
    logger.addHandler(handler)
    try:
        model.fit(np.zeros((64, 2)), np.zeros((64, 1)), batch_size=4, epochs=1, verbose=0, callbacks=[Broadcast()])
    finally:
        logger.removeHandler(handler)
    return handler.messages


def test_slow_first_batch_end_warning_is_dropped_and_only_it():
    logger = logging.getLogger("tensorflow")
    for f in [f for f in logger.filters if isinstance(f, compat._DropSlowBatchEnd)]:
        logger.removeFilter(f)
    assert any("`on_train_batch_end` is slow" in m for m in _fit_with_a_slow_first_batch_end())  # Keras warns
    compat.quiet_first_batch_broadcast_warning()
    compat.quiet_first_batch_broadcast_warning()  # idempotent
    assert sum(isinstance(f, compat._DropSlowBatchEnd) for f in logger.filters) == 1
    assert not any("is slow" in m for m in _fit_with_a_slow_first_batch_end())

    def passes(message, *args):
        return logger.filter(logging.LogRecord("tensorflow", logging.WARNING, __file__, 1, message, args, None))

    assert not passes("Method (%s) is slow compared to the batch update (%f). Check your callbacks.",
                      "on_batch_end", 0.4)  # TF 1.13 wording
    assert passes("Callback method `on_train_batch_begin` is slow compared to the batch time (batch time: 0.0010s "
                  "vs `on_train_batch_begin` time: 0.2000s). Check your callbacks.")
    assert passes("Some other warning")


def test_tf_1_12_wording_through_python_warnings_is_dropped_too():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compat.quiet_first_batch_broadcast_warning()
        warnings.warn("Method on_batch_end() is slow compared to the batch update (0.412000). Check your callbacks.")
        warnings.warn("Method on_batch_begin() is slow compared to the batch update (0.412000).")
    assert [str(w.message) for w in seen] == ["Method on_batch_begin() is slow compared to the batch update "
                                              "(0.412000)."]
