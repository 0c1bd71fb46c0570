"""The model: 14 sigmoid outputs, local backbone weights (nothing downloaded), clear errors."""
from __future__ import annotations

import numpy as np
import pytest

from trainer import model
from trainer.errors import TrainerError


def test_local_backbone_weights_are_loaded(tmp_path):
    import tensorflow as tf
    source = tf.keras.applications.ResNet50(include_top=False, weights=None, input_shape=(32, 32, 3), pooling="avg")
    path = tmp_path / "resnet50_notop.h5"
    source.save_weights(str(path))
    net = model.build("resnet50", 32, weights=str(path))
    assert net.output_shape == (None, 14) and net.input_shape == (None, 32, 32, 1)
    backbone = next(layer for layer in net.layers if isinstance(layer, tf.keras.Model))
    assert all(np.array_equal(a, b) for a, b in zip(backbone.get_weights(), source.get_weights()))
    assert net.get_layer("pathologies").activation.__name__ == "sigmoid"


@pytest.mark.parametrize("name,weights,fragment", [
    ("vgg16", "none", "expected one of densenet121, mobilenet, resnet50"),
    ("densenet121", "/no/such.h5", "no such file")])
def test_bad_model_or_weights(name, weights, fragment):
    with pytest.raises(TrainerError, match=fragment):
        model.build(name, 64, weights)


@pytest.mark.parametrize("name", sorted(model.BACKBONES))
def test_smallest_image_size_is_keras_own(name):
    """trainer.backbones.MIN_IMAGE_SIZE is what tf.keras.applications accepts (the host checks with it)."""
    import tensorflow as tf

    from trainer.backbones import MIN_IMAGE_SIZE
    smallest = MIN_IMAGE_SIZE[name]
    assert model.build(name, smallest).input_shape == (None, smallest, smallest, 1)
    with pytest.raises(ValueError, match="at least %dx%d" % (smallest, smallest)):
        getattr(tf.keras.applications, model.BACKBONES[name])(include_top=False, weights=None,
                                                              input_shape=(smallest - 1, smallest - 1, 3))


def test_batchnorm_statistics_are_recomputed_from_the_batches():
    """Precise BN: each BatchNorm layer's moving mean/variance become the image-weighted mean of the batch means
    and (biased) batch variances of its input; here the input is the normalised image itself."""
    import tensorflow as tf

    from trainer import batchnorm
    inner = tf.keras.layers.Input(shape=(4, 4, 3))
    backbone = tf.keras.models.Model(inner, tf.keras.layers.GlobalAveragePooling2D()(
        tf.keras.layers.BatchNormalization()(inner)))
    gray = tf.keras.layers.Input(shape=(4, 4, 1))
    normalise = tf.keras.layers.Conv2D(3, 1, trainable=False, name=model.NORMALISATION)
    net = tf.keras.models.Model(gray, tf.keras.layers.Dense(14)(backbone(normalise(gray))))
    kernel, bias = model.normalisation_weights("densenet121")
    normalise.set_weights([kernel, bias])
    rng = np.random.RandomState(0)
    batches = [rng.uniform(0, 255, (n, 4, 4, 1)).astype(np.float32) for n in (5, 3)]
    assert batchnorm.Statistics(net).recompute(iter(batches)) == 8
    normalised = [b * kernel.reshape(-1) + bias for b in batches]
    mean = sum(len(b) * b.mean(axis=(0, 1, 2)) for b in normalised) / 8
    var = sum(len(b) * b.var(axis=(0, 1, 2)) for b in normalised) / 8
    layer = backbone.layers[1]
    np.testing.assert_allclose(tf.keras.backend.get_value(layer.moving_mean), mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tf.keras.backend.get_value(layer.moving_variance), var, rtol=1e-4, atol=1e-6)


def test_batchnorm_moments_in_the_graph_equal_the_numpy_path():
    """Every BatchNorm layer (on the input and after convolutions) gets the moments the NumPy path computed from its
    returned input, within float32 tolerance; the last batch is shorter (tests/batchnorm_moments.py; the same check
    runs under TF 1.12 in test_trainer_legacy.py)."""
    from tests import batchnorm_moments
    result = batchnorm_moments.compare()
    assert result["count"] == 8 and result["layers"] == 3, result
    assert result["mean_error"] < 1e-4 and result["variance_error"] < 1e-4, result


def test_a_relu_saved_by_tf112_reads_back():
    """TF 1.12 saves ReLU(6.)'s arguments as ``{"type": "ndarray", "value": 6.0}`` and cannot read them back
    (tensorflow/tensorflow#22697: every MobileNet); the trainer's loads read that form and the plain one (the
    legacy test resumes a MobileNet under TF 1.12 for real)."""
    from trainer import compat

    old = {"name": "re_lu", "max_value": {"type": "ndarray", "value": 6.0},
           "negative_slope": {"type": "ndarray", "value": 0.0}, "threshold": {"type": "ndarray", "value": 0.0}}
    layer = compat.SAVED_LAYERS["ReLU"].from_config(old)
    assert float(layer.max_value) == 6.0 and float(layer.negative_slope) == 0.0 and float(layer.threshold) == 0.0
    assert float(compat.ReLU.from_config({"name": "r", "max_value": 6.0}).max_value) == 6.0
