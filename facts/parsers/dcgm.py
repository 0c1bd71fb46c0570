"""``dcgmi diag -r N`` result table -> (test, result, error) rows.

"Successfully ran diagnostic for group." only means the run finished; every row's Result must be read
(fixture 10). Long Error cells are hard-wrapped at the column width, mid-word ("disab" / "led"), so the
continuation rows (empty first cell) are joined without adding spaces.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DiagRow:
    """``name`` (e.g. "Persistence Mode"), ``result`` ("Pass", "Fail", "Warn", "Skip", or a metadata value) and
    the ``error`` text of the Error/Warning row that follows it, joined."""

    section: str
    name: str
    result: str
    error: str = ""


@dataclass
class Diag:
    rows: list[DiagRow] = field(default_factory=list)
    ran: bool = False
    problems: list[str] = field(default_factory=list)

    def with_result(self, result: str) -> list[DiagRow]:
        return [r for r in self.rows if r.result.lower() == result.lower()]


def parse_dcgmi_diag(text: str) -> Diag:
    out = Diag(ran="Successfully ran diagnostic" in (text or ""))
    section = ""
    target: DiagRow | None = None
    for line in (text or "").splitlines():
        if line.startswith("|-----"):
            section = line.strip("|-+ ").split("  ")[0].strip("- ")
            target = None
            continue
        if not line.startswith("|") or line.startswith("|="):
            continue
        cells = line.split("|")
        if len(cells) < 4:
            continue
        name, raw = cells[1].strip(), cells[2]
        chunk = raw[1:-2] if len(raw) > 3 else raw.strip()
        if name in ("Diagnostic",):
            continue
        if name in ("Error", "Warning") and out.rows:
            target = out.rows[-1]
            target.error = chunk
        elif not name and target is not None:
            target.error += chunk
        elif name:
            out.rows.append(DiagRow(section, name, raw.strip()))
            target = None
    for r in out.rows:
        r.error = r.error.strip()
    if not out.rows:
        out.problems.append("no result table")
    return out
