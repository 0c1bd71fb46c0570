"""The result every check returns: one line of the report.

A check is NHC-style: tiny, fail-closed, silent when healthy, one clear line when not. Its result says what was
measured, what was expected and, when not PASS, the remedy. ``diagnosis`` is a stable code for a known fault
(``NCCL_SHM_EXHAUSTED``, ``CUDA_DRIVER_TOO_OLD``, ``NVML_DRIVER_LIBRARY_MISMATCH``, ...) that other tools may key on.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum


class Status(str, Enum):
    """Ordered from best to worst; ``worst()`` of several statuses is the one a combined result gets. ERROR: the
    checker itself failed (an exception, a missing module of this tree): the node was not judged, exit 2."""

    PASS = "PASS"
    SKIP = "SKIP"
    WARN = "WARN"
    FAIL = "FAIL"
    ERROR = "ERROR"

    @staticmethod
    def worst(statuses) -> "Status":
        order = [Status.PASS, Status.SKIP, Status.WARN, Status.FAIL, Status.ERROR]
        return max(statuses, key=order.index, default=Status.PASS)


@dataclass
class CheckResult:
    """One check's verdict.

    ``id``: dotted check id (``gpu.inventory``); ``status``: PASS/WARN/FAIL/SKIP/ERROR; ``measured``: what was found
    (one line); ``expected``: what a fit node has; ``remedy``: what to do (empty on PASS); ``diagnosis``: a
    stable code for a known fault or None; ``details``: further lines (per-GPU, per-port findings).
    """

    id: str
    status: Status
    measured: str
    expected: str = ""
    remedy: str = ""
    diagnosis: str | None = None
    details: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        out = asdict(self)
        out["status"] = self.status.value
        return out


def passed(id: str, measured: str, expected: str = "", details: list[str] | None = None) -> CheckResult:
    return CheckResult(id, Status.PASS, measured, expected, details=details or [])


def skipped(id: str, why: str, expected: str = "") -> CheckResult:
    """A check that could not apply here; ``why`` names the missing tool, device or option."""
    return CheckResult(id, Status.SKIP, why, expected)


def warned(id: str, measured: str, expected: str, remedy: str, diagnosis: str | None = None,
           details: list[str] | None = None) -> CheckResult:
    return CheckResult(id, Status.WARN, measured, expected, remedy, diagnosis, details or [])


def failed(id: str, measured: str, expected: str, remedy: str, diagnosis: str | None = None,
           details: list[str] | None = None) -> CheckResult:
    return CheckResult(id, Status.FAIL, measured, expected, remedy, diagnosis, details or [])
