"""Which Horovod controller (Gloo or MPI) can run on this host's network interfaces.

Fact (observed here with Horovod 0.28.1 + TensorFlow 2.15.1 on Debian 12): with only the loopback
interface (a container started with ``--network none``) every rank of the Gloo controller dies with SIGSEGV
(exit 139), even with ``--network-interface lo``; the MPI controller runs the same job. So: MPI when loopback is
all there is; if the user insisted on Gloo there, stop BEFORE launching with the cause and both fixes.
(In a bare network namespace with only ``lo`` — ``unshare -n`` — Gloo did not crash on the development host;
the crash is seen in containers. MPI runs in both, so the rule does not try to tell them apart.)
"""
from __future__ import annotations

import re
import socket

from chexstack.errors import ChexstackError

CONTROLLERS = ("gloo", "mpi")
#: The fault, in the words every message about it uses.
GLOO_ON_LOOPBACK = ("Horovod's Gloo controller segfaults every rank (exit 139) when the only network interface is "
                    "loopback (seen with Horovod 0.28.1 in a --network none container)")
#: The two ways out of it.
GLOO_FIXES = "use --controller mpi, or give the host/container a network interface (e.g. docker --network host)"
_LOOPBACK = re.compile(r"^lo\d*$")


def is_loopback(name: str) -> bool:
    """``lo`` (Linux) or ``lo0`` (BSD/macOS)."""
    return bool(_LOOPBACK.match(name))


def pick_controller(interfaces: list[str], requested: str | None) -> tuple[str, str]:
    """(controller, reason) for a host whose UP network interfaces are ``interfaces``.

    ``requested`` None picks Gloo when a non-loopback interface exists (no mpirun needed) and MPI otherwise;
    "mpi" is always honoured; "gloo" with loopback only raises a ChexstackError naming the cause and the fixes.
    """
    if requested is not None and requested not in CONTROLLERS:
        raise ChexstackError("controller %r: expected one of %s" % (requested, ", ".join(CONTROLLERS)))
    usable = [name for name in interfaces if not is_loopback(name)]
    if requested == "mpi":
        return "mpi", "requested"
    if usable:
        return "gloo", ("requested" if requested else "default; network interface %s available" % usable[0])
    if requested == "gloo":
        raise ChexstackError("the Gloo controller cannot run here: the only network interface is loopback (%s). %s. "
                             "Fix: %s" % (", ".join(interfaces) or "none", GLOO_ON_LOOPBACK, GLOO_FIXES))
    return "mpi", ("only loopback (%s): Horovod's Gloo segfaults there (exit 139), MPI does not"
                   % (", ".join(interfaces) or "no interface"))


def local_interfaces() -> list[str]:
    """Names of this host's network interfaces that are up (psutil, installed with Horovod), else all names
    the kernel lists (``socket.if_nameindex``)."""
    try:
        import psutil
    except ImportError:
        return [name for _, name in socket.if_nameindex()]
    return sorted(name for name, stats in psutil.net_if_stats().items() if stats.isup)
