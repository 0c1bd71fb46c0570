"""Benchmark: a rank's start-up to its first training steps, the trainer's compiled model (optimizer slots made
before ``fit``: ``trainer.compat.create_optimizer_weights``, one trace of the train step) vs the same model
compiled as Keras leaves it (slots made in the first step, so TF 2 traces the step twice).

Each try is a fresh process (tracing happens once per process): TensorFlow and Horovod imported, ``hvd.init()``
at world size 1, the ``--model`` backbone built at ``--image-size``, compiled with Adam inside Horovod's
DistributedOptimizer and CheXNet's weighted BCE, then one ``fit`` of ``--steps`` steps on an in-memory batch with
Horovod's broadcast callback. Timed: the whole process (wall, and its CPU seconds from ``RUSAGE_CHILDREN``), so
the rate is starts per minute. The two variants alternate for ``--rounds`` rounds (``sidebyside``). Goal: the
trainer's starts at least 1.10 times as fast.

    .venv/bin/python bench/ratios/first_step.py [--model densenet121] [--image-size 32] [--steps 4] [--rounds 3]
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.ratios.sidebyside import Rates, alternate, report  # noqa: E402

RANK = """
import sys
import numpy as np
from trainer import compat, loss, runtime
from trainer import model as model_mod
variant, name, size, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
hvd = compat.import_horovod()
hvd.init()
model = model_mod.build(name, size, "none")
w = np.full(14, 0.5, dtype=np.float32)
if variant == "trainer":
    runtime.compile_model(model, hvd, 1e-3, loss.weighted_bce(w, w))
else:
    model.compile(optimizer=hvd.DistributedOptimizer(compat.adam(1e-3)), loss=loss.weighted_bce(w, w))
x = np.random.RandomState(0).rand(8 * steps, size, size, 1).astype("float32")
y = (np.random.RandomState(1).rand(8 * steps, 14) > 0.8).astype("float32")
model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
print("traces", model.train_function.experimental_get_tracing_count())
"""


def start(variant: str, args) -> Rates:
    """One process of ``variant``: starts per minute, per wall minute and per CPU-minute of the process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    run = subprocess.run([sys.executable, "-c", RANK, variant, args.model, str(args.image_size), str(args.steps)],
                         cwd=REPO, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin",
                         "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""})
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode:
        sys.exit("%s variant failed:\n%s" % (variant, run.stderr[-3000:]))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print("  %s, %s: %.1f s wall, %.1f CPU-s, train step %s" % (variant, args.model, wall, cpu, run.stdout.strip()))
    return Rates(60 / wall, 60 / cpu)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="densenet121")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    pairs = alternate(lambda: start("trainer", args), lambda: start("lazy", args), args.rounds)
    report("rank start-up to %d steps, %s at %d², world size 1: trainer (slots first) vs Keras' lazy slots"
           % (args.steps, args.model, args.image_size), "starts/min", pairs, 1.10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
