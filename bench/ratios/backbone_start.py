"""Benchmark: a rank's start-up to its first training steps with ``--model mobilenet`` vs ``--model densenet121``
(CheXNet's backbone), the trainer's compiled model in both (``first_step.start``, variant "trainer": a fresh
process, Horovod at world size 1, the backbone built at ``--image-size``, compiled as the trainer compiles it,
one ``fit`` of ``--steps`` steps with Horovod's broadcast callback).

Why it matters: on CPU a rank's start is mostly TensorFlow tracing the train step and Horovod's per-tensor
allreduce and broadcast ops, which grow with the number of trainable tensors (MobileNet 83, DenseNet-121 364:
``len(model.trainable_weights)``), not with FLOPs. Tests whose subject is the launcher, the scheduler or the
image rather than the backbone run MobileNet (tests/lib/runs.py ``FAST_MODEL``). The two alternate for
``--rounds`` rounds (``sidebyside``). Goal: MobileNet's starts at least 2 times as fast.

    .venv/bin/python bench/ratios/backbone_start.py [--image-size 32] [--steps 4] [--rounds 3]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.ratios.first_step import start  # noqa: E402
from bench.ratios.sidebyside import alternate, report  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    small, chexnet = (argparse.Namespace(**{**vars(args), "model": m}) for m in ("mobilenet", "densenet121"))
    pairs = alternate(lambda: start("trainer", small), lambda: start("trainer", chexnet), args.rounds)
    report("rank start-up to %d steps at %d², world size 1: mobilenet (ours) vs densenet121 (baseline)"
           % (args.steps, args.image_size), "starts/min", pairs, 2.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
