"""The antialiased resize of a full-size ChestX-ray14 PNG as two small matrix products: ``compat.resize``'s pixels
(within ``MAX_DIFFERENCE``) at a fraction of its cost.

``tf.image.resize(image, [S, S], antialias=True)`` (TF >= 2.0; the op ``ScaleAndTranslate``) is a separable linear
map: out = A X Aᵀ, where row j of A [S, N] holds the triangle kernel widened by the scale N / S, centred on
(j + 1/2) N / S, over the input pixel centres i + 1/2, normalised to sum 1 over the pixels inside the image
(``ComputeSpansCore`` in tensorflow/core/kernels/image/scale_and_translate_op.cc:
https://github.com/tensorflow/tensorflow/blob/v2.15.0/tensorflow/core/kernels/image/scale_and_translate_op.cc).
That op walks every output pixel's span one weight at a time; here the same weights are applied as matrix
products. With g = gcd(N, S), A is periodic: every block of N / g input pixels feeds S / g outputs, which also
reach a few pixels into the two neighbouring blocks. So each pass is one batched product of [g, S/g, N/g] weights
with the image's blocks of rows plus two thin products for the neighbours' edge rows: about 7 M multiply-adds
for 1024 -> 224, where a dense A would take 235 M, and no gather or copy of the full-size image beyond one cast
to float32.

It applies to square images of ``SOURCE_SIDE`` pixels (every ChestX-ray14 PNG as NIH releases it: "1024 x 1024"
in the data set's README_CHESTXRAY.pdf, https://nihcc.app.box.com/v/ChestXray-NIHCC) shrunk to a side S whose
blocks are at most ``MAX_BLOCK`` pixels (224, 256, 320, 512, 64, ... ; not 299, whose g is 1), and only where
``compat.resize`` is the antialiased bilinear resize (TF >= 2.0; TF 1.x keeps its AREA resize). Any other image
takes ``compat.resize`` itself, in the same graph (``tf.cond`` on the decoded shape).

The float32 sums run in another order than the op's: the pixels differ by at most ``MAX_DIFFERENCE`` grey levels
(tests/test_trainer_data.py checks it on the sample's 1024 x 1024 PNGs at several sizes; seen: 0.0015).
"""
import math

import numpy as np
import tensorflow as tf

from trainer import compat

#: the side of every ChestX-ray14 PNG, in pixels (NIH's README_CHESTXRAY.pdf)
SOURCE_SIDE = 1024
#: the largest block of input pixels the blocked products take (beyond it A is nearly dense: compat.resize)
MAX_BLOCK = 64
#: |blocked - compat.resize| per pixel, in grey levels (float32 sums in another order)
MAX_DIFFERENCE = 0.01


def weights(n, s):
    """float64 [s, n]: A, the antialiased (triangle) resize of ``n`` pixels to ``s`` as ScaleAndTranslate weighs
    them (row j: output j's weights over the input pixels, summing to 1)."""
    inverse = float(n) / s
    kernel_scale = max(inverse, 1.0)  # widened only when shrinking
    centres = (np.arange(s) + 0.5) * inverse
    distance = np.arange(n)[None, :] + 0.5 - centres[:, None]
    a = np.maximum(0.0, 1.0 - np.abs(distance / kernel_scale))
    return a / a.sum(axis=1, keepdims=True)


class Blocks(object):
    """A of ``n`` -> ``s`` cut into its periodic blocks: ``count`` (g) blocks of ``block`` input pixels feeding
    ``outputs`` pixels each; float32 ``own`` [g, s/g, block] (a block's weights on its own rows), ``before``
    [g, s/g, reach_before] (on the last rows of the block before), ``after`` [g, s/g, reach_after] (on the first
    rows of the block after)."""

    def __init__(self, n, s):
        a = weights(n, s)
        self.count = math.gcd(n, s)
        self.block, self.outputs = n // self.count, s // self.count
        self.n, self.s = n, s
        per = a.reshape(self.count, self.outputs, n)
        own, before, after = [], [], []
        for b in range(self.count):
            lo, hi = b * self.block, (b + 1) * self.block
            own.append(per[b, :, lo:hi])
            before.append(per[b, :, lo - self.block:lo] if b else np.zeros((self.outputs, self.block)))
            after.append(per[b, :, hi:hi + self.block] if b < self.count - 1 else np.zeros((self.outputs, self.block)))
        reached = sum(float(np.sum(x)) for x in (own, before, after))
        self.fits = abs(reached - s) < 1e-6 * s  # no weight beyond the two neighbouring blocks
        used_before = np.nonzero(np.any(before, axis=(0, 1)))[0]
        used_after = np.nonzero(np.any(after, axis=(0, 1)))[0]
        self.reach_before = int(self.block - used_before.min()) if used_before.size else 0
        self.reach_after = int(used_after.max() + 1) if used_after.size else 0
        self.own = np.asarray(own, np.float32)
        self.before = np.asarray(before, np.float32)[:, :, self.block - self.reach_before:]
        self.after = np.asarray(after, np.float32)[:, :, :self.reach_after]

    def apply(self, x):
        """float32 [n, c] -> [s, c]: A x, by blocks of rows."""
        c = tf.shape(x)[1]
        rows = tf.reshape(x, [self.count, self.block, c])
        y = tf.matmul(tf.constant(self.own), rows)
        if self.reach_before:
            tails = tf.pad(rows[:-1, self.block - self.reach_before:, :], [[1, 0], [0, 0], [0, 0]])
            y = y + tf.matmul(tf.constant(self.before), tails)
        if self.reach_after:
            heads = tf.pad(rows[1:, :self.reach_after, :], [[0, 1], [0, 0], [0, 0]])
            y = y + tf.matmul(tf.constant(self.after), heads)
        return tf.reshape(y, [self.s, c])


def blocks_for(n, s):
    """The Blocks of ``n`` -> ``s`` when the blocked products apply (here: this TensorFlow resizes antialiased,
    ``s`` < ``n``, blocks of at most ``MAX_BLOCK`` pixels that reach only their neighbours), else None."""
    if not compat.antialias_resize() or s >= n or n // math.gcd(n, s) > MAX_BLOCK:
        return None
    blocks = Blocks(n, s)
    return blocks if blocks.fits else None


def blocked(image, blocks):
    """uint8 (or any number type) [n, n, 1] -> float32 [s, s, 1]: A X Aᵀ of the one channel."""
    x = tf.cast(image[:, :, 0], tf.float32)
    y = blocks.apply(tf.transpose(blocks.apply(x)))  # columns, then rows: [s (columns), s (rows)]
    return tf.reshape(tf.transpose(y), [blocks.s, blocks.s, 1])


def shrinker(image_size, source_side=SOURCE_SIDE):
    """``image`` ([H, W, 1] tensor, any number type) -> float32 [image_size, image_size, 1]: ``compat.resize``'s
    pixels, by the blocked products when the image is ``source_side`` square (decided in the graph, per image)."""
    blocks = blocks_for(source_side, image_size)
    if blocks is None:
        return lambda image: compat.resize(image, image_size)

    def shrink(image):
        shape = tf.shape(image)
        square = tf.logical_and(tf.equal(shape[0], source_side), tf.equal(shape[1], source_side))
        out = tf.cond(square, lambda: blocked(image, blocks), lambda: compat.resize(image, image_size))
        out.set_shape([image_size, image_size, 1])
        return out
    return shrink
