"""The end-of-run table: per-pathology AUROC of the last epoch, the held-out test AUROC with its interval and the
baseline's, and images/s, read from ``metrics.json``."""
from __future__ import annotations

from rich.table import Table

from trainer.preflight import CLASSES


def _auroc(value: float | None) -> str:
    return "undefined" if value is None else "%.4f" % value


def _interval(entry: dict) -> str:
    """A test AUROC with its bootstrap interval, from a ``test``/``baseline`` block entry of metrics.json."""
    if entry["auroc"] is None or entry.get("ci_low") is None:
        return _auroc(entry["auroc"])
    return "%.3f [%.3f-%.3f]" % (entry["auroc"], entry["ci_low"], entry["ci_high"])


def results_table(metrics: dict) -> Table:
    """rich Table of the last epoch in ``metrics`` (the dict of metrics.json)."""
    last = metrics["epochs"][-1]
    run = metrics.get("run", {})
    table = Table(title="epoch %d of %s — %s, world size %d" % (
        last["epoch"], run.get("epochs", "?"), run.get("model", "?"), last["world_size"]))
    test, baseline = metrics.get("test"), metrics.get("baseline")
    table.add_column("pathology")
    table.add_column("val AUROC", justify="right")
    if test:
        table.add_column("test AUROC [95%% CI] (best epoch %d)" % test.get("best_epoch", 0), justify="right")
        table.add_column("positives", justify="right")
    if baseline:
        table.add_column("baseline test AUROC", justify="right")
    for name in CLASSES:
        row = [name, _auroc(last["auroc"].get(name))]
        if test:
            row += [_interval(test["auroc"][name]), str(test["auroc"][name]["n_positive"])]
        if baseline:
            row.append(_interval(baseline["auroc"][name]))
        table.add_row(*row)
    table.add_section()
    means = ["mean (%d defined)" % last.get("n_classes_defined", 0), _auroc(last["mean_auroc"])]
    means += [_auroc(test["mean_auroc"]), ""] if test else []
    means += [_auroc(baseline["mean_auroc"])] if baseline else []
    table.add_row(*means)
    table.add_row("validation rows", "%d of %d" % (last["val_rows"]["evaluated"], last["val_rows"]["expected"]))
    table.add_row("loss", "%.4f" % last["loss"] if last.get("loss") is not None else "-")
    ips = last["images_per_sec"]
    table.add_row("images/s total", "%.1f" % ips["total"])
    table.add_row("images/s per rank", ", ".join("%.1f" % v for v in ips["per_rank"]))
    return table
