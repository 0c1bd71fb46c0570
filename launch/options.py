"""Which launcher each ``invoke train`` / ``invoke bench`` option applies to.

An option given where it has no effect is an error, not silence: ``invoke train --render`` without
``--launcher slurm|k8s`` would otherwise start a full training run here, ``--network none`` without ``--stack``
would run on the host's network, and so on. ``check_applicable(launcher, stack, given, known)`` raises a
ChexstackError (exit 2) naming an unknown launcher first, then the first such option and where it applies.
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
    "rdma": ("k8s",),
    "hosts": ("mpirun",),
    "runtime": ("local",),
    "network": ("local",),
    "as_root": ("local",),
}
#: options of a run here (``--launcher local``) that act on the stack's container, so they need ``--stack``.
NEEDS_STACK = ("runtime", "network", "image", "as_root")


def flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def given(fn: Callable, values: dict, options: tuple[str, ...] | list[str]) -> dict:
    """The ``options`` whose value in ``values`` differs from ``fn``'s default: the ones the user set."""
    params = inspect.signature(fn).parameters
    return {name: values[name] for name in options if values[name] != params[name].default}


def check_launcher(launcher: str, known: tuple[str, ...]) -> None:
    """Raise ChexstackError unless ``launcher`` is one of ``known``."""
    if launcher not in known:
        raise ChexstackError("unknown launcher %r: expected %s or %s" % (launcher, ", ".join(known[:-1]), known[-1]))


def check_applicable(launcher: str, stack: str | None, options: dict, known: tuple[str, ...]) -> None:
    """Raise ChexstackError when ``launcher`` is not one of ``known`` (before any other rule: an option "applies
    to slurm only" would hide the typo), else for the first of ``options`` (name -> value, only those set) that has
    no effect with ``launcher`` (and ``stack``)."""
    check_launcher(launcher, known)
    for option in options:
        launchers = LAUNCHERS_OF.get(option)
        if launchers and launcher not in launchers:
            raise ChexstackError("%s applies to --launcher %s only (this is --launcher %s)"
                                 % (flag(option), " or ".join(launchers), launcher))
        if option in NEEDS_STACK and launcher == "local" and not stack:
            raise ChexstackError("%s applies to a run in a stack's image: add --stack S (e.g. --stack cpu)"
                                 % flag(option))
