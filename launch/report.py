"""The end-of-run table: per-pathology AUROC of the last epoch and images/s, read from ``metrics.json``."""
from __future__ import annotations

from rich.table import Table

from trainer.labels import CLASSES


def _auroc(value: float | None) -> str:
    return "undefined" if value is None else "%.4f" % value


def results_table(metrics: dict) -> Table:
    """rich Table of the last epoch in ``metrics`` (the dict of metrics.json)."""
    last = metrics["epochs"][-1]
    run = metrics.get("run", {})
    table = Table(title="epoch %d of %s — %s, world size %d" % (
        last["epoch"], run.get("epochs", "?"), run.get("model", "?"), last["world_size"]))
    table.add_column("pathology")
    table.add_column("AUROC", justify="right")
    for name in CLASSES:
        table.add_row(name, _auroc(last["auroc"].get(name)))
    table.add_section()
    table.add_row("mean (%d defined)" % last.get("n_classes_defined", 0), _auroc(last["mean_auroc"]))
    table.add_row("validation rows", "%d of %d" % (last["val_rows"]["evaluated"], last["val_rows"]["expected"]))
    table.add_row("loss", "%.4f" % last["loss"] if last.get("loss") is not None else "-")
    ips = last["images_per_sec"]
    table.add_row("images/s total", "%.1f" % ips["total"])
    table.add_row("images/s per rank", ", ".join("%.1f" % v for v in ips["per_rank"]))
    return table
