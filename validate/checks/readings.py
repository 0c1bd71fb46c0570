"""Readings several checks share: the PCI bus's NVIDIA GPUs, the kernel log, the container engine's client. A
check module reads them here, never from another check's module (``validate.checks.gpu`` for the GPU inventory,
``validate.checks.topology`` for the PCIe tree, ``validate.checks.container`` and ``validate.checks.horovod`` for the
engine).
"""
from __future__ import annotations

import os

from chexstack import engine
from chexstack.tools import ToolRun
from facts.parsers.kernel import KERNEL_LOG
from validate.checks.registry import Context
from validate.evidence import MissingEvidence


def pci_nvidia_gpus(ctx: Context, root: str = "/sys/bus/pci/devices") -> list[str] | None:
    """PCI addresses of NVIDIA GPUs (vendor 0x10de, class 0x0300xx VGA or 0x0302xx 3D controller), from sysfs;
    NVSwitches (class 0x0680) are not GPUs. None when a bundle holds no PCI listing (not compared then)."""
    try:
        devices = ctx.glob(os.path.join(root, "*"))
        found = []
        for dev in devices:
            vendor, cls = ctx.read(os.path.join(dev, "vendor")), ctx.read(os.path.join(dev, "class"))
            if vendor and cls and vendor.strip() == "0x10de" and cls.strip().startswith(("0x0300", "0x0302")):
                found.append(os.path.basename(dev))
        return found
    except MissingEvidence:
        return None


def kernel_log(ctx: Context) -> ToolRun | None:
    """The kernel log: a bundle's ``KERNEL_LOG`` (``dmesg``, also filtered), else ``dmesg`` (live: on this node);
    None when a bundle holds neither."""
    try:
        return (ctx.first(KERNEL_LOG) or ctx.observe(KERNEL_LOG)).run
    except MissingEvidence:
        return None


def docker_client():
    """The engine's client for the container checks (``chexstack.engine``); they report a missing engine."""
    return engine.client(timeout=10)
