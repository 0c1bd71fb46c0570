"""The network: a tf.keras.applications backbone, global average pooling, 14 sigmoid outputs.

CheXNet (Rajpurkar et al. 2017, https://arxiv.org/abs/1711.05225, §3.2) is DenseNet-121 whose final layer is
replaced by a fully connected layer with one sigmoid output per pathology; ResNet-50 is the other common baseline
(Wang et al. 2017 used it for ChestX-ray8). Weights are random (``none``) or read from a local Keras HDF5 file of
the backbone without its top (e.g. ``densenet121_weights_tf_dim_ordering_tf_kernels_notop.h5``): nothing is
downloaded at run time — compute nodes are usually offline.
"""
import os

import tensorflow as tf

from trainer.errors import TrainerError
from trainer.labels import CLASSES

BACKBONES = {"densenet121": "DenseNet121", "resnet50": "ResNet50"}


def build(name, image_size, weights="none"):
    """Keras Model: float32 [B, image_size, image_size, 3] → float32 [B, 14] probabilities.

    The output layer is float32 even under a mixed_float16 policy (sigmoid and loss in full precision).
    """
    if name not in BACKBONES:
        raise TrainerError("--model %s: expected one of %s" % (name, ", ".join(sorted(BACKBONES))))
    if weights not in (None, "none") and not os.path.isfile(weights):
        raise TrainerError("--weights %s: no such file (a local Keras .h5 of the %s backbone without top; "
                           "nothing is downloaded)" % (weights, name))
    backbone = getattr(tf.keras.applications, BACKBONES[name])(
        include_top=False, weights=None if weights in (None, "none") else weights,
        input_shape=(image_size, image_size, 3), pooling="avg")
    outputs = tf.keras.layers.Dense(len(CLASSES), activation="sigmoid", dtype="float32",
                                    name="pathologies")(backbone.output)
    return tf.keras.models.Model(inputs=backbone.input, outputs=outputs, name="chexnet_" + name)
