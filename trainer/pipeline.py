"""tf.data input pipelines: PNG → [image_size, image_size, 3] float32, ImageNet-normalised, batched.

Per element (parallel map): read, decode as 8-bit grayscale (``channels=1``: libpng converts RGB/RGBA to
luminance, leaves 16-bit and palette images as 8-bit gray; chest X-rays are grayscale, NIH stores a few as RGBA),
bilinear resize to ``image_size``, random horizontal flip for training. Per batch: replicate the gray channel to
3 channels as CheXNet does (Rajpurkar et al. 2017 feed X-rays to an ImageNet network) and normalise with the
ImageNet mean/std (Keras ``preprocess_input`` mode "torch", the statistics DenseNet-121 ImageNet weights expect).
Resizing one channel instead of three and normalising whole batches keeps the per-image cost close to the bare
PNG decode (bench/input_pipeline.py measures it).

Sharding: each rank gets every ``size``-th example (``shard``), so shards differ by at most one example. Training
streams repeat forever, reshuffled each pass; ``model.fit(steps_per_epoch=...)`` makes every rank run the same
number of steps, so an uneven shard cannot leave one rank waiting in an allreduce. Evaluation streams are finite
and carry each example's index, so the evaluation pass can check that no row was lost or duplicated.

Decode errors: elements whose decode fails are dropped (``compat.ignore_errors``) — never a crash; the
structural check (``trainer.pngcheck``) already removed unreadable, garbage and truncated files with a warning.
"""
import numpy as np
import tensorflow as tf

from trainer import compat

# ImageNet channel statistics (RGB, on 0..1 pixels) used for torchvision's and Keras' "torch"-mode ImageNet
# weights, DenseNet-121 included (keras/applications/imagenet_utils.py, mode "torch").
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


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


def normalise(images):
    """float32 [B, H, W, 1] on 0..255 → [B, H, W, 3] ImageNet-normalised."""
    rgb = tf.tile(images, [1, 1, 1, 3]) * (1.0 / 255.0)
    return (rgb - tf.constant(IMAGENET_MEAN)) / tf.constant(IMAGENET_STD)


def training(keys, labels, batch_size, loader, seed):
    """Endless shuffled stream of (images [B, H, W, 3], labels float32 [B, 14]) over this rank's ``keys``."""
    parallel = compat.autotune()
    ds = tf.data.Dataset.from_tensor_slices((keys, np.asarray(labels, dtype=np.float32)))
    ds = ds.shuffle(len(keys), seed=seed, reshuffle_each_iteration=True).repeat()
    ds = ds.map(lambda key, y: (tf.image.random_flip_left_right(loader(key), seed=seed), y),
                num_parallel_calls=parallel)
    ds = compat.ignore_errors(ds).batch(batch_size)
    return ds.map(lambda x, y: (normalise(x), y), num_parallel_calls=parallel).prefetch(parallel)


def evaluation(keys, indices, batch_size, loader):
    """One pass of (images [b, H, W, 3], indices int64 [b]) in order; failed decodes are dropped."""
    parallel = compat.autotune()
    ds = tf.data.Dataset.from_tensor_slices((keys, np.asarray(indices, dtype=np.int64)))
    ds = ds.map(lambda key, i: (loader(key), i), num_parallel_calls=parallel)
    ds = compat.ignore_errors(ds).batch(batch_size)
    return ds.map(lambda x, i: (normalise(x), i), num_parallel_calls=parallel).prefetch(parallel)
