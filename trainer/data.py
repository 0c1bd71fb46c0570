"""The examples of each split: label rows joined to the PNGs on disk, checked, split by patient.

``load(options)`` returns a ``Data`` whose ``report`` says what was left out and why (rows without an image,
images without a row, files failing the PNG check or the decode, images outside the official lists); rank 0 prints
it and metrics.json keeps it (``run.data``). ``--data PREP``, a prepared copy (``trainer.prepared``), gives the
same Data as its source PNGs: the same rows, the same verdicts (found when it was prepared, by the same checks),
hence the same splits; its keys are the copy's, and ``report["prepared"]`` names it. Every rank computes the same
``Data`` deterministically (same files, same seed, the decode verdicts gathered from all ranks). Left-out images are
in no split and no count; more than ``--max-bad-images`` of them (a share of the images with a label row) stops the
run.
"""
import os

import numpy as np

from trainer import events, labels, outputs, pngcheck, prepared, sources, split
from trainer.errors import TrainerError
from trainer.sources import SYNTHETIC

_SHOWN = 20


class Subset(object):
    """One split: ``names`` (N image names), ``paths`` (N file paths, or N synthetic keys), ``labels``
    (uint8 [N, 14]), ``patients`` (N IDs)."""

    def __init__(self, names, paths, labels_, patients):
        self.names = list(names)
        self.paths = list(paths)
        self.labels = np.asarray(labels_, dtype=np.uint8).reshape(-1, len(labels.CLASSES))
        self.patients = list(patients)

    def __len__(self):
        return len(self.names)


class Data(object):
    """``train``/``val``/``test`` Subsets, the label file and its content hash, the ``report`` dict, and
    ``prepared``: the ``trainer.prepared.Copy`` the images come from (None: PNGs or synthetic)."""

    def __init__(self, subsets, label_file, label_sha256, report, prepared=None):
        self.train, self.val, self.test = subsets
        self.label_file = label_file
        self.label_sha256 = label_sha256
        self.report = report
        self.prepared = prepared


def _take(table, paths, codes, code):
    keep = [i for i, c in enumerate(codes) if c == code]
    return Subset([table.names[i] for i in keep], [paths[i] for i in keep], table.labels[keep],
                  [table.patients[i] for i in keep])


def locate(options):
    """(label file, images folder, option name for messages, train_val list, test list)."""
    train_val, test = options.train_val_list, options.test_list
    if options.images and prepared.is_prepared(options.images):
        raise TrainerError("--images %s is a prepared copy (%s): give it as --data %s"
                           % (options.images, prepared.MANIFEST, options.images))
    if options.data:
        label_file = sources.find_label_file(options.data)
        found_train_val, found_test = sources.find_split_lists(options.data)
        return (label_file, options.data, "--data", train_val or found_train_val, test or found_test)
    return options.labels, options.images, "--images", train_val, test


def _report_skipped(skipped, listed_in, what):
    """Warn about the files that failed the PNG check or the decode (``what``): the first ``_SHOWN`` named, the
    rest counted; all of them written to ``listed_in`` (a CSV; by rank 0) when given, else all named."""
    if listed_in and events.is_chief():
        outputs.write_skipped_images(listed_in, skipped)
    shown = skipped[:_SHOWN] if listed_in else skipped
    text = "; ".join("%s (%s)" % (s["path"], s["reason"]) for s in shown)
    if len(skipped) > len(shown):
        text += " ... and %d more" % (len(skipped) - len(shown))
    events.warn("%d image files %s and are skipped: %s%s"
                % (len(skipped), what, text, " (all listed in %s)" % listed_in if listed_in else ""))


def _unusable(paths, decode_check):
    """``({index: reason}, n failing the PNG check, n failing the decode)`` for ``paths``: the structural check
    (``pngcheck``) of every file, then ``decode_check(paths) -> {index: reason}`` of the files that passed it."""
    problems = pngcheck.find_problems(paths)
    structural = len(problems)
    if decode_check is not None:
        passed = [k for k in range(len(paths)) if k not in problems]
        failures = decode_check([paths[k] for k in passed])
        problems.update((passed[j], r) for j, r in failures.items())
    return problems, structural, len(problems) - structural


def _check_share(n_bad, n_images, limit, option, images_dir, listed_in):
    """TrainerError when more than ``limit`` (a share, 0..1; None: no limit) of the images are unusable."""
    if limit is None or n_bad <= limit * n_images:
        return
    raise TrainerError("%d of %d images below %s %s (%.1f %%) cannot be used, more than --max-bad-images %g allows: "
                       "is the copy of the data complete? They are %s; raise --max-bad-images to train without them"
                       % (n_bad, n_images, option, images_dir, 100.0 * n_bad / n_images, limit,
                          "listed in %s" % listed_in if listed_in else "named above"))


def _report_unmatched(report, copy, rows, with_image, images_dir, label_name):
    """Say which label rows have no image and which images no row: for PNGs in the folder's terms; for a prepared
    ``copy`` in the copy's (it holds the labelled PNGs its source had, so "rows without an image below PREP" is
    what it was prepared from, not a fault of the copy)."""
    source = (copy.source or "its source folder") if copy is not None else None
    if report["rows_without_image"]:
        if copy is not None:
            events.info("the prepared copy %s holds %d of the %d rows of %s (the images found below %s when it was "
                        "prepared); the other %d rows are not used" % (images_dir, with_image, rows, label_name,
                                                                       source, report["rows_without_image"]))
        else:
            events.info("%d of %d label rows have no image below %s (not used); %d images with labels found"
                        % (report["rows_without_image"], rows, images_dir, with_image))
    if report["images_without_row"]:
        if copy is not None:
            events.warn("%d PNGs below the copy's source %s have no row in %s (not in the copy)"
                        % (report["images_without_row"], source, label_name))
        else:
            events.warn("%d PNGs below %s have no row in %s (not used)"
                        % (report["images_without_row"], images_dir, label_name))


def load(options, skipped_list=None, decode_check=None, required=(split.TRAIN, split.VAL)):
    """Build the splits from ``--data DIR`` or ``--images DIR --labels FILE`` (see ``trainer.cli``).

    ``skipped_list``: CSV path that receives the files failing the PNG check or the decode
    (``outputs.write_skipped_images``), written before a TrainerError for "no usable image" or "more than
    --max-bad-images" so the list outlives the aborted run. ``decode_check(paths) -> {index: reason}``
    (``trainer.decodecheck.checker``; None: structural check only, no TensorFlow). ``options.max_bad_images``:
    the largest share of unusable images that still trains (absent: no limit). ``required``: the splits that must
    not be empty (a training run validates every epoch; a throughput run reads only the training split).
    """
    label_file, images_dir, option, train_val_list, test_list = locate(options)
    table = labels.read_label_file(label_file)
    copy = None
    if option == "--data" and prepared.is_prepared(images_dir):
        copy = prepared.open_copy(images_dir, table.sha256, getattr(options, "image_size", None))
        on_disk = copy.index
    else:
        on_disk = sources.index_images(images_dir, option)
    with_image = [i for i, n in enumerate(table.names) if n in on_disk]
    report = {"label_rows": len(table), "images_found": copy.images_found if copy else len(on_disk),
              "rows_without_image": len(table) - len(with_image),
              "images_without_row": copy.images_without_row if copy else len(set(on_disk) - set(table.names))}
    if copy:
        report["prepared"] = copy.summary
    if not with_image and copy:
        raise TrainerError("none of the %d rows of %s has an image in the prepared copy %s (%d images there): "
                           "prepare it again" % (len(table), label_file, images_dir, len(on_disk)))
    if not with_image:
        raise TrainerError("none of the %d rows of %s has an image below %s %s (%d PNGs there; names must be the "
                           "'Image Index' values, e.g. %s)" % (len(table), label_file, option, images_dir,
                                                                 len(on_disk), table.names[0]))
    if copy:
        problems, structural, undecodable = copy.unusable([table.names[i] for i in with_image])
    else:
        problems, structural, undecodable = _unusable([on_disk[table.names[i]] for i in with_image], decode_check)
    report["skipped_images"] = [{"path": on_disk[table.names[with_image[k]]], "reason": r}
                                for k, r in sorted(problems.items())]
    report["images_skipped"] = {"png_check": structural, "decode": undecodable, "total": len(problems)}
    what = "failed the PNG check" + (" or the decode" if undecodable else "")
    if problems:
        _report_skipped(report["skipped_images"], skipped_list, what)
    usable = [i for k, i in enumerate(with_image) if k not in problems]
    report["images_used"] = len(usable)
    if not usable:
        raise TrainerError("no usable image below %s %s: all %d %s (%s)"
                           % (option, images_dir, len(with_image), what,
                              "listed in %s" % skipped_list if skipped_list else "named above"))
    _check_share(len(problems), len(with_image), getattr(options, "max_bad_images", None), option, images_dir,
                 skipped_list)
    _report_unmatched(report, copy, len(table), len(with_image), images_dir, os.path.basename(label_file))

    sub = labels.LabelTable(label_file, [table.names[i] for i in usable], [table.patients[i] for i in usable],
                            table.labels[usable], table.sha256)
    paths = [on_disk[n] for n in sub.names]
    if train_val_list or test_list:
        if not (train_val_list and test_list):
            raise TrainerError("official split: need both train_val_list.txt and test_list.txt (got only %s)"
                               % (train_val_list or test_list))
        codes = split.official_split(sub.names, sub.patients, sources.read_name_list(train_val_list),
                                     sources.read_name_list(test_list), options.seed, options.val_fraction)
        report["split_source"] = "official lists %s, %s (+ seeded patient split of train/val)" % (
            train_val_list, test_list)
    else:
        codes = split.patient_split(sub.patients, options.seed, options.val_fraction, options.test_fraction)
        report["split_source"] = "seeded patient split (seed %d)" % options.seed
    split.check_patient_disjoint(sub.names, sub.patients, codes)
    subsets = tuple(_take(sub, paths, codes, code) for code in split.SPLITS)
    report["split"] = dict((code, len(s)) for code, s in zip(split.SPLITS, subsets))
    report["split"]["unlisted"] = codes.count(split.UNLISTED)
    report["patients"] = dict((code, len(set(s.patients))) for code, s in zip(split.SPLITS, subsets))
    for code, s in zip(split.SPLITS, subsets):
        if code in required and not len(s):
            raise TrainerError("the %s split is empty (%s); more images or another --val-fraction are needed"
                               % (code, report["split_source"]))
    return Data(subsets, label_file, table.sha256, report, copy)


def synthetic(n_train, n_val, seed, prevalence=0.1):
    """Random labels (Bernoulli(``prevalence``) per class) for ``--data synthetic``; images are made by the
    pipeline. Keys are the integers 0..N-1."""
    rng = np.random.RandomState(seed)

    def subset(prefix, n, offset):
        return Subset(["%s_%06d" % (prefix, i) for i in range(n)], list(range(offset, offset + n)),
                      (rng.rand(n, len(labels.CLASSES)) < prevalence).astype(np.uint8),
                      ["%s%d" % (prefix, i) for i in range(n)])

    report = {"split": {"train": n_train, "val": n_val, "test": 0}, "split_source": "synthetic"}
    return Data((subset("train", n_train, 0), subset("val", n_val, n_train), subset("test", 0, 0)),
                SYNTHETIC, None, report)
