"""The baseline every CNN number is read against: a logistic regression on down-sampled pixels.

Each image is decoded and resized like the CNN's input (``pipeline.png_loader``, antialiased) to ``size`` x
``size`` gray values, standardised per pixel on the training split; one L2-regularised logistic regression per
pathology (scikit-learn ``LogisticRegression``, lbfgs, C = 1, ``class_weight="balanced"`` as the CNN's weighted
loss) is fitted on the SAME training split and scored on the SAME test split, with the same patient-bootstrap
intervals (``evaluation.held_out_block``). A pathology without positives (or without negatives) in the training
rows has no model: its scores are 0.5 everywhere, so its test AUROC is 0.5 if defined.

Runs on rank 0 only, after the CNN's test evaluation. At most ``MAX_TRAIN`` training rows (a seeded sample) keep it
to minutes on the full dataset.
"""
import numpy as np

from trainer import compat, evaluation, pipeline
from trainer.errors import TrainerError
from trainer.labels import CLASSES

MAX_TRAIN = 20000


def pixels(subset, rows, size, loader_factory):
    """float32 [len(rows), size * size] gray values of ``subset``'s ``rows`` (rows that fail to decode: NaN)."""
    features = np.full((len(rows), size * size), np.nan, dtype=np.float32)
    if not len(rows):
        return features
    keys = [subset.paths[i] for i in rows]
    dataset = pipeline.evaluation(keys, np.arange(len(rows), dtype=np.int64), 64, loader_factory(size))
    for images, indices in compat.iterate_numpy(dataset):
        features[np.asarray(indices)] = np.asarray(images).reshape(len(indices), -1)
    return features


def fit_and_score(train_x, train_y, test_x):
    """One logistic regression per class on ``train_x`` [n, d] / ``train_y`` {0,1} [n, 14]; returns test
    scores [m, 14] (0.5 for classes without both label values in training)."""
    try:
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler
    except ImportError as e:
        raise TrainerError("the logistic-regression baseline needs scikit-learn (%s); or pass --baseline-size 0" % e)
    scaler = StandardScaler().fit(train_x)
    train_x, test_x = scaler.transform(train_x), scaler.transform(test_x)
    scores = np.full((len(test_x), len(CLASSES)), 0.5, dtype=np.float32)
    for c in range(len(CLASSES)):
        y = np.asarray(train_y)[:, c]
        if y.min() == y.max():
            continue
        model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=1000)
        scores[:, c] = model.fit(train_x, y).predict_proba(test_x)[:, 1]
    return scores


def run(data, size, seed, resamples, loader_factory):
    """(the ``baseline`` block of metrics.json: the ``test`` block's fields plus the method; (the test rows scored,
    their scores [n, 14]) for ``evaluation.baseline_comparison``), or (None, None) without a test split."""
    if not len(data.test):
        return None, None
    train_rows = np.arange(len(data.train))
    if len(train_rows) > MAX_TRAIN:
        train_rows = np.sort(np.random.RandomState(seed).choice(train_rows, MAX_TRAIN, replace=False))
    train_x = pixels(data.train, train_rows, size, loader_factory)
    test_x = pixels(data.test, np.arange(len(data.test)), size, loader_factory)
    keep_train = ~np.isnan(train_x).any(axis=1)
    keep_test = np.nonzero(~np.isnan(test_x).any(axis=1))[0]
    scores = fit_and_score(train_x[keep_train], data.train.labels[train_rows][keep_train], test_x[keep_test])
    block = evaluation.held_out_block(data.test.labels[keep_test], scores, [data.test.patients[i] for i in keep_test],
                                      resamples, seed, len(data.test),
                                      [data.test.paths[i] for i in sorted(set(range(len(data.test))) -
                                                                          set(keep_test.tolist()))])
    block["method"] = ("logistic regression (scikit-learn, C=1, balanced class weights) on %dx%d standardised "
                       "pixels, %d training images" % (size, size, int(keep_train.sum())))
    return block, (keep_test, scores)
