"""Benchmark: held-out test mean AUROC of the trainer's default recipe vs the logistic-regression baseline, measured
side by side in one run (issue 14, "a baseline in the box").

One ``invoke train`` run (``launch.run``: 2 CPU ranks under horovodrun) on the shared ChestX-ray14 sample
(800 images, 64 x 64, ../shared/data/chestxray14/images-64) with a seeded PATIENT-level 70/10/20 split and every
recipe option at its default except ``--epochs``. At the end the trainer scores the test split with its best epoch
(model-best.h5) and fits the baseline (logistic regression on 16 x 16 pixels, ``trainer.baseline``) on the same
training split, scored on the same test split. Prints both test mean AUROCs with their patient-bootstrap
intervals per pathology averaged, and the ratio CNN / baseline (> 1: the CNN is better). Nothing is tuned on the
test split.

    .venv/bin/python bench/ratios/recipe_vs_baseline.py [--epochs 10] [--model densenet121] [--seed 0] [--output DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SAMPLE = (REPO / ".." / "shared" / "data" / "chestxray14").resolve()


def main() -> int:
    import launch
    from launch.request import TrainRequest

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--model", default="densenet121")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--output", help="run folder (default: a temp folder)")
    args = ap.parse_args()
    output = args.output or os.path.join(tempfile.mkdtemp(prefix="chexstack-recipe-"), "run")
    request = TrainRequest(gpus=0, np=args.np, argv=(
        "--images", str(SAMPLE / "images-64"), "--labels", str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"),
        "--model", args.model, "--epochs", str(args.epochs), "--image-size", "64", "--output", output,
        "--seed", str(args.seed)))
    started = time.time()
    metrics = launch.run(request, launch.where())
    test, base = metrics["test"], metrics["baseline"]
    print()
    print("%s, %d epochs (best epoch %d), %d CPU ranks, 64x64, test split: %d images of %d patients (%.0f s)"
          % (args.model, args.epochs, test["best_epoch"], args.np, test["n_images"], test["n_patients"],
             time.time() - started))
    for name, block in (("CNN (default recipe)", test), ("baseline (" + base["method"] + ")", base)):
        print("%-40s test mean AUROC %.3f over %d pathologies" % (name[:40], block["mean_auroc"],
                                                                  block["n_classes_defined"]))
    print("ratio CNN / baseline: %.3f" % (test["mean_auroc"] / base["mean_auroc"]))
    print("per pathology (AUROC [95% CI], positives):")
    for name, entry in test["auroc"].items():
        other = base["auroc"][name]
        if entry["auroc"] is None:
            continue
        print("  %-20s CNN %s  baseline %s  (%d positives)" % (name, _cell(entry), _cell(other), entry["n_positive"]))
    return 0


def _cell(entry: dict) -> str:
    if entry["auroc"] is None:
        return "undefined"
    if entry["ci_low"] is None:
        return "%.3f [-]" % entry["auroc"]
    return "%.3f [%.3f-%.3f]" % (entry["auroc"], entry["ci_low"], entry["ci_high"])


if __name__ == "__main__":
    sys.exit(main())
