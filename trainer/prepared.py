"""A prepared copy of ChestX-ray14 (``python -m trainer prepare``, ``invoke prepare``): what it holds, and reading it.

Layout of a prepared folder PREP (``--data PREP`` trains from it)::

    PREP/chexstack-prepared.json   the manifest (MANIFEST, schema SCHEMA), below
    PREP/<label file>              a byte copy of the label file (same name when it is Data_Entry_2017*.csv[.gz])
    PREP/train_val_list.txt        copies of the official split lists, when the source folder had them
    PREP/test_list.txt
    PREP/shards/shard-NNNNN.npy    uint8 [n, S, S] C-order NumPy arrays, one row per stored image
    PREP/shards/shard-NNNNN.json   that shard's record, written after its .npy: the shard is done
    PREP/skipped-images.csv        path, reason of the source files left out (as a training run writes it)

The manifest: ``schema``, ``image_size`` (S), ``dtype`` ("uint8"), ``resize`` (``compat.resize_method()`` of the
TensorFlow that prepared it), ``tensorflow``, ``label_file`` (the copy's name), ``label_sha256`` (of its content,
as ``trainer.labels`` hashes it), ``label_rows``, ``split_lists`` ({name: SHA-256}), ``source`` ({"option",
"path"}), ``images_found`` and ``images_without_row`` (the PNGs below the source and those without a label row:
the data report's counts), ``shard_images`` (images per shard), ``shards`` ([{"file", "sha256", "images"}]; file
relative to PREP), ``images`` ([{"name", "source" (path), "bytes", "shard", "sha256", "row"}]: every labelled PNG
of the source in label-file order; ``row`` null and ``skipped`` {"reason", "check": "png_check"|"decode"} for a
file left out), ``complete`` (false while ``prepare`` runs: then ``images`` is its plan, without sha256 and row).

Pixels: each stored image is ``round(pipeline.png_loader(S)(path))`` as uint8, i.e. the trainer's own decode and
antialiased resize, rounded half to even; the training pipeline from the PNGs gives the unrounded float32 values, so
the copy's pixels differ from them by at most 0.5 grey levels (``MAX_PIXEL_DIFFERENCE``; the resize's weights are
non-negative, so no value leaves 0..255 and clipping changes nothing). Training from the copy needs
``--image-size S``: at another size the pixels would be a resize of a resize.
"""
import os

import numpy as np

from trainer import outputs
from trainer.errors import TrainerError

MANIFEST = "chexstack-prepared.json"
SCHEMA = "chexstack.prepared/1"
SHARDS = "shards"
#: the bound on |copy - PNG pipeline| per pixel, in grey levels (rounding to uint8)
MAX_PIXEL_DIFFERENCE = 0.5
_FIELDS = ("schema", "image_size", "resize", "label_file", "label_sha256", "images_found", "images_without_row",
           "shards", "images", "complete")

_open_shards = {}


def is_prepared(folder):
    """Whether ``folder`` holds a prepared copy's manifest."""
    return bool(folder) and os.path.isfile(os.path.join(folder, MANIFEST))


def manifest_path(folder):
    return os.path.join(folder, MANIFEST)


def read_manifest(folder):
    """The manifest of ``folder`` (a dict); TrainerError naming the file and the field for one that is not ours."""
    path = manifest_path(folder)
    value = outputs.read_json(path)
    if not isinstance(value, dict):
        raise TrainerError("%s: not a prepared copy's manifest (expected a JSON object)" % path)
    if value.get("schema") != SCHEMA:
        raise TrainerError("%s: schema %r; this trainer reads %s (prepare the copy again with this version)"
                           % (path, value.get("schema"), SCHEMA))
    missing = [f for f in _FIELDS if f not in value]
    if missing:
        raise TrainerError("%s: field %s missing" % (path, ", ".join(missing)))
    return value


def check_size(folder, image_size):
    """TrainerError unless the copy in ``folder`` was prepared at ``image_size`` pixels."""
    manifest = read_manifest(folder)
    if image_size is not None and manifest["image_size"] != image_size:
        raise TrainerError("--data %s: prepared at %d x %d pixels (%s), not --image-size %d: train with "
                           "--image-size %d, or prepare a copy at %d into another folder"
                           % (folder, manifest["image_size"], manifest["image_size"], manifest_path(folder),
                              image_size, manifest["image_size"], image_size))
    return manifest


def key(shard_path, row):
    """The pipeline key of one stored image: ``"<shard .npy path>#<row>"`` (a string, as a PNG path is)."""
    return "%s#%d" % (shard_path, row)


class Copy(object):
    """A complete prepared copy, checked against its label file.

    ``index``: {image name: key} of every labelled PNG the source had (a stored image's ``key``, a skipped file's
    source path); ``image_size``; ``images_found``, ``images_without_row``; ``source`` (the folder it was prepared
    from, None when not recorded); ``summary`` (the data report's ``prepared`` block).
    """

    def __init__(self, folder, manifest):
        self.folder, self.manifest = folder, manifest
        self.image_size = manifest["image_size"]
        self.images_found = manifest["images_found"]
        self.images_without_row = manifest["images_without_row"]
        self.source = (manifest.get("source") or {}).get("path")
        shards = [os.path.join(folder, s["file"]) for s in manifest["shards"]]
        self.index, self._skipped = {}, {}
        for image in manifest["images"]:
            if image.get("skipped"):
                self.index[image["name"]] = image["source"]
                self._skipped[image["name"]] = image["skipped"]
            else:
                self.index[image["name"]] = key(shards[image["shard"]], image["row"])
        self.summary = {"manifest": os.path.abspath(manifest_path(folder)), "schema": manifest["schema"],
                        "image_size": self.image_size, "resize": manifest["resize"],
                        "shards": len(shards), "images": len(manifest["images"]) - len(self._skipped)}

    def unusable(self, names):
        """``({index: reason}, n failing the PNG check, n failing the decode)`` for ``names`` (indexes into it), as
        ``prepare`` found them: the same verdicts as ``data._unusable`` gives the source PNGs."""
        problems, structural = {}, 0
        for k, name in enumerate(names):
            skipped = self._skipped.get(name)
            if skipped:
                problems[k] = skipped["reason"]
                structural += skipped["check"] == "png_check"
        return problems, structural, len(problems) - structural


def _check_shards(folder, manifest):
    """TrainerError naming the first shard file that is missing or does not hold its rows as uint8 [n, S, S]."""
    size = manifest["image_size"]
    for shard in manifest["shards"]:
        path = os.path.join(folder, shard["file"])
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except (IOError, OSError, ValueError) as e:
            raise TrainerError("%s: cannot read this shard of the prepared copy (%s); run the prepare again to "
                               "redo it" % (path, e))
        if array.dtype != np.uint8 or tuple(array.shape) != (shard["images"], size, size):
            raise TrainerError("%s: holds %s %s, the manifest says uint8 %s; run the prepare again to redo it"
                               % (path, array.dtype, list(array.shape), [shard["images"], size, size]))


def open_copy(folder, label_sha256, image_size=None):
    """The Copy in ``folder``: complete, prepared at ``image_size`` (None: any), from the label file whose content
    SHA-256 is ``label_sha256``, every shard present with its rows. TrainerError otherwise, naming the file."""
    manifest = check_size(folder, image_size)
    path = manifest_path(folder)
    if not manifest["complete"]:
        done = sum(os.path.isfile(os.path.join(folder, s["file"][:-4] + ".json")) for s in manifest["shards"])
        raise TrainerError("%s: the prepare stopped after %d of %d shards; run it again to finish the copy"
                           % (path, done, len(manifest["shards"])))
    if manifest["label_sha256"] != label_sha256:
        raise TrainerError("%s: prepared with the label file of SHA-256 %s, but %s now has %s: the label file "
                           "changed; prepare the copy again" % (path, manifest["label_sha256"],
                                                                 os.path.join(folder, manifest["label_file"]),
                                                                 label_sha256))
    _check_shards(folder, manifest)
    return Copy(folder, manifest)


def _rows(shard_path):
    array = _open_shards.get(shard_path)
    if array is None:
        array = _open_shards[shard_path] = np.load(shard_path, mmap_mode="r", allow_pickle=False)
    return array


def _shard_row(key_value):
    """(shard path, row) of one ``key`` (str, bytes, or a 0-d array of either, as ``numpy_function`` passes it)."""
    key_value = np.asarray(key_value).item()
    if isinstance(key_value, bytes):
        key_value = key_value.decode("utf-8")
    shard_path, _, row = key_value.rpartition("#")
    return shard_path, int(row)


def read_image(key_value):
    """uint8 [S, S] of one ``key``: the row of the memory-mapped shard."""
    shard_path, row = _shard_row(key_value)
    return np.array(_rows(shard_path)[row])


def read_images(key_values):
    """uint8 [n, S, S] of ``n`` keys (a 1-d array of str or bytes), in their order: one copy out of the
    memory-mapped shards for the whole batch (consecutive rows of one shard are sliced at once)."""
    places = [_shard_row(k) for k in np.asarray(key_values).ravel()]
    if not places:
        return np.zeros((0, 0, 0), np.uint8)
    parts, start = [], 0
    while start < len(places):
        shard_path, first = places[start]
        end = start + 1
        while end < len(places) and places[end] == (shard_path, first + end - start):
            end += 1
        parts.append(_rows(shard_path)[first:first + end - start])
        start = end
    return np.concatenate(parts) if len(parts) > 1 else np.array(parts[0])


def loader(copy, image_size):
    """``key`` (string tensor) -> float32 [image_size, image_size, 1], 0..255, from ``copy`` (a Copy): the stored
    pixels as they are when the sizes match (training), else resized by ``compat.resize`` (the logistic-regression
    baseline's small size). Warns when the copy was resized otherwise than this TensorFlow resizes the PNGs (TF 1.x
    has no antialiased bilinear resize: ``compat.resize``): then the pixel bound is against the other resize.

    The function carries ``batch``: keys (string tensor [n]) -> float32 [n, image_size, image_size, 1], the same
    pixels read for a whole batch in one call (``pipeline``'s streams use it: one ``numpy_function``, which holds
    the GIL, per batch instead of per image).
    """
    import tensorflow as tf

    from trainer import compat, events
    stored_size = copy.image_size
    if copy.summary["resize"] != compat.resize_method():
        events.warn("%s was prepared with %s; this TensorFlow %s resizes PNGs with %s, so the copy's pixels are "
                    "not the ones training from the PNGs here would see" % (
                        copy.summary["manifest"], copy.summary["resize"], compat.tf_version(), compat.resize_method()))

    def sized(images):
        images = tf.cast(images, tf.float32)
        return images if image_size == stored_size else compat.resize(images, image_size)

    def load(key_tensor):
        image = compat.numpy_function(read_image, [key_tensor], tf.uint8)
        return sized(tf.reshape(image, [stored_size, stored_size, 1]))

    def load_batch(keys_tensor):
        images = compat.numpy_function(read_images, [keys_tensor], tf.uint8)
        return sized(tf.reshape(images, [-1, stored_size, stored_size, 1]))
    load.batch = load_batch
    return load
