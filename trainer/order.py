"""Which training rows each rank sees in each step of epoch ``e``, and how each is augmented: a function of
(seed, e) only.

So a run resumed after epoch k replays epochs k+1... exactly as the uninterrupted run would (the order never
depends on how many epochs this process already ran), and every rank derives the same plan without talking to
the others.

Epoch ``e`` (0-based): a permutation of the N training rows drawn from ``numpy.random.RandomState([seed, e])``
(NumPy's frozen legacy stream, NEP 19) is cut into ``steps x size`` consecutive batches whose sizes differ by at
most one (``numpy.array_split``), ``steps = ceil(N / (batch_size x size))``, so every batch holds at most
``batch_size`` rows; batch ``s x size + r`` is rank r's step s. Every row is seen exactly once per epoch across
ranks, and every rank runs the same number of steps (no rank waits in an allreduce). Only when
``steps x size > N`` (``--batch-size 1`` with N not a multiple of the world size) would a batch be empty: such a
batch takes a row of the permutation's start, the one case where a row is seen twice.

Augmentation (the same stream, after the permutation): per row a horizontal flip (probability 0.5 when
``hflip``), a rotation uniform in +-``rotation`` degrees, a zoom uniform in 1 +- ``zoom`` and a shift uniform in
+-``shift`` of the image side on each axis, composed into one projective transform (8 numbers, the form of
``tf.raw_ops.ImageProjectiveTransformV2``: output pixel (x, y) samples the input at
((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1). Never a vertical flip: a chest X-ray is
not upside down. CheXNet (Rajpurkar et al. 2017, §3.1) used random horizontal flips.
"""
import math

import numpy as np

IDENTITY = np.array([1, 0, 0, 0, 1, 0, 0, 0], dtype=np.float32)


class Augmentation(object):
    """Ranges of the random transform: ``rotation`` (degrees), ``shift`` and ``zoom`` (fractions), ``hflip``."""

    def __init__(self, rotation=0.0, shift=0.0, zoom=0.0, hflip=False):
        self.rotation, self.shift, self.zoom, self.hflip = float(rotation), float(shift), float(zoom), bool(hflip)

    def active(self):
        return bool(self.rotation or self.shift or self.zoom or self.hflip)


def steps_per_epoch(n, batch_size, size):
    """ceil(N / (batch_size x size)): the steps every rank runs per epoch."""
    return int(math.ceil(float(n) / (batch_size * size)))


def _rng(seed, epoch):
    return np.random.RandomState([int(seed) % (2 ** 32), int(epoch), 0x0c4e])


def epoch_batches(n, batch_size, size, seed, epoch):
    """All batches of epoch ``epoch``: a list of ``steps x size`` int64 arrays of row indices (batch
    ``s x size + r`` is rank r's step s)."""
    rng = _rng(seed, epoch)
    perm = rng.permutation(n).astype(np.int64)
    steps = steps_per_epoch(n, batch_size, size)
    chunks = np.array_split(perm, steps * size)
    return [c if len(c) else perm[k % n:k % n + 1] for k, c in enumerate(chunks)]


def epoch_transforms(n, seed, epoch, image_size, augmentation):
    """float32 [N, 8]: row i's projective transform in epoch ``epoch`` (rows in training-split order)."""
    rng = _rng(seed, epoch)
    rng.permutation(n)  # the same stream as epoch_batches, continued
    flips = rng.rand(n) < 0.5
    angles = np.radians(rng.uniform(-1.0, 1.0, n) * augmentation.rotation)
    zooms = 1.0 + rng.uniform(-1.0, 1.0, n) * augmentation.zoom
    shifts = rng.uniform(-1.0, 1.0, (n, 2)) * augmentation.shift * image_size
    if not augmentation.active():
        return np.tile(IDENTITY, (n, 1))
    centre = (image_size - 1) / 2.0
    cos, sin = np.cos(angles) / zooms, np.sin(angles) / zooms
    sign = np.where(flips & augmentation.hflip, -1.0, 1.0)  # a horizontal flip negates the x column
    a0, a1, b0, b1 = cos * sign, -sin, sin * sign, cos
    out = np.zeros((n, 8), dtype=np.float64)
    out[:, 0], out[:, 1], out[:, 3], out[:, 4] = a0, a1, b0, b1
    out[:, 2] = centre + shifts[:, 0] - (a0 + a1) * centre
    out[:, 5] = centre + shifts[:, 1] - (b0 + b1) * centre
    return out.astype(np.float32)


def rank_stream(n, batch_size, rank, size, seed, epochs, image_size, augmentation):
    """This rank's training stream for the epochs in ``epochs`` (0-based, e.g. ``range(initial, total)``):
    (rows int64 [T], transforms float32 [T, 8], batch lengths int64 [steps x len(epochs)])."""
    rows, transforms, lengths = [], [], []
    for epoch in epochs:
        batches = epoch_batches(n, batch_size, size, seed, epoch)[rank::size]
        per_row = epoch_transforms(n, seed, epoch, image_size, augmentation)
        for batch in batches:
            rows.append(batch)
            transforms.append(per_row[batch])
            lengths.append(len(batch))
    if not rows:
        return np.zeros((0,), np.int64), np.zeros((0, 8), np.float32), np.zeros((0,), np.int64)
    return np.concatenate(rows), np.concatenate(transforms), np.array(lengths, dtype=np.int64)


def statistics_rows(n, count, seed):
    """int64 [min(n, count)], sorted: the training rows whose BatchNorm statistics are recomputed at every epoch
    end (``trainer.batchnorm``): all rows when ``n <= count``, else a sample drawn with ``seed`` alone (the same
    rows every epoch, so a resumed run recomputes what the uninterrupted one did)."""
    if n <= count:
        return np.arange(n, dtype=np.int64)
    rng = np.random.RandomState([int(seed) % (2 ** 32), 0xb17])
    return np.sort(rng.choice(n, count, replace=False)).astype(np.int64)
