"""tf.data input pipelines: PNG → batches of float32 [B, image_size, image_size, 1] gray values 0..255.

Per element (parallel map): read, decode as 8-bit grayscale (``channels=1``: libpng converts RGB/RGBA to
luminance and 16-bit/palette images to 8-bit gray; chest X-rays are grayscale, NIH stores a few as RGBA),
antialiased resize to ``image_size`` (``compat.resize``); for training, batches as ``trainer.order`` plans them
(epoch order and augmentation are functions of (seed, epoch)), then the batch's projective transforms (flip,
rotation, shift, zoom); prefetch. With ``in_step`` the resize and the transforms are the training step's
(``trainer.device_input``): the host decodes full-size uint8 images and batches them with their transforms.

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


def source_loader(source, uniform=True):
    """``path`` (string tensor) → uint8 [height, width, 1], the PNG decoded to gray, for a step that resizes on the
    device (``trainer.device_input``); ``source``: (height, width). ``uniform``: every image has that size (as in
    ChestX-ray14, all 1024²; ``pngcheck.sizes`` read the headers), and one that does not (a file changed since) fails
    as a decode error does; else an image of another size is first brought to ``source`` here (``compat.resize``),
    so that a batch stacks: a per-image branch that costs 2 % of the decode rate (bench/ratios/input_pipeline.py)."""
    height, width = source

    def load(path):
        image = tf.image.decode_png(compat.read_file(path), channels=1)
        if uniform:
            return compat.ensure_shape(image, [height, width, 1])
        shape = tf.shape(image)
        same = tf.logical_and(tf.equal(shape[0], height), tf.equal(shape[1], width))
        image = tf.cond(same, lambda: image, lambda: tf.cast(
            tf.round(tf.clip_by_value(compat.resize(image, (height, width)), 0.0, 255.0)), tf.uint8))
        image.set_shape([height, width, 1])
        return image
    return load


def synthetic_loader(image_size):
    """Any key → a uniform random float32 [image_size, image_size, 1] image, 0..255 (``--data synthetic``)."""
    def load(key):
        return compat.random_uniform([image_size, image_size, 1], 255.0)
    return load


def training(keys, labels, rows, transforms, lengths, loader, augment, in_step=False):
    """This rank's training stream, one batch per step: (images [b, H, W, 1], labels float32 [b, 14]).

    ``keys``/``labels``: the whole training split; ``rows``, ``transforms``, ``lengths``: the rows in stream order,
    their projective transforms and the batch sizes (``trainer.order.rank_stream``), so the order and the
    augmentation are the plan's, not a shuffle buffer's. ``augment``: apply the transforms (else identity).
    ``in_step``: the step resizes and augments (``trainer.device_input``): the stream is ((images, transforms
    float32 [b, 8]), labels) as ``loader`` gives the images, and nothing is applied here.
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
        # one parallel decode over the whole stream (a dataset per batch paused it at every batch's end: 8 to 20 %
        # of the decode rate), then the plan's batches: the rows of each run of equal lengths in windows of its length
        _, counts, sizes = equal_length_runs(lengths)
        sizes_t = tf.constant(sizes)
        ds = tf.data.Dataset.from_tensor_slices((rows_t, transforms_t,
                                                 np.repeat(np.arange(len(sizes), dtype=np.int64), counts)))
        ds = compat.ignore_errors(ds.map(lambda row, t, run: (loader(tf.gather(keys_t, row)), tf.gather(labels_t, row),
                                                              t, run), num_parallel_calls=parallel))
        ds = compat.group_by_window(ds, lambda images, y, t, run: run, lambda run, window: window.batch(sizes_t[run]),
                                    lambda run: sizes_t[run])
        ds = ds.map(lambda images, y, t, run: (images, y, t))
    if in_step:
        ds = ds.map(lambda images, y, t: ((images, t), y))
    elif augment:
        ds = ds.map(lambda images, y, t: (compat.transform_images(images, t), y), num_parallel_calls=parallel)
    else:
        ds = ds.map(lambda images, y, t: (images, y))
    # an image that failed to decode shifts the later rows of its run one place forward, and the run's short last
    # batch comes at the end of the stream; repeating keeps it from running dry
    return ds.repeat().prefetch(parallel)


def equal_length_runs(lengths):
    """The batch ``lengths`` (int [steps]) as runs of consecutive equal lengths: (row offsets, row counts, batch
    lengths), int64 [runs] each. ``trainer.order`` makes batches of two lengths at most (``np.array_split``), in
    at most two runs an epoch."""
    lengths = np.asarray(lengths, dtype=np.int64)
    if not len(lengths):
        return tuple(np.zeros((0,), np.int64) for _ in range(3))
    firsts = np.flatnonzero(np.concatenate([[True], lengths[1:] != lengths[:-1]]))
    steps = np.diff(np.concatenate([firsts, [len(lengths)]]))
    offsets = np.concatenate([[0], np.cumsum(lengths)])[firsts]
    return offsets.astype(np.int64), (steps * lengths[firsts]).astype(np.int64), lengths[firsts]


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
