"""Every image decoded once before training, by the input pipeline's own decoder: the images that fail are named.

``trainer.pngcheck`` reads a few bytes per file and misses corruption inside the compressed data (a bad IDAT
stream, a data chunk whose CRC does not match, rows shorter than the bit depth says: libpng stops with "Invalid
PNG data"). The input pipeline would then drop such an image silently (``compat.ignore_errors``) while ``n_train``
still counts it. So every image that passed the structural check is decoded here with ``tf.image.decode_png`` (as
``pipeline.png_loader`` does) in a parallel tf.data pass; each rank decodes every ``size``-th image and the
verdicts are gathered, so all ranks leave out the same images. Cost: one decode per image per run start, the
decode work of one epoch spread over all ranks (no resize, no training step).
"""
import re

import numpy as np
import tensorflow as tf

from trainer import compat

#: Reasons are read one image at a time (a second decode that raises); beyond this many the reason is generic.
DETAILED_REASONS = 100
_GENERIC = "failed to decode (tf.image.decode_png)"


def _decoded_size(path):
    return tf.size(tf.image.decode_png(compat.read_file(path), channels=1))


def decode_each(paths, indices, fn, batch=256):
    """Yield ``(index, value)`` for each entry of ``indices`` (into ``paths``) whose ``fn(path)`` (a tensor
    function, e.g. ``pipeline.png_loader(size)``) succeeds, in ``indices`` order, from one parallel tf.data pass
    (``num_parallel_calls`` autotuned: all cores); the entries that fail are left out (``compat.ignore_errors``)."""
    if not len(indices):
        return
    ds = tf.data.Dataset.from_tensor_slices(([paths[i] for i in indices], np.asarray(indices, dtype=np.int64)))
    ds = ds.map(lambda path, i: (fn(path), i), num_parallel_calls=compat.autotune())
    for values, found in compat.iterate_numpy(compat.ignore_errors(ds, log=False).batch(batch)):
        for value, i in zip(values, np.atleast_1d(found)):
            yield int(i), value


def _undecodable(paths, indices):
    """The entries of ``indices`` (into ``paths``) whose decode fails, in one parallel tf.data pass."""
    decoded = set(i for i, _ in decode_each(paths, indices, _decoded_size))
    return [i for i in indices if i not in decoded]


def reason(path):
    """Why ``path`` fails to decode: the decoder's own first message line ("Invalid PNG data, size 4106")."""
    ds = tf.data.Dataset.from_tensors(path).map(_decoded_size)
    try:
        for _ in compat.iterate_numpy(ds.map(lambda n: (n,))):
            pass
    except tf.errors.OpError as e:
        # TF 2.x prefixes the function's name ("{{function_node __wrapped__IteratorGetNext...}} Input is empty.")
        text = re.sub(r"^\{\{[^}]*\}\}\s*", "", (e.message or "").strip())
        return "failed to decode: %s" % text.splitlines()[0] if text else _GENERIC
    return "failed to decode in the input pipeline, not when decoded alone"


def find_failures(paths, rank=0, size=1, gather=None):
    """``{index: reason}`` for the ``paths`` whose decode fails; the same dict on every rank.

    This rank decodes ``paths[rank::size]``; ``gather(array, name)`` (``compat.allgather``; None for one rank)
    concatenates every rank's int8 [len(paths)] failure mask. Reasons are read on rank 0 only (the others get a
    generic one: rank 0 writes the list), the first ``DETAILED_REASONS`` of them in full.
    """
    mask = np.zeros(len(paths), dtype=np.int8)
    mask[_undecodable(paths, list(range(rank, len(paths), size)))] = 1
    if gather is not None and size > 1:
        mask = gather(mask, "chexstack_decode_check").reshape(size, len(paths)).max(axis=0)
    failed = [int(i) for i in np.nonzero(mask)[0]]
    return dict((i, reason(paths[i]) if rank == 0 and k < DETAILED_REASONS else _GENERIC)
                for k, i in enumerate(failed))


def checker(rt):
    """``find_failures`` for the ranks of ``rt`` (a ``runtime.Runtime``), as ``data.load(decode_check=...)``."""
    return lambda paths: find_failures(paths, rt.rank, rt.size, compat.allgather)
