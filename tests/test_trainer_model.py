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


@pytest.mark.parametrize("name,weights,fragment", [("vgg16", "none", "expected one of densenet121, resnet50"),
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
