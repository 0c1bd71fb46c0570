"""The one rule for measured checks (bandwidth, busbw): repeat a measurement before a shortfall becomes the verdict,
and report every try, so that one noisy run does not drain a healthy node.

A try's verdict is a noisy shortfall when its code is ``noisy`` in ``validate.catalogue`` (``NCCL_BUSBW_LOW``,
``MPI_BANDWIDTH_LOW``, ``IB_BANDWIDTH_LOW``): only then is the measurement repeated, up to ``TRIES`` times. A fault
one run proves (wrong values, a failed or hung run, a split communicator) is not a shortfall and is never retried
into a PASS. The verdict is the last try's: the first that is not a noisy shortfall, or the last of ``TRIES``
shortfalls.
"""
from __future__ import annotations

from typing import Callable

from validate.catalogue import CODES
from validate.evidence import MissingEvidence
from validate.result import CheckResult, Status

#: Tries of a measurement whose verdict is a noisy shortfall (the first included).
TRIES = 3


def noisy(result: CheckResult) -> bool:
    """Whether ``result`` is a shortfall one noisy run can cause (its code is ``noisy`` in the catalogue)."""
    return result.status != Status.PASS and result.diagnosis in CODES and CODES[result.diagnosis].noisy


def until_pass(attempt: Callable[[int], CheckResult], tries: int = TRIES) -> CheckResult:
    """Run ``attempt(n)`` (the n-th try's judged measurement, n from 1) until its verdict is not a noisy shortfall,
    at most ``tries`` times; the last try's verdict, with ``tries`` listing every try (``{"try", "status",
    "measured", "diagnosis"}``) and, when there was more than one or a try is missing, a detail line per try.
    A bundle that recorded fewer tries (``MissingEvidence`` on a try after the first) is judged on those it holds,
    and says so; ``MissingEvidence`` on the first try propagates (the check is then a SKIP)."""
    done: list[CheckResult] = []
    missing = None
    for n in range(1, tries + 1):
        try:
            result = attempt(n)
        except MissingEvidence as e:
            if not done:
                raise
            missing = "try %d of %d not in the bundle (%s): judged on the %d recorded" % (n, tries, e.what, len(done))
            break
        done.append(result)
        if not noisy(result):
            break
    final = done[-1]
    final.tries = [{"try": n, "status": r.status.value, "measured": r.measured, "diagnosis": r.diagnosis}
                   for n, r in enumerate(done, 1)]
    if len(done) > 1 or missing:
        final.details = ["try %d of %d: %s %s" % (n, tries, r.status.value, r.measured)
                         for n, r in enumerate(done, 1)] + ([missing] if missing else []) + final.details
    return final
