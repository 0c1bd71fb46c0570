"""The JSON report's model (``invoke validate --json``): one pydantic model is the single source of the report
``validate.report.Report.to_json`` writes and of the JSON Schema published beside it,
``validate/schema/report-v1.json`` (``tests/test_validate_verdict.py`` checks that the file is the model's schema and
that real reports validate against it). The catalogue of checks and codes that produced a report is named in it
(``catalogue``: name and SHA-256 of ``validate/schema/catalogue-v1.json``, ``validate.catalogue.document``).

A change that removes or renames a field, or narrows a value, is a new major version: ``SCHEMA`` and the file name
change together; a new optional field is not.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: The report's schema id and version; also the file name's version (``report-v1.json``).
SCHEMA = "chexstack.validate.report/1"
FOLDER = Path(__file__).resolve().parent / "schema"
REPORT_FILE = FOLDER / "report-v1.json"
CATALOGUE_FILE = FOLDER / "catalogue-v1.json"

StatusWord = Literal["PASS", "SKIP", "WARN", "FAIL", "ERROR"]
ActionWord = Literal["none", "retry", "reconfigure", "reload_module", "reboot", "replace_hardware"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Try(_Strict):
    """One try of a repeated measurement (``validate.tries``)."""

    try_: int = Field(alias="try", ge=1, description="1 for the first try")
    status: StatusWord
    measured: str
    diagnosis: str | None

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


#: What the model's validator says in the schema: a non-PASS result has a code and an action.
_CODED = {"if": {"properties": {"status": {"not": {"const": "PASS"}}}},
          "then": {"properties": {"diagnosis": {"type": "string"}, "action": {"type": "string"}}}}


class Signals(_Strict):
    """The fault-signal lines (``facts/signals.yaml``) in the evidence a check read."""

    read: int = Field(ge=0, description="fault-signal lines in the evidence the check read")
    explained: int = Field(ge=0, description="of those, the lines a finding (of this check or another reader of the "
                                             "same evidence) explains")
    unexplained: list[str] = Field(description="the others, each 'SIGNAL-ID: line (where)': the check is then a "
                                               "WARN UNEXPLAINED_FAULT_SIGNAL at least, never a PASS")


class Result(_Strict):
    """One check's verdict (``validate.result.CheckResult``) and its catalogued next action."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_CODED)

    id: str = Field(description="dotted check id, e.g. gpu.inventory")
    status: StatusWord
    measured: str
    expected: str
    remedy: str = Field(description="the fix for this case; empty on PASS")
    diagnosis: str | None = Field(description="the verdict's code in the catalogue; null only on PASS")
    action: ActionWord | None = Field(description="the code's next action, cheapest first: none, retry, "
                                                  "reconfigure, reload_module, reboot, replace_hardware; null on "
                                                  "PASS")
    details: list[str]
    tries: list[Try] = Field(description="every try of a repeated measurement, first to last; empty when the check "
                                         "measured once")
    signals: Signals | None = Field(default=None, description="the fault-signal lines of the evidence the check "
                                                              "read and whether its findings explained them; null "
                                                              "where no node evidence was read (--job)")

    @model_validator(mode="after")
    def _coded(self) -> "Result":
        if self.status != "PASS" and (self.diagnosis is None or self.action is None):
            raise ValueError("%s: a %s result needs a diagnosis code and an action" % (self.id, self.status))
        return self


class Catalogue(_Strict):
    """Which catalogue of checks and codes produced the report."""

    name: str = Field(description="chexstack.validate.catalogue/N")
    sha256: str = Field(pattern="^[0-9a-f]{64}$", description="SHA-256 of the catalogue document "
                                                               "(validate/schema/catalogue-v1.json)")


class Summary(_Strict):
    PASS: int = Field(ge=0)
    SKIP: int = Field(ge=0)
    WARN: int = Field(ge=0)
    FAIL: int = Field(ge=0)
    ERROR: int = Field(ge=0)


class Job(_Strict):
    """The job file an ``invoke validate --job FILE`` report judged (its results are the rules of
    ``validate.jobrules``, ``job.*``)."""

    path: str
    kind: Literal["MPIJob", "Slurm batch script"]


class Report(_Strict):
    """The report of one ``invoke validate`` run: a node's checks, or a job file's rules (``--job FILE``)."""

    model_config = ConfigDict(extra="forbid", title="chexstack validate report",
                              json_schema_extra={"$id": SCHEMA})

    schema_: Literal["chexstack.validate.report/1"] = Field(alias="schema")
    catalogue: Catalogue
    host: str
    stack: str | None
    hosts: list[str]
    bundle: str | None = Field(description="the bundle judged with --from, else null")
    selection: Literal["full", "fast", "job"] = Field(description="fast: only the checks that fit a Slurm prolog "
                                                                  "(--fast); job: a job file's rules (--job)")
    job: Job | None = Field(default=None, description="the job file judged with --job (then host is the machine "
                                                      "that judged it); absent or null for a node's report")
    seconds: float = Field(ge=0)
    exit_code: Literal[0, 1, 2]
    action: ActionWord | None = Field(description="the node's next action: the most drastic of its FAIL results' "
                                                  "actions; null without a FAIL")
    summary: Summary
    results: list[Result]


def schema_document() -> dict:
    """The JSON Schema of ``Report`` as the published file holds it."""
    doc = Report.model_json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **doc}


def schema_text() -> str:
    """``schema_document()`` as ``validate/schema/report-v1.json`` holds it (indented, one trailing newline)."""
    return json.dumps(schema_document(), indent=2, ensure_ascii=False) + "\n"


def to_json(**fields) -> dict:
    """A report as JSON, through the model: a report that would not validate is a chexstack bug (pydantic's
    ValidationError, an ERROR of the run), never a file that breaks its readers."""
    return Report.model_validate(fields).model_dump(mode="json", by_alias=True)
