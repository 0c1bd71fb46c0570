"""The seed study's Table 1 as data (``envs/table1.yaml``): its rows in its order, both columns, cells as published.

``load_table1()`` validates that the rows are exactly ``envs.manifest.COMPONENTS`` in that order and that each
column names a stack manifest; errors name the file and field.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from envs.manifest import COMPONENTS, validation_error, yaml_mapping

TABLE1_FILE = Path(__file__).resolve().parent / "table1.yaml"


class Column(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    title: str
    stack: str


class Row(BaseModel):
    """One Table 1 row: ``component`` (a COMPONENTS key), ``label`` as printed, and one cell per column key."""

    model_config = ConfigDict(extra="allow", frozen=True)

    component: str
    label: str

    def cell(self, column: str) -> str:
        return str(getattr(self, column))


class Table1(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    columns: list[Column]
    rows: list[Row]

    @model_validator(mode="after")
    def _shape(self) -> "Table1":
        got = tuple(r.component for r in self.rows)
        if got != COMPONENTS:
            raise ValueError("expected the rows %s in this order, got %s" % (", ".join(COMPONENTS), ", ".join(got)))
        keys = [c.key for c in self.columns]
        for r in self.rows:
            missing = [k for k in keys if not isinstance(getattr(r, k, None), str)]
            if missing:
                raise ValueError("row %s: expected a text cell for column(s) %s" % (r.component, ", ".join(missing)))
        return self


@lru_cache(maxsize=None)
def load_table1(path: Path = TABLE1_FILE) -> Table1:
    """Load and validate Table 1 (ChexstackError naming the file and field when malformed)."""
    data = yaml_mapping(path.read_text(), path, "Table 1 fields")
    try:
        return Table1.model_validate(data)
    except ValidationError as e:
        raise validation_error(path, e) from None
