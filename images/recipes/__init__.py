"""One hpccm recipe per stack family (``cpu``, ``ngc``, ``conda``), each a composition of ``images.parts``.

``stages(stack, base=None)`` -> the ``Stage`` list for the stack's family; ``base`` replaces the manifest's base
image reference (a local stand-in, a mirror). Every value a recipe needs comes from the manifest.
"""
from __future__ import annotations

from chexstack.errors import ChexstackError
from envs.manifest import Stack
from images.parts import Stage
from images.recipes import conda, cpu, ngc

FAMILIES = {"cpu": cpu.stages, "ngc": ngc.stages, "conda": conda.stages}

# hpccm's distribution names (apt vs yum, package names), from the manifest's OS row.
_DISTROS = {("Ubuntu", "16"): "ubuntu16", ("Ubuntu", "18"): "ubuntu18", ("Ubuntu", "20"): "ubuntu20",
            ("Ubuntu", "22"): "ubuntu22", ("Ubuntu", "24"): "ubuntu24", ("Debian", "12"): "ubuntu22",
            ("RHEL", "7"): "centos7", ("CentOS", "7"): "centos7", ("RHEL", "8"): "rhel8"}


def hpccm_distro(stack: Stack) -> str:
    """hpccm's ``_distro`` for the stack's OS row (Debian counts as Ubuntu: both apt). Raises ChexstackError
    naming the manifest field for an OS no recipe knows."""
    os_row = stack.components["os"]
    major = (os_row.version or "").split(".")[0]
    try:
        return _DISTROS[(os_row.name or "", major)]
    except KeyError:
        known = ", ".join("%s %s" % k for k in _DISTROS)
        raise ChexstackError("stack %s: field components.os: no recipe for %s %s; known: %s"
                             % (stack.name, os_row.name, os_row.version, known)) from None


def stages(stack: Stack, base: str | None = None) -> list[Stage]:
    """The recipe of ``stack``: its stages, the last one being the image."""
    return FAMILIES[stack.family](stack, base or stack.base.reference, hpccm_distro(stack))
