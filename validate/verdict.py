"""The judged hosts of a run, for its signed statement (``launch.attest.validation_block``): ``invoke train
--validate`` judges this node before the launch (``invoke validate`` with the run's ``--stack`` and ``--gpus``, its
evidence kept as a bundle in ``OUTPUT/validate-<UTC time>/``), ``--evidence DIR,...`` takes bundles that ``invoke
validate --collect DIR`` wrote on the run's nodes, each with the verdict its ``report.json`` gives.

A host judged FAIL (exit 1) or ERROR (exit 2, could not judge) stops the run before it starts: ChexstackError
(exit 1) naming the host and the checks; a run is never started on a node its own check judged unfit. The verdict
word: FAIL, ERROR, WARN (exit 0 with a WARN), SKIP (exit 0 and no check passed: nothing was judged, never a PASS),
else PASS.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from chexstack.errors import ChexstackError, ExitCode
from launch.attest import validation_block

REPORT = "report.json"


def verdict_word(report: dict) -> str:
    """FAIL, ERROR, WARN, SKIP or PASS of a report (``validate.report_schema``'s JSON): its exit code, then its
    counts."""
    code, summary = report.get("exit_code"), report.get("summary") or {}
    if code == 1:
        return "FAIL"
    if code == 2:
        return "ERROR"
    return "WARN" if summary.get("WARN") else "PASS" if summary.get("PASS") else "SKIP"


def _judged(folder: Path, what: str) -> dict:
    """The validation block of a bundle folder; ChexstackError naming it when it is no bundle, and (exit 1) when its
    report judged the host unfit."""
    path = folder / REPORT
    try:
        report = json.loads(path.read_text())
        host, code = report["host"], int(report["exit_code"])
    except FileNotFoundError:
        raise ChexstackError("%s %s: no %s (expected a bundle of invoke validate --collect DIR)"
                             % (what, folder, REPORT)) from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ChexstackError("%s %s: cannot read its report %s (%s)" % (what, folder, path, e)) from None
    word = verdict_word(report)
    if word in ("FAIL", "ERROR"):
        bad = ["%s %s" % (r.get("id"), r.get("status")) for r in report.get("results", [])
               if r.get("status") in ("FAIL", "ERROR")]
        raise ChexstackError("%s %s: host %s judged %s (%s): not starting the run on it"
                             % (what, folder, host, word, ", ".join(bad) or "exit %d" % code),
                             exit_code=ExitCode.FAILED)
    return validation_block(host, word, code, report.get("summary") or {}, folder)


def from_bundles(folders: list[str]) -> list[dict]:
    """``--evidence DIR,...``: each bundle's host and verdict (its report.json) and SHA-256, in the order given."""
    blocks = []
    for folder in folders:
        if not Path(folder).is_dir():
            raise ChexstackError("--evidence %s: no such folder (expected a bundle of invoke validate --collect DIR)"
                                 % folder)
        if not (Path(folder) / "bundle.json").is_file():
            raise ChexstackError("--evidence %s: no bundle.json there (expected a bundle of invoke validate "
                                 "--collect DIR)" % folder)
        blocks.append(_judged(Path(folder), "--evidence"))
    return blocks


def this_node(output: str, stack: str | None, gpus: int) -> dict:
    """``--validate``: judge this node (``invoke validate --stack STACK --gpus N --collect OUTPUT/validate-<UTC>``,
    its table printed) and return its block."""
    from validate.report import validate

    folder = Path(output) / ("validate-%s" % time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    validate(stack, collect=str(folder), gpus=gpus)
    return _judged(folder, "--validate: the bundle")


def judged(evidence: list[str], here: bool, output: str, stack: str | None, gpus: int) -> list[dict]:
    """The run's judged hosts: this node first with ``here`` (``--validate``), then the ``evidence`` bundles."""
    return ([this_node(output, stack, gpus)] if here else []) + from_bundles(evidence)
