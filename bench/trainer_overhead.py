"""Benchmark: steps/s of the trainer's training step vs a bare tf.keras ``model.fit`` — same model, same data,
one process.

Ours: ``trainer.runtime.compile_model`` (Adam inside Horovod's DistributedOptimizer, CheXNet's weighted BCE) and
the trainer's fit callbacks (broadcast, metric averaging, LR warm-up, step timer, rank-0 progress events), world
size 1. Bare: the same architecture with the same initial weights, the same Adam class without Horovod's wrapper
(``trainer.compat.adam``: in TF >= 2.11 ``tf.keras.optimizers.legacy.Adam``; Keras' new default Adam is a
different optimizer implementation, not overhead), Keras' ``binary_crossentropy``, no callbacks. Both read one in-memory batch repeated (the input pipeline has its own
benchmark), run ``--steps`` steps per ``fit`` call, alternate for ``--rounds`` rounds after one warm-up call each
(tracing). Goal: median ratio >= 0.97.

    .venv/bin/python bench/trainer_overhead.py [--model densenet121] [--image-size 64] [--batch-size 16]
                                               [--steps 20] [--rounds 7]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.sidebyside import Rates, alternate, measure, report  # noqa: E402
from trainer import callbacks, compat, loss, model as model_mod, runtime  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="densenet121", choices=sorted(model_mod.BACKBONES))
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()

    rt = runtime.start(seed=0)
    rng = np.random.RandomState(0)
    images = rng.uniform(0, 255, (args.batch_size, args.image_size, args.image_size, 1)).astype(np.float32)
    labels = (rng.rand(args.batch_size, 14) < 0.2).astype(np.float32)
    data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    lr = 1e-3

    ours_model = model_mod.build(args.model, args.image_size)
    bare_model = model_mod.build(args.model, args.image_size)
    bare_model.set_weights(ours_model.get_weights())
    runtime.compile_model(ours_model, rt.hvd, lr, loss.weighted_bce(*loss.class_weights(labels)))
    bare_model.compile(optimizer=compat.adam(lr), loss="binary_crossentropy")
    timer, progress = callbacks.StepTimer(), callbacks.Progress(args.steps)
    ours_callbacks = runtime.horovod_callbacks(rt.hvd, lr, 5, args.steps) + [timer, progress]

    def ours() -> Rates:
        with contextlib.redirect_stdout(io.StringIO()):  # the progress events a launcher would read
            return measure(lambda: ours_model.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=0,
                                                  callbacks=ours_callbacks), args.steps)

    def bare() -> Rates:
        return measure(lambda: bare_model.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=0), args.steps)

    ours(), bare()  # warm-up: tracing, first allocations
    print("%s, %dx%d, batch %d, %d steps per round, %s, TF %s, %d cores"
          % (args.model, args.image_size, args.image_size, args.batch_size, args.steps, rt.device,
             tf.__version__, os.cpu_count()))
    report("training step: steps/s of the trainer vs bare model.fit", "steps/s",
           alternate(ours, bare, args.rounds), goal=0.97)


if __name__ == "__main__":
    main()
