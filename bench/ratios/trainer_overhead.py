"""Benchmark: steps/s of the trainer's training step vs a bare tf.keras ``model.fit`` — same model, same data,
one process.

Ours: ``trainer.runtime.compile_model`` (Adam inside Horovod's DistributedOptimizer, CheXNet's weighted BCE) and
the trainer's fit callbacks (broadcast, metric averaging, LR warm-up, step timer, rank-0 progress events), world
size 1. Bare: the same architecture with the same initial weights, the same Adam class without Horovod's wrapper
(``trainer.compat.adam``: in TF >= 2.11 ``tf.keras.optimizers.legacy.Adam``; Keras' new default Adam is a
different optimizer implementation, not overhead), Keras' ``binary_crossentropy``, and only a timestamp callback.
Both read one in-memory batch repeated (the input pipeline has its own benchmark), run ``--steps`` steps per
``fit`` call, alternate for ``--rounds`` rounds after one warm-up call each (tracing).

steps/s = 1 / median step time, a step being the gap between the ends of consecutive steps — so it contains every
callback hook of the step; the same with this process's CPU time per step (robust to other load on shared cores).
Whole ``fit`` calls are not timed: Keras' per-call set-up and tear-down varies by seconds from call to call on this
CPU (same for both variants) and would swamp the step. Goal: median ratio >= 0.97. Afterwards one more call
measures the time spent inside the trainer's callback hooks directly (the only per-step work the bare fit lacks
besides the loss and the optimizer wrapper).

    .venv/bin/python bench/ratios/trainer_overhead.py [--model densenet121] [--image-size 64] [--batch-size 16]
                                               [--steps 15] [--rounds 11]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench.ratios.sidebyside import Rates, alternate, cpu_seconds, report  # noqa: E402
from trainer import callbacks, compat, loss, runtime  # noqa: E402
from trainer import model as model_mod


class CpuStepTimer(callbacks.StepTimer):
    """The trainer's StepTimer, also noting this process's CPU seconds at the end of every step."""

    def on_epoch_begin(self, epoch, logs=None):
        super().on_epoch_begin(epoch, logs)
        self.cpu = []

    def on_batch_end(self, batch, logs=None):
        super().on_batch_end(batch, logs)
        self.cpu.append(cpu_seconds())

    def rates(self) -> Rates:
        """(1 / median wall seconds per step, 1 / median CPU seconds per step), the first step left out."""
        return Rates(1.0 / float(np.median(self.step_times()[1:])), 1.0 / float(np.median(np.diff(self.cpu))))


def time_hooks(hooks: list, seconds: list[float]) -> None:
    """Wrap the per-step Keras entry points of ``hooks`` so the time spent in them is appended to ``seconds``."""
    for callback in hooks:
        for name in ("on_train_batch_begin", "on_train_batch_end"):
            def wrapped(*args, _hook=getattr(callback, name), **kwargs):
                start = time.perf_counter()
                _hook(*args, **kwargs)
                seconds.append(time.perf_counter() - start)
            setattr(callback, name, wrapped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="densenet121", choices=sorted(model_mod.BACKBONES))
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=11)
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
    ours_timer, bare_timer = CpuStepTimer(), CpuStepTimer()
    ours_callbacks = runtime.horovod_callbacks(rt.hvd, lr, 5, args.steps) + [
        ours_timer, callbacks.Progress(args.steps)]

    def ours() -> Rates:
        with contextlib.redirect_stdout(io.StringIO()):  # the progress events a launcher would read
            ours_model.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=0, callbacks=ours_callbacks)
        return ours_timer.rates()

    def bare() -> Rates:
        bare_model.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=0, callbacks=[bare_timer])
        return bare_timer.rates()

    ours(), bare()  # warm-up: tracing, first allocations
    print("%s, %dx%d, batch %d, %d steps per round, %s, TF %s, %d cores"
          % (args.model, args.image_size, args.image_size, args.batch_size, args.steps, rt.device,
             tf.__version__, os.cpu_count()))
    ratio = report("training step: steps/s of the trainer vs bare model.fit", "steps/s",
                   alternate(ours, bare, args.rounds), goal=0.97)
    hook_seconds: list[float] = []
    time_hooks(ours_callbacks, hook_seconds)
    step = 1.0 / ours()[0]
    per_step = sum(hook_seconds) / args.steps
    print("trainer callback hooks: %.0f us per step = %.3f %% of a %.0f ms step (steps/s ratio %.3f)"
          % (per_step * 1e6, 100 * per_step / step, step * 1e3, ratio.wall))


if __name__ == "__main__":
    main()
