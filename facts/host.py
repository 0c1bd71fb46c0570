"""This host's facts that several areas need, in one home: the git state of a checkout, the GPUs, the CPU cores a
process may use, and the RDMA ports. Every fact answers "unknown" (None / empty / 0) instead of failing: a missing
tool is a fact about the host, not an error. Tools run through ``chexstack.tools.run``; their output is read by
``facts.parsers``.

Not here: the node *checks* (``validate/``), which judge richer evidence of the same things, and the in-image
probe (``facts/probe.py``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from chexstack.tools import run
from facts.parsers.nvidia_smi import parse_query_csv

#: The kernel's ib_core sysfs ABI (Documentation/ABI/stable/sysfs-class-infiniband).
SYSFS_INFINIBAND = Path("/sys/class/infiniband")
#: Seconds a host tool may take before its fact is "unknown".
TIMEOUT_S = 30


def git(repo: str | Path, *args: str) -> str | None:
    """stdout of ``git ARGS`` in ``repo``, stripped; None outside a checkout or without git."""
    result = run(["git", *args], timeout=TIMEOUT_S, cwd=str(repo))
    return result.stdout.strip() if result.ok else None


def git_state(repo: str | Path) -> tuple[str | None, bool | None]:
    """(``git rev-parse HEAD``, whether tracked files differ from it) of the checkout at ``repo``; None where
    unknown."""
    status = git(repo, "status", "--porcelain", "--untracked-files=no")
    return git(repo, "rev-parse", "HEAD") or None, (None if status is None else bool(status))


#: The query whose output ``gpus`` reads (also recorded on cluster nodes by a scheduled sweep's job).
GPU_QUERY = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]


def gpus_from_query(text: str) -> list[tuple[str, str]]:
    """``GPU_QUERY``'s output -> [(model, driver version), ...] (rows that do not parse are left out)."""
    rows, _ = parse_query_csv(text or "", ["name", "driver_version"])
    return [(row["name"] or "", row["driver_version"] or "") for row in rows]


def gpus() -> list[tuple[str, str]]:
    """This host's GPUs as (model, driver version) from ``GPU_QUERY``; [] without nvidia-smi, without GPUs, or
    when it fails."""
    result = run(GPU_QUERY, timeout=TIMEOUT_S)
    return gpus_from_query(result.stdout) if result.ok else []


def gpu_count() -> int:
    """Number of GPUs ``nvidia-smi`` lists here (0 without it or when it fails)."""
    return len(gpus())


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity mask, as taskset, cpusets and cgroups set it): the slots for
    CPU ranks."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Interconnect:
    """``summary``: one line for a run record ("none: ..." when no RDMA device); ``ports``: one dict per HCA port
    (``hca``, ``port``, ``state``, ``phys_state``, ``rate``, ``link_layer``)."""

    summary: str
    ports: list[dict] = field(default_factory=list)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def interconnect(root: Path = SYSFS_INFINIBAND) -> Interconnect:
    """RDMA ports from sysfs (``<root>/<HCA>/ports/<n>/{state,phys_state,rate,link_layer}``): HCA, port, state,
    physical state, rate, link layer (InfiniBand, or Ethernet = RoCE)."""
    if not root.is_dir():
        return Interconnect("none: no RDMA device (%s absent)" % root)
    ports = []
    for port_dir in sorted(root.glob("*/ports/*")):
        ports.append({"hca": port_dir.parent.parent.name, "port": port_dir.name,
                      **{k: _read(port_dir / k) for k in ("state", "phys_state", "rate", "link_layer")}})
    active = [p for p in ports if p["state"] and p["state"].endswith("ACTIVE")]
    if not active:
        return Interconnect("none active: %d RDMA port(s), none ACTIVE" % len(ports), ports)
    kinds = sorted({"%s %s" % (p["link_layer"] or "RDMA", p["rate"] or "?") for p in active})
    return Interconnect("%d ACTIVE RDMA port(s): %s" % (len(active), "; ".join(kinds)), ports)
