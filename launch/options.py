"""Which launcher each ``invoke train`` / ``invoke bench`` option applies to.

An option given where it has no effect is an error, not silence: ``invoke train --render`` without
``--launcher slurm|k8s`` would otherwise start a full training run here, ``--network none`` without ``--stack``
would run on the host's network, and so on. ``check_applicable(launcher, stack, given)`` raises a ChexstackError
(exit 2) naming the first such option and where it applies.
"""
from __future__ import annotations

import inspect
from typing import Callable

from chexstack.errors import ChexstackError

#: option -> the launchers it applies to.
LAUNCHERS_OF = {
    "render": ("slurm", "k8s"),
    "submit": ("slurm", "k8s"),
    "per_node": ("slurm", "k8s"),
    "results": ("slurm", "k8s"),
    "hybrid": ("slurm",),
    "nodes": ("slurm", "k8s"),
    "ntasks_per_node": ("slurm", "k8s"),
    "time": ("slurm",),
    "partition": ("slurm",),
    "account": ("slurm",),
    "detach": ("slurm",),
    "rdma": ("k8s",),
    "hosts": ("mpirun",),
    "runtime": ("local",),
    "network": ("local",),
}
#: options of a run here (``--launcher local``) that act on the stack's container, so they need ``--stack``.
NEEDS_STACK = ("runtime", "network", "image")


def flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def given(fn: Callable, values: dict, options: tuple[str, ...] | list[str]) -> dict:
    """The ``options`` whose value in ``values`` differs from ``fn``'s default: the ones the user set."""
    params = inspect.signature(fn).parameters
    return {name: values[name] for name in options if values[name] != params[name].default}


def check_applicable(launcher: str, stack: str | None, options: dict) -> None:
    """Raise ChexstackError for the first of ``options`` (name -> value, only those set) that has no effect with
    ``launcher`` (and ``stack``)."""
    for option in options:
        launchers = LAUNCHERS_OF.get(option)
        if launchers and launcher not in launchers:
            raise ChexstackError("%s applies to --launcher %s only (this is --launcher %s)"
                                 % (flag(option), " or ".join(launchers), launcher))
        if option in NEEDS_STACK and launcher == "local" and not stack:
            raise ChexstackError("%s applies to a run in a stack's image: add --stack S (e.g. --stack cpu)"
                                 % flag(option))
