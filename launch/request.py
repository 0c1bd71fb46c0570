"""``TrainRequest``: a training run as ``invoke train`` states it, independent of where it will run.

Launchers (local horovodrun here; containers, Slurm and Kubernetes elsewhere) turn it into their own command;
``trainer_args()`` is the part they share: the ``python -m trainer`` options (trainer/cli.py is the reference).
"""
from __future__ import annotations

import dataclasses
import os

from chexstack.errors import ChexstackError

SYNTHETIC = "synthetic"


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
        explicit = self.images is not None or self.labels is not None
        if self.data and explicit:
            raise ChexstackError("give either --data or --images with --labels, not both")
        if not self.data and not (self.images and self.labels):
            raise ChexstackError("no data: give --data DIR, --data synthetic, or --images DIR with --labels FILE")
        return self

    def with_absolute_paths(self) -> "TrainRequest":
        """The same request with data and output paths absolute (ranks may start in another directory)."""
        def absolute(path: str | None) -> str | None:
            return path if path in (None, SYNTHETIC) else os.path.abspath(os.path.expanduser(path))
        return dataclasses.replace(self, data=absolute(self.data), images=absolute(self.images),
                                   labels=absolute(self.labels), output=absolute(self.output))

    def trainer_args(self) -> list[str]:
        """The ``python -m trainer`` options of this request."""
        args: list[str] = []
        if self.data:
            args += ["--data", self.data]
        else:
            args += ["--images", self.images, "--labels", self.labels]
        args += ["--model", self.model, "--epochs", str(self.epochs), "--batch-size", str(self.batch_size),
                 "--image-size", str(self.image_size), "--output", self.output]
        if self.resume:
            args.append("--resume")
        return args
