"""Files under ``--output``, each replaced atomically (temp file + fsync + ``os.replace`` + fsync of the folder),
so a crash leaves the previous complete version, never a torn one. Rank 0 writes them all.

- ``metrics.json``     ``{"run": {...}, "epochs": [{epoch, loss, val_loss, auroc{class: float|null}, mean_auroc,
                       images_per_sec{per_rank, total}, world_size, label_sha256, n_train, n_val, val_rows, ...}],
                       "test": {...}, "baseline": {...}, "comparison": {...}}`` (fields below)
- ``predictions.csv``  pooled validation predictions of the last epoch: ``Image Index``, ``label_<class>`` ×14
                       (0/1), ``score_<class>`` ×14 (float32 written with 9 significant digits: exact round trip)
- ``test-predictions.csv`` the same for the test split, scored with the best epoch (``model-best.h5``)
- ``splits.csv``       ``Image Index``, ``Patient ID``, ``split`` of every image used (``write_splits``)
- ``throughput.json``  throughput mode: ``{images_per_sec{total, per_rank}, step_times_s, world_size, model,
                       batch_size, amp, device, ...}``
- ``skipped-images.csv`` images left out because they failed the PNG check or the decode: ``path``, ``reason``
                       (written before training starts, also when the run then stops because too few images are
                       usable; a validation image that fails to decode later, during an evaluation, is added)

The fields other areas read (``bench``, ``launch``, the tests), by key:

- an epoch: ``epoch, loss, val_loss, auroc {class: float|null}, mean_auroc, n_classes_defined, monitor,
  monitor_value, images_per_sec {per_rank, total}, world_size, label_sha256`` (SHA-256 of the label file's content,
  after gunzip) ``, n_train, n_val, val_rows {expected, evaluated, skipped}, epoch_time_s, learning_rate, lr_at_floor,
  improved, lr_decayed, lr_decays, best_epoch, early_stop, eval_time_s``;
- ``run``: the settings (``recipe``, ``deterministic``, ``input_resize {where: host|device, why, source_size}``),
  versions, class weights, the data report (rows without image, ``images_skipped {png_check, decode, total}``,
  ``images_used``, split sizes), ``splits {file: splits.csv, sha256, train|val|test: {images, patients, sha256}}`` (a
  split's sha256 over its sorted image names joined by newlines), ``end_epoch`` and ``end``
  (``trainer.recipe.end_of_run``: ``epoch, reason: early_stop|epochs, lr_at_floor, floor_epoch,
  epochs_at_floor_without_improvement, best_epoch, message``);
- ``test`` (after the last epoch, with the best epoch's weights; absent without a test split): ``auroc {class:
  {auroc, ci_low, ci_high, n_positive, n_resamples_defined}}, mean_auroc, mean_auroc_ci_low, mean_auroc_ci_high,
  n_classes_defined, n_images, n_patients, rows, bootstrap {resamples, unit: patient, level: 0.95, method:
  percentile, seed}, model, best_epoch``; ``baseline``: the same for the logistic regression, plus ``method``;
  ``comparison`` (``trainer.evaluation.baseline_comparison``): ``statistic, difference`` (CNN minus baseline test mean
  AUROC on the rows both scored) ``, ci_low, ci_high, level, distinguishable, verdict, n_classes, n_images,
  n_patients, n_resamples_defined, bootstrap``;
- ``throughput.json``: also ``hosts`` (each rank's host, rank order), ``image_size``, ``versions`` (``python``,
  ``tensorflow``, ``horovod``, and the MPI library the ranks mapped, ``trainer.mpilib``), ``mpi``, ``label_sha256``,
  ``splits`` (null for synthetic data), ``trainable_parameters``, ``input_resize``, ``host_load`` (per rank in
  rank order, ``trainer.hostload``: ``host``, ``boot_id``, ``cpus`` its ``sched_getaffinity``, and over the timed
  steps ``window_s``, ``cpu_s``, ``ticks_per_s``, ``stat`` and ``loadavg`` raw at start and end); with
  ``--horovod-timeline`` also ``input_wait_s`` (each step's wait for its batch) and ``timeline``:
  ``horovod-timeline.json`` beside it, Horovod's own timeline, which ``bench.attribution`` splits.

Beside them: ``checkpoint/`` (``epoch-NNNN.h5`` and ``state.json``, the commit record written last:
``trainer.checkpoint``), ``model.h5`` and ``model-best.h5`` (input float32 ``[B, S, S, 1]`` grey values 0..255; the
first layer normalises as the backbone's weights expect), ``.chexstack.lock`` (``trainer.runlock``, there only while
held) and, from ``python -m trainer evaluate``, ``evaluation.json`` (the ``test`` block plus model and label SHA-256,
``list``, ``split``, ``images_seen_in_training``, ``few_cases``: ``trainer.evaluation.few_cases``).

A run killed while writing (SIGKILL, power loss) leaves a ``.tmp-*`` file next to the complete previous version;
the next run removes them once it holds the output lock (``remove_stale_temp_files``).
"""
import csv
import glob
import hashlib
import json
import os
import warnings
from collections import OrderedDict

from trainer.errors import TrainerError
from trainer.labels import CLASSES
from trainer.split import TRAIN, VAL

METRICS = "metrics.json"
PREDICTIONS = "predictions.csv"
TEST_PREDICTIONS = "test-predictions.csv"
SPLITS = "splits.csv"
BEST_MODEL = "model-best.h5"
THROUGHPUT = "throughput.json"
#: Horovod's own timeline of a ``--horovod-timeline`` throughput run (``HOROVOD_TIMELINE``; written by rank 0's Horovod)
TIMELINE = "horovod-timeline.json"
MODEL = "model.h5"
SKIPPED_IMAGES = "skipped-images.csv"
_TEMP = ".tmp-*"


def _fsync_dir(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def replace_atomically(path, write, suffix=""):
    """Call ``write(tmp_path)`` to write a temp file next to ``path``, fsync it and rename it onto ``path``.

    ``suffix`` keeps an extension the writer looks at (Keras picks HDF5 for names ending in ``.h5``).
    """
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        os.makedirs(folder)
    tmp = os.path.join(folder, "%s%d-%s%s" % (_TEMP[:-1], os.getpid(), os.path.basename(path), suffix))
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    _fsync_dir(folder)


def remove_stale_temp_files(output):
    """Remove the temp files of a run that was killed mid-write (call it only while holding the output lock)."""
    for path in glob.glob(os.path.join(output, _TEMP)) + glob.glob(os.path.join(output, "*", _TEMP)):
        try:
            os.remove(path)
        except OSError:
            pass


def file_sha256(path):
    """The SHA-256 (hex) of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json(path, value):
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(value, f, indent=2)
            f.write("\n")
    replace_atomically(path, write)


def read_json(path):
    """The JSON value in ``path``, or None if the file does not exist."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (IOError, OSError, ValueError) as e:
        raise TrainerError("cannot read %s: %s" % (path, e))


def write_metrics(output, run, epochs, extra=None):
    """metrics.json: ``{"run", "epochs"}`` plus the items of ``extra`` (``test``, ``baseline``) in that order."""
    value = OrderedDict([("run", run), ("epochs", epochs)])
    value.update(extra or {})
    write_json(os.path.join(output, METRICS), value)


def read_metric_epochs(output):
    """The epoch entries of an existing metrics.json (for --resume), or []."""
    value = read_json(os.path.join(output, METRICS))
    return list(value.get("epochs", [])) if isinstance(value, dict) else []


def write_predictions(output, names, labels, scores, filename=PREDICTIONS):
    """``names`` [N], ``labels`` {0,1} [N, 14], ``scores`` [N, 14] → predictions.csv (or ``filename``)."""
    def write(tmp):
        with open(tmp, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["Image Index"] + ["label_" + c for c in CLASSES] + ["score_" + c for c in CLASSES])
            for name, y, p in zip(names, labels, scores):
                out.writerow([name] + [int(v) for v in y] + ["%.9g" % v for v in p])
    replace_atomically(os.path.join(output, filename), write)


def read_predictions(path):
    """(names [N], labels int [N, 14], scores float64 [N, 14]) of a file ``write_predictions`` wrote; TrainerError
    naming the file and row when a column is missing or a value is not a number."""
    import numpy as np
    names, labels, scores = [], [], []
    try:
        with open(path, newline="") as f:
            for line, row in enumerate(csv.DictReader(f), start=2):
                try:
                    labels.append([int(row["label_" + c]) for c in CLASSES])
                    scores.append([float(row["score_" + c]) for c in CLASSES])
                except (KeyError, TypeError, ValueError) as e:
                    raise TrainerError("%s:%d: expected label_<class> 0/1 and score_<class> numbers for the 14 "
                                       "classes (%s)" % (path, line, e))
                names.append(row["Image Index"])
    except (IOError, OSError) as e:
        raise TrainerError("cannot read %s: %s" % (path, e))
    return names, np.array(labels, dtype=np.int64).reshape(-1, len(CLASSES)), np.array(
        scores, dtype=np.float64).reshape(-1, len(CLASSES))


def _split_rows(path):
    """[(image name, patient ID, split)] of the splits.csv at ``path`` (``write_splits``); TrainerError naming it
    when it cannot be read."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            return [(r["Image Index"], r["Patient ID"], r["split"]) for r in csv.DictReader(f)]
    except (IOError, OSError, KeyError, UnicodeDecodeError) as e:
        raise TrainerError("cannot read %s: %s" % (path, e))


def read_splits(output):
    """{image name: patient ID} of ``OUTPUT/splits.csv`` (``write_splits``)."""
    return dict((image, patient) for image, patient, _ in _split_rows(os.path.join(output, SPLITS)))


#: splits.csv's header (``write_splits``), by which a file given as a list of names is known to be one
SPLITS_HEADER = ("Image Index", "Patient ID", "split")


def splits_beside(model):
    """The path of the splits.csv of the run that saved ``model`` (beside it, or one folder up for a checkpoint's
    ``checkpoint/epoch-NNNN.h5``), else None."""
    folder = os.path.dirname(os.path.abspath(model))
    for candidate in (folder, os.path.dirname(folder)):
        path = os.path.join(candidate, SPLITS)
        if os.path.isfile(path):
            return path
    return None


def trained_on(model):
    """(image names of the training and validation splits, splits.csv's path) of the run that saved ``model``
    (``splits_beside``), else (None, None)."""
    path = splits_beside(model)
    if path is None:
        return None, None
    return set(image for image, _, split in _split_rows(path) if split in (TRAIN, VAL)), path


def is_splits_file(path):
    """Whether the file at ``path`` starts with splits.csv's header (``SPLITS_HEADER``; its line end ``\r\n``, the
    csv module's, or ``\n``). False for a file that cannot be read (its reader says why)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            first = next(csv.reader(f), None)
    except (IOError, OSError, UnicodeDecodeError, csv.Error):
        return False
    return first is not None and tuple(first) == SPLITS_HEADER


def split_names(path, split):
    """The image names of ``split`` (train, val, test) in the splits.csv at ``path``, in its order; TrainerError
    naming the file when it is not a splits.csv (its header is not ``SPLITS_HEADER``) or cannot be read."""
    if not is_splits_file(path):
        raise TrainerError("%s: not a run's splits.csv (expected its first line %s)" % (path, ",".join(SPLITS_HEADER)))
    return [image for image, _, name in _split_rows(path) if name == split]


def write_splits(output, subsets):
    """splits.csv (``Image Index``, ``Patient ID``, ``split``) of ``subsets`` [(split name, Subset)]; returns
    {"file", "sha256", split name: {"images", "patients", "sha256"}} where a split's sha256 is that of its sorted
    image names joined by newlines (compare runs without the file)."""
    summary = OrderedDict([("file", SPLITS)])

    def write(tmp):
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(list(SPLITS_HEADER))
            for name, subset in subsets:
                for image, patient in zip(subset.names, subset.patients):
                    out.writerow([image, patient, name])
    replace_atomically(os.path.join(output, SPLITS), write)
    summary["sha256"] = file_sha256(os.path.join(output, SPLITS))
    summary.update(split_digests(subsets))
    return summary


def split_digests(subsets):
    """{split name: {"images", "patients", "sha256"}} of ``subsets`` [(split name, Subset)], a split's sha256 that
    of its sorted image names joined by newlines (UTF-8): the same split gives the same digest in any run, with or
    without ``splits.csv``."""
    digests = OrderedDict()
    for name, subset in subsets:
        digest = hashlib.sha256("\n".join(sorted(subset.names)).encode("utf-8")).hexdigest()
        digests[name] = OrderedDict([("images", len(subset)), ("patients", len(set(subset.patients))),
                                     ("sha256", digest)])
    return digests


def write_skipped_images(path, skipped):
    """``skipped``: [{"path", "reason"}] -> CSV with those two columns."""
    def write(tmp):
        with open(tmp, "w", newline="", encoding="utf-8") as f:  # paths may be non-ASCII (C locale: ascii)
            out = csv.writer(f)
            out.writerow(["path", "reason"])
            for item in skipped:
                out.writerow([item["path"], item["reason"]])
    replace_atomically(path, write)


def add_skipped_images(path, skipped):
    """Add ``skipped`` ([{"path", "reason"}]) to the CSV at ``path`` (made when missing); paths listed already keep
    their first reason."""
    rows = []
    if os.path.exists(path):
        with open(path, newline="", encoding="utf-8") as f:
            rows = [{"path": r["path"], "reason": r["reason"]} for r in csv.DictReader(f)]
    listed = set(r["path"] for r in rows)
    new = [s for s in skipped if s["path"] not in listed]
    if new:
        write_skipped_images(path, rows + new)


def save_model(model, path, include_optimizer):
    """Keras HDF5 file, written atomically (the temp name ends in .h5 so every Keras version picks HDF5)."""
    def write(tmp):
        with warnings.catch_warnings():  # Keras >= 2.13 calls HDF5 "legacy"; it is the format every version reads
            warnings.filterwarnings("ignore", message=".*HDF5 file.*")
            model.save(tmp, include_optimizer=include_optimizer)
    replace_atomically(path, write, suffix=".h5")
