"""CheXNet's class-weighted BCE, atomic writes, checkpoint identity (../shared/cases/18: no resume across label
files)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from trainer import checkpoint, loss, outputs
from trainer.errors import TrainerError


def test_class_weights_follow_chexnet():
    # 4 images: class 0 positive once, class 1 never, class 2 always (w+ = |N|/(|P|+|N|), w- = |P|/(|P|+|N|))
    labels = np.zeros((4, 14), np.uint8)
    labels[0, 0] = 1
    labels[:, 2] = 1
    w_pos, w_neg = loss.class_weights(labels)
    assert w_pos[:3].tolist() == [0.75, 1.0, 0.0] and w_neg[:3].tolist() == [0.25, 0.0, 1.0]


def test_weighted_bce_value():
    import tensorflow as tf
    w_pos, w_neg = np.full(14, 0.8, np.float32), np.full(14, 0.2, np.float32)
    y = np.zeros((2, 14), np.float32)
    y[0, :7] = 1
    p = np.full((2, 14), 0.7, np.float32)
    got = tf.keras.backend.get_value(loss.weighted_bce(w_pos, w_neg)(tf.constant(y), tf.constant(p)))
    expected = -(0.8 * y * np.log(p) + 0.2 * (1 - y) * np.log(1 - p)).mean(axis=-1)
    assert np.allclose(got, expected, rtol=1e-6)
    assert loss.weighted_bce(w_pos, w_neg).__name__ == "weighted_bce"  # the name HDF5 files refer to


def test_failed_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "metrics.json"
    outputs.write_json(str(path), {"epochs": [1]})

    def broken(tmp):
        open(tmp, "w").write('{"epochs": [1, 2')
        raise RuntimeError("crash while writing")

    with pytest.raises(RuntimeError):
        outputs.replace_atomically(str(path), broken)
    assert json.loads(path.read_text()) == {"epochs": [1]}
    assert os.listdir(tmp_path) == ["metrics.json"]


def _identity(**kw):
    value = {"label_sha256": "a" * 64, "model": "densenet121", "image_size": 64, "seed": 0, "n_train": 10,
             "n_val": 2}
    value.update(kw)
    return value


def test_resume_refused_with_another_label_file(tmp_path):
    os.makedirs(checkpoint.folder(str(tmp_path)))
    outputs.write_json(os.path.join(checkpoint.folder(str(tmp_path)), checkpoint.STATE),
                       dict(_identity(), epoch=1, model_file="epoch-0001.h5"))
    state = checkpoint.load_state(str(tmp_path))
    checkpoint.check_identity(state, _identity(), str(tmp_path))
    with pytest.raises(TrainerError, match="label_sha256.*a different label file"):
        checkpoint.check_identity(state, _identity(label_sha256="b" * 64), str(tmp_path))
    with pytest.raises(TrainerError, match="image_size is 64, this run's is 224"):
        checkpoint.check_identity(state, _identity(image_size=224), str(tmp_path))
    with pytest.raises(TrainerError, match="cannot see"):
        checkpoint.model_path(str(tmp_path), state)


def test_resume_refusal_names_every_field_that_differs(tmp_path):
    """One refusal, every offender: the user fixes them all at once, not one per attempt."""
    state = dict(_identity(), epoch=1, model_file="epoch-0001.h5")
    with pytest.raises(TrainerError) as e:
        checkpoint.check_identity(state, _identity(model="resnet50", image_size=224, label_sha256="b" * 64),
                                  str(tmp_path))
    assert "its label_sha256 is %r, this run's is %r; its model is 'densenet121', this run's is 'resnet50'; its " \
           "image_size is 64, this run's is 224 (a different label file" % ("a" * 64, "b" * 64) in str(e.value)


def test_predictions_csv_round_trips_float32(tmp_path):
    scores = np.random.RandomState(0).rand(3, 14).astype(np.float32)
    outputs.write_predictions(str(tmp_path), ["a", "b", "c"], np.eye(3, 14, dtype=np.uint8), scores)
    rows = (tmp_path / "predictions.csv").read_text().splitlines()
    assert rows[0].split(",")[:2] == ["Image Index", "label_Atelectasis"] and len(rows[0].split(",")) == 29
    back = np.array([[float(v) for v in r.split(",")[15:]] for r in rows[1:]], dtype=np.float32)
    assert (back == scores).all()
