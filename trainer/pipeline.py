"""tf.data input pipelines: PNG → batches of float32 [B, image_size, image_size, 1] gray values 0..255.

Per element (parallel map): read, decode as 8-bit grayscale (``channels=1``: libpng converts RGB/RGBA to
luminance and 16-bit/palette images to 8-bit gray; chest X-rays are grayscale, NIH stores a few as RGBA),
antialiased resize to ``image_size`` (``compat.resize``); for training, batches as ``trainer.order`` plans them
(epoch order and augmentation are functions of (seed, epoch)), then the batch's projective transforms (flip,
rotation, shift, zoom); prefetch.

A loader may carry ``batch`` (keys [n] → float32 [n, S, S, 1]): then a step's images are read in one call (the
prepared copy's ``trainer.prepared.loader``: one memory-mapped read per batch, not per image).

The gray → 3-channel expansion and the ImageNet normalisation are the model's first layer
(``trainer.model``: a fixed 1x1 convolution), i.e. they run on the accelerator: the host decodes one channel and
ships a third of the bytes. Doing them here per batch cost 12 % of the host's decode throughput
(bench/ratios/input_pipeline.py measures the pipeline against a bare PNG decode).

Sharding: training batches come from ``trainer.order`` (each row once per epoch across ranks, the same number of
steps on every rank, so no rank waits in an allreduce); evaluation rows are every ``size``-th (``shard``).
Evaluation streams are finite
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
    decode = png_decoder(image_size)
    return lambda path: decode(compat.read_file(path))


def png_decoder(image_size):
    """A PNG file's ``contents`` (string tensor) → what ``png_loader`` gives for its path."""
    return lambda contents: compat.resize(tf.image.decode_png(contents, channels=1), image_size)


def synthetic_loader(image_size):
    """Any key → a uniform random float32 [image_size, image_size, 1] image, 0..255 (``--data synthetic``)."""
    def load(key):
        return compat.random_uniform([image_size, image_size, 1], 255.0)
    return load


def training(keys, labels, rows, transforms, lengths, loader, augment):
    """This rank's training stream, one batch per step: (images [b, H, W, 1], labels float32 [b, 14]).

    ``keys``/``labels``: the whole training split; ``rows``, ``transforms``, ``lengths``: the rows in stream order,
    their projective transforms and the batch sizes (``trainer.order.rank_stream``), so the order and the
    augmentation are the plan's, not a shuffle buffer's. ``augment``: apply the transforms (else identity).
    """
    parallel = compat.autotune()
    keys_t = tf.constant(np.asarray(keys))
    labels_t = tf.constant(np.asarray(labels, dtype=np.float32))
    rows_t = tf.constant(np.asarray(rows, dtype=np.int64))
    transforms_t = tf.constant(np.asarray(transforms, dtype=np.float32))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)

    batch_load = getattr(loader, "batch", None)
    if batch_load is not None:
        def whole_batch(start, length):  # one read of the step's rows (a loader that cannot fail per image)
            selected = rows_t[start:start + length]
            return (batch_load(tf.gather(keys_t, selected)), tf.gather(labels_t, selected),
                    transforms_t[start:start + length])
        ds = tf.data.Dataset.from_tensor_slices((starts, np.asarray(lengths, dtype=np.int64)))
        ds = ds.map(whole_batch, num_parallel_calls=parallel)
    else:
        def one_batch(start, length):
            elements = tf.data.Dataset.from_tensor_slices((rows_t[start:start + length],
                                                           transforms_t[start:start + length]))
            elements = elements.map(lambda row, t: (loader(tf.gather(keys_t, row)), tf.gather(labels_t, row), t),
                                    num_parallel_calls=parallel)
            return compat.ignore_errors(elements).batch(length)
        ds = tf.data.Dataset.from_tensor_slices((starts, np.asarray(lengths, dtype=np.int64))).flat_map(one_batch)
    if augment:
        ds = ds.map(lambda images, y, t: (compat.transform_images(images, t), y), num_parallel_calls=parallel)
    else:
        ds = ds.map(lambda images, y, t: (images, y))
    # a batch whose images all failed to decode yields nothing; repeating keeps the stream from running dry
    return ds.repeat().prefetch(parallel)


def evaluation(keys, indices, batch_size, loader):
    """One pass of (images [b, H, W, 1], indices int64 [b]) in order; failed decodes are dropped."""
    parallel = compat.autotune()
    ds = tf.data.Dataset.from_tensor_slices((keys, np.asarray(indices, dtype=np.int64)))
    batch_load = getattr(loader, "batch", None)
    if batch_load is not None:
        return ds.batch(batch_size).map(lambda k, i: (batch_load(k), i), num_parallel_calls=parallel).prefetch(
            parallel)
    ds = ds.map(lambda key, i: (loader(key), i), num_parallel_calls=parallel)
    return compat.ignore_errors(ds).batch(batch_size).prefetch(parallel)
