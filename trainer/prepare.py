"""``python -m trainer prepare``: one pass over a ChestX-ray14 folder into a prepared copy (``trainer.prepared``).

    python -m trainer prepare --data DIR | --images DIR --labels FILE --image-size S --output PREP

The labelled PNGs (label-file order, found as training finds them: ``data.locate``, ``sources.index_images``) are
cut into shards of ``--shard-images``; a shard at a time, each file is read ONCE (in threads, ``_CHUNK`` files at a
time), and of those bytes it gets its SHA-256 (hashlib releases the GIL), the PNG check (``pngcheck.problem_in``)
and, when it passes, the decode and resize by the trainer's own ``pipeline.png_decoder(S)`` (what ``png_loader(S)``
does after reading the file) in one tf.data pass whose map runs on all cores (``decodecheck.decode_each``). The
shard's SHA-256 is taken while it is written. A file whose decode fails gets the decoder's own reason
(``decodecheck.reason``, as training names it); the stored pixels are rounded to uint8 (``to_uint8``; bound:
``prepared.MAX_PIXEL_DIFFERENCE``).

Resuming: the plan (the manifest with ``complete: false``) is written first; a shard is done when its record
``shards/shard-NNNNN.json`` exists (written after its .npy, both atomically), and a run finds the done shards and
does only the others, after checking that the plan it would make now is the folder's: same schema, image size,
resize, label file content (SHA-256), shard size and labelled images (names, order and byte sizes: a done shard's
sources are not read again, so their SHA-256 is recorded, not re-checked). Any difference is refused, naming the
manifest and what differs. A done shard whose .npy no longer matches its recorded SHA-256 is redone.

TensorFlow is imported only when the work starts: ``trainer.preflight`` checks a prepare's options on the host.
"""
import fnmatch
import hashlib
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from trainer import cli, data, events, labels, outputs, pngcheck, prepared, runlock, sources
from trainer.backbones import MIN_IMAGE_SIZE
from trainer.errors import TrainerError
from trainer.usage import Parser, reporting_errors

COMMAND = "python -m trainer prepare"
#: the host's log of a prepare, in the output folder (``invoke prepare``)
LOG = "prepare.log"
#: bytes of pixels per shard by default: 2048 images at 256 x 256
SHARD_BYTES = 128 << 20
_THREADS = 8
#: source files held in memory at a time: about 190 MB of NIH's PNGs (112,120 files, about 42 GB: 375 KB each on
#: average; https://nihcc.app.box.com/v/ChestXray-NIHCC)
_CHUNK = 512


def parser():
    p = Parser(prog=COMMAND, description="Decode, resize and shard a ChestX-ray14 folder once, for training.")
    p.add_argument("--data", metavar="DIR", help="dataset folder: Data_Entry_2017*.csv[.gz] in it, PNGs below it")
    p.add_argument("--images", metavar="DIR", help="folder with the PNGs (searched recursively)")
    p.add_argument("--labels", metavar="FILE", help="label file Data_Entry_2017*.csv or .csv.gz")
    p.add_argument("--image-size", type=int, default=cli.parser().get_default("image_size"),
                   help="side in pixels of the stored images; train with the same --image-size (%(default)s)")
    p.add_argument("--output", required=True, metavar="PREP", help="the prepared copy's folder (new or empty, or "
                   "one this command started: it resumes)")
    p.add_argument("--shard-images", type=int, default=None, metavar="N",
                   help="images per shard (default: %d MiB of pixels per shard)" % (SHARD_BYTES >> 20))
    p.set_defaults(train_val_list=None, test_list=None)
    return p


def check(options):
    """``options`` (of ``parser()``), or TrainerError for values and combinations that cannot run."""
    if bool(options.data) == bool(options.images or options.labels) or (options.images is None) != (
            options.labels is None):
        raise TrainerError("give either --data DIR or --images DIR with --labels FILE")
    if options.data == sources.SYNTHETIC:
        raise TrainerError("--data synthetic has no files to prepare")
    smallest = min(MIN_IMAGE_SIZE.values())
    if options.image_size < smallest:
        raise TrainerError("--image-size %d: expected at least %d pixels (the smallest any backbone takes)"
                           % (options.image_size, smallest))
    if options.shard_images is not None and options.shard_images < 1:
        raise TrainerError("--shard-images %d: expected at least 1" % options.shard_images)
    return options


def to_uint8(image):
    """float32 [S, S, 1] gray values 0..255 -> uint8 [S, S]: rounded half to even, clipped to 0..255."""
    return np.clip(np.round(np.asarray(image)[..., 0]), 0, 255).astype(np.uint8)


def _label_copy_name(label_file):
    """The label file's name in the copy: its own when ``sources.find_label_file`` finds it so, else the pattern's."""
    name = os.path.basename(label_file)
    if any(fnmatch.fnmatch(name, pattern) for pattern in sources.LABEL_PATTERNS):
        return name
    return "Data_Entry_2017.csv" + (".gz" if name.endswith(".gz") else "")


def default_shard_images(image_size):
    """Images per shard without ``--shard-images``: ``SHARD_BYTES`` of ``image_size`` x ``image_size`` pixels."""
    return max(1, SHARD_BYTES // (image_size * image_size))


def plan(options):
    """(the manifest of a copy not yet made: ``complete`` false, ``images`` without sha256 and row; the label
    file; the split lists to copy [(name, path)])."""
    label_file, images_dir, option, train_val, test = data.locate(options)
    table = labels.read_label_file(label_file)
    on_disk = sources.index_images(images_dir, option)
    names = [n for n in table.names if n in on_disk]
    if not names:
        raise TrainerError("none of the %d rows of %s has an image below %s %s" % (len(table), label_file, option,
                                                                                   images_dir))
    per_shard = options.shard_images or default_shard_images(options.image_size)
    images = []
    for k, name in enumerate(names):
        path = on_disk[name]
        images.append({"name": name, "source": path, "bytes": _size(path), "shard": k // per_shard})
    n_shards = (len(names) + per_shard - 1) // per_shard
    lists = [(os.path.basename(p), p) for p in (train_val, test) if p]
    from trainer import compat
    manifest = {
        "schema": prepared.SCHEMA, "image_size": options.image_size, "dtype": "uint8", "resize": compat.resize_method(),
        "tensorflow": compat.tf_version(), "label_file": _label_copy_name(label_file), "label_sha256": table.sha256,
        "label_rows": len(table), "split_lists": dict((n, outputs.file_sha256(p)) for n, p in lists),
        "source": {"option": option, "path": images_dir}, "images_found": len(on_disk),
        "images_without_row": len(set(on_disk) - set(table.names)), "shard_images": per_shard,
        "shards": [{"file": "%s/shard-%05d.npy" % (prepared.SHARDS, k)} for k in range(n_shards)],
        "images": images, "complete": False}
    return manifest, label_file, lists


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return None


_COMPARED = ("schema", "image_size", "resize", "label_sha256", "split_lists", "shard_images")


def differences(there, here):
    """What differs between the folder's manifest ``there`` and the plan ``here``: a list of phrases, each in
    terms the user can act on (an option, a file) or naming the cause of a value they never gave (a shard size
    derived from the image size, a resize from the TensorFlow version)."""
    found = []
    for field in _COMPARED:
        if there.get(field) != here.get(field):
            phrase = _difference(field, there, here)
            if phrase:
                found.append(phrase)
    old = [(i["name"], i["bytes"]) for i in there.get("images", [])]
    new = [(i["name"], i["bytes"]) for i in here["images"]]
    if old != new:
        old_names, new_names = dict(old), dict(new)
        only_there = [n for n, _ in old if n not in new_names]
        only_here = [n for n, _ in new if n not in old_names]
        changed = [n for n, b in new if n in old_names and old_names[n] != b]
        for what, items in (("images only there", only_there), ("images only here", only_here)):
            if items:
                found.append("%d %s, e.g. %s" % (len(items), what, items[0]))
        if changed:
            found.append("%d images of another size, e.g. %s (%s bytes there, %s here)"
                         % (len(changed), changed[0], old_names[changed[0]], new_names[changed[0]]))
        if not (only_there or only_here or changed):
            found.append("the images in another order")
    return found


def _difference(field, there, here):
    """The phrase for ``field``, which differs between ``there`` and ``here``; None when another phrase already
    names its cause (a derived shard size at another image size)."""
    old, new = there.get(field), here.get(field)
    if field == "shard_images":
        derived = [m.get("shard_images") == default_shard_images(m.get("image_size") or 1) for m in (there, here)]
        if all(derived) and there.get("image_size") != here.get("image_size"):
            return None  # both the default of their image size: "image size A there, B here" is the cause
        return "--shard-images %s there%s, %s here%s" % (
            old, " (the default at image size %s)" % there.get("image_size") if derived[0] else "",
            new, " (the default at image size %s: give --shard-images %s to match)" % (here.get("image_size"), old)
            if derived[1] else "")
    if field == "image_size":
        return "image size %s there, %s here" % (old, new)
    if field == "resize":  # compat.resize_method() of the TensorFlow that prepares
        versions = (there.get("tensorflow"), here.get("tensorflow"))
        return "resize %s there, %s here%s" % (old, new, " (TensorFlow %s there, %s here)" % versions
                                               if all(versions) else "")
    if field == "label_sha256":
        return "another label file (SHA-256 %s there, %s here)" % (_short(old), _short(new))
    if field == "split_lists":
        old, new = old or {}, new or {}
        if sorted(old) == sorted(new):
            return "another %s (its SHA-256 differs)" % ", ".join(n for n in sorted(new) if old[n] != new[n])
        return "split lists %s there, %s here" % (", ".join(sorted(old)) or "none", ", ".join(sorted(new)) or "none")
    return "manifest %s %s there, %s here (made by another chexstack)" % (field, _short(old), _short(new))


def _short(value):
    text = str(value)
    return text if len(text) <= 24 else text[:12] + "..."


def _check_folder(folder):
    """TrainerError when ``folder`` holds files but no manifest: it is not a copy this command made."""
    ours = set([LOG, runlock.LOCK_FILE])
    others = sorted(n for n in os.listdir(folder) if n not in ours and not n.startswith(".tmp-"))
    if others:
        raise TrainerError("--output %s: not empty (%s%s) and no %s in it: not a prepared copy; choose a new or "
                           "empty folder" % (folder, ", ".join(others[:3]), ", ..." if len(others) > 3 else "",
                                             prepared.MANIFEST))


def check_output(folder):
    """TrainerError for an ``--output`` a prepare must not write into, found without writing anything and without
    TensorFlow (the host checks it before it opens ``prepare.log``): a folder that holds other files and no
    manifest, or one another run holds. A prepared copy made from other sources or settings is found by the
    trainer (``_check_start``: its plan needs TensorFlow), also before it writes anything."""
    if os.path.isdir(folder):
        if not prepared.is_prepared(folder):
            _check_folder(folder)
        runlock.check_free(folder, "--output")


def _check_start(folder, manifest):
    """The folder's manifest when it was started with the plan ``manifest`` (resume), None for a new or empty
    folder; TrainerError for a copy prepared from other sources or settings, or a folder holding other files.
    Reads only: the trainer asks before it takes the lock (a refused prepare writes nothing) and again under it."""
    if prepared.is_prepared(folder):
        there = outputs.read_json(prepared.manifest_path(folder))
        found = differences(there if isinstance(there, dict) else {}, manifest)
        if found:
            raise TrainerError("%s: prepared from other sources or settings: %s; prepare into another folder"
                               % (prepared.manifest_path(folder), "; ".join(found)))
        return there
    if os.path.isdir(folder):
        _check_folder(folder)
    return None


def _start(folder, manifest, label_file, lists):
    """The folder's manifest when it was started with the same plan (resume), else the new plan written there."""
    there = _check_start(folder, manifest)
    if there is not None:
        return there
    shutil.copyfile(label_file, os.path.join(folder, manifest["label_file"]))
    for name, path in lists:
        shutil.copyfile(path, os.path.join(folder, name))
    outputs.write_json(prepared.manifest_path(folder), manifest)
    return manifest


def _record_path(folder, shard):
    return os.path.join(folder, shard["file"][:-4] + ".json")


def _done(folder, shard):
    """The shard's record if the shard is done and its .npy still is what the record says, else None."""
    record = outputs.read_json(_record_path(folder, shard))
    if not isinstance(record, dict):
        return None
    npy = os.path.join(folder, shard["file"])
    if not os.path.isfile(npy) or outputs.file_sha256(npy) != record.get("sha256"):
        events.warn("%s: does not match its record; preparing this shard again" % npy)
        return None
    return record


def _source(path):
    """One read of a source file: ``(contents or None, its SHA-256 or None, pngcheck's reason or None)``."""
    try:
        with open(path, "rb") as f:
            contents = f.read()
    except (IOError, OSError) as e:
        return None, None, pngcheck.unreadable(e)
    return contents, hashlib.sha256(contents).hexdigest(), pngcheck.problem_in(contents)


class _Hashing(object):
    """A binary file that also hashes what is written to it (``np.save`` writes through ``write``)."""

    def __init__(self, f):
        self.f, self.digest = f, hashlib.sha256()

    def write(self, data):
        self.digest.update(data)
        return self.f.write(data)


def _save(npy, array):
    """Write ``array`` to ``npy`` atomically; the SHA-256 of the file, hashed while writing it."""
    written = []

    def write(tmp):
        with open(tmp, "wb") as f:
            out = _Hashing(f)
            np.save(out, array)
            written.append(out.digest.hexdigest())
    outputs.replace_atomically(npy, write, suffix=".npy")
    return written[-1]


def _read_and_decode(paths, image_size):
    """Every one of ``paths`` read once, in chunks of ``_CHUNK`` files: (SHA-256s, {index: PNG check reason},
    {index: uint8 [S, S]} of the files that passed and decoded), decoded and resized by ``pipeline.png_decoder``
    from the bytes read (``decodecheck.decode_each``, all cores)."""
    from trainer import decodecheck, pipeline
    decode = pipeline.png_decoder(image_size)
    hashes, problems, pixels = [], {}, {}
    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        for first in range(0, len(paths), _CHUNK):
            read = list(pool.map(_source, paths[first:first + _CHUNK]))
            hashes.extend(h for _, h, _ in read)
            problems.update((first + k, r) for k, (_, _, r) in enumerate(read) if r is not None)
            contents = [c for c, _, _ in read]
            passed = [k for k, (_, _, r) in enumerate(read) if r is None]
            pixels.update((first + k, to_uint8(v)) for k, v in decodecheck.decode_each(contents, passed, decode))
    return hashes, problems, pixels


def prepare_shard(folder, shard, entries, image_size):
    """Make one shard of ``entries`` (the plan's images of it): returns its record ``{"file", "sha256",
    "images", "entries": [{"name", "sha256", "row"} + "skipped": {"reason", "check"} for a file left out]}``.
    Each source file is read once (its SHA-256, the PNG check and the decode are of those bytes); the shard's
    SHA-256 is taken while it is written."""
    from trainer import decodecheck
    paths = [e["source"] for e in entries]
    hashes, problems, pixels = _read_and_decode(paths, image_size)
    rows, out = [], []
    for k, entry in enumerate(entries):
        item = {"name": entry["name"], "sha256": hashes[k], "row": None}
        if k in problems:
            item["skipped"] = {"reason": problems[k], "check": "png_check"}
        elif k not in pixels:
            item["skipped"] = {"reason": decodecheck.reason(paths[k]), "check": "decode"}
        else:
            item["row"] = len(rows)
            rows.append(pixels[k])
        out.append(item)
    array = np.stack(rows) if rows else np.zeros((0, image_size, image_size), dtype=np.uint8)
    sha256 = _save(os.path.join(folder, shard["file"]), array)
    record = {"file": shard["file"], "sha256": sha256, "images": len(rows), "entries": out}
    outputs.write_json(_record_path(folder, shard), record)
    return record


def by_shard(manifest):
    """The plan's images of each shard: a list per shard, in plan order."""
    groups = [[] for _ in manifest["shards"]]
    for image in manifest["images"]:
        groups[image["shard"]].append(image)
    return groups


def finish(folder, manifest, records):
    """The complete manifest: the plan with each shard's record merged in; writes it and skipped-images.csv."""
    images = []
    for shard, mine, record in zip(manifest["shards"], by_shard(manifest), records):
        shard.update(sha256=record["sha256"], images=record["images"])
        if len(mine) != len(record["entries"]):
            raise TrainerError("%s: %d entries, the plan has %d images in %s; delete it to redo the shard"
                               % (_record_path(folder, shard), len(record["entries"]), len(mine), shard["file"]))
        for image, item in zip(mine, record["entries"]):
            if image["name"] != item["name"]:
                raise TrainerError("%s: record of %s does not follow the plan (%s where %s belongs); delete it to "
                                   "redo the shard" % (_record_path(folder, shard), shard["file"], item["name"],
                                                       image["name"]))
            image.update((f, item[f]) for f in ("sha256", "row", "skipped") if f in item)
            images.append(image)
    manifest["images"], manifest["complete"] = images, True
    skipped = [{"path": i["source"], "reason": i["skipped"]["reason"]} for i in images if i.get("skipped")]
    outputs.write_skipped_images(os.path.join(folder, outputs.SKIPPED_IMAGES), skipped)
    outputs.write_json(prepared.manifest_path(folder), manifest)
    return skipped


def _images_done(records):
    return sum(len(r["entries"]) for r in records if r)


def run(options):
    """Prepare (or finish preparing) the copy of checked ``options`` in ``options.output``; exit status 0."""
    manifest, label_file, lists = plan(options)
    _check_start(options.output, manifest)  # a refused prepare writes nothing, not even the lock file
    lock = runlock.acquire_unless_held_for_us(options.output, COMMAND, "--output")  # None: its launcher holds it
    try:
        outputs.remove_stale_temp_files(options.output)  # a killed run's half-written shard
        manifest = _start(options.output, manifest, label_file, lists)
        if manifest["complete"]:
            events.info("%s is prepared already (%d images at %d px): nothing to do"
                        % (options.output, len(manifest["images"]), manifest["image_size"]))
            return 0
        shards, total, groups = manifest["shards"], len(manifest["images"]), by_shard(manifest)
        records = [_done(options.output, s) for s in shards]
        events.emit("prepare", images=total, shards=len(shards), done_shards=sum(1 for r in records if r),
                    done_images=_images_done(records), image_size=manifest["image_size"], output=options.output)
        for k, shard in enumerate(shards):
            if records[k] is None:
                records[k] = prepare_shard(options.output, shard, groups[k], manifest["image_size"])
                events.emit("shard", shard=k + 1, shards=len(shards), images=_images_done(records), total=total)
        skipped = finish(options.output, manifest, records)
        if skipped:
            events.warn("%d image files failed the PNG check or the decode and are not in the copy (all listed in "
                        "%s)" % (len(skipped), os.path.join(options.output, outputs.SKIPPED_IMAGES)))
        events.emit("done", output=options.output, images=total - len(skipped), skipped=len(skipped))
        events.info("prepared %d images at %d x %d px in %d shards: train with --data %s --image-size %d"
                    % (total - len(skipped), manifest["image_size"], manifest["image_size"], len(shards),
                       options.output, manifest["image_size"]))
        return 0
    finally:
        if lock is not None:
            lock.release()


def parse(argv):
    """The checked options of ``argv`` (``python -m trainer prepare``'s arguments); TrainerError otherwise."""
    return check(parser().parse_args(list(argv)))


def main(argv):
    return reporting_errors(lambda: run(parse(argv)), COMMAND)
