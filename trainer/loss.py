"""Class-weighted binary cross-entropy of CheXNet.

Rajpurkar et al. 2017, "CheXNet: Radiologist-Level Pneumonia Detection on Chest X-Rays with Deep Learning",
https://arxiv.org/abs/1711.05225, §2.2: L(X, y) = −w₊·y·log p(Y=1|X) − w₋·(1−y)·log p(Y=0|X) with
w₊ = |N| / (|P| + |N|) and w₋ = |P| / (|P| + |N|), |P| and |N| the numbers of positive and negative cases in the
TRAINING set; applied per pathology for the 14-label model and averaged over pathologies and the batch.
"""
import numpy as np
import tensorflow as tf

EPSILON = 1e-7
K = tf.keras.backend


def class_weights(labels):
    """(w_pos, w_neg), float32 arrays [14], from training labels uint8 [N, 14].

    A pathology with no positive example gets w₊ = 1, w₋ = 0 (it cannot be learned from this set).
    """
    labels = np.asarray(labels, dtype=np.float64)
    n = float(labels.shape[0])
    positives = labels.sum(axis=0)
    w_pos = (n - positives) / n
    w_neg = positives / n
    return w_pos.astype(np.float32), w_neg.astype(np.float32)


def weighted_bce(w_pos, w_neg):
    """Keras loss ``(y_true [B, 14], y_pred [B, 14]) → [B]`` named ``weighted_bce`` (its HDF5 name)."""
    w_pos = K.constant(np.asarray(w_pos, dtype=np.float32))
    w_neg = K.constant(np.asarray(w_neg, dtype=np.float32))

    def weighted_bce(y_true, y_pred):
        y_true = K.cast(y_true, "float32")
        p = K.clip(K.cast(y_pred, "float32"), EPSILON, 1.0 - EPSILON)
        terms = w_pos * y_true * K.log(p) + w_neg * (1.0 - y_true) * K.log(1.0 - p)
        return -K.mean(terms, axis=-1)

    return weighted_bce


def weighted_bce_value(labels, scores, w_pos, w_neg):
    """The loss above in NumPy over pooled predictions: labels {0,1} [N, 14], scores [N, 14] -> float (mean over
    rows and pathologies); the validation loss of an epoch."""
    y = np.asarray(labels, dtype=np.float64)
    p = np.clip(np.asarray(scores, dtype=np.float64), EPSILON, 1.0 - EPSILON)
    if not len(y):
        return None
    terms = np.asarray(w_pos) * y * np.log(p) + np.asarray(w_neg) * (1.0 - y) * np.log(1.0 - p)
    return float(-np.mean(terms))
