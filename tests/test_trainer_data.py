"""Finding the data (NIH layout, duplicates), PNG structural check, and corrupt images: skipped, counted, named."""
from __future__ import annotations

import argparse
import os
import shutil

import numpy as np
import pytest

from tests.lib.paths import SAMPLE
from trainer import data, pngcheck, sources
from trainer.errors import TrainerError

IMAGES = SAMPLE / "images-64"
LABEL_FILE = SAMPLE / "Data_Entry_2017_v2020.csv.gz"


def _options(**kw):
    base = dict(data=None, images=None, labels=None, train_val_list=None, test_list=None, seed=0,
                val_fraction=0.1, test_fraction=0.2)
    base.update(kw)
    return argparse.Namespace(**base)


def _nih_layout(root, n=120):
    """The first ``n`` sample images spread over NIH's images_0NN/images/ folders, plus the label file."""
    names = sorted(os.listdir(IMAGES))[:n]
    for i, name in enumerate(names):
        folder = root / ("images_%03d" % (1 + i % 3)) / "images"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(IMAGES / name, folder / name)
    shutil.copy(LABEL_FILE, root / LABEL_FILE.name)
    return names


@pytest.fixture
def corrupt_dir(tmp_path):
    """Sample images plus one truncated, one garbage, one unreadable (dangling link) and one with corrupt IDAT."""
    names = _nih_layout(tmp_path, 60)
    raw = (IMAGES / names[0]).read_bytes()
    bad = {"truncated": names[1], "garbage": names[2], "unreadable": names[3], "idat": names[4]}
    paths = {}
    for kind, name in bad.items():
        target = paths[kind] = next(tmp_path.glob("images_*/images/" + name))
        target.unlink()
        if kind == "truncated":
            target.write_bytes(raw[: len(raw) // 2])
        elif kind == "garbage":
            target.write_bytes(np.random.RandomState(0).bytes(3000))
        elif kind == "unreadable":
            os.symlink(str(tmp_path / "no-such-file"), str(target))
        else:
            data_ = bytearray(raw)
            start = raw.find(b"IDAT") + 40
            data_[start:start + 200] = bytes(b ^ 0x5A for b in data_[start:start + 200])
            target.write_bytes(bytes(data_))
    return tmp_path, bad, paths


def test_png_check_reasons(corrupt_dir):
    root, bad, paths = corrupt_dir
    path = {kind: str(p) for kind, p in paths.items()}
    assert pngcheck.problem(path["truncated"]).startswith("truncated")
    assert pngcheck.problem(path["garbage"]) == "not a PNG (no PNG signature)"
    assert pngcheck.problem(path["unreadable"]).startswith("unreadable")
    assert pngcheck.problem(path["idat"]) is None  # passes: caught at decode time (see test_trainer_pipeline)
    assert pngcheck.problem(str(IMAGES / "00000001_000.png")) is None
    assert pngcheck.problem(str(SAMPLE / "images-1024" / "00000001_000.png")) is None


def test_corrupt_files_are_skipped_counted_and_named(corrupt_dir, capsys):
    root, bad, _ = corrupt_dir
    d = data.load(_options(data=str(root)))
    skipped = {os.path.basename(s["path"]): s["reason"] for s in d.report["skipped_images"]}
    assert set(skipped) == {bad["truncated"], bad["garbage"], bad["unreadable"]}
    assert len(d.train) + len(d.val) + len(d.test) == 60 - 3
    assert bad["truncated"] in capsys.readouterr().err


def test_skipped_files_are_listed_in_the_output_folder(corrupt_dir, tmp_path, capsys):
    root, bad, _ = corrupt_dir
    listed = tmp_path / "out" / "skipped-images.csv"
    data.load(_options(data=str(root)), skipped_list=str(listed))
    rows = listed.read_text().splitlines()
    assert rows[0] == "path,reason" and len(rows) == 4
    assert {os.path.basename(r.split(",")[0]) for r in rows[1:]} == {bad["truncated"], bad["garbage"],
                                                                     bad["unreadable"]}
    assert "(all listed in %s)" % listed in capsys.readouterr().err


@pytest.mark.slow
def test_only_corrupt_images_abort_and_the_list_is_where_the_message_says(tmp_path):
    """D2 for real: ``python -m trainer`` on 30 garbage files named like sample images."""
    import subprocess
    import sys

    from tests.lib.paths import REPO
    folder = tmp_path / "images"
    folder.mkdir()
    names = sorted(os.listdir(IMAGES))[:30]
    for name in names:
        (folder / name).write_bytes(np.random.RandomState(0).bytes(500))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "trainer", "--images", str(folder), "--labels", str(LABEL_FILE),
                             "--image-size", "32", "--output", str(out)], cwd=REPO, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 2
    listed = out / "skipped-images.csv"
    assert "... and 10 more (all listed in %s)" % listed in result.stderr
    assert ("trainer: error: no usable image below --images %s: all 30 failed the PNG check (listed in %s)"
            % (folder, listed)) in result.stderr
    rows = listed.read_text().splitlines()[1:]
    assert sorted(os.path.basename(r.split(",")[0]) for r in rows) == names
    assert all(r.endswith("not a PNG (no PNG signature)") for r in rows)


def test_nih_layout_with_official_lists(tmp_path):
    names = _nih_layout(tmp_path)
    (tmp_path / "test_list.txt").write_text("\n".join(n for n in names if n.startswith("0000000")) + "\n")
    (tmp_path / "train_val_list.txt").write_text("\n".join(n for n in names if not n.startswith("0000000")) + "\n")
    d = data.load(_options(data=str(tmp_path)))
    assert d.report["split"]["test"] == sum(n.startswith("0000000") for n in names)
    assert d.report["rows_without_image"] == 112120 - len(names)
    assert d.report["split_source"].startswith("official lists")
    assert not set(d.train.patients) & set(d.val.patients)
    assert not (set(d.train.patients) | set(d.val.patients)) & set(d.test.patients)


def test_same_image_name_twice_names_both_paths(tmp_path):
    _nih_layout(tmp_path, 3)
    name = sorted(os.listdir(IMAGES))[0]
    (tmp_path / "images_009" / "images").mkdir(parents=True)
    shutil.copy(IMAGES / name, tmp_path / "images_009" / "images" / name)
    with pytest.raises(TrainerError) as err:
        sources.index_images(str(tmp_path), "--data")
    message = str(err.value)
    assert "images_001/images/" + name in message and "images_009/images/" + name in message
    assert "--images" in message


def test_label_file_is_required_and_unique(tmp_path):
    with pytest.raises(TrainerError, match="no label file"):
        sources.find_label_file(str(tmp_path))
    (tmp_path / "Data_Entry_2017.csv").write_text("x")
    (tmp_path / "Data_Entry_2017_v2020.csv.gz").write_text("x")
    with pytest.raises(TrainerError, match="2 label files"):
        sources.find_label_file(str(tmp_path))


def test_no_matching_image_is_a_clear_error(tmp_path):
    (tmp_path / "img").mkdir()
    shutil.copy(IMAGES / "00000001_000.png", tmp_path / "img" / "unrelated.png")
    with pytest.raises(TrainerError, match="none of the 112120 rows"):
        data.load(_options(images=str(tmp_path / "img"), labels=str(LABEL_FILE)))


# --- the tf.data pipeline on the same files ---------------------------------------------------------------------

def _tiny_model(size):
    import tensorflow as tf
    return tf.keras.Sequential([tf.keras.layers.GlobalAveragePooling2D(input_shape=(size, size, 1)),
                                tf.keras.layers.Dense(14, activation="sigmoid")])


def test_pipeline_decodes_gray_1024_and_rgb_64_and_the_model_normalises_to_3_channels():
    import tensorflow as tf

    from trainer import compat, model, pipeline
    paths = [str(SAMPLE / "images-1024" / "00000001_000.png"), str(IMAGES / "00000001_000.png")]
    (images, indices), = list(compat.iterate_numpy(pipeline.evaluation(paths, [0, 1], 2, pipeline.png_loader(96))))
    assert images.shape == (2, 96, 96, 1) and images.dtype == np.float32 and indices.tolist() == [0, 1]
    assert 0 <= images.min() and images.max() <= 255 and images.std() > 10
    net = model.build("densenet121", 96)
    normalise = tf.keras.Model(net.input, net.get_layer(model.NORMALISATION).output)
    rgb = normalise.predict_on_batch(images)
    mean, std = np.array(model.IMAGENET_MEAN), np.array(model.IMAGENET_STD)
    assert rgb.shape == (2, 96, 96, 3)
    assert np.allclose(rgb, (images / 255.0 - mean) / std, atol=1e-5)  # gray copied to R, G, B, then normalised
    assert not net.get_layer(model.NORMALISATION).trainable_weights


def test_corrupt_idat_is_dropped_and_named_by_the_evaluation_pass(corrupt_dir):
    from trainer import evaluation, pipeline
    _, _, paths = corrupt_dir
    keys = [str(IMAGES / "00000001_000.png"), str(paths["idat"]), str(IMAGES / "00000001_001.png")]
    ds = pipeline.evaluation(keys, [0, 1, 2], 2, pipeline.png_loader(64))
    indices, scores = evaluation.predict_shard(_tiny_model(64), ds)
    indices, scores, missing = evaluation.order_rows(indices, scores, 3)
    assert indices.tolist() == [0, 2] and scores.shape == (2, 14) and missing.tolist() == [1]


def test_training_stream_survives_corrupt_images(corrupt_dir):
    from trainer import compat, order, pipeline
    _, _, paths = corrupt_dir
    keys = [str(IMAGES / "00000001_000.png"), str(paths["idat"]), str(paths["truncated"]), str(paths["garbage"])]
    rows, transforms, lengths = order.rank_stream(4, 3, 0, 1, 0, range(3), 64, order.Augmentation())
    ds = pipeline.training(keys, np.zeros((4, 14), np.uint8), rows, transforms, lengths, pipeline.png_loader(64),
                           False)
    batches = [b for _, b in zip(range(4), compat.iterate_numpy(ds))]
    # 3 epochs of 2 batches of 2 rows are one run of 12 rows (pipeline.equal_length_runs), 3 of them the good image:
    # its batches close up (2, then the short last one), and the stream goes on
    assert [b[0].shape for b in batches] == [(2, 64, 64, 1), (1, 64, 64, 1)] * 2
    good = batches[1][0][0]
    assert all(np.array_equal(image, good) for b in batches for image in b[0])


def _row_loader(key):
    """A loader whose image is its key's number everywhere (keys "0", "1", …): a batch names its rows."""
    import tensorflow as tf
    return tf.fill([4, 4, 1], tf.strings.to_number(key))


def test_equal_length_runs_of_the_plans_batches():
    from trainer import order, pipeline
    assert [r.tolist() for r in pipeline.equal_length_runs([4, 4, 3, 3, 3, 4])] == [[0, 8, 17], [8, 9, 4], [4, 3, 4]]
    assert [r.tolist() for r in pipeline.equal_length_runs([])] == [[], [], []]
    _, _, lengths = order.rank_stream(23, 4, 1, 2, 7, range(3), 4, order.Augmentation())
    offsets, counts, sizes = pipeline.equal_length_runs(lengths)
    assert counts.sum() == lengths.sum() and len(offsets) <= 2 * 3  # at most two runs an epoch
    assert np.array_equal(np.repeat(sizes, counts // sizes), lengths)


def test_training_batches_come_in_the_plans_order():
    """Each batch holds exactly its planned rows, batch after batch, across epochs and a short last batch."""
    from trainer import compat, order, pipeline
    n, batch = 23, 4
    rows, transforms, lengths = order.rank_stream(n, batch, 1, 2, 7, range(3), 4, order.Augmentation())
    ds = pipeline.training([str(i) for i in range(n)], np.zeros((n, 14), np.uint8), rows, transforms, lengths,
                           _row_loader, False)
    got = [b[0][:, 0, 0, 0].astype(int).tolist() for _, b in zip(range(len(lengths)), compat.iterate_numpy(ds))]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    assert got == [rows[s:s + k].tolist() for s, k in zip(starts, lengths)]


def test_only_the_splits_a_run_reads_must_hold_images(tmp_path):
    """``python -m trainer --throughput`` on 3 images was refused with "the val split is empty", though a throughput
    run reads only the training split: ``required`` names the splits that must not be empty (training: train and
    val; throughput: train)."""
    from trainer import split
    for name in sorted(os.listdir(IMAGES))[:3]:  # one patient: the split puts all 3 in train
        shutil.copy(IMAGES / name, tmp_path / name)
    options = _options(images=str(tmp_path), labels=str(LABEL_FILE))
    with pytest.raises(TrainerError, match="the val split is empty"):
        data.load(options)
    loaded = data.load(options, required=(split.TRAIN,))
    assert (len(loaded.train), len(loaded.val)) == (3, 0)
