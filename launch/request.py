"""``TrainRequest``: a training run as ``invoke train`` states it, independent of where it will run.

Launchers (local horovodrun here; containers, Slurm and Kubernetes elsewhere) turn it into their own command;
``trainer_args()`` is the part they share: the ``python -m trainer`` options (trainer/cli.py is the reference).

Checks before anything starts, each raising one ChexstackError (exit 2): ``check()`` the values, by the trainer's
own option parser and checks (one source of truth, no TensorFlow import); ``check_paths()`` the data and output on
THIS machine (launchers that run here: local horovodrun, docker, singularity); ``check_checkpoint()`` the
``--resume`` rules on the output folder (after the output lock is taken).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator

from chexstack.errors import ChexstackError
from trainer import preflight
from trainer.errors import TrainerError
from trainer.preflight import SYNTHETIC


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    gpus: int = 0
    np: int | None = None
    data: str | None = None
    images: str | None = None
    labels: str | None = None
    model: str = "densenet121"
    epochs: int = 1
    batch_size: int = 16
    image_size: int = 224
    output: str = "runs/train"
    resume: bool = False
    controller: str | None = None
    val_fraction: float | None = None
    test_fraction: float | None = None
    #: Further ``python -m trainer`` options, as its command line (``--lr 0.01 --seed 3``): judged by its parser.
    more: tuple[str, ...] = ()

    def ranks(self) -> int:
        """World size: ``np``, else one rank per GPU, else 1 (a CPU rank)."""
        if self.np is not None:
            return self.np
        return self.gpus if self.gpus > 0 else 1

    def check(self) -> "TrainRequest":
        """Raise ChexstackError for requests that cannot run anywhere."""
        if self.gpus < 0:
            raise ChexstackError("--gpus %d: expected 0 (CPU ranks) or more" % self.gpus)
        if self.np is not None and self.np < 1:
            raise ChexstackError("--np %d: at least one rank is needed" % self.np)
        if self.gpus > 0 and self.ranks() > self.gpus:
            raise ChexstackError("--np %d with --gpus %d: each rank needs its own GPU" % (self.ranks(), self.gpus))
        with trainer_errors():  # data given once, each number in range, the model known, ...
            preflight.check_options(self.trainer_args())
        return self

    def check_paths(self) -> "TrainRequest":
        """Raise ChexstackError unless the data exist here as the options say (a folder with one label file, a
        folder of images and a label file) and the output folder exists or can be created, and can be written
        (and, for ``--resume``, exists)."""
        req = self.with_absolute_paths()
        with trainer_errors():
            if req.data and req.data != SYNTHETIC:
                preflight.find_label_file(req.data)
            if req.images is not None:
                preflight.check_folder(req.images, "--images")
            if req.labels is not None and not os.path.isfile(req.labels):
                why = ("a directory; expected the label file (Data_Entry_2017*.csv or .csv.gz)"
                       if os.path.isdir(req.labels) else "no such file")
                raise TrainerError("--labels %s: %s" % (req.labels, why))
            preflight.check_output_folder(req.output)
            if not os.path.exists(req.output):  # --resume into nothing: refused before the folder is made
                preflight.committed_state(req.output, req.resume)
        return self

    def check_checkpoint(self) -> "TrainRequest":
        """Raise ChexstackError when ``--resume`` finds no checkpoint in the output folder, or a run without it
        finds one (the trainer's own rule, ``trainer.checkpoint.committed_state``), or the checkpoint was made
        with another model, image size or label file (``trainer.checkpoint.check_identity``)."""
        req = self.with_absolute_paths()
        with trainer_errors():
            state = preflight.committed_state(req.output, req.resume)
            if state is not None:
                preflight.check_identity(state, req.known_identity(), req.output)
        return self

    def known_identity(self) -> dict:
        """The checkpoint identity fields this request fixes without loading the data: model, image size and the
        label file's SHA-256 (None for synthetic data, as the trainer records it)."""
        identity = {"model": self.model, "image_size": self.image_size}
        if self.data == SYNTHETIC:
            identity["label_sha256"] = None
        else:
            path = self.labels or (self.data and preflight.find_label_file(self.data))
            if path:
                identity["label_sha256"] = preflight.label_sha256(path)
        return identity

    def with_absolute_paths(self) -> "TrainRequest":
        """The same request with data and output paths absolute (ranks may start in another directory)."""
        def absolute(path: str | None) -> str | None:
            return path if path in (None, SYNTHETIC) else os.path.abspath(os.path.expanduser(path))
        more = list(self.more)
        for i in self.more_paths():
            more[i] = absolute(more[i])
        return dataclasses.replace(self, data=absolute(self.data), images=absolute(self.images),
                                   labels=absolute(self.labels), output=absolute(self.output), more=tuple(more))

    def more_paths(self) -> list[int]:
        """Indexes in ``more`` of the values that are files or folders (``--weights PATH``, ``--test-list
        FILE``, ...): launchers make them absolute and reachable (mounted read-only in images and jobs)."""
        from launch.options import path_values
        return path_values(self.more)

    def device_env(self) -> dict[str, str]:
        """The ranks' device environment: CPU ranks see no GPU (``CUDA_VISIBLE_DEVICES=""``); with ``--gpus N``
        a rank whose TensorFlow sees no GPU stops instead of training on CPU (``trainer.cli.REQUIRE_GPU_ENV``)."""
        return {"CUDA_VISIBLE_DEVICES": ""} if self.gpus == 0 else {preflight.REQUIRE_GPU_ENV: "1"}

    def trainer_args(self) -> list[str]:
        """The ``python -m trainer`` options of this request."""
        args: list[str] = []
        for option, value in (("--data", self.data), ("--images", self.images), ("--labels", self.labels)):
            if value is not None:
                args += [option, value]
        args += ["--model", self.model, "--epochs", str(self.epochs), "--batch-size", str(self.batch_size),
                 "--image-size", str(self.image_size), "--output", self.output]
        for option, value in (("--val-fraction", self.val_fraction), ("--test-fraction", self.test_fraction)):
            if value is not None:
                args += [option, repr(value)]
        if self.resume:
            args.append("--resume")
        return args + list(self.more)


@contextlib.contextmanager
def trainer_errors() -> Iterator[None]:
    """Turn the trainer's TrainerError (same message) into a ChexstackError (exit 2)."""
    try:
        yield
    except TrainerError as e:
        raise ChexstackError(str(e)) from None
