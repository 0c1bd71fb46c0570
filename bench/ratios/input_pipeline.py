"""Benchmark: images/s of the trainer's input pipelines vs a bare PNG decode of the same files on the same cores.

Data: the 3 full-resolution ChestX-ray14 PNGs (1024x1024, 8-bit gray) of ../shared/data/chestxray14/images-1024,
copied to --files files in a temp dir (page-cached after the first round, so disk is out of the picture), with a
label file naming them, and a prepared copy of them at --image-size (``trainer.prepare``, made once, not timed).
Five variants, consumed for one pass of the files each (the prepared copy's: ``PREPARED_PASSES`` passes, the
plan's first epochs), in rounds (each round's order rotated):

- raw: ``trainer.pipeline.training`` from the PNGs (read, decode to gray, antialiased resize to --image-size, the
  planned order and augmentation of ``trainer.order``: flip, rotation, shift, zoom; skip undecodable, batch,
  prefetch);
- prepared: the same pipeline from the prepared copy (``trainer.prepared.loader``: one read of a batch's
  memory-mapped uint8 rows);
- raw, no augmentation / prepared, no augmentation: the same two without the projective transforms;
- raw, resized in the step: the host's part of ``--input-resize device`` (``trainer.device_input``): the same
  pipeline from the PNGs, decoding to full-size uint8 gray and batching with the transforms, the resize and the
  augmentation left to the training step (on the GPU where there is one);
- bare decode: ``tf.data`` read + ``decode_png`` (native channels) with the same parallel map and prefetch.

Every one is consumed inside TensorFlow (``Dataset.reduce`` over one pixel per element) so Python iteration costs
nothing to any. Printed, each the median of the per-round ratios (``bench.ratios.sidebyside``), wall-clock and per
CPU-second of this process: raw / bare decode and raw resized in the step / bare decode (goal >= 0.95) and
prepared / raw in images/s per core (the same cores for both: goal >= 10 at 224); then where the CPU time of one
image goes (CPU-milliseconds per image, the medians: decode, the resize as raw-without-augmentation minus bare
decode, the augmentation as each pipeline minus its no-augmentation variant), and what the step's resize and
augmentation cost when this machine's CPU does them (``device_input.preprocess`` on a batch; on a GPU node it is the
GPU's work, not measured here).

    .venv/bin/python bench/ratios/input_pipeline.py [--files 420] [--rounds 9] [--image-size 224] [--batch-size 16]
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SOURCE = REPO.parent / "shared" / "data" / "chestxray14" / "images-1024"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.ratios.sidebyside import Rates, measure, report, rotate  # noqa: E402
from trainer import compat, device_input, labels, order, pipeline, pngcheck, prepare, prepared  # noqa: E402

#: the sample's PNGs' (height, width)
SOURCE_SIZE = (1024, 1024)
#: passes over the files the prepared variants make per measurement (one for the others): a pass from the copy
#: takes a fraction of a second, in which the pipeline's start would weigh
PREPARED_PASSES = 8


def replicate(folder: Path, count: int) -> list[str]:
    """``count`` copies of the sample's 1024 x 1024 PNGs in ``folder`` and a label file naming each (its own
    patient, "No Finding"); the paths, in label-file order."""
    sources = sorted(SOURCE.glob("*.png"))
    paths = []
    with open(folder / "Data_Entry_2017.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["Image Index", "Finding Labels", "Follow-up #", "Patient ID"])
        for i in range(count):
            src = sources[i % len(sources)]
            dst = folder / "images" / ("%s_r%03d.png" % (src.stem, i))
            dst.parent.mkdir(exist_ok=True)
            shutil.copyfile(src, dst)
            out.writerow([dst.name, "No Finding", 0, 100000 + i])
            paths.append(str(dst))
    return paths


def prepared_keys(folder: Path, image_size: int) -> tuple[prepared.Copy, list[str]]:
    """A prepared copy of ``folder``'s images at ``image_size`` and its pipeline keys, in label-file order."""
    label_file, output = folder / "Data_Entry_2017.csv", folder / "prep"
    prepare.run(prepare.parse(["--images", str(folder / "images"), "--labels", str(label_file),
                               "--image-size", str(image_size), "--output", str(output)]))
    table = labels.read_label_file(str(label_file))
    copy = prepared.open_copy(str(output), table.sha256, image_size)
    return copy, [copy.index[name] for name in table.names]


def first_pixel(element):
    """One pixel of a training batch ((images, labels))."""
    return element[0][0, 0, 0, 0]


def first_pixel_in_step(element):
    """One pixel of a batch for a step that resizes (((images uint8, transforms), labels))."""
    return tf.cast(element[0][0][0, 0, 0, 0], tf.float32)


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
    size = args.image_size
    with tempfile.TemporaryDirectory(prefix="chexstack-bench-") as tmp:
        paths = replicate(Path(tmp), args.files)
        check_us = 1e6 / measure(lambda: pngcheck.find_problems(paths), len(paths)).wall
        copy, keys = prepared_keys(Path(tmp), size)
        steps = len(paths) // args.batch_size
        images = steps * args.batch_size
        targets = np.zeros((len(paths), 14), np.uint8)
        augmentation = order.Augmentation(5, 0.05, 0.1, True)

        def trainer(keys_, loader, augment=True, passes=1, in_step=False):
            # the plan of exactly the passes consumed: a longer one would decode ahead, past the measured steps
            plan = order.rank_stream(len(paths), args.batch_size, 0, 1, 0, range(passes), size, augmentation)
            pixel = first_pixel_in_step if in_step else first_pixel

            def run() -> Rates:
                ds = pipeline.training(keys_, targets, *plan, loader=loader, augment=augment, in_step=in_step)
                return rate(ds.take(steps * passes), images * passes, pixel)
            return run

        def bare() -> Rates:
            auto = compat.autotune()
            ds = tf.data.Dataset.from_tensor_slices(paths).map(
                lambda p: tf.io.decode_png(tf.io.read_file(p)), num_parallel_calls=auto).prefetch(auto)
            return rate(ds.take(images), images, lambda e: tf.cast(e[0, 0, 0], tf.float32))

        variants = {"raw": trainer(paths, pipeline.png_loader(size)),
                    "prepared": trainer(keys, prepared.loader(copy, size), passes=PREPARED_PASSES),
                    "raw, resized in the step": trainer(paths, pipeline.source_loader(SOURCE_SIZE), in_step=True),
                    "bare decode": bare, "raw, no augmentation": trainer(paths, pipeline.png_loader(size), False),
                    "prepared, no augmentation": trainer(keys, prepared.loader(copy, size), False, PREPARED_PASSES)}
        for run in variants.values():
            run()  # warm: page cache, tf.data autotuning, graph tracing
        results = rotate(variants, args.rounds)
        cores = len(os.sched_getaffinity(0))
        print("%d files of %s (%d cores); PNG structural check %.0f us/file (once per run, not in the ratio); "
              "prepared copy at %d px" % (len(paths), "1024x1024 gray", cores, check_us, size))
        for name in variants:
            walls = sorted(r[name].wall for r in results)
            print("  %-26s median %.1f images/s = %.1f per core" % (name, walls[len(walls) // 2],
                                                                   walls[len(walls) // 2] / cores))
        for ours, base, goal in (("raw", "bare decode", 0.95), ("raw, resized in the step", "bare decode", 0.95),
                                 ("prepared", "raw", 10.0)):
            report("%s vs %s: images/s to %dx%d batches of %d" % (ours, base, size, size, args.batch_size),
                   "images/s", [(r[ours], r[base]) for r in results], goal=goal)
        breakdown(results)
        step_on_this_cpu(paths[:args.batch_size], size, augmentation)


def breakdown(results: list[dict[str, Rates]]) -> None:
    """Print the CPU-milliseconds of one image per step of the pipelines (medians over the rounds)."""
    ms = {name: statistics.median(1000.0 / r[name].cpu for r in results) for name in results[0]}
    print("CPU-milliseconds per image (medians): PNG decode %.2f; antialiased resize %.2f; augmentation "
          "(projective transform) %.2f from the PNGs, %.2f from the copy; the copy's read and batch %.2f"
          % (ms["bare decode"], ms["raw, no augmentation"] - ms["bare decode"],
             ms["raw"] - ms["raw, no augmentation"], ms["prepared"] - ms["prepared, no augmentation"],
             ms["prepared, no augmentation"]))


def step_on_this_cpu(paths: list[str], size: int, augmentation: order.Augmentation) -> None:
    """Print the CPU-milliseconds per image of the step's resize and augmentation (``device_input.preprocess``) on
    one batch of ``paths`` when this machine's CPU runs them (median of 5; the GPU's work on a GPU node)."""
    raw = tf.stack([pipeline.source_loader(SOURCE_SIZE)(tf.constant(p)) for p in paths])
    _, transforms, _ = order.rank_stream(len(paths), len(paths), 0, 1, 0, range(1), size, augmentation)
    transforms = tf.constant(np.asarray(transforms, np.float32))
    resize = device_input.Resize(SOURCE_SIZE, size)
    step = tf.function(lambda: device_input.preprocess(resize, raw, transforms, True))
    step()
    ms = statistics.median(1000.0 / measure(lambda: step().numpy(), 1).cpu / len(paths) for _ in range(5))
    print("the step's resize (two matrix products) and augmentation on this CPU: %.2f CPU-ms per image (on a GPU "
          "node the GPU's work; not measured here)" % ms)


if __name__ == "__main__":
    main()
