"""Run the selected checks and decide, in this one place, the report and the exit code.

Exit codes follow Kubernetes node-problem-detector's plugin contract: 0 no FAIL, 1 at least one FAIL, 2 could not
run (bad option, unknown check id or stack, unreadable bundle) or a check itself failed. A check that raises (a bug,
an ImportError of this tree) is an ERROR naming the exception with its traceback in ``details`` — never a SKIP,
never a bare traceback; a check whose evidence a bundle lacks (``validate.evidence.MissingEvidence``) is a SKIP
naming what is missing — never a PASS.
"""
from __future__ import annotations

import json
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table
from rich.text import Text

from chexstack.console import console
from chexstack.errors import ChexstackError
from chexstack.outputs import output_file
from validate.checks import CHECKS, Context
from validate.evidence import Bundle, Live, MissingEvidence, Replay
from validate.result import CheckResult, Status, skipped

EXIT_OK, EXIT_FAIL, EXIT_CANNOT_RUN = 0, 1, 2
#: Report order: the node's hardware first, then what runs on it.
AREAS = ("gpu", "topo", "nccl", "mpi", "ib", "container", "horovod")
STYLE = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim",
         Status.ERROR: "bold magenta"}


@dataclass
class Report:
    results: list[CheckResult]
    seconds: float
    stack: str | None = None
    hosts: list[str] = field(default_factory=list)
    host: str = "?"
    bundle: str | None = None

    @property
    def exit_code(self) -> int:
        if any(r.status == Status.ERROR for r in self.results):
            return EXIT_CANNOT_RUN
        return EXIT_FAIL if any(r.status == Status.FAIL for r in self.results) else EXIT_OK

    def counts(self) -> dict[str, int]:
        return {s.value: sum(r.status == s for r in self.results) for s in Status}

    def to_json(self) -> dict:
        return {"chexstack_validate": 1, "host": self.host, "stack": self.stack, "hosts": self.hosts,
                "bundle": self.bundle, "seconds": round(self.seconds, 2), "exit_code": self.exit_code,
                "summary": self.counts(), "results": [r.to_json() for r in self.results]}


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
    except MissingEvidence as e:
        return skipped(check_id, "could not run: %s not in the bundle" % e.what)
    except Exception as e:  # a bug in a check must not hide the other results, nor pass for a SKIP
        frames = traceback.format_exception(type(e), e, e.__traceback__)
        return CheckResult(check_id, Status.ERROR, "checker failed: %s: %s" % (type(e).__name__, e),
                           "a verdict", "a chexstack bug: report it with the JSON report's details (traceback)",
                           "CHECK_CRASHED", "".join(frames).rstrip().splitlines())


def run_checks(ctx: Context, ids: list[str], workers: int = 8) -> Report:
    """Run ``ids`` concurrently (tools shared through ``ctx``); results in registry order."""
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda cid: _run_one(cid, ctx), ids))
    return Report(results, time.monotonic() - start, ctx.stack.name if ctx.stack else None, list(ctx.hosts),
                  ctx.host)


def findings(r: CheckResult) -> str:
    """The table's "measured" cell: the result's line, and for a WARN/FAIL every further finding (one per
    line, as in the JSON's ``details``); an ERROR's traceback stays in the JSON."""
    if r.status not in (Status.WARN, Status.FAIL) or not r.details:
        return r.measured
    return "\n".join([r.measured] + ["• " + d for d in r.details])


def print_table(report: Report) -> None:
    title = "chexstack validate%s — %s%s" % (" --stack %s" % report.stack if report.stack else "", report.host,
                                             " (from bundle %s)" % report.bundle if report.bundle else "")
    table = Table(title=title, show_lines=False)
    for col in ("check", "status", "measured", "expected", "remedy"):
        table.add_column(col, overflow="fold")
    for r in report.results:  # the cells as plain text: node output and remedies hold [brackets], never markup
        table.add_row(r.id, "[%s]%s[/]" % (STYLE[r.status], r.status.value), Text(findings(r)),
                      Text(r.expected if r.status != Status.SKIP else ""), Text(r.remedy))
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


def collect_folder(path: str) -> Path:
    """``--collect DIR``: an empty or new folder (created); ChexstackError (exit 2) before any check runs when it
    holds files or cannot be written."""
    from chexstack.outputs import output_folder

    folder = Path(path)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ChexstackError("--collect %s: %s; give a new or empty folder"
                             % (path, "not empty" if folder.is_dir() else "is a file"))
    return output_folder(folder, "--collect")


def validate(stack: str | None = None, hosts: list[str] | None = None, json_path: str | None = None,
             only: list[str] | None = None, skip: list[str] | None = None, collect: str | None = None,
             from_bundle: str | None = None) -> int:
    """``invoke validate``: run, print the table, write the JSON, return the exit code.

    ``collect``: also record every tool run, file read and fact into a bundle in that folder (with the report as
    ``report.json``); ``from_bundle``: judge a bundle recorded on another node instead of this node (its stack and
    hosts are the bundle's). Raises ChexstackError before any check runs for an unknown stack or check id, a
    ``json_path`` or ``collect`` folder that cannot be written, or an unreadable bundle."""
    from envs.manifest import load_stack

    if collect and from_bundle:
        raise ChexstackError("--collect and --from: give one (collect on the node, judge the bundle anywhere)")
    if json_path:
        output_file(json_path, "--json")
    ids = select(list(only or []), list(skip or []))
    recorder = None
    if from_bundle:
        bundle = Bundle.load(from_bundle)
        if stack or hosts:
            raise ChexstackError("--from %s: the bundle records its --stack (%s) and --hosts (%s); do not give them"
                                 % (from_bundle, bundle.meta.get("stack"), ",".join(bundle.meta.get("hosts") or [])
                                    or "none"))
        stack, hosts, evidence = bundle.meta.get("stack"), bundle.meta.get("hosts") or [], Replay(bundle)
    manifest = load_stack(stack) if stack else None
    if not from_bundle:
        if collect:
            folder = collect_folder(collect)
            recorder = Bundle({"host": None, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "stack": stack, "hosts": list(hosts or []), "checks": ids})
        evidence = Live(recorder)
        if recorder is not None:
            recorder.meta["host"] = evidence.host
    ctx = Context(stack=manifest, hosts=list(hosts or []), evidence=evidence)
    report = run_checks(ctx, ids)
    report.bundle = from_bundle
    print_table(report)
    if recorder is not None:
        recorder.save(folder)
        write_json(report, str(folder / "report.json"))
        console.print("bundle: %s (%d records); judge it anywhere with invoke validate --from %s"
                      % (folder, len(recorder.entries), folder))
    if json_path:
        write_json(report, json_path)
    return report.exit_code
