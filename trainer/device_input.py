"""Resize and augmentation inside the training step, on the accelerator (``--input-resize device``).

Why: the host's cores are the input's bound. One core decodes a 1024² ChestX-ray14 PNG in about 4.2 ms; the
antialiased resize to 224² and the projective augmentation cost another ~2.2 ms on the same core
(bench/ratios/input_pipeline.py, 2026-12-06), so the host-resized pipeline delivers 0.65 of a bare decode. Here the
host only reads, decodes and batches (uint8, full size: ``pipeline.source_loader``): 0.97 of a bare decode,
measured the same way; the step does the rest on the device the model runs on:

- the resize as two matrix products, ``W_h · X · W_wᵀ``, whose weights are ``compat.resize``'s own: each weight
  matrix is that resize applied to an identity along one axis (the resize is separable and linear; at scale 1 along
  the other axis its bilinear kernel sampled at pixel centres is exactly the identity). TensorFlow's antialiased
  resize (``ScaleAndTranslate``) has no GPU kernel; a matrix product has. Cost: 2·B·H·W·S + 2·B·S·H·S FLOP, i.e.
  0.57 GFLOP an image from 1024² to 224²: about 1.4 TFLOP/s at 2,400 images/s, a few per cent of an A100's or
  H100's FP32 rate (and less with TF32);
- then the same projective transforms (``compat.transform_images``, ImageProjectiveTransformV2, which has a GPU
  kernel) with the same per-image parameters (``trainer.order``), at the model's size.

The pixels match the host path's to float32 rounding on a CPU (tests/test_trainer_device_input.py states the bound);
on an Ampere or newer GPU, TensorFlow runs float32 matrix products in TF32 (10-bit mantissa) by default, which puts
them at most 0.13 grey level (of 0..255; mean 0.03) apart, emulated on a CPU (tests/test_trainer_device_input.py;
not measured on a GPU) — below the prepared copy's uint8 rounding (0.5).

It takes over the model's step (Keras ``Model.train_step``, TF >= 2.2): the stream's inputs are (images uint8
[B, H, W, 1], transforms float32 [B, 8]) and ``install`` turns them into the model's input before the usual step.
The saved model, validation, the test split and ``evaluate`` are unchanged: they see host-resized images.

``auto`` (the default) picks the device path when the ranks train on GPUs, the data are PNGs (a prepared copy and
synthetic images are at the model's size already) and this Keras has ``train_step``; else the host path. Asking for
``device`` where it cannot run is a TrainerError, never a silent fallback. The batches stack images of one size:
the training PNGs' headers give the most common one, and only when some differ does the host bring those to it
(``pipeline.source_loader``); the run record counts them.
"""
import collections

import numpy as np
import tensorflow as tf

from trainer import compat, pngcheck
from trainer.cli import INPUT_RESIZE, already_sized
from trainer.errors import TrainerError

#: The choice for a run: ``mode`` "host" or "device", ``reason`` (a phrase for the run record), and for "device"
#: the training images' most common (height, width) ``source`` and how many ``others`` have another size.
Choice = collections.namedtuple("Choice", "mode reason source others")


def has_train_step():
    """Whether this Keras lets a model's step be replaced (``Model.train_step``: TF >= 2.2)."""
    return hasattr(tf.keras.Model, "train_step")


def choose(requested, kind, paths, device):
    """The Choice for ``--input-resize requested`` (one of ``trainer.cli.INPUT_RESIZE``).

    ``kind``: "png", "prepared" or "synthetic" (the run's data); ``paths``: the training PNGs, whose headers give
    their sizes (``pngcheck.sizes``: 33 bytes a file, read only when the step is to resize); ``device``: "GPU" or
    "CPU" (the ranks'). TrainerError when ``device`` was asked for and cannot be had.
    """
    if requested not in INPUT_RESIZE:
        raise TrainerError("--input-resize %s: expected one of %s" % (requested, ", ".join(INPUT_RESIZE)))
    if requested == "host":
        return Choice("host", "asked for (--input-resize host)", None, 0)
    cannot = None
    if kind != "png":
        cannot = already_sized(kind)
    elif not has_train_step():
        cannot = "TensorFlow %s's Keras has no Model.train_step to take it over (TF >= 2.2)" % compat.tf_version()
    elif requested == "auto" and device != "GPU":
        return Choice("host", "the ranks train on the CPU: the resize would cost the same cores", None, 0)
    found = collections.Counter() if cannot else pngcheck.sizes(paths)
    if not cannot and not found:
        cannot = "none of the %d training images has a readable PNG header to take its size from" % len(paths)
    if cannot:
        if requested == "device":
            raise TrainerError("--input-resize device: %s; use --input-resize host or auto" % cannot)
        return Choice("host", cannot, None, 0)
    source, count = found.most_common(1)[0]
    reason = "asked for (--input-resize device)" if requested == "device" else "the ranks train on GPUs"
    return Choice("device", reason, source, len(paths) - count)


def resize_weights(source, size):
    """float32 [size, source]: row s holds the weight ``compat.resize`` gives each of ``source`` pixels along one
    axis for output pixel s (eager TensorFlow)."""
    identity = np.eye(source, dtype=np.float32)[:, :, None]
    return np.asarray(compat.resize(identity, (size, source)))[:, :, 0]


class Resize(object):
    """The antialiased resize of a batch, as two matrix products: float32 [B, H, W, 1] -> [B, S, S, 1]."""

    def __init__(self, source, size):
        height, width = source
        self.rows = tf.constant(resize_weights(height, size))     # [S, H]
        self.columns = tf.constant(resize_weights(width, size))   # [S, W]

    def __call__(self, images):
        gray = images[:, :, :, 0]
        narrow = tf.einsum("bhw,tw->bht", gray, self.columns)
        return tf.einsum("sh,bht->bst", self.rows, narrow)[:, :, :, None]


def preprocess(resize, images, transforms, augment):
    """The model's input from the stream's: uint8 [B, H, W, 1] images and float32 [B, 8] transforms -> float32
    [B, S, S, 1], 0..255, resized (``resize``: a ``Resize``) and, when ``augment``, transformed."""
    resized = resize(tf.cast(images, tf.float32))
    return compat.transform_images(resized, transforms) if augment else resized


def install(model, choice, size, augment):
    """Make ``model``'s training step take (images, transforms) batches of ``choice.source`` size and do the resize
    to ``size`` and the augmentation itself, then run the model's own step (Keras ``train_step``) on the result."""
    resize = Resize(choice.source, size)
    own_step = model.train_step

    def train_step(data):
        (images, transforms), rest = data[0], tuple(data[1:])
        return own_step((preprocess(resize, images, transforms, augment),) + rest)

    model.train_step = train_step
    model.train_function = None  # built again from the new step at the next fit
