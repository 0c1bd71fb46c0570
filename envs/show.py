"""What ``invoke stacks`` prints: Table 1 exactly as published with what each artifact ships where it differs,
every stack's versions, and (``--check``) the consistency findings; or the same as JSON for machines.

Renderers return rich renderables (the task prints them through ``chexstack.console``) or plain data
(``stacks_data``); ``render_text`` turns renderables into fixed-width text for golden tests.
"""
from __future__ import annotations

import io
import json

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from envs.check import Finding, norm_name, split_reported, stack_order
from envs.manifest import COMPONENTS, Stack, load_stack
from envs.table1 import load_table1

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def shipped_cell(stack: Stack, component: str) -> str | None:
    """What the artifact contains for a Table 1 row, or None when that equals the published cell."""
    c = stack.components[component]
    if component == "cuda_driver":
        return "needs >= %s" % stack.min_driver if stack.min_driver else None
    if c.version is None:
        return None
    name, rep = split_reported(c.reported or "")
    text = "%s %s" % (c.name, c.version) if c.name and name else c.version
    same_name = not name or (c.name is not None and norm_name(name) == norm_name(c.name))
    return None if rep == c.version and same_name else text


def table1_renderable() -> Table:
    """Table 1 as published (its rows, order and cells), with a "ships" column per stack where they differ."""
    t1 = load_table1()
    table = Table(title="Table 1 (seed study), as published; \"ships\": what the stack's artifact contains where "
                        "it differs", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("component")
    for col in t1.columns:
        table.add_column(col.title)
        table.add_column("%s ships" % col.stack, style="cyan")
    stacks = {col.stack: load_stack(col.stack) for col in t1.columns}
    for row in t1.rows:
        cells = [row.label]
        for col in t1.columns:
            cells += [row.cell(col.key), shipped_cell(stacks[col.stack], row.component) or ""]
        table.add_row(*cells)
    return table


def component_text(stack: Stack, component: str) -> str:
    c = stack.components[component]
    if component == "cuda_driver":
        return ">= %s" % stack.min_driver if stack.min_driver else "-"
    if c.version is None:
        return "-"
    return "%s %s" % (c.name, c.version) if c.name else c.version


def stacks_renderable(names: list[str]) -> Table:
    """Every stack's component versions side by side, with base image and minimum driver."""
    stacks = [load_stack(n) for n in names]
    table = Table(title="Stacks: what each artifact must contain (envs/stacks/*.yaml)", box=box.SIMPLE_HEAD,
                  title_justify="left")
    table.add_column("component")
    for s in stacks:
        table.add_column(s.name, overflow="fold")
    labels = {r.component: r.label for r in load_table1().rows}
    for comp in COMPONENTS:
        table.add_row(labels[comp], *[component_text(s, comp) for s in stacks])
    table.add_row("base image", *[s.base.reference for s in stacks])
    return table


def findings_renderable(findings: list[Finding]) -> Group:
    """One block per finding (severity, stack, field, message, source) and a summary with the exit code."""
    parts: list[RenderableType] = []
    for f in findings:
        head = Text()
        head.append("%-7s" % f.severity.upper(), style=SEVERITY_STYLE[f.severity])
        head.append(" %s %s: " % (f.stack, f.field), style="bold")
        head.append(f.message)
        head.append(" [%s%s]" % (f.subject, ", blocking" if f.blocking else ""), style="dim")
        parts.append(head)
        parts.append(Text("        source: %s" % f.source, style="dim"))
    counts = {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")}
    blocking = sum(1 for f in findings if f.blocking)
    parts.append(Text("%d findings (errors: %d, warnings: %d, info: %d); blocking, in this repository's files: %d "
                      "(exit %d). Table 1 findings are facts about the paper and never fail the check."
                      % (len(findings), counts["error"], counts["warning"], counts["info"], blocking,
                         1 if blocking else 0)))
    return Group(*parts)


def stacks_data(names: list[str], findings: list[Finding] | None = None) -> dict:
    """The JSON document of ``invoke stacks --json``: Table 1, what each Table 1 stack ships, every manifest,
    and (with ``--check``) the findings and the number of blocking ones."""
    t1 = load_table1()
    data = {
        "table1": t1.model_dump(),
        "shipped": {col.stack: {row.component: shipped_cell(load_stack(col.stack), row.component)
                                for row in t1.rows} for col in t1.columns},
        "stacks": {n: load_stack(n).model_dump(mode="json") for n in names},
    }
    if findings is not None:
        data["findings"] = [f.as_dict() for f in findings]
        data["blocking"] = sum(1 for f in findings if f.blocking)
    return data


def stacks_json(names: list[str] | None = None, findings: list[Finding] | None = None) -> str:
    return json.dumps(stacks_data(names or stack_order(), findings), indent=2, sort_keys=False) + "\n"


def manifest_json(stack: Stack) -> str:
    """A manifest as canonical JSON (the BOM the images record in their labels)."""
    return json.dumps(stack.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def render_text(*renderables: RenderableType, width: int = 120) -> str:
    """Plain text of rich renderables at a fixed width (no colour), for golden files."""
    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, force_terminal=False, highlight=False, emoji=False)
    for r in renderables:
        con.print(r)
    return buf.getvalue()
