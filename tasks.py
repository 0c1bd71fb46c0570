"""chexstack's command line: thin invoke glue over envs/, images/, validate/, trainer/, launch/ and bench/.

Each task parses its options, calls one function of an area module and turns a ``ChexstackError`` into a clear
message and an exit code (no traceback). Run ``invoke --list`` for the tasks, ``invoke --help TASK`` for options.
"""
from __future__ import annotations

import functools
import sys

from invoke import Exit, task

from chexstack.console import console
from chexstack.errors import ChexstackError


def user_errors(fn):
    """Print a ChexstackError as one red message and exit with its code, instead of a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ChexstackError as e:
            console.print("[bold red]error:[/] %s" % e, soft_wrap=True)
            raise Exit(code=e.exit_code) from None

    return wrapper


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


# --- train (launch/, trainer/) ---------------------------------------------------------------------------------
@task(
    help={
        "gpus": "GPUs to use, one rank each (0: CPU ranks)",
        "np": "number of ranks (0, the default: one per GPU, or 1 with --gpus 0)",
        "data": "dataset folder (Data_Entry_2017*.csv[.gz] + PNGs below it), or 'synthetic'",
        "images": "folder with the PNGs (searched recursively); use with --labels",
        "labels": "label file Data_Entry_2017*.csv or .csv.gz; use with --images",
        "model": "densenet121 (CheXNet) or resnet50",
        "epochs": "total epochs (also when resuming)",
        "batch-size": "images per rank per step",
        "image-size": "input side in pixels",
        "output": "output folder (metrics.json, predictions.csv, model.h5, checkpoint/)",
        "resume": "continue from the last complete checkpoint in --output",
        "controller": "Horovod controller: gloo or mpi (default: chosen for this host's network interfaces)",
        "val-fraction": "share of patients in the validation split (trainer default 0.1)",
        "test-fraction": "share of patients held out as test split without official lists (trainer default 0.2)",
    }
)
@user_errors
def train(c, gpus=0, np=0, data=None, images=None, labels=None, model="densenet121", epochs=1, batch_size=16,
          image_size=224, output="runs/train", resume=False, controller=None, val_fraction=None, test_fraction=None):
    """Train CheXNet with Horovod on this machine; prints the launch command, progress and a table of AUROCs."""
    from launch.local import train as train_local
    from launch.request import TrainRequest

    train_local(TrainRequest(gpus=int(gpus), np=int(np) or None, data=data, images=images,
                             labels=labels, model=model, epochs=int(epochs), batch_size=int(batch_size),
                             image_size=int(image_size), output=output, resume=resume, controller=controller,
                             val_fraction=None if val_fraction is None else float(val_fraction),
                             test_fraction=None if test_fraction is None else float(test_fraction)))
