"""Validation AUROC from the predictions of ALL ranks pooled — never an average of per-rank AUROCs.

AUROC is a rank statistic of the whole set: averaging per-shard values (``hvd.allreduce(auc)``,
``MetricAverageCallback``) is wrong — ../shared/cases/16 has shards with AUROC 1.0 each whose pooled AUROC is
0.4375 (horovod/horovod#444). So each rank predicts its shard, ``hvd.allgather`` pools (row index, scores) on
every rank, and rank 0 computes one AUROC per pathology with scikit-learn's ``roc_auc_score`` on the pooled rows.

A pathology whose labels in the split are all 0 or all 1 has no AUROC (``roc_auc_score`` is undefined there):
it is ``None`` (null in JSON, "undefined" on screen) — not a crash, not 0.5 — and is left out of the mean.
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
