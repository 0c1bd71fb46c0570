"""The recipe's pure parts: epoch plans (order, once per epoch, augmentation as a function of (seed, epoch)),
plateau decisions and their replay, the patient bootstrap, the validation loss. No TensorFlow run."""
from __future__ import annotations

import numpy as np
import pytest

from trainer import order, recipe
from trainer.evaluation import bootstrap_auroc

AUG = order.Augmentation(rotation=5, shift=0.05, zoom=0.1, hflip=True)


@pytest.mark.parametrize("n,batch,size", [(560, 16, 2), (33, 16, 2), (800, 16, 3), (5, 1, 2), (7, 4, 4), (1, 8, 1)])
def test_each_row_once_per_epoch_across_ranks_and_equal_steps(n, batch, size):
    steps = order.steps_per_epoch(n, batch, size)
    for epoch in range(3):
        per_rank = [order.rank_stream(n, batch, r, size, 7, [epoch], 32, AUG) for r in range(size)]
        assert {len(lengths) for _, _, lengths in per_rank} == {steps}
        assert all(lengths.max() <= batch and lengths.min() >= 1 for _, _, lengths in per_rank)
        seen = np.concatenate([rows for rows, _, _ in per_rank])
        if steps * size <= n:
            assert sorted(seen.tolist()) == list(range(n))
        else:  # --batch-size 1, N not a multiple of the world size: the only repeats
            assert set(seen.tolist()) == set(range(n)) and len(seen) == steps * size


def test_plan_is_a_function_of_seed_and_epoch():
    whole = order.rank_stream(100, 8, 1, 2, 3, range(0, 3), 64, AUG)
    tail = order.rank_stream(100, 8, 1, 2, 3, range(1, 3), 64, AUG)
    cut = len(order.rank_stream(100, 8, 1, 2, 3, [0], 64, AUG)[0])
    assert np.array_equal(whole[0][cut:], tail[0]) and np.array_equal(whole[1][cut:], tail[1])
    other_epoch = order.epoch_batches(100, 8, 2, 3, 1)
    assert not np.array_equal(np.concatenate(order.epoch_batches(100, 8, 2, 3, 0)), np.concatenate(other_epoch))
    assert not np.array_equal(np.concatenate(order.epoch_batches(100, 8, 2, 4, 1)), np.concatenate(other_epoch))


def test_transforms_stay_small_and_never_flip_vertically():
    t = order.epoch_transforms(2000, 0, 0, 64, AUG)
    assert t.shape == (2000, 8) and not t[:, 6:].any()
    # the y row of the affine part never has a negative determinant component from a vertical flip
    det = t[:, 0] * t[:, 4] - t[:, 1] * t[:, 3]
    flipped = det < 0
    assert 0.4 < flipped.mean() < 0.6  # horizontal flips about half the time
    assert (t[:, 4] > 0).all()  # y keeps its direction (rotation <= 5 degrees)
    assert (np.abs(det) > 1 / 1.1 ** 2 - 1e-3).all() and (np.abs(det) < 1 / 0.9 ** 2 + 1e-3).all()
    none = order.epoch_transforms(10, 0, 0, 64, order.Augmentation())
    assert np.array_equal(none, np.tile(order.IDENTITY, (10, 1)))


def test_plateau_decays_after_warmup_stops_early_and_replays():
    p = recipe.Plateau("val_loss", patience=1, factor=0.1, early_stop=3, warmup_epochs=3)
    decisions = [p.update(e, v) for e, v in enumerate([1.0, 1.1, 1.2, 0.9, 0.95, 0.96, 0.97], start=1)]
    assert [d[0] for d in decisions] == [True, False, False, True, False, False, False]
    assert [d[1] for d in decisions] == [False, False, True, False, True, True, True]  # epoch 2 ends inside the warm-up
    assert [d[2] for d in decisions] == [False] * 7  # no floor (0): the LR never reaches one, so no early stop
    assert p.best_epoch == 4 and p.lr_multiplier() == pytest.approx(1e-4)
    entries = [{"epoch": e, "monitor_value": v} for e, v in enumerate([1.0, 1.1, 1.2, 0.9], start=1)]
    again = recipe.Plateau("val_loss", 1, 0.1, 3, 3).replay(entries)
    assert (again.best, again.best_epoch, again.decays, again.wait) == (0.9, 4, 1, 0)
    auroc = recipe.Plateau("mean_auroc", patience=2)
    assert [auroc.update(e, v)[0] for e, v in enumerate([0.6, 0.7, None, 0.65], 1)] == [True, True, False, False]
    assert auroc.decays == 1


def test_bootstrap_point_estimate_and_interval_match_scikit_learn_weighted():
    from sklearn.metrics import roc_auc_score
    rng = np.random.RandomState(0)
    n = 300
    patients = ["p%d" % (i // 3) for i in range(n)]
    y = (rng.rand(n, 14) < 0.2).astype(np.uint8)
    y[:, 13] = 0  # no positive: undefined
    scores = np.round(y * 0.3 + rng.rand(n, 14), 2)  # ties
    result = bootstrap_auroc(y, scores, patients, resamples=200, seed=1)
    assert result[13]["auroc"] is None and result[13]["ci_low"] is None and result[13]["n_positive"] == 0
    for c in range(13):
        assert result[c]["auroc"] == pytest.approx(roc_auc_score(y[:, c], scores[:, c]))
        assert result[c]["ci_low"] < result[c]["auroc"] < result[c]["ci_high"]
        assert result[c]["n_positive"] == int(y[:, c].sum())
    # one resample by hand: patient multiplicities as sample weights
    from trainer.evaluation import _weighted_auroc
    weights = rng.randint(0, 3, size=(1, n)).astype(float)
    assert _weighted_auroc(scores[:, 0], y[:, 0].astype(float), weights)[0] == pytest.approx(
        roc_auc_score(y[:, 0], scores[:, 0], sample_weight=weights[0]))


def test_validation_loss_equals_the_keras_loss():
    import tensorflow as tf

    from trainer import loss
    rng = np.random.RandomState(0)
    y = (rng.rand(20, 14) < 0.3).astype(np.float32)
    p = rng.rand(20, 14).astype(np.float32)
    w_pos, w_neg = loss.class_weights(y)
    keras_value = float(np.mean(np.asarray(loss.weighted_bce(w_pos, w_neg)(tf.constant(y), tf.constant(p)))))
    assert loss.weighted_bce_value(y, p, w_pos, w_neg) == pytest.approx(keras_value, rel=1e-5)


def test_weights_imagenet_offline_is_a_clear_error(monkeypatch):
    """Keras fetches the ImageNet weights with ``data_utils.get_file``; offline it raises "URL fetch failure"
    (simulated here, so the test does not depend on the network being absent)."""
    from keras.src.utils import data_utils

    from trainer import model
    from trainer.errors import TrainerError

    def offline(*args, **kwargs):
        raise Exception("URL fetch failure on https://storage.googleapis.com/...: None -- [Errno -3] "
                        "Temporary failure in name resolution")
    monkeypatch.setattr(data_utils, "get_file", offline)
    with pytest.raises(TrainerError) as e:
        model.build("resnet50", 32, "imagenet")
    assert "--weights imagenet" in str(e.value) and "~/.keras/models" in str(e.value)
    assert "Temporary failure in name resolution" in str(e.value)


def test_resnet50_gets_caffe_preprocessing():
    from trainer import model
    kernel, bias = model.normalisation_weights("resnet50")
    assert np.allclose(kernel, 1) and np.allclose(bias, [-103.939, -116.779, -123.68])  # BGR means, no scaling
    kernel, bias = model.normalisation_weights("densenet121")
    assert np.allclose(kernel.ravel() * 255 * np.array(model.IMAGENET_STD), 1)


@pytest.mark.parametrize("name,module", [("densenet121", "densenet"), ("resnet50", "resnet50"),
                                         ("mobilenet", "mobilenet")])
def test_normalisation_layer_is_the_backbones_own_preprocess_input(name, module):
    """The frozen 1x1 convolution on a gray image equals Keras' ``preprocess_input`` of the backbone's module on
    that image copied to R, G, B (the fact it stands for: keras/src/applications/<module>.py)."""
    import tensorflow as tf

    from trainer import model
    gray = np.random.default_rng(0).uniform(0, 255, (2, 4, 4, 1)).astype(np.float32)
    kernel, bias = model.normalisation_weights(name)
    ours = gray * kernel.reshape(1, 1, 1, 3) + bias
    keras = getattr(tf.keras.applications, module).preprocess_input(np.repeat(gray, 3, axis=-1))
    assert np.allclose(ours, keras, atol=1e-4), (name, ours[0, 0, 0], keras[0, 0, 0])


@pytest.mark.parametrize("requested,epochs,expected", [(None, 10, 1.0), (None, 18, 1.0), (None, 19, 2.0),
                                                       (None, 90, 5.0), (None, 300, 5.0), (0, 10, 0.0),
                                                       (3, 10, 3.0)])
def test_default_warmup_is_goyals_share_of_the_run_in_whole_epochs(requested, epochs, expected):
    assert recipe.warmup_epochs(requested, epochs) == expected


def test_statistics_rows_are_all_rows_or_a_seeded_sample():
    assert order.statistics_rows(5, 2048, 0).tolist() == [0, 1, 2, 3, 4]
    sample = order.statistics_rows(1000, 100, 3)
    assert len(set(sample.tolist())) == 100 and np.all(np.diff(sample) > 0) and sample.max() < 1000
    assert np.array_equal(sample, order.statistics_rows(1000, 100, 3))
    assert not np.array_equal(sample, order.statistics_rows(1000, 100, 4))


def _run(plateau, values):
    """(improved, decayed, stop) of each epoch until the plateau stops, and the LR multiplier each epoch trained at."""
    decisions, trained = [], []
    for epoch, value in enumerate(values, start=1):
        trained.append(plateau.lr_multiplier())
        decisions.append(plateau.update(epoch, value))
        if decisions[-1][2]:
            break
    return decisions, trained


def test_the_default_floor_is_three_decays_and_the_first_epoch_at_it_without_improvement_ends_the_run():
    from trainer import cli
    options = cli.parse(["--data", "synthetic"])
    assert (options.min_lr, options.min_delta, options.early_stop) == (None, 1e-4, 1)
    floor = recipe.min_lr(options.min_lr, options.lr) / options.lr
    assert floor == pytest.approx(1e-3)
    p = recipe.Plateau(options.monitor, options.lr_patience, options.lr_factor, options.early_stop, 1, floor,
                       options.min_delta)
    # the run of issue 27: best at epoch 1, then the same validation loss at every epoch
    decisions, trained = _run(p, [0.1, 0.11, 0.105, 0.0967, 0.0967, 0.0967, 0.0967, 0.0967])
    assert [d[1] for d in decisions] == [False, True, True, False, True, False]
    assert trained == pytest.approx([1, 1, 0.1, 0.01, 0.01, 1e-3])
    assert [d[2] for d in decisions] == [False] * 5 + [True]  # epoch 6 is the first at the floor: it ends the run
    assert (p.best_epoch, p.floor_epoch, p.floor_wait, p.decays) == (4, 6, 1, 3)
    assert p.lr_multiplier() == pytest.approx(1e-3)  # no decay below the floor
    end = recipe.end_of_run(p, 6, 15, 2e-3)
    assert end["reason"] == "early_stop" and end["floor_epoch"] == 6 and end["lr_at_floor"]
    assert end["message"] == ("stopped early after epoch 6 of 15: the LR reached its floor 2e-06 at epoch 6 and 1 "
                              "epoch at it brought no improvement (--early-stop 1); best epoch 4")


def test_no_run_of_the_default_recipe_has_two_epochs_at_the_floor_without_improvement():
    """Whatever the validation losses, the default schedule never trains two epochs at the floor without an
    improvement (of more than --min-delta) between them: identical epochs at the floor cannot happen."""
    rng = np.random.RandomState(0)
    for trial in range(300):
        p = recipe.Plateau("val_loss", 1, 0.1, recipe.EARLY_STOP, rng.randint(0, 3), recipe.MIN_LR_OF_LR,
                           recipe.MIN_DELTA)
        values = np.round(0.1 + rng.randn(40).cumsum() * rng.choice([1e-5, 1e-3, 1e-2]), 5)
        decisions, trained = _run(p, values)
        at_floor = [m <= recipe.MIN_LR_OF_LR * (1 + 1e-9) for m in trained]
        for k in range(1, len(decisions)):
            assert not (at_floor[k - 1] and at_floor[k] and not decisions[k - 1][0] and not decisions[k][0])
        if decisions[-1][2]:
            assert at_floor[-1] and not decisions[-1][0]


def test_early_stop_off_says_why_the_run_goes_on_and_a_floor_of_the_lr_means_no_decay():
    p = recipe.Plateau("val_loss", 1, 0.1, early_stop=0, floor=1.0)  # --min-lr = --lr: at the floor from the start
    decisions, trained = _run(p, [0.5, 0.6, 0.7])
    assert not any(d[1] or d[2] for d in decisions) and trained == [1, 1, 1] and p.floor_wait == 2
    assert recipe.end_of_run(p, 3, 3, 0.004)["message"] == (
        "ran all --epochs 3; the LR reached its floor 0.004 at epoch 1 and 2 epochs at it brought no "
        "improvement, but --early-stop 0 does not stop the run; best epoch 1")
    waiting = recipe.Plateau("val_loss", 1, 0.1, early_stop=3, floor=1.0)
    _run(waiting, [0.5, 0.6])
    assert recipe.end_of_run(waiting, 2, 2, 0.004)["message"].endswith(
        "but --early-stop 3 needs 3 epochs; best epoch 1")
    # --lr-factor 1 never lowers the LR: --early-stop counts every epoch without improvement, as before the floor
    flat = recipe.Plateau("val_loss", 1, 1.0, early_stop=2)
    assert [d[2] for d in _run(flat, [0.5, 0.4, 0.45, 0.5, 0.3])[0]] == [False, False, False, True]
    assert "the LR schedule never lowers the LR (0.001)" in recipe.end_of_run(flat, 4, 5, 0.001)["message"]
    none = recipe.Plateau("val_loss", 1, 0.1, early_stop=1, floor=0.0)  # --min-lr 0: no floor, never stops
    assert not any(d[2] for d in _run(none, [0.5] + [0.6] * 20)[0])
    assert recipe.end_of_run(none, 21, 21, 1.0)["message"] == (
        "ran all --epochs 21; the LR (1e-20 now) has no floor (--min-lr 0); best epoch 1")


def test_min_delta_and_a_floor_between_decays():
    p = recipe.Plateau("mean_auroc", 1, 0.1, early_stop=1, floor=0.05, min_delta=0.01)
    decisions, trained = _run(p, [0.6, 0.605, 0.62, 0.62, 0.7, 0.69])
    assert [d[0] for d in decisions] == [True, False, True, False, True, False]  # +0.005 is no improvement
    assert trained == pytest.approx([1, 1, 0.1, 0.1, 0.05, 0.05])  # 0.01 would be below the floor 0.05
    assert decisions[-1][2] and p.floor_epoch == 5
    replayed = recipe.Plateau("mean_auroc", 1, 0.1, 1, 0, 0.05, 0.01).replay(
        [{"epoch": e, "monitor_value": v} for e, v in enumerate([0.6, 0.605, 0.62, 0.62, 0.7, 0.69], 1)])
    assert (replayed.decays, replayed.floor_wait, replayed.stopped) == (p.decays, p.floor_wait, True)


@pytest.mark.parametrize("argv,message", [(["--min-lr", "-1"], "--min-lr -1: expected a floor from 0 to --lr 0.001"),
                                          (["--lr", "0.01", "--min-lr", "0.1"], "--min-lr 0.1: expected a floor"),
                                          (["--min-delta", "-0.1"], "--min-delta -0.1 cannot be negative")])
def test_bad_floor_options_are_refused(argv, message):
    from trainer import cli
    from trainer.errors import TrainerError
    with pytest.raises(TrainerError) as e:
        cli.check(cli.parse(["--data", "synthetic"] + argv))
    assert message in str(e.value)


# A fixed small test split for the CNN-vs-baseline statistic: 6 images of 4 patients, one pathology with positives
# and negatives (the other 13 all negative: undefined). Rows: patient, label, CNN score, baseline score.
HAND = [("A", 1, 0.9, 0.2), ("A", 0, 0.1, 0.6), ("B", 1, 0.8, 0.7), ("C", 0, 0.3, 0.1), ("D", 1, 0.4, 0.3),
        ("D", 0, 0.5, 0.4)]


def _hand_split():
    labels = np.zeros((6, 14))
    labels[:, 0] = [r[1] for r in HAND]
    cnn, base = np.full((6, 14), 0.5), np.full((6, 14), 0.5)
    cnn[:, 0], base[:, 0] = [r[2] for r in HAND], [r[3] for r in HAND]
    return labels, cnn, base, [r[0] for r in HAND]


def test_cnn_minus_baseline_interval_equals_a_hand_computation(monkeypatch):
    """Point: CNN AUROC 8/9 (0.4 loses to the negative 0.5), baseline 5/9: +1/3. Four resamples of patients, chosen
    here: (A, A, B, D) -> row weights 2 2 1 0 1 1: CNN 11/12, baseline 3/12, difference 2/3; (C, C, D, D): 1/2 and
    1/2, difference 0; (A, A, A, A): 1 and 0, difference 1; (B, B, B, B): no negative, left out. Percentile interval of
    (0, 2/3, 1) by linear interpolation: 2.5 % -> 0.05 x 2/3 = 1/30, 97.5 % -> 2/3 + 0.95 x 1/3 = 0.98333."""
    from launch.report import comparison_line
    from trainer import evaluation
    labels, cnn, base, patients = _hand_split()
    chosen = np.array([[2, 2, 1, 0, 1, 1], [0, 0, 0, 2, 2, 2], [4, 4, 0, 0, 0, 0], [0, 0, 4, 0, 0, 0]], float)
    drawn = []

    def patient_resamples(patients_, resamples, seed):
        drawn.append((list(patients_), resamples, seed))
        return [chosen]
    monkeypatch.setattr(evaluation, "patient_resamples", patient_resamples)
    result = evaluation.paired_difference(labels, cnn, base, patients, resamples=4, seed=5)
    assert drawn == [(patients, 4, 5)]  # ONE set of draws for both models
    assert result["difference"] == pytest.approx(8 / 9 - 5 / 9)
    assert (result["ci_low"], result["ci_high"]) == (pytest.approx(1 / 30), pytest.approx(2 / 3 + 0.95 / 3))
    assert result["n_resamples_defined"] == 3 and result["n_classes"] == 1 and result["distinguishable"] is True
    assert comparison_line(result) == "CNN - baseline: +0.333 (95 % interval +0.033 .. +0.983): CNN better"
    # the same models swapped: the negated difference and interval
    swapped = evaluation.paired_difference(labels, base, cnn, patients, resamples=4, seed=5)
    assert (swapped["difference"], swapped["ci_low"]) == (pytest.approx(-1 / 3), pytest.approx(-(2 / 3 + 0.95 / 3)))
    assert comparison_line(swapped).endswith(": baseline better")


def test_cnn_minus_baseline_block_pairs_rows_and_says_when_they_are_not_distinguishable():
    from launch.report import comparison_line
    from trainer import evaluation
    labels, cnn, base, patients = _hand_split()
    same = evaluation.baseline_comparison(labels, patients, (np.arange(6), cnn), (np.arange(6), cnn), 200, 0)
    assert (same["difference"], same["ci_low"], same["ci_high"]) == (0.0, 0.0, 0.0)
    assert same["verdict"] == "not distinguishable" and same["distinguishable"] is False
    assert comparison_line(same) == "CNN - baseline: +0.000 (95 % interval +0.000 .. +0.000): not distinguishable"
    # the baseline could not score row 3: both are compared on rows 0, 1, 2, 4, 5 only
    block = evaluation.baseline_comparison(labels, patients, (np.arange(6), cnn),
                                           (np.array([0, 1, 2, 4, 5]), base[[0, 1, 2, 4, 5]]), 200, 0)
    keep = [0, 1, 2, 4, 5]
    alone = evaluation.paired_difference(labels[keep], cnn[keep], base[keep], [patients[i] for i in keep], 200, 0)
    assert block["difference"] == pytest.approx(alone["difference"]) and block["ci_low"] == alone["ci_low"]
    assert (block["n_images"], block["n_patients"]) == (5, 3)  # patient C had only row 3
    assert block["bootstrap"] == {"resamples": 200, "unit": "patient", "paired": True, "method": "percentile",
                                  "seed": 0}
    none = evaluation.baseline_comparison(labels, patients, (np.arange(6), cnn), (np.arange(6), base), 0, 0)
    assert none["verdict"] == "no interval" and none["ci_low"] is None
    assert comparison_line(none) == ("CNN - baseline: +0.333 (no interval: --bootstrap 0 or too few resamples "
                                     "define it)")


def test_the_test_blocks_mean_interval_uses_the_per_class_resamples():
    from trainer import evaluation
    rng = np.random.RandomState(3)
    y = (rng.rand(120, 14) < 0.3).astype(float)
    scores = y * 0.2 + rng.rand(120, 14)
    patients = ["p%d" % (i // 2) for i in range(120)]
    block = evaluation.held_out_block(y, scores, patients, 300, 7, 120, [])
    values = evaluation.resampled_auroc(y, scores, evaluation.patient_resamples(patients, 300, 7),
                                        evaluation.auroc_per_class(y, scores))
    assert block["auroc"]["Atelectasis"]["ci_low"] == pytest.approx(np.percentile(values[:, 0], 2.5))
    low, high = np.percentile(values.mean(axis=1), [2.5, 97.5])  # every class defined in every resample here
    assert (block["mean_auroc_ci_low"], block["mean_auroc_ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert block["mean_auroc_ci_low"] < block["mean_auroc"] < block["mean_auroc_ci_high"]
    assert evaluation._mean_over_defined(np.array([[0.5, np.nan], [np.nan, np.nan], [0.2, 0.4]])) == pytest.approx(
        [0.5, np.nan, 0.3], nan_ok=True)
