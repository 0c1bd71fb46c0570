"""Run the selected checks and decide, in this one place, the report and the exit code.

Exit codes follow Kubernetes node-problem-detector's plugin contract: 0 no FAIL, 1 at least one FAIL, 2 could not
run (bad option, unknown check id or stack, unreadable bundle) or a check itself failed. A check that raises (a bug,
an ImportError of this tree) is an ERROR naming the exception with its traceback in ``details`` — never a SKIP,
never a bare traceback; a check whose evidence a bundle lacks (``validate.evidence.MissingEvidence``) is a SKIP
naming what is missing — never a PASS. Every non-PASS result carries a code of ``validate.catalogue`` and its next
action; a check that returns one without (a chexstack bug) is an ERROR too, its verdict kept in ``details``. No
PASS over a fault signal nobody explained: every piece of evidence a check read is scanned with ``facts.signals``,
and a signal no finding of its readers explains makes a PASS a WARN ``UNEXPLAINED_FAULT_SIGNAL``
(``account_signals``). The JSON is the model of ``validate.report_schema`` (published as
``validate/schema/report-v1.json``).
"""
from __future__ import annotations

import json
import re
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
from facts import signals
from validate import catalogue, report_schema
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
    fast: bool = False
    #: ``{"path", "kind"}`` of the job file a ``--job`` report judged (``validate.jobfile.job_report``), else None
    job: dict | None = None

    @property
    def exit_code(self) -> int:
        if any(r.status == Status.ERROR for r in self.results):
            return EXIT_CANNOT_RUN
        return EXIT_FAIL if any(r.status == Status.FAIL for r in self.results) else EXIT_OK

    def counts(self) -> dict[str, int]:
        return {s.value: sum(r.status == s for r in self.results) for s in Status}

    @property
    def action(self) -> catalogue.Action | None:
        """The node's next action: the most drastic of its FAIL results' actions; None without a FAIL."""
        fails = [action_of(r) for r in self.results if r.status == Status.FAIL]
        return max(fails) if fails else None

    def to_json(self) -> dict:
        """The report as ``validate/schema/report-v1.json`` describes it (``validate.report_schema``)."""
        return report_schema.to_json(
            schema=report_schema.SCHEMA,
            catalogue={"name": catalogue.CATALOGUE, "sha256": catalogue.digest(CHECKS)},
            host=self.host, stack=self.stack, hosts=self.hosts, bundle=self.bundle,
            selection="job" if self.job else "fast" if self.fast else "full", job=self.job,
            seconds=round(self.seconds, 2), exit_code=self.exit_code,
            action=self.action.word if self.action is not None else None, summary=self.counts(),
            results=[dict(r.to_json(), action=action_of(r).word if r.status != Status.PASS else None)
                     for r in self.results])


def action_of(result: CheckResult) -> catalogue.Action:
    """The catalogued next action of a non-PASS ``result`` (``Action.NONE`` for a PASS)."""
    return catalogue.Action.NONE if result.status == Status.PASS else catalogue.entry(result.diagnosis).action


def select(only: list[str], skip: list[str], fast: bool = False) -> list[str]:
    """Check ids to run: ``only`` (ids or ``area.`` prefixes such as ``gpu``) minus ``skip``, and with ``fast``
    only the checks that fit a Slurm prolog (``Check.fast``); ChexstackError (exit 2) naming an id that matches no
    check, or when the selection leaves no check to run."""
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
    ids = [c for c in CHECKS if c in chosen and c not in dropped and (CHECKS[c].fast or not fast)]
    if not ids:
        given = " ".join("%s %s" % (o, ",".join(v)) for o, v in (("--only", only), ("--skip", skip)) if v)
        if fast and any(c in chosen and c not in dropped for c in CHECKS):
            raise ChexstackError("--fast %s: selects no check (every check --only chose launches something or "
                                 "takes minutes); nothing would be validated" % given)
        raise ChexstackError("%s: selects no check (--skip removes every check --only chose); nothing would be "
                             "validated" % given)
    return sorted(ids, key=lambda c: AREAS.index(c.split(".")[0]) if c.split(".")[0] in AREAS else len(AREAS))


def _run_one(check_id: str, ctx: Context) -> CheckResult:
    with ctx.reading(check_id):
        return _judge_one(check_id, ctx)


def _judge_one(check_id: str, ctx: Context) -> CheckResult:
    try:
        result = CHECKS[check_id].fn(ctx)
    except MissingEvidence as e:
        return skipped(check_id, "could not run: %s not in the bundle" % e.what, code="EVIDENCE_MISSING")
    except Exception as e:  # a bug in a check must not hide the other results, nor pass for a SKIP
        frames = traceback.format_exception(type(e), e, e.__traceback__)
        return _crashed(check_id, "%s: %s" % (type(e).__name__, e), "".join(frames).rstrip().splitlines())
    if result.status != Status.PASS and result.diagnosis not in catalogue.CODES:
        return _crashed(check_id, "%s without a catalogued code (%r)" % (result.status.value, result.diagnosis),
                        ["the check's verdict: %s %s" % (result.status.value, result.measured)] + result.details
                        + (["remedy: %s" % result.remedy] if result.remedy else []))
    return result


def _crashed(check_id: str, what: str, details: list[str]) -> CheckResult:
    return CheckResult(check_id, Status.ERROR, "checker failed: %s" % what, "a verdict",
                       "a chexstack bug: report it with the JSON report's details", "CHECK_CRASHED", details)


def run_checks(ctx: Context, ids: list[str], workers: int = 8) -> Report:
    """Run ``ids`` concurrently (tools shared through ``ctx``); results in registry order."""
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda cid: _run_one(cid, ctx), ids))
    results = account_signals(results, {r.id: ctx.read_by(r.id) for r in results})
    return Report(results, time.monotonic() - start, ctx.stack.name if ctx.stack else None, list(ctx.hosts),
                  ctx.host)


def _hits(evidence: dict, cache: dict) -> dict:
    """``{evidence key: [Hit]}`` of one check's evidence (``Context.read_by``); ``cache``: the scans of evidence
    another check read too (each piece is scanned once)."""
    out = {}
    for key, (kind, where, text) in evidence.items():
        if key not in cache:
            cache[key] = signals.scan_fact(text, where) if kind == "fact" else signals.scan(text, kind, where)
        if cache[key]:
            out[key] = cache[key]
    return out


def _quotes(result: CheckResult, line: str) -> bool:
    """Whether ``result``'s findings quote ``line`` (or a line of them, of 20 characters or more, is in it)."""
    said = [result.measured, result.remedy] + list(result.details)
    if any(line in s for s in said):
        return True
    return any(len(part.strip()) >= 20 and part.strip() in line for s in said for part in re.split(r"[;\n]", s))


def explains(result: CheckResult, hit: signals.Hit, own: bool = True) -> bool:
    """Whether ``result`` accounts for the fault signal ``hit``. Only a finding explains: a WARN or FAIL (not itself
    ``UNEXPLAINED_FAULT_SIGNAL``) whose code is one the lexicon entry's ``claimed_by`` names (``*``: any code, for
    the generic error and failure lines of a run whose fault the check diagnosed), whose finding quotes the line, or
    that names the signal's id, class or a fragment of its line in ``explains``. ``own``: ``result`` is the verdict
    of the check that read the line; its own ``explains`` claim counts whatever its status (a check that judged the
    line benign says so there: ``validate.checks.cuda``'s absent libcuda on a node without GPUs). A SKIP, a PASS or
    an ERROR of another check never explains, nor does a line merely listed in a result's details."""
    if result.status in (Status.WARN, Status.FAIL) and result.diagnosis != "UNEXPLAINED_FAULT_SIGNAL":
        finding = True
    elif own:
        finding = False
    else:
        return False
    for named in result.explains:
        if named in (hit.signal.id, hit.signal.klass) or (len(named) >= 6 and named in hit.line):
            return True
    if not finding:
        return False
    if "*" in hit.signal.claimed_by or result.diagnosis in hit.signal.claimed_by:
        return True
    return _quotes(result, hit.line)


def account_signals(results: list[CheckResult], read_by: dict[str, dict]) -> list[CheckResult]:
    """Scan the evidence each check read (``read_by``: ``{check id: Context.read_by(id)}``) for fault signals
    (``facts.signals``) and say on each result how many it held and which no finding explains (``signals``): a
    signal is explained when a result of a check that read the same evidence ``explains`` it (judged on the checks'
    own verdicts, before this adds anything to them, so that the verdict of a check does not depend on which others
    ran). A PASS over an unexplained signal becomes a WARN ``UNEXPLAINED_FAULT_SIGNAL`` naming the lines; so does
    the first SKIP (registry order) that read an unexplained line no other reader's verdict is a WARN, FAIL or ERROR
    over (a SKIP over an Xid is no "all fine"); any other result keeps its verdict and lists them in its details."""
    by_id = {r.id: r for r in results}
    cache: dict = {}
    hits = {cid: _hits(evidence, cache) for cid, evidence in read_by.items()}
    readers: dict = {}
    for cid, found in hits.items():
        for key in found:
            readers.setdefault(key, []).append(cid)
    left = {}  # check id -> [(evidence key, Hit)] no finding explains
    for r in results:
        left[r.id] = [(key, h) for key, hs in hits.get(r.id, {}).items() for h in hs
                      if not any(explains(by_id[c], h, own=c == r.id) for c in readers[key] if c in by_id)]
    # (evidence key, line) a reader's verdict is a WARN, FAIL or ERROR over: a PASS that read it turns WARN
    flagged = set()
    for r in results:
        if r.status != Status.SKIP:
            flagged.update((key, h.line) for key, h in left[r.id])
    out = []
    for r in results:
        found = hits.get(r.id, {})
        unexplained = [h for _, h in left[r.id]]
        total = sum(len(hs) for hs in found.values())
        r.signals = {"read": total, "explained": total - len(unexplained),
                     "unexplained": list(dict.fromkeys(str(h) for h in unexplained))}
        if unexplained:
            alone = [(key, h.line) for key, h in left[r.id] if (key, h.line) not in flagged]
            flagged.update(alone)
            r = _unexplained(r, unexplained, warn=r.status == Status.PASS or bool(alone))
        out.append(r)
    return out


#: how many unexplained lines a result names in its details (the JSON's ``signals`` has them all)
_SHOWN = 10


def _unexplained(r: CheckResult, hits: list, warn: bool) -> CheckResult:
    """``r`` with the unexplained ``hits`` named: a WARN ``UNEXPLAINED_FAULT_SIGNAL`` where ``warn`` (a PASS, or the
    SKIP that speaks for a line nothing else flags), else its own verdict with them in its details."""
    lines = list(dict.fromkeys(str(h) for h in hits))
    more = ["… and %d more (the JSON's signals)" % (len(lines) - _SHOWN)] if len(lines) > _SHOWN else []
    named = ["unexplained fault signal: %s" % line for line in lines[:_SHOWN]] + more
    if not warn:
        r.details = list(r.details) + named
        return r
    first = hits[0]
    if r.status == Status.SKIP:
        named = ["not judged (%s): %s" % (r.diagnosis, r.measured)] + named
    return CheckResult(r.id, Status.WARN, "%s; but its evidence holds %d fault-signal line%s no finding explains: "
                                          "%s" % (r.measured, len(lines), "" if len(lines) == 1 else "s",
                                                  first.line),
                       r.expected, "read the line%s in %s: a fault chexstack does not know yet, on this node until "
                                   "shown otherwise; fix its cause and validate again (a line that is benign on "
                                   "healthy nodes is an exclusion to add to facts/signals.yaml, with its source)"
                       % ("" if len(lines) == 1 else "s", first.where),
                       "UNEXPLAINED_FAULT_SIGNAL", list(r.details) + named, r.tries, r.explains, r.signals)


def findings(r: CheckResult) -> str:
    """The table's "measured" cell: the result's line, and for a WARN/FAIL every further finding (one per
    line, as in the JSON's ``details``); an ERROR's traceback stays in the JSON. Where the check's evidence held
    fault-signal lines, a last line says how many and whether all were explained (``signals``)."""
    lines = [r.measured]
    if r.status in (Status.WARN, Status.FAIL):
        lines += ["• " + d for d in r.details]
    if r.signals and r.signals["read"]:
        left = len(r.signals["unexplained"])
        lines.append("fault signals: %d line%s read, %s" % (
            r.signals["read"], "" if r.signals["read"] == 1 else "s",
            "all explained" if not left else "%d not explained" % left))
    return "\n".join(lines)


def print_table(report: Report) -> None:
    title = "chexstack validate%s — %s%s" % (" --stack %s" % report.stack if report.stack else "", report.host,
                                             " (from bundle %s)" % report.bundle if report.bundle else "")
    table = Table(title=title, show_lines=False)
    for col in ("check", "status"):  # a check ID or a diagnosis code is never broken across lines
        table.add_column(col, no_wrap=True)
    for col in ("measured", "expected", "remedy"):
        table.add_column(col, overflow="fold")
    for r in report.results:  # the cells as plain text: node output and remedies hold [brackets], never markup
        table.add_row(r.id, Text.assemble((r.status.value, STYLE[r.status]), *(("\n" + r.diagnosis,)
                                                                               if r.status != Status.PASS else ())),
                      Text(findings(r)), Text(r.expected if r.status != Status.SKIP else ""), Text(remedy_cell(r)))
    console.print(table)
    counts = report.counts()
    action = report.action
    console.print("%s in %.1f s — exit %d%s" % (
        ", ".join("%d %s" % (n, s) for s, n in counts.items() if n), report.seconds, report.exit_code,
        "; next action: %s" % action.word if action is not None else ""))


def remedy_cell(r: CheckResult) -> str:
    """The table's "remedy" cell: the result's remedy after its catalogued next action (``reboot: drain the node;
    …``); a SKIP's or PASS's stays as it is (a SKIP's code under its status says why)."""
    action = action_of(r)
    if r.status in (Status.PASS, Status.SKIP) or action == catalogue.Action.NONE or not r.remedy:
        return r.remedy
    return "%s: %s" % (action.word, r.remedy)


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
             from_bundle: str | None = None, fast: bool = False, gpus: int = 0, images: str | None = None) -> int:
    """``invoke validate``: run, print the table, write the JSON, return the exit code.

    ``fast``: only the checks that fit a Slurm prolog (``Check.fast``: seconds, no launch). ``gpus``: the GPUs the
    run will use (``Context.gpus``; 0: the node's); ``images``: a folder of the user's PNGs (``Context.images``).
    ``collect``: also record every tool run, file read and fact into a bundle in that folder (with the report as
    ``report.json``); ``from_bundle``: judge a bundle recorded on another node instead of this node (its stack and
    hosts are the bundle's). Raises ChexstackError before any check runs for an unknown stack or check id, a
    ``json_path`` or ``collect`` folder that cannot be written, or an unreadable bundle."""
    from envs.manifest import load_stack

    if collect and from_bundle:
        raise ChexstackError("--collect and --from: give one (collect on the node, judge the bundle anywhere)")
    if gpus < 0:
        raise ChexstackError("--gpus %d: expected the GPUs the run will use, or 0 for all the node has" % gpus)
    if images and not Path(images).is_dir():
        raise ChexstackError("--images %s: no such folder (expected a folder of your PNGs, searched recursively)"
                             % images)
    if json_path:
        output_file(json_path, "--json")
    ids = select(list(only or []), list(skip or []), fast)
    recorder = None
    if from_bundle:
        bundle = Bundle.load(from_bundle)
        if stack or hosts or gpus or images:
            recorded = (bundle.meta.get("stack"), ",".join(bundle.meta.get("hosts") or []) or "none",
                        bundle.meta.get("gpus") or 0, bundle.meta.get("images") or "none")
            raise ChexstackError("--from %s: the bundle records its --stack (%s), --hosts (%s), --gpus (%s) and "
                                 "--images (%s); do not give them" % (from_bundle, *recorded))
        stack, hosts, evidence = bundle.meta.get("stack"), bundle.meta.get("hosts") or [], Replay(bundle)
        gpus, images = bundle.meta.get("gpus") or 0, bundle.meta.get("images")
    manifest = load_stack(stack) if stack else None
    if not from_bundle:
        if collect:
            folder = collect_folder(collect)
            recorder = Bundle({"host": None, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "stack": stack, "hosts": list(hosts or []), "gpus": gpus, "images": images,
                               "checks": ids})
        evidence = Live(recorder)
        if recorder is not None:
            recorder.meta["host"] = evidence.host
    ctx = Context(stack=manifest, hosts=list(hosts or []), evidence=evidence, gpus=gpus, images=images)
    report = run_checks(ctx, ids)
    report.bundle, report.fast = from_bundle, fast
    print_table(report)
    if recorder is not None:
        recorder.save(folder)
        write_json(report, str(folder / "report.json"))
        console.print("bundle: %s (%d records); judge it anywhere with invoke validate --from %s"
                      % (folder, len(recorder.entries), folder))
    if json_path:
        write_json(report, json_path)
    return report.exit_code
