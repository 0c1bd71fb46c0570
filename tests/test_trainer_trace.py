"""The train step is traced once: the optimizer's slots exist before ``model.fit``'s first call
(``trainer.compat.create_optimizer_weights``), so TF 2 does not trace the step a second time without the variables
its first call created. A process of its own (``hvd.init()``, world size 1), on a small convolutional model."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.lib.paths import REPO

pytestmark = pytest.mark.slow

SCRIPT = """
import sys
import numpy as np
import tensorflow as tf
from trainer import compat, loss, runtime
hvd = compat.import_horovod()
hvd.init()
inputs = tf.keras.Input((16, 16, 3))
x = tf.keras.layers.Conv2D(4, 3)(inputs)
x = tf.keras.layers.BatchNormalization()(x)
outputs = tf.keras.layers.Dense(14, activation="sigmoid")(tf.keras.layers.GlobalAveragePooling2D()(x))
model = tf.keras.Model(inputs, outputs)
w = np.full(14, 0.5, dtype=np.float32)
if sys.argv[1] == "trainer":
    runtime.compile_model(model, hvd, 1e-3, loss.weighted_bce(w, w))
else:  # the same without the slots made first
    model.compile(optimizer=hvd.DistributedOptimizer(compat.adam(1e-3)), loss=loss.weighted_bce(w, w))
x = np.random.RandomState(0).rand(8, 16, 16, 3).astype("float32")
y = (np.random.RandomState(1).rand(8, 14) > 0.8).astype("float32")
model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
print("traces", model.train_function.experimental_get_tracing_count())
"""


def _traces(variant: str) -> int:
    run = subprocess.run([sys.executable, "-c", SCRIPT, variant], cwd=REPO, capture_output=True, text=True,
                         timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                           "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 0, run.stderr[-3000:]
    return int(run.stdout.split("traces ")[-1])


def test_the_trainers_compiled_model_traces_its_train_step_once():
    assert _traces("trainer") == 1
    assert _traces("lazy") == 2  # what it saves: Keras' lazily made slots cost a second trace
