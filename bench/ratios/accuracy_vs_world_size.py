"""Benchmark: does the default recipe's accuracy survive distribution? The same run at 1, 2 and 4 CPU ranks, side
by side (issue 27, "accuracy vs world size, measured").

Each world size is one ``invoke train`` run (``launch.run``: horovodrun) on the shared ChestX-ray14 sample (800
images, ../shared/data/chestxray14/images-64) with the same seed (so the same patient-level 70/10/20 split and the
same test images), the same ``--epochs`` and every recipe option at its default: ``--batch-size`` per rank, the LR
scaled by the world size with the warm-up, BatchNorm statistics averaged over the ranks. Prints each run's test mean
AUROC with its 95 % patient-bootstrap interval, its best and last epoch and why it ended, and images/s (the median
over its epochs of all ranks' images/s); then each run against the first (the reference, normally 1 rank): the
paired difference of test mean AUROC on the same test images with its patient-bootstrap interval
(``trainer.evaluation.paired_difference``: the same resamples for both runs), and whether the run's mean lies in
the reference's interval (the goal). A run whose CPU ranks outnumber the cores (4 ranks on 2 cores) gets a note
under the table (``launch.local.oversubscription``): its images/s is that of ranks sharing cores. Nothing is tuned on
the test split.

    .venv/bin/python bench/ratios/accuracy_vs_world_size.py [--ranks 1,2,4] [--epochs 15] [--image-size 64]
        [--model densenet121] [--seed 0] [--bootstrap 1000] [--output DIR]

CPU-heavy: each run trains for real (a 10-epoch run of the default recipe at 64 px took 48 minutes on 2 shared
cores, docs/training.md); ``--model mobilenet --ranks 1,2 --epochs 2 --image-size 32`` shows the script works in
about a minute and a half.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SAMPLE = (REPO / ".." / "shared" / "data" / "chestxray14").resolve()


class Run(NamedTuple):
    """One world size's run: its metrics.json (dict), output folder, wall seconds, and the launcher's warnings
    about it (``launch.local.oversubscription``: CPU ranks outnumbering the cores)."""
    ranks: int
    metrics: dict
    output: str
    wall_s: float
    warnings: tuple[str, ...] = ()


def parse_ranks(text: str) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]: distinct world sizes >= 1, in the order given (the first is the reference)."""
    try:
        ranks = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("--ranks %r: expected world sizes separated by commas, e.g. 1,2,4" % text)
    if not ranks or min(ranks) < 1 or len(set(ranks)) != len(ranks):
        raise argparse.ArgumentTypeError("--ranks %r: expected distinct world sizes of at least 1" % text)
    return ranks


def images_per_sec(metrics: dict) -> float:
    """The median over the run's epochs of all ranks' images/s."""
    return statistics.median(e["images_per_sec"]["total"] for e in metrics["epochs"])


def _interval(block: dict) -> str:
    if block["mean_auroc"] is None:
        return "undefined"
    if block.get("mean_auroc_ci_low") is None:
        return "%.3f [-]" % block["mean_auroc"]
    return "%.3f [%.3f-%.3f]" % (block["mean_auroc"], block["mean_auroc_ci_low"], block["mean_auroc_ci_high"])


def _name(ranks: int) -> str:
    return "%d rank%s" % (ranks, "" if ranks == 1 else "s")


def test_predictions(run: Run) -> dict:
    """{image name: (patient, labels [14], scores [14])} of the run's test-predictions.csv and splits.csv."""
    from trainer import outputs
    names, labels, scores = outputs.read_predictions(os.path.join(run.output, outputs.TEST_PREDICTIONS))
    patients = outputs.read_splits(run.output)
    return dict((name, (patients[name], labels[i], scores[i])) for i, name in enumerate(names))


def difference(reference: dict, other: dict, resamples: int, seed: int) -> dict:
    """``trainer.evaluation.paired_difference`` of ``other``'s test mean AUROC minus ``reference``'s on the test
    images both scored (``test_predictions`` of each)."""
    import numpy as np

    from trainer import evaluation
    names = sorted(set(reference) & set(other))
    if not names:
        raise SystemExit("the runs share no test image: was the seed the same?")
    labels = np.array([reference[n][1] for n in names])
    return evaluation.paired_difference(labels, np.array([other[n][2] for n in names]),
                                        np.array([reference[n][2] for n in names]), [reference[n][0] for n in names],
                                        resamples, seed)


def report(runs: list[Run], differences: list[dict], title: str) -> list[str]:
    """The printed lines: one per run, then each later run against the first (``differences[i]``: run i + 1 minus
    run 0, as ``difference`` returns it)."""
    from launch.report import comparison_line
    lines = [title, "%-8s %6s %10s %6s %5s  %-24s %9s %7s  %s" % (
        "ranks", "batch", "lr", "best", "end", "test mean AUROC [95% CI]", "images/s", "wall s", "why it ended")]
    for run in runs:
        info, test = run.metrics["run"], run.metrics["test"]
        end = info.get("end", {})
        lines.append("%-8d %6d %10g %6d %5d  %-24s %9.1f %7.0f  %s" % (
            run.ranks, info["global_batch_size"], info["lr_scaled"], test["best_epoch"], info["end_epoch"],
            _interval(test), images_per_sec(run.metrics), run.wall_s, end.get("reason", "?")))
    reference = runs[0]
    ref_test = reference.metrics["test"]
    lines.append("against %s (paired patient bootstrap on the same test images):" % _name(reference.ranks))
    for run, diff in zip(runs[1:], differences):
        mean, low, high = run.metrics["test"]["mean_auroc"], ref_test.get("mean_auroc_ci_low"), ref_test.get(
            "mean_auroc_ci_high")
        within = "unknown (no interval)" if mean is None or low is None else (
            "yes" if low <= mean <= high else "NO")
        lines.append("  %s; within %s's interval: %s" % (
            comparison_line(diff, (_name(run.ranks), _name(reference.ranks))), _name(reference.ranks), within))
    lines.extend("note (%s): %s" % (_name(run.ranks), warning) for run in runs for warning in run.warnings)
    return lines


def request(ranks: int, args: argparse.Namespace, folder: str):
    """The ``launch.request.TrainRequest`` of one world size: ``ranks`` CPU ranks, the recipe's defaults but for
    the data, ``--model``, ``--epochs``, ``--image-size``, ``--seed``, ``--bootstrap``; output ``folder/npN``."""
    from launch.request import TrainRequest
    images = SAMPLE / ("images-64" if args.image_size <= 64 else "images-1024")
    return TrainRequest(gpus=0, np=ranks, argv=(
        "--images", str(images), "--labels", str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"), "--model", args.model,
        "--epochs", str(args.epochs), "--image-size", str(args.image_size), "--seed", str(args.seed),
        "--bootstrap", str(args.bootstrap), "--output", os.path.join(folder, "np%d" % ranks)))


def main(argv: list[str] | None = None) -> int:
    import launch
    from facts import host
    from launch.local import oversubscription

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=parse_ranks, default=[1, 2, 4], help="world sizes, the first the reference")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--model", default="densenet121")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bootstrap", type=int, default=1000, help="patient resamples of the intervals")
    ap.add_argument("--output", help="folder of the runs, one per world size (default: a temp folder)")
    args = ap.parse_args(argv)
    folder = args.output or tempfile.mkdtemp(prefix="chexstack-world-size-")
    started_at = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    runs = []
    for ranks in args.ranks:
        req = request(ranks, args, folder)
        started = time.time()
        metrics = launch.run(req, launch.where())
        runs.append(Run(ranks, metrics, req.options.output, time.time() - started, tuple(oversubscription(req))))
    predictions = [test_predictions(run) for run in runs]
    differences = [difference(predictions[0], other, args.bootstrap, args.seed) for other in predictions[1:]]
    test = runs[0].metrics["test"]
    print()
    print("\n".join(report(runs, differences, "%s, --epochs %d, %dx%d, seed %d, CPU ranks on %d cores, started %s, "
                                              "%.0f s in all; test split: %d images of %d patients; runs in %s" % (
                                                  args.model, args.epochs, args.image_size, args.image_size,
                                                  args.seed, host.cpu_cores(), started_at,
                                                  sum(run.wall_s for run in runs), test["n_images"],
                                                  test["n_patients"], folder))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
