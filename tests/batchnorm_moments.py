"""Precise BN's in-graph moments (``trainer.batchnorm.Statistics``) against the NumPy reference -- every BatchNorm
layer's input returned to NumPy in training mode and its mean/biased variance taken there, the trainer's path
before the moments moved into the graph -- on a small backbone with BatchNorm layers on its input and after
convolutions, batches of 5 and 3 images (the short last batch). Imported by tests/test_trainer_model.py (TF 2.x);
run as a script under .venv-tf112 by tests/test_trainer_legacy.py (TF 1.12), printing the JSON result."""
import json

import numpy as np
import tensorflow as tf

from trainer import batchnorm, compat, model

LAYERS = tf.keras.layers


def _net(size=6):
    inner = LAYERS.Input(shape=(size, size, 3))
    x = LAYERS.BatchNormalization()(inner)
    x = LAYERS.Conv2D(4, 3, padding="same")(x)
    x = LAYERS.Activation("relu")(LAYERS.BatchNormalization()(x))
    x = LAYERS.Conv2D(5, 1)(x)
    x = LAYERS.BatchNormalization(axis=-1)(x)
    backbone = tf.keras.models.Model(inner, LAYERS.GlobalAveragePooling2D()(x))
    gray = LAYERS.Input(shape=(size, size, 1))
    normalise = LAYERS.Conv2D(3, 1, trainable=False, name=model.NORMALISATION)
    net = tf.keras.models.Model(gray, LAYERS.Dense(14)(backbone(normalise(gray))))
    normalise.set_weights(list(model.normalisation_weights("densenet121")))
    return net, backbone


def _reference(net, backbone, batches):
    """The NumPy path: (mean, variance) float64 per BatchNorm layer, image-weighted over ``batches``."""
    layers = [l for l in backbone.layers if isinstance(l, LAYERS.BatchNormalization)]
    probe = tf.keras.models.Model(backbone.inputs, [l.input for l in layers])
    kernel, bias = net.get_layer(model.NORMALISATION).get_weights()
    if compat.executing_eagerly():
        def run(x):
            return [np.asarray(o) for o in probe(x, training=True)]
    else:
        function = tf.keras.backend.function(list(probe.inputs) + [tf.keras.backend.learning_phase()],
                                             [tf.identity(o) for o in probe.outputs])

        def run(x):
            return function([x, 1])
    sums = [[0.0, 0.0] for _ in layers]
    for images in batches:
        inputs = run((images * kernel.reshape(-1) + bias).astype(np.float32))
        for total, value in zip(sums, inputs):
            value = np.asarray(value, np.float64)
            total[0] = total[0] + len(images) * value.mean(axis=(0, 1, 2))
            total[1] = total[1] + len(images) * value.var(axis=(0, 1, 2))
    count = sum(len(b) for b in batches)
    return [(m / count, v / count) for m, v in sums], layers


def compare():
    """{"count": images used, "layers": BatchNorm layers, "mean_error"/"variance_error": the largest absolute
    difference divided by (1e-3 + |reference|), over every channel of every layer}."""
    net, backbone = _net()
    rng = np.random.RandomState(0)
    batches = [rng.uniform(0, 255, (n, 6, 6, 1)).astype(np.float32) for n in (5, 3)]
    expected, layers = _reference(net, backbone, batches)
    count = batchnorm.Statistics(net).recompute(iter(batches))
    get = tf.keras.backend.get_value
    errors = [[], []]
    for layer, (mean, var) in zip(layers, expected):
        errors[0].append(np.max(np.abs(get(layer.moving_mean) - mean) / (1e-3 + np.abs(mean))))
        errors[1].append(np.max(np.abs(get(layer.moving_variance) - var) / (1e-3 + np.abs(var))))
    return {"count": count, "layers": len(layers), "mean_error": float(max(errors[0])),
            "variance_error": float(max(errors[1]))}


if __name__ == "__main__":
    print(json.dumps(compare()))
