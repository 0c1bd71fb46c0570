"""The network: ImageNet normalisation layer, a tf.keras.applications backbone, 14 sigmoid outputs.

CheXNet (Rajpurkar et al. 2017, https://arxiv.org/abs/1711.05225, §3.2) is DenseNet-121 whose final layer is
replaced by a fully connected layer with one sigmoid output per pathology; ResNet-50 is the other common baseline
(Wang et al. 2017 used it for ChestX-ray8). Weights are random (``none``) or read from a local Keras HDF5 file of
the backbone without its top (e.g. ``densenet121_weights_tf_dim_ordering_tf_kernels_notop.h5``): nothing is
downloaded at run time — compute nodes are usually offline.

Input is the pipeline's gray image (float32 [B, S, S, 1], 0..255). The first layer, ``imagenet_normalisation``,
is a frozen 1x1 convolution with 3 filters: channel c = x / (255·std_c) − mean_c / std_c — the gray value copied
to R, G, B (as CheXNet feeds X-rays to an ImageNet network) and normalised with the ImageNet statistics that
"torch"-mode ImageNet weights, DenseNet-121's included, expect (Keras ``imagenet_utils.preprocess_input``, mode
"torch"). A built-in layer, so the HDF5 file loads in every Keras without custom objects. The backbone is a
nested model with its own 3-channel input, so a backbone weights file loads into it unchanged.
"""
import os

import numpy as np
import tensorflow as tf

from trainer.backbones import BACKBONES
from trainer.errors import TrainerError
from trainer.labels import CLASSES

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # RGB, on 0..1 pixels
IMAGENET_STD = (0.229, 0.224, 0.225)
NORMALISATION = "imagenet_normalisation"


def normalisation_weights():
    """(kernel [1, 1, 1, 3], bias [3]) of the normalisation layer."""
    mean, std = np.array(IMAGENET_MEAN, np.float32), np.array(IMAGENET_STD, np.float32)
    return (1.0 / (255.0 * std)).reshape(1, 1, 1, 3), -mean / std


def build(name, image_size, weights="none"):
    """Keras Model: float32 [B, image_size, image_size, 1] (0..255) → float32 [B, 14] probabilities.

    The normalisation and output layers are float32 even under a mixed_float16 policy.
    """
    if name not in BACKBONES:
        raise TrainerError("--model %s: expected one of %s" % (name, ", ".join(sorted(BACKBONES))))
    if weights not in (None, "none") and not os.path.isfile(weights):
        raise TrainerError("--weights %s: no such file (a local Keras .h5 of the %s backbone without top; "
                           "nothing is downloaded)" % (weights, name))
    gray = tf.keras.layers.Input(shape=(image_size, image_size, 1), name="gray")
    normalise = tf.keras.layers.Conv2D(3, 1, trainable=False, dtype="float32", name=NORMALISATION)
    backbone = getattr(tf.keras.applications, BACKBONES[name])(
        include_top=False, weights=None if weights in (None, "none") else weights,
        input_shape=(image_size, image_size, 3), pooling="avg")
    outputs = tf.keras.layers.Dense(len(CLASSES), activation="sigmoid", dtype="float32",
                                    name="pathologies")(backbone(normalise(gray)))
    normalise.set_weights(list(normalisation_weights()))
    return tf.keras.models.Model(inputs=gray, outputs=outputs, name="chexnet_" + name)
