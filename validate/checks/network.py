"""This node's network interfaces, for the checks that judge what runs over them (``horovod.controller``: Gloo needs
one that is not loopback, ../shared/cases/23). Not a check: a reading of the node that checks share.

Live they are a fact (``launch.controller.local_interfaces``: psutil, the interfaces that are up); a bundle holds that
fact (``--collect``) or, put together by hand, a recorded ``ip`` run in any form (``facts.parsers.network.IP_LINK``:
``ip -o link show``, ``ip link``, ``ip -o addr``, ``ip -br a``, under sudo or piped).
"""
from __future__ import annotations

from facts.parsers.network import IP_LINK
from launch.controller import local_interfaces
from validate.checks.registry import Context
from validate.evidence import MissingEvidence


def interfaces(ctx: Context) -> tuple[list[str], str | None]:
    """(the names of the interfaces that are up, the recorded command they were read from or None for the fact);
    ``MissingEvidence`` naming both when a bundle holds neither."""
    try:
        return ctx.fact("network interfaces", local_interfaces), None
    except MissingEvidence:
        seen = ctx.first(IP_LINK)
        if seen is None:
            raise MissingEvidence("network interfaces (the fact, or a recorded `ip -o link show`)") from None
        return seen.value, seen.command
