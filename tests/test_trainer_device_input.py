"""``--input-resize device`` (``trainer.device_input``): the step resizes and augments, the host only decodes.

The pixels are the host pipeline's to float32 rounding, on the real 1024² sample and the real 64² one; which path
a run takes is decided by rule. A real 2-rank run with the resize in the step is in tests/test_trainer_training.py
(beside the host-resized run of the same seed it is compared with).
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.lib.paths import SAMPLE
from trainer.errors import TrainerError

tf = pytest.importorskip("tensorflow")

from trainer import compat, device_input, order, pipeline  # noqa: E402

FULL = sorted((SAMPLE / "images-1024").glob("*.png"))
SMALL = sorted((SAMPLE / "images-64").glob("*.png"))[:8]
#: float32 rounding of two sums of ~10 products of 0..255 values (measured: 6.1e-05 on the 1024² sample)
PIXEL_BOUND = 1e-3


def _host(paths, size, transforms=None):
    images = tf.stack([pipeline.png_loader(size)(tf.constant(str(p))) for p in paths])
    return images if transforms is None else compat.transform_images(images, transforms)


def _device(paths, source, size, transforms, augment):
    raw = tf.stack([pipeline.source_loader(source)(tf.constant(str(p))) for p in paths])
    assert raw.dtype == tf.uint8 and tuple(raw.shape[1:]) == source + (1,)
    return device_input.preprocess(device_input.Resize(source, size), raw, transforms, augment)


def _plan_transforms(count, size):
    """The trainer's own augmentation parameters for ``count`` images at ``size`` (rotation, shift, zoom, flip)."""
    _, transforms, _ = order.rank_stream(count, count, 0, 1, 7, range(1), size, order.Augmentation(5, 0.05, 0.1, True))
    return tf.constant(np.asarray(transforms[:count], np.float32))


@pytest.mark.parametrize("paths, source, size", [(FULL, (1024, 1024), 224), (SMALL, (64, 64), 32)],
                         ids=["1024-to-224", "64-to-32"])
def test_the_step_gives_the_host_pipelines_pixels(paths, source, size):
    transforms = _plan_transforms(len(paths), size)
    plain = _device(paths, source, size, transforms, augment=False)
    assert plain.shape == (len(paths), size, size, 1)
    assert float(tf.reduce_max(tf.abs(plain - _host(paths, size)))) < PIXEL_BOUND
    augmented = _device(paths, source, size, transforms, augment=True)
    assert float(tf.reduce_max(tf.abs(augmented - _host(paths, size, transforms)))) < PIXEL_BOUND
    assert float(tf.reduce_max(tf.abs(augmented - plain))) > 1.0  # the transforms did something


def _tf32(values):
    """float32 ``values`` rounded to TF32 (1 sign, 8 exponent, 10 mantissa bits; nearest, ties to even): what an
    Ampere or newer GPU's tensor cores read of a float32 matrix product's inputs (NVIDIA, "TensorFloat-32 in the A100
    GPU", 2020), TensorFlow's default there (``tf.config.experimental.enable_tensor_float_32_execution``)."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
    return bits.astype(np.uint32).view(np.float32)


def test_on_a_tf32_gpu_the_resize_stays_below_the_copys_uint8_rounding():
    """The bound docs/training.md states for a GPU that runs the products in TF32, emulated on this CPU (each
    product's inputs rounded to TF32, float32 sums): at most 0.13 of 255 on the 1024² sample (mean 0.03), below the
    0.5 a prepared copy's uint8 pixels are rounded by. Not measured on a GPU (none lent here)."""
    rows = device_input.resize_weights(1024, 224)
    worst, mean = [], []
    for path in FULL:
        image = tf.io.decode_png(tf.io.read_file(str(path)), channels=1).numpy()[:, :, 0].astype(np.float64)
        exact = rows.astype(np.float64) @ image @ rows.T.astype(np.float64)
        emulated = _tf32(_tf32(rows) @ _tf32(image)) @ _tf32(rows.T)
        worst.append(np.abs(emulated - exact).max())
        mean.append(np.abs(emulated - exact).mean())
    assert 0.05 < max(worst) < 0.2 and max(mean) < 0.05, (worst, mean)


def test_resize_weights_are_the_resizes_own():
    assert np.array_equal(device_input.resize_weights(64, 64), np.eye(64, dtype=np.float32))
    weights = device_input.resize_weights(1024, 224)
    assert weights.shape == (224, 1024)
    assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-5)
    assert (weights >= 0).all() and (weights != 0).sum(axis=1).max() <= 12  # a widened bilinear kernel: ~2 x 4.6


def test_an_image_of_another_size_is_brought_to_the_source_size_on_the_host_or_fails_where_none_should():
    path = tf.constant(str(SMALL[0]))  # 64 x 64
    image = pipeline.source_loader((128, 96), uniform=False)(path)
    assert image.dtype == tf.uint8 and image.shape == (128, 96, 1)
    expected = np.round(np.clip(compat.resize(tf.image.decode_png(tf.io.read_file(str(SMALL[0])), channels=1),
                                              (128, 96)).numpy(), 0, 255))
    assert np.array_equal(image.numpy(), expected.astype(np.uint8))
    assert pipeline.source_loader((64, 64), uniform=False)(path).shape == (64, 64, 1)
    with pytest.raises(tf.errors.InvalidArgumentError):  # as a decode error: dropped from the stream, not a crash
        pipeline.source_loader((128, 96))(path)


def test_the_headers_say_which_size_the_step_resizes_from_and_how_many_differ(tmp_path):
    import shutil
    paths = [str(p) for p in SMALL[:3]] + [str(FULL[0])]
    shutil.copyfile(SAMPLE / "Data_Entry_2017_v2020.csv.gz", tmp_path / "not-a-png.png")
    choice = device_input.choose("auto", "png", paths + [str(tmp_path / "not-a-png.png")], "GPU")
    assert (choice.mode, choice.source, choice.others) == ("device", (64, 64), 2)  # the 1024² one and the CSV


@pytest.mark.parametrize("requested, kind, device, where, why", [
    ("auto", "png", "GPU", "device", "the ranks train on GPUs"),
    ("auto", "png", "CPU", "host", "the ranks train on the CPU"),
    ("auto", "prepared", "GPU", "host", "a prepared copy, already at the model's size"),
    ("auto", "synthetic", "GPU", "host", "synthetic images"),
    ("host", "png", "GPU", "host", "--input-resize host"),
    ("device", "png", "CPU", "device", "--input-resize device"),
])
def test_which_path_a_run_takes(requested, kind, device, where, why):
    choice = device_input.choose(requested, kind, [str(p) for p in FULL], device)
    assert choice.mode == where and why in choice.reason
    assert (choice.source, choice.others) == (((1024, 1024), 0) if where == "device" else (None, 0))


@pytest.mark.parametrize("kind, first, message", [
    ("prepared", FULL[0], "the data are a prepared copy, already at the model's size"),
    ("synthetic", FULL[0], "the data are synthetic images"),
    ("png", SAMPLE / "Data_Entry_2017_v2020.csv.gz", "none of the 1 training images has a readable PNG header"),
])
def test_asking_for_the_device_path_where_it_cannot_run_is_an_error(kind, first, message):
    with pytest.raises(TrainerError, match="--input-resize device: .*%s.*; use --input-resize host or auto" % message):
        device_input.choose("device", kind, [str(first)], "GPU")
    with pytest.raises(TrainerError, match="--input-resize sideways: expected one of auto, host, device"):
        device_input.choose("sideways", "png", [str(FULL[0])], "GPU")


def _small_model():
    """Conv → mean → 14 sigmoids on float32 [B, 32, 32, 1]: no BatchNorm, whose statistics of 16 images turn the
    float32 rounding of the pixels into per-cent changes of a gradient (measured with MobileNet at 32 px: its third
    step's loss moves 0.5 % for 3e-5 of noise on the host's own pixels)."""
    inputs = tf.keras.layers.Input((32, 32, 1))
    hidden = tf.keras.layers.Conv2D(8, 3, activation="relu")(inputs / 255.0)
    outputs = tf.keras.layers.Dense(14, activation="sigmoid")(tf.keras.layers.GlobalAveragePooling2D()(hidden))
    return tf.keras.Model(inputs, outputs)


def test_a_step_that_resizes_is_the_host_resized_step():
    """Two models with the same weights, one fed host-resized batches, one full-size batches its step resizes
    (``device_input.install``): the same losses and the same weights after 3 steps, to float tolerance."""
    paths = [str(p) for p in sorted((SAMPLE / "images-64").glob("*.png"))[:48]]
    labels = np.eye(14, dtype=np.float32)[np.arange(len(paths)) % 14]
    plan = order.rank_stream(len(paths), 16, 0, 1, 3, range(1), 32, order.Augmentation(5, 0.05, 0.1, True))
    host_model, step_model = _small_model(), _small_model()
    initial = host_model.get_weights()
    step_model.set_weights(initial)
    for model in (host_model, step_model):
        model.compile(optimizer=tf.keras.optimizers.SGD(0.5), loss="binary_crossentropy")
    device_input.install(step_model, device_input.Choice("device", "test", (64, 64), 0), 32, True)
    host = pipeline.training(paths, labels, *plan, loader=pipeline.png_loader(32), augment=True)
    full = pipeline.training(paths, labels, *plan, loader=pipeline.source_loader((64, 64)), augment=True,
                             in_step=True)
    losses = [model.fit(data, steps_per_epoch=3, verbose=0).history["loss"][0]
              for model, data in ((host_model, host), (step_model, full))]
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    for a, b in zip(step_model.get_weights(), host_model.get_weights()):
        assert np.allclose(a, b, rtol=1e-5, atol=1e-7)
    assert not all(np.array_equal(a, b) for a, b in zip(step_model.get_weights(), initial))  # it trained
