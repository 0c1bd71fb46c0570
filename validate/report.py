"""Run the selected checks and decide, in this one place, the report and the exit code.

Exit codes follow Kubernetes node-problem-detector's plugin contract: 0 no FAIL, 1 at least one FAIL, 2 could not
run at all (bad option, unknown check id or stack). A check that raises is a FAIL naming the exception (fail-closed),
never a traceback.
"""
from __future__ import annotations

import json
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table

from chexstack.console import console
from chexstack.errors import ChexstackError
from chexstack.outputs import output_file
from validate.checks import CHECKS, Context
from validate.result import CheckResult, Status, failed

EXIT_OK, EXIT_FAIL, EXIT_CANNOT_RUN = 0, 1, 2
#: Report order: the node's hardware first, then what runs on it.
AREAS = ("gpu", "topo", "nccl", "mpi", "ib", "container", "horovod")
STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


@dataclass
class Report:
    results: list[CheckResult]
    seconds: float
    stack: str | None = None
    hosts: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_FAIL if any(r.status == Status.FAIL for r in self.results) else EXIT_OK

    def counts(self) -> dict[str, int]:
        return {s.value: sum(r.status == s for r in self.results) for s in Status}

    def to_json(self) -> dict:
        return {"chexstack_validate": 1, "host": platform.node(), "stack": self.stack, "hosts": self.hosts,
                "seconds": round(self.seconds, 2), "exit_code": self.exit_code, "summary": self.counts(),
                "results": [r.to_json() for r in self.results]}


def select(only: list[str], skip: list[str]) -> list[str]:
    """Check ids to run: ``only`` (ids or ``area.`` prefixes such as ``gpu``) minus ``skip``; ChexstackError
    (exit 2) naming an id that matches no check, or when the selection leaves no check to run."""
    def expand(names: list[str], option: str) -> set[str]:
        out = set()
        for name in names:
            hits = [c for c in CHECKS if c == name or c.startswith(name.rstrip(".") + ".")]
            if not hits:
                raise ChexstackError("%s %s: no such check; known: %s" % (option, name, ", ".join(CHECKS)))
            out.update(hits)
        return out

    chosen = expand(only, "--only") if only else set(CHECKS)
    dropped = expand(skip, "--skip")
    ids = [c for c in CHECKS if c in chosen and c not in dropped]
    if not ids:
        given = " ".join("%s %s" % (o, ",".join(v)) for o, v in (("--only", only), ("--skip", skip)) if v)
        raise ChexstackError("%s: selects no check (--skip removes every check --only chose); nothing would be "
                             "validated" % given)
    return sorted(ids, key=lambda c: AREAS.index(c.split(".")[0]) if c.split(".")[0] in AREAS else len(AREAS))


def _run_one(check_id: str, ctx: Context) -> CheckResult:
    try:
        return CHECKS[check_id].fn(ctx)
    except Exception as e:  # a bug in a check must not hide the other results
        return failed(check_id, "check crashed: %s: %s" % (type(e).__name__, e), "a verdict",
                      "report this as a chexstack bug", "CHECK_CRASHED")


def run_checks(ctx: Context, ids: list[str], workers: int = 8) -> Report:
    """Run ``ids`` concurrently (tools shared through ``ctx``); results in registry order."""
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda cid: _run_one(cid, ctx), ids))
    return Report(results, time.monotonic() - start, ctx.stack.name if ctx.stack else None, list(ctx.hosts))


def print_table(report: Report) -> None:
    table = Table(title="chexstack validate%s — %s" % (" --stack %s" % report.stack if report.stack else "",
                                                         platform.node()), show_lines=False)
    for col in ("check", "status", "measured", "expected", "remedy"):
        table.add_column(col, overflow="fold")
    for r in report.results:
        table.add_row(r.id, "[%s]%s[/]" % (STYLE[r.status], r.status.value), r.measured,
                      r.expected if r.status != Status.SKIP else "", r.remedy)
    console.print(table)
    counts = report.counts()
    console.print("%s in %.1f s — exit %d" % (", ".join("%d %s" % (n, s) for s, n in counts.items() if n),
                                             report.seconds, report.exit_code))


def write_json(report: Report, path: str) -> None:
    """Write the JSON report atomically (temp file + rename). Raises ChexstackError naming the path when it
    cannot be written (no temporary file is left behind)."""
    target = Path(path)
    tmp = target.with_name(".%s.tmp" % target.name)
    try:
        tmp.write_text(json.dumps(report.to_json(), indent=2) + "\n")
        tmp.replace(target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ChexstackError("--json %s: cannot write the report (%s); the table above has the results"
                             % (path, e.strerror or e)) from None


def validate(stack: str | None = None, hosts: list[str] | None = None, json_path: str | None = None,
             only: list[str] | None = None, skip: list[str] | None = None) -> int:
    """``invoke validate``: run, print the table, write the JSON, return the exit code. Raises ChexstackError
    before any check runs for an unknown stack or check id, or a ``json_path`` that cannot be written."""
    from envs.manifest import load_stack

    if json_path:
        output_file(json_path, "--json")
    ctx = Context(stack=load_stack(stack) if stack else None, hosts=list(hosts or []))
    report = run_checks(ctx, select(list(only or []), list(skip or [])))
    print_table(report)
    if json_path:
        write_json(report, json_path)
    return report.exit_code
