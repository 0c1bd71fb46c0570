"""Facts for a sweep's run record, gathered on the host that runs ``invoke bench``: git revision, GPUs and driver,
interconnect, CPU slots, and the identity of a stack image. Every probe answers "unknown" (None / empty) instead
of failing: a missing tool is a fact about the host, not an error.
"""
from __future__ import annotations

import csv
import io
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from chexstack import engine

SYSFS_INFINIBAND = Path("/sys/class/infiniband")


def _run(argv: list[str], cwd: str | Path | None = None, timeout: int = 30) -> str | None:
    """stdout of ``argv``, or None when the tool is missing, fails or hangs."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def git_state(repo: Path) -> tuple[str | None, bool | None]:
    """(``git rev-parse HEAD``, whether tracked files differ from it) for the checkout at ``repo``."""
    rev = _run(["git", "rev-parse", "HEAD"], cwd=repo)
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo)
    return (rev.strip() if rev else None), (None if status is None else bool(status.strip()))


def parse_gpu_query(text: str) -> list[tuple[str, str]]:
    """``nvidia-smi --query-gpu=name,driver_version --format=csv,noheader`` -> [(name, driver), ...]."""
    return [(row[0].strip(), row[1].strip()) for row in csv.reader(io.StringIO(text or "")) if len(row) >= 2]


def gpus() -> list[tuple[str, str]]:
    """This host's GPUs as (model, driver version); [] without nvidia-smi or GPUs."""
    return parse_gpu_query(_run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]) or "")


def cpu_slots() -> int:
    """CPU cores this process may run on (the affinity mask, e.g. a cgroup's cpuset), the slots for CPU ranks."""
    return len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class Interconnect:
    """``summary``: one line for the record ("none: ..." when no RDMA device); ``ports``: per HCA port."""

    summary: str
    ports: list[dict] = field(default_factory=list)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def interconnect(root: Path = SYSFS_INFINIBAND) -> Interconnect:
    """RDMA ports from sysfs (``/sys/class/infiniband/<HCA>/ports/<n>/{state,phys_state,rate,link_layer}``, the
    kernel's ib_core ABI): HCA, port, state, physical state, rate, link layer (InfiniBand, or Ethernet = RoCE)."""
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


def image_identity(ref: str) -> tuple[str | None, list[str]]:
    """(image ID ``sha256:…``, registry digests ``repo@sha256:…``) of a local Docker image; (None, []) when the
    image or the Docker engine is not there."""
    client = engine.optional_client()
    try:
        image = client.images.get(ref)
    except Exception:  # engine down (None), or no such image: unknown, not an error
        return None, []
    return image.id, list(image.attrs.get("RepoDigests") or [])


def hostname() -> str:
    return socket.gethostname()
