"""Benchmark: the epoch-end BatchNorm pass ("precise BN", ``trainer.batchnorm``) with its moments computed in the
graph vs the former NumPy path, side by side in one process, and the pass's cost as a fraction of one training
epoch — on the shared ChestX-ray14 sample at 64 x 64.

Ours: ``trainer.batchnorm.Statistics.recompute`` — one ``tf.function`` per batch returning, per BatchNorm layer,
the batch mean and biased variance of its input as [C] vectors. Baseline (the trainer's path before, kept only
here): an eager ``probe(x, training=True)`` returning every BatchNorm layer's input ([B, H, W, C] activations,
120 layers in DenseNet-121) to NumPy, normalised there, whose moments NumPy takes in float64. Both read the same
in-memory batches (the first ``--images`` PNGs of ../shared/data/chestxray14/images-64, decoded once by the
trainer's loader: 603 is the training split of the default 70/10/20 split, so 2048 ``--bn-images`` cover it),
alternate for ``--rounds`` rounds after one warm-up call each (tracing), and must set the same statistics
(checked). Goal: median images/s ratio ours/baseline >= 1.5.

The epoch: ``model.fit`` over the same images for one epoch (ceil(images / batch) steps, world size 1, the
trainer's compiled model: Horovod's DistributedOptimizer around Adam, CheXNet's weighted BCE), timed after a
warm-up epoch, median of ``--epochs`` epochs; in-memory and un-augmented, so the input pipeline and validation —
also part of a real epoch — are not in the denominator (the fraction is an upper bound).

    .venv/bin/python bench/ratios/precise_bn.py [--model densenet121] [--images 603] [--batch-size 16]
                                             [--rounds 5] [--epochs 2]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
SAMPLE = (REPO / ".." / "shared" / "data" / "chestxray14").resolve()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.ratios.sidebyside import Rates, alternate, measure, report  # noqa: E402
from trainer import batchnorm, compat, loss, pipeline, runtime  # noqa: E402
from trainer import model as model_mod

SIZE = 64


class NumpyStatistics(batchnorm.Statistics):
    """The former path: every BatchNorm layer's input to NumPy (eager training-mode call), moments taken there."""

    def __init__(self, model):
        super().__init__(model)
        backbone = batchnorm.backbone_of(model)
        self.probe = tf.keras.models.Model(backbone.inputs, [layer.input for layer in self.layers])
        self.kernel, self.bias = model.get_layer(model_mod.NORMALISATION).get_weights()

    def recompute(self, batches):
        sums, count = None, 0
        for images in batches:
            n = len(images)
            normalised = (np.asarray(images, np.float32) * self.kernel.reshape(-1) + self.bias).astype(np.float32)
            moments = []
            for layer, value in zip(self.layers, self.probe(normalised, training=True)):
                value = np.asarray(value, np.float64)
                axes = tuple(i for i in range(value.ndim) if i != batchnorm._channel_axis(layer, value.ndim))
                moments.append((n * value.mean(axis=axes), n * value.var(axis=axes)))
            sums = moments if sums is None else [(m + a, v + b) for (m, v), (a, b) in zip(sums, moments)]
            count += n
        tf.keras.backend.batch_set_value(
            [(v, (s / count).astype(np.float32)) for layer, (mean, var) in zip(self.layers, sums)
             for v, s in ((layer.moving_mean, mean), (layer.moving_variance, var))])
        return count


def load(count: int, batch_size: int) -> list[np.ndarray]:
    paths = sorted(str(p) for p in (SAMPLE / "images-64").glob("*.png"))[:count]
    dataset = pipeline.evaluation(paths, np.arange(len(paths)), batch_size, pipeline.png_loader(SIZE))
    return [images for images, _ in compat.iterate_numpy(dataset)]


def moving_statistics(layers) -> np.ndarray:
    return np.concatenate([tf.keras.backend.get_value(v).ravel() for layer in layers
                           for v in (layer.moving_mean, layer.moving_variance)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="densenet121", choices=sorted(model_mod.BACKBONES))
    ap.add_argument("--images", type=int, default=603)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()

    rt = runtime.start(seed=0)
    batches = load(args.images, args.batch_size)
    count = sum(len(b) for b in batches)
    model = model_mod.build(args.model, SIZE)
    ours_statistics, numpy_statistics = batchnorm.Statistics(model), NumpyStatistics(model)
    seconds = {"ours": [], "baseline": []}

    def timed(name, statistics_) -> Rates:
        started = time.perf_counter()
        rates = measure(lambda: statistics_.recompute(iter(batches)), count)
        seconds[name].append(time.perf_counter() - started)
        return rates

    numpy_statistics.recompute(iter(batches))
    expected = moving_statistics(numpy_statistics.layers)
    ours_statistics.recompute(iter(batches))
    got = moving_statistics(ours_statistics.layers)
    error = float(np.max(np.abs(got - expected) / (1e-3 + np.abs(expected))))
    print("%s, %dx%d, %d images in batches of %d, %d BatchNorm layers, %s, TF %s, %d cores"
          % (args.model, SIZE, SIZE, count, args.batch_size, len(ours_statistics.layers), rt.device,
             tf.__version__, os.cpu_count()))
    print("same statistics: largest |ours - baseline| / (1e-3 + |baseline|) = %.2e (%s)"
          % (error, "ok" if error < 1e-3 else "DIFFERENT"))
    ratio = report("epoch-end BatchNorm pass: images/s, moments in the graph vs the NumPy path", "images/s",
                   alternate(lambda: timed("ours", ours_statistics), lambda: timed("baseline", numpy_statistics),
                             args.rounds), goal=1.5)

    labels = (np.random.RandomState(0).rand(count, 14) < 0.2).astype(np.float32)
    runtime.compile_model(model, rt.hvd, 1e-3, loss.weighted_bce(*loss.class_weights(labels)))
    data = tf.data.Dataset.from_tensor_slices((np.concatenate(batches), labels)).batch(args.batch_size)
    steps = len(batches)
    epochs = []
    for e in range(args.epochs + 1):
        started = time.perf_counter()
        model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
        if e:  # the first is the warm-up (tracing)
            epochs.append(time.perf_counter() - started)
    epoch = statistics.median(epochs)
    ours, base = statistics.median(seconds["ours"]), statistics.median(seconds["baseline"])
    print("one training epoch (%d steps, median of %d): %.1f s; the BatchNorm pass: ours %.2f s = %.1f %% of it, "
          "the NumPy path %.2f s = %.1f %% (pass ratio %.2f)"
          % (steps, len(epochs), epoch, ours, 100 * ours / epoch, base, 100 * base / epoch, ratio.wall))


if __name__ == "__main__":
    main()
