"""``TrainRequest``: a training run as the launchers take it, independent of where it will run: how many ranks
(``gpus``, ``np``), which Horovod controller, and the trainer's own command line (``argv``, the ``python -m
trainer`` options: trainer/cli.py is the reference, and the only statement of them).

What the host needs to know of a run (its output folder, data, ``--resume``, model, ...) it reads from ``argv``
through the trainer's own parser (``options``, ``trainer.preflight.parse_options``), never from a copy of the
trainer's options; every path in ``argv`` is found by ``launch.options.path_values``.

Checks before anything starts, each raising one ChexstackError (exit 2), each the trainer's own rule
(``trainer.preflight``, no TensorFlow import): ``check()`` the values (``preflight.check_options``);
``check_paths()`` the data and output on THIS machine (launchers that run here: local horovodrun, docker,
singularity; ``preflight.check_here``); ``check_checkpoint()`` the ``--resume`` rules on the output folder (after
the output lock is taken; ``preflight.check_resume``).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
from collections.abc import Iterator

from chexstack.errors import ChexstackError
from launch.options import path_values
from trainer import preflight
from trainer.errors import TrainerError


def check_np(np: int) -> None:
    """ChexstackError unless ``np`` (``--np``, the world size) is at least one rank."""
    if np < 1:
        raise ChexstackError("--np %d: at least one rank is needed" % np)


@dataclasses.dataclass(frozen=True)
class TrainRequest:
    """``gpus``: GPUs, one rank each (0: CPU ranks); ``np``: ranks (None: one per GPU, or 1); ``controller``:
    ``gloo`` or ``mpi`` (None: chosen for the network); ``argv``: the ``python -m trainer`` options."""

    gpus: int = 0
    np: int | None = None
    controller: str | None = None
    argv: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "argv", tuple(self.argv))

    @functools.cached_property
    def options(self) -> argparse.Namespace:
        """The values of ``argv``, the trainer's defaults for the rest (``.output``, ``.data``, ``.images``,
        ``.labels``, ``.resume``, ``.model``, ``.image_size``, ...): read by the trainer's own parser, not yet
        checked together (``check``). ChexstackError for an unknown option or a value of the wrong type."""
        with trainer_errors():
            return preflight.parse_options(self.argv)

    def ranks(self) -> int:
        """World size: ``np``, else one rank per GPU, else 1 (a CPU rank)."""
        if self.np is not None:
            return self.np
        return self.gpus if self.gpus > 0 else 1

    def check(self) -> "TrainRequest":
        """Raise ChexstackError for requests that cannot run anywhere."""
        if self.gpus < 0:
            raise ChexstackError("--gpus %d: expected 0 (CPU ranks) or more" % self.gpus)
        if self.np is not None:
            check_np(self.np)
        if self.gpus > 0 and self.ranks() > self.gpus:
            raise ChexstackError("--np %d with --gpus %d: each rank needs its own GPU" % (self.ranks(), self.gpus))
        with trainer_errors():  # data given once, each number in range, the model known, ...
            preflight.check_options(self.argv)
        return self

    def check_paths(self) -> "TrainRequest":
        """Raise ChexstackError unless the data exist here as the options say (a folder with one label file, a
        folder of images and a label file) and the output folder exists or can be created, and can be written
        (and, for ``--resume``, exists)."""
        with trainer_errors():
            preflight.check_here(self.with_absolute_paths().argv)
        return self

    def check_checkpoint(self) -> "TrainRequest":
        """Raise ChexstackError when ``--resume`` finds no checkpoint in the output folder, or a run without it
        finds one, or the checkpoint was made with another model, image size or label file."""
        with trainer_errors():
            preflight.check_resume(self.with_absolute_paths().argv)
        return self

    def with_option(self, flag: str, value: str) -> "TrainRequest":
        """The same request with ``flag``'s value in ``argv`` replaced by ``value`` (added when not given)."""
        argv = list(self.argv)
        if flag in argv[:-1]:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
        return dataclasses.replace(self, argv=tuple(argv))

    def with_absolute_paths(self) -> "TrainRequest":
        """The same request with every path in ``argv`` absolute (``launch.options.path_values``: data, output,
        ``--weights PATH``, ``--test-list FILE``, ...), ``--output`` given even when it is the trainer's default:
        ranks may start in another directory."""
        argv = list(self.with_option("--output", self.options.output).argv)
        for i in path_values(argv):
            argv[i] = os.path.abspath(os.path.expanduser(argv[i]))
        return dataclasses.replace(self, argv=tuple(argv))

    def device_env(self) -> dict[str, str]:
        """The ranks' device environment: CPU ranks see no GPU (``CUDA_VISIBLE_DEVICES=""``); with ``--gpus N``
        a rank whose TensorFlow sees no GPU stops instead of training on CPU (``trainer.cli.REQUIRE_GPU_ENV``)."""
        return {"CUDA_VISIBLE_DEVICES": ""} if self.gpus == 0 else {preflight.REQUIRE_GPU_ENV: "1"}


@contextlib.contextmanager
def trainer_errors() -> Iterator[None]:
    """Turn the trainer's TrainerError (same message) into a ChexstackError (exit 2)."""
    try:
        yield
    except TrainerError as e:
        raise ChexstackError(str(e)) from None

