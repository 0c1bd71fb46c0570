"""tf.data input pipelines: PNG → batches of float32 [B, image_size, image_size, 1] gray values 0..255.

Per element (parallel map): read, decode as 8-bit grayscale (``channels=1``: libpng converts RGB/RGBA to
luminance and 16-bit/palette images to 8-bit gray; chest X-rays are grayscale, NIH stores a few as RGBA),
bilinear resize to ``image_size``, random horizontal flip for training; then batch and prefetch.

The gray → 3-channel expansion and the ImageNet normalisation are the model's first layer
(``trainer.model``: a fixed 1x1 convolution), i.e. they run on the accelerator: the host decodes one channel and
ships a third of the bytes. Doing them here per batch cost 12 % of the host's decode throughput
(bench/input_pipeline.py measures the pipeline against a bare PNG decode).

Sharding: each rank gets every ``size``-th example (``shard``), so shards differ by at most one example. Training
streams repeat forever, reshuffled each pass; ``model.fit(steps_per_epoch=...)`` makes every rank run the same
number of steps, so an uneven shard cannot leave one rank waiting in an allreduce. Evaluation streams are finite
and carry each example's index, so the evaluation pass can check that no row was lost or duplicated.

Decode errors: elements whose decode fails are dropped (``compat.ignore_errors``) — never a crash; before the
run, the structural check (``trainer.pngcheck``) and a full decode of every image (``trainer.decodecheck``) already
left out and named every file that fails, so only a file that changes during the run can be dropped here (the
evaluation pass names such a validation image).
"""
import numpy as np
import tensorflow as tf

from trainer import compat

def shard(items, rank, size):
    """Every ``size``-th item starting at ``rank`` (a list or numpy array)."""
    return items[rank::size]


def png_loader(image_size):
    """``path`` (string tensor) → float32 [image_size, image_size, 1], 0..255."""
    def load(path):
        image = tf.image.decode_png(compat.read_file(path), channels=1)
        return compat.resize(image, image_size)
    return load


def synthetic_loader(image_size):
    """Any key → a uniform random float32 [image_size, image_size, 1] image, 0..255 (``--data synthetic``)."""
    def load(key):
        return compat.random_uniform([image_size, image_size, 1], 255.0)
    return load


def training(keys, labels, batch_size, loader, seed):
    """Endless shuffled stream of (images [B, H, W, 1], labels float32 [B, 14]) over this rank's ``keys``."""
    parallel = compat.autotune()
    ds = tf.data.Dataset.from_tensor_slices((keys, np.asarray(labels, dtype=np.float32)))
    ds = ds.shuffle(len(keys), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.map(lambda key, y: (tf.image.random_flip_left_right(loader(key), seed=seed), y),
                num_parallel_calls=parallel)
    return compat.ignore_errors(ds).batch(batch_size).prefetch(parallel)


def evaluation(keys, indices, batch_size, loader):
    """One pass of (images [b, H, W, 1], indices int64 [b]) in order; failed decodes are dropped."""
    parallel = compat.autotune()
    ds = tf.data.Dataset.from_tensor_slices((keys, np.asarray(indices, dtype=np.int64)))
    ds = ds.map(lambda key, i: (loader(key), i), num_parallel_calls=parallel)
    return compat.ignore_errors(ds).batch(batch_size).prefetch(parallel)
