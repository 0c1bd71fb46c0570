"""The network: ImageNet normalisation layer, a tf.keras.applications backbone, 14 sigmoid outputs.

CheXNet (Rajpurkar et al. 2017, https://arxiv.org/abs/1711.05225, §3.2) is DenseNet-121 whose final layer is
replaced by a fully connected layer with one sigmoid output per pathology; ResNet-50 is the other common baseline
(Wang et al. 2017 used it for ChestX-ray8). Weights are random (``none``), Keras' ImageNet weights (``imagenet``:
downloaded once into ~/.keras/models, an error naming that folder offline), or read from a local Keras HDF5 file
of the backbone without its top (e.g. ``densenet121_weights_tf_dim_ordering_tf_kernels_notop.h5``) or of a whole
chexstack model.

Input is the pipeline's gray image (float32 [B, S, S, 1], 0..255). The first layer, ``imagenet_normalisation``,
is a frozen 1x1 convolution with 3 filters: channel c = x / (255·std_c) − mean_c / std_c — the gray value copied
to R, G, B (as CheXNet feeds X-rays to an ImageNet network) and normalised with the ImageNet statistics that
"torch"-mode ImageNet weights, DenseNet-121's included, expect (Keras ``imagenet_utils.preprocess_input``, mode
"torch"); for ResNet-50, whose Keras weights come from Caffe, the "caffe" mode (BGR means subtracted, no scaling);
for MobileNet the "tf" mode (x / 127.5 − 1).
A built-in layer, so the HDF5 file loads in every Keras without custom objects. The backbone is a
nested model with its own 3-channel input, so a backbone weights file loads into it unchanged.
"""
import os

import numpy as np
import tensorflow as tf

from trainer.backbones import BACKBONES
from trainer.errors import TrainerError
from trainer.labels import CLASSES

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # RGB, on 0..1 pixels ("torch" mode)
IMAGENET_STD = (0.229, 0.224, 0.225)
CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)  # on 0..255 pixels ("caffe" mode)
NORMALISATION = "imagenet_normalisation"
#: ``--model`` name -> the ``preprocess_input`` mode its Keras ImageNet weights were trained with
#: (keras/src/applications/densenet.py: "torch"; resnet.py / resnet50: "caffe"; mobilenet.py: "tf")
PREPROCESSING = {"densenet121": "torch", "resnet50": "caffe", "mobilenet": "tf"}


def normalisation_weights(name="densenet121"):
    """(kernel [1, 1, 1, 3], bias [3]) of the normalisation layer for backbone ``name``.

    "torch": channel c = x / (255 std_c) - mean_c / std_c (RGB). "caffe": channel c = x - mean_c with channels
    in BGR order, no scaling (Keras ``imagenet_utils.preprocess_input``); for a gray image only the means differ.
    "tf": channel c = x / 127.5 - 1, to [-1, 1].
    """
    if PREPROCESSING[name] == "caffe":
        return np.ones((1, 1, 1, 3), np.float32), -np.array(CAFFE_MEAN_BGR, np.float32)
    if PREPROCESSING[name] == "tf":
        return np.full((1, 1, 1, 3), 1.0 / 127.5, np.float32), -np.ones(3, np.float32)
    mean, std = np.array(IMAGENET_MEAN, np.float32), np.array(IMAGENET_STD, np.float32)
    return (1.0 / (255.0 * std)).reshape(1, 1, 1, 3), -mean / std


def _is_full_model(path):
    """Whether the HDF5 file ``path`` holds a whole chexstack model (its ``pathologies`` layer) rather than a
    backbone without top."""
    try:
        import h5py
        with h5py.File(path, "r") as f:
            group = f["model_weights"] if "model_weights" in f else f
            names = group.attrs.get("layer_names", [])
            return any((n.decode() if isinstance(n, bytes) else n) == "pathologies" for n in names)
    except (IOError, OSError, KeyError):
        return False


def _backbone(name, image_size, weights):
    constructor = getattr(tf.keras.applications, BACKBONES[name])
    try:
        return constructor(include_top=False, weights=weights, input_shape=(image_size, image_size, 3),
                           pooling="avg")
    except Exception as e:  # Keras' get_file raises Exception("URL fetch failure on ...") offline
        if weights != "imagenet":
            raise TrainerError("--weights %s: cannot load it into the %s backbone (%s)"
                               % (weights, name, " ".join(str(e).split())))
        raise TrainerError("--weights imagenet: cannot get the %s ImageNet weights (%s). Keras downloads them once "
                           "into ~/.keras/models; on an offline node, copy that file there or pass --weights PATH "
                           "to a local .h5" % (name, " ".join(str(e).split())[:300]))


def build(name, image_size, weights="none"):
    """Keras Model: float32 [B, image_size, image_size, 1] (0..255) -> float32 [B, 14] probabilities.

    ``weights``: "none" (random), "imagenet" (Keras' ImageNet weights, downloaded once into ~/.keras/models; a
    TrainerError offline), or a local .h5: a backbone without top, or a whole chexstack model (model.h5,
    model-best.h5) whose weights are all loaded. The normalisation and output layers are float32 even under a
    mixed_float16 policy.
    """
    if name not in BACKBONES:
        raise TrainerError("--model %s: expected one of %s" % (name, ", ".join(sorted(BACKBONES))))
    weights = weights or "none"
    if weights not in ("none", "imagenet") and not os.path.isfile(weights):
        raise TrainerError("--weights %s: no such file (none, imagenet, or a local Keras .h5 of the %s backbone "
                           "without top or of a whole chexstack model)" % (weights, name))
    full = weights not in ("none", "imagenet") and _is_full_model(weights)
    gray = tf.keras.layers.Input(shape=(image_size, image_size, 1), name="gray")
    normalise = tf.keras.layers.Conv2D(3, 1, trainable=False, dtype="float32", name=NORMALISATION)
    backbone = _backbone(name, image_size, None if weights == "none" or full else weights)
    outputs = tf.keras.layers.Dense(len(CLASSES), activation="sigmoid", dtype="float32",
                                    name="pathologies")(backbone(normalise(gray)))
    normalise.set_weights(list(normalisation_weights(name)))
    model = tf.keras.models.Model(inputs=gray, outputs=outputs, name="chexnet_" + name)
    if full:
        try:
            model.load_weights(weights)
        except (ValueError, IOError, OSError) as e:
            raise TrainerError("--weights %s: a chexstack model of another backbone or image size (%s)"
                               % (weights, " ".join(str(e).split())))
    return model
