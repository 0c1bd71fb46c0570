"""The catalogue of verdict codes: every non-PASS result's ``diagnosis`` is one of ``CODES``, with what it means and
the next action a person takes, on one ladder from cheapest to most drastic (``Action``). ``CODES``, ``Code`` and
``Action`` are the one table of faults, ``facts.faults_table`` (with each fault's remedy), which launch/ reads too;
this module publishes it (``document``) and judges results by it (``entry``).

The shape is NVIDIA's health-validation tooling's: DCGM diagnostics give each failure "a specific ID, Severity, and
Category that can be useful when deciding how to handle the failure" (DCGM reference, Diagnostic Errors:
https://docs.nvidia.com/datacenter/dcgm/latest/reference/diagnostics/errors.html; its ``DCGM_ERROR_*`` severities
run from MONITOR and CONFIG to RESET and ISOLATE), and NVSentinel's ``HealthEvent`` carries an ``errorCode`` and a
``recommendedAction`` (``NONE``, ``COMPONENT_RESET``, ``RESTART_VM``, ``RESTART_BM``, ``REPLACE_VM``, ...: NVSentinel
HealthEvent data model, https://docs.nvidia.com/nvsentinel/architecture/health-event-data-model). Where DCGM's CLI
JSON "has no published stable schema" (the same page), this report has one (``validate.report_schema``).

A code is stable: other tools key on it; a new fault family gets a new code here, never a new meaning for an old
one. ``noisy`` marks a measured shortfall that one noisy run can cause: a check repeats its measurement before it
gives that verdict (``validate.tries.until_pass``). The SKIP codes say why a check did not judge the node
(``NOT_APPLICABLE``, ``TOOL_MISSING``, ``NOT_REPORTED``, ``TOOL_FAILED``, ``EVIDENCE_MISSING``).
"""
from __future__ import annotations

import hashlib
import json

from facts.faults_table import CODES, Action, Code  # noqa: F401  (the one table of faults: this module publishes it)

#: The name and version of this catalogue; a report names it with its digest (``digest()``).
CATALOGUE = "chexstack.validate.catalogue/1"


class UncataloguedCode(Exception):
    """A non-PASS result without a code of ``CODES``: a chexstack bug, reported as an ERROR."""


def entry(code: str | None) -> Code:
    """The catalogue entry of ``code``; ``UncataloguedCode`` naming it when there is none."""
    if code not in CODES:
        raise UncataloguedCode("verdict code %r is not in validate/catalogue.py" % code)
    return CODES[code]


def document(checks: dict) -> dict:
    """The catalogue as JSON (``validate/schema/catalogue-v1.json``): its name, every check (``id``: title, whether
    it is ``fast``), every rule of ``invoke validate --job`` (``validate.jobrules``: what it expects, the job files it
    applies to) and every code (meaning, action, noisy). ``checks``: ``validate.checks.CHECKS``."""
    from validate.jobrules import RULES  # imports nothing

    return {"catalogue": CATALOGUE,
            "actions": [a.word for a in Action],
            "checks": {cid: {"title": c.title, "fast": c.fast} for cid, c in sorted(checks.items())},
            "job_rules": {rid: {"expected": r.expected, "kinds": list(r.kinds)} for rid, r in sorted(RULES.items())},
            "codes": {code: {"meaning": c.meaning, "action": c.action.word, "noisy": c.noisy}
                      for code, c in sorted(CODES.items())}}


def text(checks: dict) -> str:
    """``document(checks)`` as the file holds it (indented, sorted, one trailing newline)."""
    return json.dumps(document(checks), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def digest(checks: dict) -> str:
    """SHA-256 of ``text(checks)``: which catalogue of checks and codes produced a report."""
    return hashlib.sha256(text(checks).encode()).hexdigest()
