"""A multi-node run request, independent of the launcher: what the Slurm and Kubernetes renderers share.

A ``JobSpec`` says which stack and image to run, on how many nodes with how many ranks each, with which trainer
arguments and which host paths mounted. ``launch.slurm`` and ``launch.k8s`` turn the same spec into a batch script
or an MPIJob, so both launch the same stack the same way.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from chexstack.errors import ChexstackError
from envs.manifest import Stack
from images.naming import IN_IMAGE_HOME
from trainer.preflight import SYNTHETIC

#: How every launcher starts the trainer inside a stack image (``trainer/`` lives in ``IN_IMAGE_HOME``).
TRAINER_COMMAND = ("python", "-m", "trainer")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class Mount:
    """A host path visible at ``target`` inside the container (same path when ``target`` is None)."""

    source: str
    target: str | None = None
    read_only: bool = False

    @property
    def container_path(self) -> str:
        return self.target or self.source


@dataclass(frozen=True)
class JobSpec:
    """One Horovod run of the trainer: ``nodes`` × ``ranks_per_node`` ranks (one per GPU when ``gpus``).

    ``name``: job name, an RFC 1123 DNS label (Kubernetes object names; Slurm accepts it too).
    ``stack``: the stack whose image runs; None for a bare-metal Slurm job (a Python environment on shared storage).
    ``image``: what the launcher runs — a registry reference (pyxis, Kubernetes), a SIF path (hybrid model), or
    for bare metal the environment's Python (``workdir``: the checkout with ``trainer/``). A registry image is
    ``repo@sha256:…`` whenever a push or a pull fixed its digest (``launch.cluster.pinned_image``); ``image_from``
    is then what it was pinned from (the tag given, or the local tag a push recorded), shown beside it.
    ``trainer_args``: arguments after ``python -m trainer`` (``trainer/cli.py``, the trainer's contract).
    Raises ChexstackError for a bad name or counts.
    """

    name: str
    stack: Stack | None
    image: str
    nodes: int
    ranks_per_node: int
    gpus: bool
    trainer_args: tuple[str, ...]
    mounts: tuple[Mount, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = IN_IMAGE_HOME
    image_from: str | None = None

    def __post_init__(self):
        if not _DNS_LABEL.match(self.name):
            raise ChexstackError("job name %r: expected lower-case letters, digits and '-' (an RFC 1123 label, "
                                 "at most 63 characters)" % self.name)
        if not self.image or any(c.isspace() for c in self.image):
            raise ChexstackError("image %r: expected an image reference or a file path without spaces" % self.image)
        if self.nodes < 1 or self.ranks_per_node < 1:
            raise ChexstackError("expected nodes >= 1 and ranks per node >= 1, got %d and %d"
                                 % (self.nodes, self.ranks_per_node))

    @property
    def world_size(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def command(self) -> list[str]:
        return list(TRAINER_COMMAND) + list(self.trainer_args)


def layout(world_size: int, per_node: int) -> tuple[int, int]:
    """(nodes, ranks per node) for ``world_size`` ranks on nodes with ``per_node`` slots: as few nodes as possible,
    the same number of ranks on each (Horovod's hierarchical all-reduce and MPIJob's ``slotsPerWorker`` assume
    it). 8 on 4-GPU nodes -> (2, 4); 3 -> (1, 3); 6 -> (2, 3). Raises ChexstackError when no even split exists
    (5 ranks on 4-slot nodes)."""
    if world_size < 1 or per_node < 1:
        raise ChexstackError("expected at least 1 rank (--gpus/--np) and --per-node of at least 1, got %d and %d"
                             % (world_size, per_node))
    nodes = -(-world_size // per_node)
    if world_size % nodes:
        raise ChexstackError("%d ranks cannot be spread evenly over %d nodes of %d slots; choose a multiple of %d "
                             "or at most %d" % (world_size, nodes, per_node, nodes, per_node))
    return nodes, world_size // nodes


def cluster_path(launcher: str, option: str, path: str | None) -> str | None:
    """``path`` as given when it is absolute (a path the cluster's nodes see), None or ``synthetic``. Raises
    ChexstackError for a relative path: resolved here it would name a folder of this machine (the reviewer's
    hostPath ``/work/fresh/runs/train``)."""
    cluster_paths(launcher, [(option, path)])
    return path


def cluster_paths(launcher: str, paths: list[tuple[str, str | None]]) -> None:
    """``cluster_path`` of every (option, path) at once: one ChexstackError naming each relative path, so that
    one fix is enough."""
    bad = [(o, p) for o, p in paths if not (p is None or p == SYNTHETIC or os.path.isabs(p))]
    if not bad:
        return
    raise ChexstackError("--launcher %s: %s %s relative to this machine; give the absolute path%s the cluster's "
                         "nodes see (shared storage), e.g. %s" % (
                             launcher, ", ".join("%s %s" % b for b in bad), "is a path" if len(bad) == 1
                             else "are paths", "" if len(bad) == 1 else "s",
                             " ".join("%s /shared/chexstack/%s" % (o, p.rstrip("/").rsplit("/", 1)[-1] or "x")
                                      for o, p in bad)))
