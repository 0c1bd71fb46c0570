"""The end-of-run table: per-pathology AUROC of the last epoch, the held-out test AUROC with its interval and the
baseline's, images/s, and below it why the run ended and whether the CNN is distinguishable from the baseline, read
from ``metrics.json``."""
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


def _signed(value: float) -> str:
    return "%+.3f" % value


def comparison_line(comparison: dict, names: tuple[str, str] = ("CNN", "baseline")) -> str:
    """``comparison`` (metrics.json's ``comparison`` block, or ``trainer.evaluation.paired_difference``'s result) as
    one line: "CNN - baseline: +0.012 (95 % interval -0.030 .. +0.050): not distinguishable"."""
    if comparison["difference"] is None:
        return "%s - %s: undefined (no pathology with positives and negatives)" % names
    line = "%s - %s: %s" % (names + (_signed(comparison["difference"]),))
    if comparison["ci_low"] is None:
        return line + " (no interval: --bootstrap 0 or too few resamples define it)"
    line += " (%d %% interval %s .. %s): " % (round(comparison["level"] * 100), _signed(comparison["ci_low"]),
                                               _signed(comparison["ci_high"]))
    if not comparison["distinguishable"]:
        return line + "not distinguishable"
    return line + "%s better" % (names[0] if comparison["ci_low"] > 0 else names[1])


def _caption(metrics: dict) -> str | None:
    lines = []
    end = metrics.get("run", {}).get("end")
    if end:
        lines.append(end["message"])
    if metrics.get("comparison"):
        lines.append("test mean AUROC, " + comparison_line(metrics["comparison"]))
    return "\n".join(lines) or None


def _mean_interval(block: dict) -> str:
    if block["mean_auroc"] is None or block.get("mean_auroc_ci_low") is None:
        return _auroc(block["mean_auroc"])
    return "%.3f [%.3f-%.3f]" % (block["mean_auroc"], block["mean_auroc_ci_low"], block["mean_auroc_ci_high"])


def results_table(metrics: dict) -> Table:
    """rich Table of the last epoch in ``metrics`` (the dict of metrics.json); its caption says why the run ended
    and how the CNN compares with the baseline."""
    last = metrics["epochs"][-1]
    run = metrics.get("run", {})
    table = Table(title="epoch %d of %s — %s, world size %d" % (
        last["epoch"], run.get("epochs", "?"), run.get("model", "?"), last["world_size"]),
        caption=_caption(metrics), caption_justify="left")
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
    means += [_mean_interval(test), ""] if test else []
    means += [_mean_interval(baseline)] if baseline else []
    table.add_row(*means)
    table.add_row("validation rows", "%d of %d" % (last["val_rows"]["evaluated"], last["val_rows"]["expected"]))
    table.add_row("loss", "%.4f" % last["loss"] if last.get("loss") is not None else "-")
    ips = last["images_per_sec"]
    table.add_row("images/s total", "%.1f" % ips["total"])
    table.add_row("images/s per rank", ", ".join("%.1f" % v for v in ips["per_rank"]))
    return table
