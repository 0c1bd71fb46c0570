"""The exact ``horovodrun`` command line (argv + extra environment) of a trainer run.

Facts used: ``horovodrun -np N -H host1:slots,host2:slots [--gloo|--mpi] [--mpi-args=...] CMD`` (Horovod docs,
"Running Horovod"); with MPI, horovodrun forwards its environment to the ranks (``mpirun -x``), with Gloo it
passes it on itself. Open MPI's run-as-root permission (``facts.openmpi``) is added in both forms for the MPI
controller — harmless for a non-root user, required in containers that run as root.
"""
from __future__ import annotations

import os
import sys

from chexstack.errors import ChexstackError
from facts.openmpi import ALLOW_RUN_AS_ROOT_ENV, ALLOW_RUN_AS_ROOT_FLAG
from launch.controller import CONTROLLERS

#: horovodrun passes ``--mpi-args`` on to mpirun.
OPEN_MPI_ROOT_ARG = "--mpi-args=" + ALLOW_RUN_AS_ROOT_FLAG


def slots(host: str) -> int:
    """The slots of a ``NAME[:SLOTS]`` host entry (1 without SLOTS); ChexstackError for a bad entry."""
    name, _, slots = host.partition(":")
    if not name or (slots and not slots.isdigit()) or slots == "0":
        raise ChexstackError("host %r: expected NAME or NAME:SLOTS (SLOTS >= 1)" % host)
    return int(slots) if slots else 1


def horovodrun_executable(python: str) -> str:
    """The ``horovodrun`` next to ``python`` (same virtual environment) if there is one, else from PATH."""
    sibling = os.path.join(os.path.dirname(python), "horovodrun")
    return sibling if os.path.isfile(sibling) else "horovodrun"


def horovodrun_argv(np: int, trainer_args: list[str], *, hosts: list[str] | None = None,
                    controller: str | None = None, python: str = sys.executable,
                    ssh_identity_file: str | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, extra environment) running ``python -m trainer TRAINER_ARGS`` as ``np`` Horovod ranks.

    ``hosts``: ``["node1:4", "node2:4"]`` (default ``["localhost:NP"]``); their slots must cover ``np``.
    ``controller``: "gloo", "mpi" or None (horovodrun's own choice). ``ssh_identity_file``: the key horovodrun's
    ssh (and mpirun's, through it) uses for the remote hosts. Raises ChexstackError on bad values.
    """
    if np < 1:
        raise ChexstackError("np %d: at least one rank is needed" % np)
    hosts = list(hosts) if hosts else ["localhost:%d" % np]
    if sum(slots(h) for h in hosts) < np:
        raise ChexstackError("hosts %s have %d slots for %d ranks" % (",".join(hosts), sum(map(slots, hosts)), np))
    if controller is not None and controller not in CONTROLLERS:
        raise ChexstackError("controller %r: expected one of %s" % (controller, ", ".join(CONTROLLERS)))
    argv = [horovodrun_executable(python), "-np", str(np), "-H", ",".join(hosts)]
    if ssh_identity_file:
        argv += ["--ssh-identity-file", ssh_identity_file]
    env: dict[str, str] = {}
    if controller == "gloo":
        argv.append("--gloo")
    elif controller == "mpi":
        argv += ["--mpi", OPEN_MPI_ROOT_ARG]
        env.update(ALLOW_RUN_AS_ROOT_ENV)
    return argv + [python, "-m", "trainer", *trainer_args], env
