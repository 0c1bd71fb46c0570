"""Validation AUROC from the predictions of ALL ranks pooled — never an average of per-rank AUROCs.

AUROC is a rank statistic of the whole set: averaging per-shard values (``hvd.allreduce(auc)``,
``MetricAverageCallback``) is wrong — https://github.com/horovod/horovod/issues/444 has shards with AUROC 1.0 each whose
pooled AUROC is
0.4375 (horovod/horovod#444). So each rank predicts its shard, ``hvd.allgather`` pools (row index, scores) on
every rank, and rank 0 computes one AUROC per pathology with scikit-learn's ``roc_auc_score`` on the pooled rows.

A pathology whose labels in the split are all 0 or all 1 has no AUROC (``roc_auc_score`` is undefined there):
it is ``None`` (null in JSON, "undefined" on screen) — not a crash, not 0.5 — and is left out of the mean. One
with an AUROC from fewer than ``MIN_CASES`` positives or negatives, or a set of fewer than ``MIN_CASES`` patients,
is a result that means little (``few_cases``).
"""
import numpy as np

from trainer import compat
from trainer.errors import TrainerError
from trainer.labels import CLASSES


def predict_shard(model, dataset):
    """Run ``model`` over an evaluation dataset of (images, indices) batches.

    Returns (indices int64 [n], scores float32 [n, 14]); images that failed to decode are simply absent.
    ``dataset`` None (a rank without validation rows) gives empty arrays.
    """
    indices, scores = [np.zeros((0,), np.int64)], [np.zeros((0, len(CLASSES)), np.float32)]
    for images, batch_indices in (compat.iterate_numpy(dataset) if dataset is not None else ()):
        scores.append(np.asarray(model.predict_on_batch(images), dtype=np.float32))
        indices.append(np.asarray(batch_indices, dtype=np.int64))
    return np.concatenate(indices), np.concatenate(scores)


def pool(indices, scores, tag):
    """Allgather (indices, scores) of every rank, in rank order; ``tag`` makes the collective names unique."""
    return (compat.allgather(indices, "chexstack_eval_idx_%s" % tag),
            compat.allgather(scores, "chexstack_eval_scores_%s" % tag))


def order_rows(indices, scores, n_expected):
    """Sort pooled rows by index and check them against the split of ``n_expected`` rows.

    Returns (indices, scores, missing) with ``missing`` the sorted indices no rank returned (failed decodes).
    A duplicated or out-of-range index means the shards overlap: a TrainerError (a bug, never silently kept).
    """
    indices = np.asarray(indices, dtype=np.int64)
    unique, counts = np.unique(indices, return_counts=True)
    if (counts > 1).any():
        raise TrainerError("evaluation: validation rows %s were predicted by more than one rank (shards overlap)"
                           % unique[counts > 1][:10].tolist())
    if len(indices) and (indices.min() < 0 or indices.max() >= n_expected):
        raise TrainerError("evaluation: row index outside the %d validation rows" % n_expected)
    order = np.argsort(indices, kind="mergesort")
    missing = np.setdiff1d(np.arange(n_expected, dtype=np.int64), indices)
    return indices[order], np.asarray(scores)[order], missing


def _roc_auc_score():
    try:
        from sklearn.metrics import roc_auc_score
    except ImportError as e:
        raise TrainerError("rank 0 needs scikit-learn to compute AUROC (%s); install scikit-learn into this "
                           "environment or image" % e)
    return roc_auc_score


def auroc_per_class(labels, scores):
    """AUROC of each column: labels {0,1} [N, C], scores [N, C] → list of C floats or None (undefined)."""
    roc_auc_score = _roc_auc_score()
    labels = np.asarray(labels)
    scores = np.asarray(scores, dtype=np.float64)
    values = []
    for c in range(labels.shape[1]):
        column = labels[:, c]
        if column.size == 0 or column.min() == column.max():
            values.append(None)
        else:
            values.append(float(roc_auc_score(column, scores[:, c])))
    return values


def mean_defined(values):
    """Mean of the values that are not None, or None if there are none."""
    defined = [v for v in values if v is not None]
    return float(np.mean(defined)) if defined else None


def _weighted_auroc(scores, positive, weights):
    """AUROC of one class for each row of ``weights`` [R, n] (resample multiplicities): the Mann-Whitney statistic
    with ties counted half, vectorised over resamples. Returns float64 [R], NaN where a resample has no positive or
    no negative."""
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    starts = np.concatenate([[0], np.nonzero(np.diff(sorted_scores))[0] + 1])
    w = weights[:, order]
    pos = np.add.reduceat(w * positive[order], starts, axis=1)
    neg = np.add.reduceat(w * (1 - positive[order]), starts, axis=1)
    below = np.cumsum(neg, axis=1) - neg
    n_pos, n_neg = pos.sum(axis=1), neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (pos * (below + 0.5 * neg)).sum(axis=1) / (n_pos * n_neg)
    auc[(n_pos == 0) | (n_neg == 0)] = np.nan
    return auc


def patient_resamples(patients, resamples, seed):
    """The row weights of ``resamples`` bootstrap resamples of PATIENTS drawn with replacement (a patient's images
    move together: they are not independent; Efron & Tibshirani 1993, ch. 13): a list of float64 chunks [r, N]
    (r <= 100, N = len(patients)), row i's weight being how often its patient was drawn. The same (patient set,
    ``resamples``, ``seed``) gives the same draws, so two models scored on the same rows are resampled alike."""
    ids = sorted(set(patients))
    index = dict((p, i) for i, p in enumerate(ids))
    row_patient = np.array([index[p] for p in patients], dtype=np.int64)
    rng = np.random.RandomState(seed)
    chunks = []
    for start in range(0, resamples, 100):
        draws = rng.multinomial(len(ids), np.full(len(ids), 1.0 / len(ids)), size=min(100, resamples - start))
        chunks.append(draws[:, row_patient].astype(np.float64))
    return chunks


def resampled_auroc(labels, scores, chunks, point):
    """AUROC of every class in every resample: float64 [R, C], NaN where the class is undefined in the resample or
    in ``point`` (the per-class AUROCs of all rows, None: undefined)."""
    labels = np.asarray(labels, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    total = sum(len(w) for w in chunks)
    values = np.full((total, labels.shape[1]), np.nan)
    for c in range(labels.shape[1]):
        if point[c] is not None and chunks:
            values[:, c] = np.concatenate([_weighted_auroc(scores[:, c], labels[:, c], w) for w in chunks])
    return values


def _mean_over_defined(values):
    """Row means of [R, C] over the non-NaN columns: float64 [R], NaN where a row has none."""
    defined = ~np.isnan(values)
    counts = defined.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(defined, values, 0.0).sum(axis=1) / counts
    means[counts == 0] = np.nan
    return means


def percentile_interval(values, resamples, level=0.95):
    """The percentile interval (low, high) of the defined (non-NaN) resample ``values``, and how many were defined;
    (None, None, n) when fewer than half of the ``resamples`` define it."""
    defined = values[~np.isnan(values)]
    if not len(defined) or len(defined) < resamples / 2.0:
        return None, None, int(len(defined))
    alpha = (1.0 - level) / 2 * 100
    low, high = np.percentile(defined, [alpha, 100 - alpha])
    return float(low), float(high), int(len(defined))


def _bootstrap(labels, scores, patients, resamples, seed, level):
    """(per-class entries as ``bootstrap_auroc`` returns them, the [R, C] resampled AUROCs)."""
    labels = np.asarray(labels, dtype=np.float64)
    point = auroc_per_class(labels, scores)
    values = resampled_auroc(labels, scores, patient_resamples(patients, resamples, seed), point)
    result = []
    for c in range(labels.shape[1]):
        entry = {"auroc": point[c], "ci_low": None, "ci_high": None,
                 "n_positive": int(labels[:, c].sum()), "n_resamples_defined": 0}
        if point[c] is not None and resamples:
            entry["ci_low"], entry["ci_high"], entry["n_resamples_defined"] = percentile_interval(
                values[:, c], resamples, level)
        result.append(entry)
    return result, values


def bootstrap_auroc(labels, scores, patients, resamples=1000, seed=0, level=0.95):
    """Per-class AUROC with a percentile bootstrap interval, resampling PATIENTS with replacement
    (``patient_resamples``).

    labels {0,1} [N, C], scores [N, C], patients: N IDs. Returns a list of C dicts {"auroc", "ci_low", "ci_high",
    "n_positive", "n_resamples_defined"}; "auroc" None where the class has no positive or no negative, the interval
    None where fewer than half of the resamples define it (``resamples`` 0: no intervals).
    """
    return _bootstrap(labels, scores, patients, resamples, seed, level)[0]


def paired_difference(labels, scores, other, patients, resamples=1000, seed=0, level=0.95):
    """Mean AUROC of ``scores`` minus that of ``other`` (two models' scores [N, C] of the SAME rows), with a paired
    percentile patient-bootstrap interval: each resample draws the patients once (``patient_resamples``, the draws
    of ``bootstrap_auroc`` with the same seed) and scores both models on it; its difference is that of the two
    mean AUROCs over the classes the resample defines (the same for both: it depends on the labels only).

    Returns {"difference", "ci_low", "ci_high", "level", "n_resamples_defined", "n_classes", "distinguishable"}:
    "difference" None without a defined class; the interval None where fewer than half of the resamples define it;
    "distinguishable" True when the interval excludes 0, False when it includes it, None without an interval.
    """
    labels = np.asarray(labels, dtype=np.float64)
    point, point_other = auroc_per_class(labels, scores), auroc_per_class(labels, other)
    mean, mean_other = mean_defined(point), mean_defined(point_other)
    result = {"difference": None if mean is None else mean - mean_other, "ci_low": None, "ci_high": None,
              "level": level, "n_resamples_defined": 0, "n_classes": sum(v is not None for v in point),
              "distinguishable": None}
    if mean is None or not resamples:
        return result
    chunks = patient_resamples(patients, resamples, seed)
    differences = (_mean_over_defined(resampled_auroc(labels, scores, chunks, point)) -
                   _mean_over_defined(resampled_auroc(labels, other, chunks, point_other)))
    result["ci_low"], result["ci_high"], result["n_resamples_defined"] = percentile_interval(
        differences, resamples, level)
    if result["ci_low"] is not None:
        result["distinguishable"] = bool(result["ci_low"] > 0 or result["ci_high"] < 0)
    return result


def held_out_block(labels, scores, patients, resamples, seed, n_expected, skipped):
    """The ``test`` block of metrics.json: per-class AUROC with 95 % patient-bootstrap intervals and positives,
    the mean AUROC over defined classes with its interval (the same resamples, each one's mean over the classes
    it defines), the rows scored."""
    from collections import OrderedDict
    per_class, values = _bootstrap(labels, scores, patients, resamples, seed, 0.95)
    low, high, _ = percentile_interval(_mean_over_defined(values), resamples) if resamples else (None, None, 0)
    return OrderedDict([
        ("auroc", OrderedDict((name, OrderedDict(sorted(entry.items()))) for name, entry in zip(CLASSES, per_class))),
        ("mean_auroc", mean_defined([e["auroc"] for e in per_class])),
        ("mean_auroc_ci_low", low), ("mean_auroc_ci_high", high),
        ("n_classes_defined", sum(e["auroc"] is not None for e in per_class)),
        ("n_images", int(len(labels))), ("n_patients", len(set(patients))),
        ("rows", OrderedDict([("expected", n_expected), ("evaluated", int(len(labels))), ("skipped", skipped)])),
        ("bootstrap", OrderedDict([("resamples", resamples), ("unit", "patient"), ("level", 0.95),
                                   ("method", "percentile"), ("seed", seed)])),
    ])


def baseline_comparison(labels, patients, model_rows, baseline_rows, resamples, seed):
    """The ``comparison`` block of metrics.json: the CNN's test mean AUROC minus the baseline's on the test rows
    both scored (``paired_difference``), and whether the 95 % interval tells them apart.

    ``labels`` {0,1} [N, 14] and ``patients`` (N IDs) of the whole test split; ``model_rows`` and
    ``baseline_rows``: (row indices into it, scores [n, 14]) of each model."""
    from collections import OrderedDict
    rows = np.intersect1d(model_rows[0], baseline_rows[0])
    pick = [np.asarray(scored)[np.searchsorted(indices, rows)] for indices, scored in (model_rows, baseline_rows)]
    row_patients = [patients[i] for i in rows]
    result = paired_difference(np.asarray(labels)[rows], pick[0], pick[1], row_patients, resamples, seed)
    if result["difference"] is None:
        verdict = "undefined"
    elif result["distinguishable"] is None:
        verdict = "no interval"
    elif not result["distinguishable"]:
        verdict = "not distinguishable"
    else:
        verdict = "CNN better" if result["ci_low"] > 0 else "baseline better"
    return OrderedDict([
        ("statistic", "CNN test mean AUROC minus the baseline's, on the same images"),
        ("difference", result["difference"]), ("ci_low", result["ci_low"]), ("ci_high", result["ci_high"]),
        ("level", result["level"]), ("distinguishable", result["distinguishable"]), ("verdict", verdict),
        ("n_classes", result["n_classes"]), ("n_images", int(len(rows))), ("n_patients", len(set(row_patients))),
        ("n_resamples_defined", result["n_resamples_defined"]),
        ("bootstrap", OrderedDict([("resamples", resamples), ("unit", "patient"), ("paired", True),
                                   ("method", "percentile"), ("seed", seed)])),
    ])


#: Below this many positive (or negative) images of a pathology, or patients in the set, an AUROC and its 95 %
#: interval mean little. Hanley & McNeil (1982, Radiology 143:29-36) give an AUROC A's standard error; with n
#: positives among many more negatives it is about sqrt((Q2 - A^2) / n), Q2 = 2A^2 / (1 + A): 0.29 / sqrt(n) at
#: A = 0.5, 0.27 / sqrt(n) at 0.8, so at 30 positives the 95 % interval is already about +-0.1 (the size of the
#: gains CheXNet reported over the models before it: Rajpurkar et al. 2017, arXiv:1711.05225, Table 2), wider
#: below 30 (the same with positives and negatives swapped). The intervals here resample patients
#: (``patient_resamples``); a percentile bootstrap over few units is too narrow and its coverage falls short of 95 %
#: (Hesterberg 2015, "What Teachers Should Know About the Bootstrap", The American Statistician 69(4), "narrowness
#: bias"), the more so below 30.
MIN_CASES = 30


def few_cases(block, minimum=MIN_CASES):
    """Whether ``block`` (``held_out_block``'s) rests on too few cases to mean much: {"minimum", "pathologies":
    {name: {"n_positive", "n_negative"}} of the pathologies WITH an AUROC whose positive or negative images are
    fewer than ``minimum``, "n_patients", "few_patients" (fewer than ``minimum`` patients), "warning" (a sentence
    saying so and why, None when neither)}. Undefined AUROCs are not listed: they are not in the mean."""
    from collections import OrderedDict
    few = OrderedDict()
    for name, entry in block["auroc"].items():
        positives, negatives = entry["n_positive"], block["n_images"] - entry["n_positive"]
        if entry["auroc"] is not None and min(positives, negatives) < minimum:
            few[name] = OrderedDict([("n_positive", positives), ("n_negative", negatives)])
    few_patients = block["n_patients"] < minimum
    warning = None
    if few or few_patients:
        said = []
        if few:
            said.append("%d of the %d pathologies with an AUROC have fewer than %d positive or %d negative images "
                        "(%s)" % (len(few), block["n_classes_defined"], minimum, minimum,
                           ", ".join("%s %d+/%d-" % (n, e["n_positive"], e["n_negative"]) for n, e in few.items())))
        if few_patients:
            said.append("the %d patients, the bootstrap's units, are fewer than %d" % (block["n_patients"], minimum))
        warning = ("the AUROCs and their 95 %% intervals mean little: %s; below %d positives an AUROC's 95 %% interval "
                   "is wider than +-0.1 (Hanley & McNeil 1982), and a patient bootstrap over few patients gives "
                   "intervals too narrow (Hesterberg 2015); score more images" % ("; ".join(said), minimum))
    return OrderedDict([("minimum", minimum), ("pathologies", few), ("n_patients", block["n_patients"]),
                        ("few_patients", few_patients), ("warning", warning)])
