"""Benchmark: images/s of the trainer's input pipeline vs a bare PNG decode of the same files on the same cores.

Data: the 3 full-resolution ChestX-ray14 PNGs (1024x1024, 8-bit gray) of ../shared/data/chestxray14/images-1024,
copied to >= 200 files in a temp dir (page-cached after the first round, so disk is out of the picture).
Ours: ``trainer.pipeline.training`` (read, decode to gray, antialiased resize to --image-size, the planned
order and augmentation of ``trainer.order``: flip, rotation, shift, zoom; skip undecodable, batch, prefetch) for
one pass of the files. Baseline: ``tf.data`` read + ``decode_png``
(native channels) with the same parallel map and prefetch. Both are consumed inside TensorFlow (``Dataset.reduce``
over one pixel per element) so Python iteration costs nothing to either. Goal: wall-clock ratio >= 0.9; the ratio
per CPU-second is printed too (robust when other processes share the cores).

    .venv/bin/python bench/ratios/input_pipeline.py [--files 420] [--rounds 9] [--image-size 224] [--batch-size 16]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SOURCE = REPO.parent / "shared" / "data" / "chestxray14" / "images-1024"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.ratios.sidebyside import Rates, alternate, measure, report  # noqa: E402
from trainer import compat, order, pipeline, pngcheck  # noqa: E402


def replicate(folder: Path, count: int) -> list[str]:
    sources = sorted(SOURCE.glob("*.png"))
    paths = []
    for i in range(count):
        src = sources[i % len(sources)]
        dst = folder / ("%s_r%03d.png" % (src.stem, i))
        shutil.copyfile(src, dst)
        paths.append(str(dst))
    return paths


def rate(dataset: tf.data.Dataset, images: int, pixel) -> Rates:
    """images/s of consuming ``dataset`` fully inside TensorFlow (one pixel per element is read)."""
    return measure(lambda: dataset.reduce(tf.constant(0.0), lambda acc, e: acc + pixel(e)).numpy(), images)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=420)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--batch-size", type=int, default=16)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="chexstack-bench-") as tmp:
        paths = replicate(Path(tmp), args.files)
        check_us = 1e6 / measure(lambda: pngcheck.find_problems(paths), len(paths)).wall
        steps = len(paths) // args.batch_size
        labels = np.zeros((len(paths), 14), np.uint8)

        def ours() -> Rates:
            plan = order.rank_stream(len(paths), args.batch_size, 0, 1, 0, range(1), args.image_size,
                                     order.Augmentation(5, 0.05, 0.1, True))
            ds = pipeline.training(paths, labels, *plan, loader=pipeline.png_loader(args.image_size), augment=True)
            return rate(ds.take(steps), steps * args.batch_size, lambda e: e[0][0, 0, 0, 0])

        def baseline() -> Rates:
            auto = compat.autotune()
            ds = tf.data.Dataset.from_tensor_slices(paths).map(
                lambda p: tf.io.decode_png(tf.io.read_file(p)), num_parallel_calls=auto).prefetch(auto)
            return rate(ds.take(steps * args.batch_size), steps * args.batch_size,
                        lambda e: tf.cast(e[0, 0, 0], tf.float32))

        ours(), baseline()  # warm: page cache, tf.data autotuning, graph tracing
        print("%d files of %s (%d cores); PNG structural check %.0f us/file (once per run, not in the ratio)"
              % (len(paths), "1024x1024 gray", os.cpu_count(), check_us))
        report("input pipeline: images/s to %dx%d batches of %d vs bare decode_png"
               % (args.image_size, args.image_size, args.batch_size), "images/s",
               alternate(ours, baseline, args.rounds), goal=0.9)


if __name__ == "__main__":
    main()
