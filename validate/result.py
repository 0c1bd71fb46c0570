"""The result every check returns: one line of the report.

A check is NHC-style: tiny, fail-closed, silent when healthy, one clear line when not. Its result says what was
measured, what was expected and, when not PASS, the remedy. ``diagnosis`` is the verdict's stable code: every
non-PASS result has one of ``validate.catalogue.CODES`` (``NCCL_SHM_EXHAUSTED``, ``CUDA_DRIVER_TOO_OLD``,
``TOOL_MISSING``, ...), which other tools may key on and which names the next action.
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


class Reason(str):
    """Why a check does not apply, with its SKIP code: ``Reason("mpirun not on PATH", "TOOL_MISSING")`` is the
    string, and ``skipped(id, reason)`` takes the code from it. What a ``requires`` function or a helper returns
    when the reason is made far from the ``skipped`` call."""

    code: str

    def __new__(cls, text: str, code: str) -> "Reason":
        out = super().__new__(cls, text)
        out.code = code
        return out


@dataclass
class CheckResult:
    """One check's verdict.

    ``id``: dotted check id (``gpu.inventory``); ``status``: PASS/WARN/FAIL/SKIP/ERROR; ``measured``: what was found
    (one line); ``expected``: what a fit node has; ``remedy``: what to do (empty on PASS); ``diagnosis``: the
    verdict's code (``validate.catalogue``; None on PASS); ``details``: further lines (per-GPU, per-port findings);
    ``tries``: a repeated measurement's every try, first to last (``validate.tries``), each ``{"try", "status",
    "measured", "diagnosis"}``; empty when measured once; ``explains``: the fault signals of its evidence its
    findings account for, each a ``facts/signals.yaml`` id or class, or a fragment of the line (a finding that quotes
    the line, or whose code the entry's ``claimed_by`` names, explains it without this; a PASS explains only what it
    names here); ``signals``: set by ``validate.report``: ``{"read", "explained", "unexplained"}``, how many fault
    signal lines the check's evidence held, how many its findings (or another reader's) explained, and the others.
    """

    id: str
    status: Status
    measured: str
    expected: str = ""
    remedy: str = ""
    diagnosis: str | None = None
    details: list[str] = field(default_factory=list)
    tries: list[dict] = field(default_factory=list)
    explains: list[str] = field(default_factory=list)
    signals: dict | None = None

    def to_json(self) -> dict:
        out = asdict(self)
        out["status"] = self.status.value
        del out["explains"]
        if out["signals"] is None:
            del out["signals"]
        return out

    @classmethod
    def from_json(cls, doc: dict) -> "CheckResult":
        """A result read back from a report's ``results`` (its ``action`` is the catalogue's, not the result's)."""
        fields = {k: v for k, v in doc.items() if k != "action"}
        return cls(**dict(fields, status=Status(doc["status"])))


def passed(id: str, measured: str, expected: str = "", details: list[str] | None = None) -> CheckResult:
    return CheckResult(id, Status.PASS, measured, expected, details=details or [])


def skipped(id: str, why: str, expected: str = "", code: str | None = None) -> CheckResult:
    """A check that could not apply here; ``why`` names the missing tool, device or option; ``code`` its SKIP code
    (``NOT_APPLICABLE``, ``TOOL_MISSING``, ...), taken from ``why`` when it is a ``Reason``."""
    return CheckResult(id, Status.SKIP, str(why), expected, diagnosis=code or getattr(why, "code", None))


def warned(id: str, measured: str, expected: str, remedy: str, diagnosis: str | None = None,
           details: list[str] | None = None) -> CheckResult:
    return CheckResult(id, Status.WARN, measured, expected, remedy, diagnosis, details or [])


def failed(id: str, measured: str, expected: str, remedy: str, diagnosis: str | None = None,
           details: list[str] | None = None) -> CheckResult:
    return CheckResult(id, Status.FAIL, measured, expected, remedy, diagnosis, details or [])
