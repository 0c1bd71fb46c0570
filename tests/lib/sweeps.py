"""A sweep request as ``invoke bench`` makes it, for tests that state the trainer's options as keywords."""
from __future__ import annotations

from bench.sweep import SweepRequest
from launch.options import SWEEP_NAMES, SWEEP_OPTIONS, trainer_options


def sweep_request(**kw) -> SweepRequest:
    """``SweepRequest(**kw)`` with the trainer's options among ``kw`` (``model="resnet50"``, ``batch_size=4``,
    ``timeline=True``: a sweep's names, ``launch.options.SWEEP_NAMES``) turned into its ``argv``."""
    by_name = {o.name: o for o in trainer_options(only=SWEEP_OPTIONS, names=SWEEP_NAMES)}
    argv: list[str] = []
    for name in [name for name in kw if name in by_name]:
        option, value = by_name[name], kw.pop(name)
        argv += ([option.flag] if value else []) if option.is_switch else [option.flag, str(value)]
    return SweepRequest(argv=tuple(argv), **kw)
