"""What ``invoke bench`` and ``invoke bench-report`` do, behind the thin task glue in tasks.py."""
from __future__ import annotations

import glob
from datetime import datetime, timezone
from pathlib import Path

import launch
from bench import attribution, batch, figure, gate, guard
from bench.results import Sweep, load_sweep
from bench.sweep import SweepRequest, run_sweep
from chexstack.console import console, warn
from chexstack.errors import ChexstackError, ExitCode
from chexstack.inputs import input_file
from launch.cluster import ClusterOptions
from launch.options import LAUNCHERS

REPO = Path(__file__).resolve().parents[1]


def parse_counts(text: str, option: str = "--gpus") -> tuple[int, ...]:
    """``"1,2,3,4,8"`` (the value of ``option``) -> (1, 2, 3, 4, 8). Raises ChexstackError naming the bad entry."""
    counts = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item.isdigit() or int(item) < 1:
            raise ChexstackError("%s %r: expected counts >= 1 separated by commas, e.g. 1,2,3,4,8 (bad: %r)"
                                 % (option, text, item))
        counts.append(int(item))
    return tuple(counts)


def sweep_counts(gpus: str | None, np: str | None) -> tuple[tuple[int, ...], bool]:
    """(counts, whether they are GPUs) from ``--gpus`` or ``--np`` (default: the seed's Figure 1 GPU counts).
    Raises ChexstackError when both are given or one does not parse (an empty value too: given is not unset)."""
    from bench.sweep import FIGURE1_COUNTS

    if gpus is not None and np is not None:
        raise ChexstackError("--gpus %s and --np %s: give one (GPU counts, or CPU rank counts)" % (gpus, np))
    if np is not None:  # given, even as '': an empty list is refused naming --np, never taken as unset
        return parse_counts(np, "--np"), False
    return (parse_counts(gpus) if gpus is not None else FIGURE1_COUNTS), True


def print_sweep(sweep: Sweep, path: Path) -> None:
    cmp = figure.compare([sweep])
    console.print(figure.rich_table(cmp, title="%s (%s)" % (sweep.label, sweep.unit)))
    for line in cmp.cores:
        console.print(line, markup=False, highlight=False)
    for note in sweep.record.notes:
        console.print("[yellow]note:[/] %s" % note)
    console.print("sweep written to [bold]%s[/]" % path)


def scheduled(req: SweepRequest, opts: ClusterOptions) -> None:
    """Render (and with ``opts.submit`` submit) the sweep on ``opts.scheduler``, the scheduler ``invoke train``
    would use there (``launch.where``): its target by the same rules (``bench.batch.sweep_target``), its steps
    (``bench.batch.render``), their submission (``Scheduler.submit_steps``)."""
    if not (opts.render or opts.submit):
        raise ChexstackError("--launcher %s goes through its scheduler: add --render to print the job(s) or "
                             "--submit to hand them over; then `invoke bench --collect FOLDER`" % req.launcher)
    target = batch.sweep_target(req, opts)
    text, root = batch.render(req, target, opts, REPO, now=datetime.now(timezone.utc))
    if opts.render:
        print(text, end="")
    if opts.submit:
        job_id = opts.scheduler.submit_steps(text, opts, target.results, root)
        if job_id is not None:
            _keep_job(Path(root), opts, text, job_id)


def _keep_job(root: Path, opts: ClusterOptions, text: str, job_id: str) -> None:
    """Keep the submitted sweep job's id and script SHA-256 in its results folder (``launch.attest.keep_job``), for
    the statement ``--collect`` signs; a warning when the folder cannot be written here."""
    from launch import attest
    from launch.schedulers import name_of

    try:
        attest.keep_job(root, attest.job_block(name_of(opts.scheduler), opts.scheduler.artifact, text, job_id))
    except OSError as e:
        warn("cannot keep the job's record in %s (%s): invoke bench --collect will sign the sweep without its job"
             % (root, e.strerror or e))


def place(launcher: str, given: dict, *, stack: str | None, image: str | None, hosts: tuple[str, ...],
          **scheduler) -> launch.Where:
    """Where ``invoke bench`` runs (``launch.where`` over every launcher, ``given`` the options the user set):
    here or across ``hosts``, or a scheduler of the table with its ``launch.cluster.ClusterOptions`` fields
    (``scheduler``: ``per_node``, ``slurm_model``, ``rdma_resource``, ``results``, ``render``, ``submit``)."""
    return launch.where(launcher, given, known=LAUNCHERS, stack=stack, image=image, hosts=hosts, **scheduler)


def default_label(stack: str | None, launcher: str) -> str:
    return "%s-%s" % (stack or "host", launcher)


def collect(folder: str, output: Path, label: str | None, launcher: str | None = None) -> None:
    """``invoke bench --collect FOLDER``: the sweep JSON from a scheduled sweep's results; the record keeps the
    launcher it names unless ``launcher`` (the one the user gave) names another. Then the signed statements: the
    sweep JSON's beside it, and the results folder's (every count's throughput.json and what the job stored),
    each with the job (``launch.attest.kept_job``: its id and batch script's SHA-256, kept at submission)."""
    from launch import attest

    started = attest.now()
    sweep, path = batch.collect(Path(folder), output, label=label, launcher=launcher)
    print_sweep(sweep, path)
    for line in sweep.record.drift:
        warn("drift: %s" % line)
    job = attest.kept_job(Path(folder))
    if job is None:
        warn("%s holds no %s (the job's id and script, kept at submission by invoke bench --submit): the "
             "statements name no job" % (folder, attest.JOB_FILE))
    record = sweep.record
    image = {"ref": record.image, "image_id": record.image_id} if record.image else None
    common = dict(stack=record.stack, image=image, drift=record.drift, started=started, kind="sweep",
                  jobs=[job] if job else [])
    signed = attest.write_collection(path.parent, [path.name], path=attest.sweep_statement_path(path), **common)
    console.print("signed statement: %s (invoke verify-run %s)" % (signed, signed), markup=False)
    try:
        raw = attest.write_collection(Path(folder), batch.collected_files(Path(folder)), **common)
    except ChexstackError as e:  # results on storage this machine only reads: the sweep's statement stands
        warn("the results folder's statement is not written: %s" % e)
    else:
        console.print("signed statement of the results: %s (invoke verify-run %s)" % (raw, folder), markup=False)


def bench(req: SweepRequest, output: Path, runs: Path, where: launch.Where) -> None:
    """``invoke bench``: go through the scheduler ``where`` names (``place``) or run the sweep here (local,
    mpirun)."""
    if where.cluster is not None:
        scheduled(req.check(), where.cluster)
        return
    from launch import attest
    from launch.dispatch import image_of

    started = attest.now()
    sweep, path = run_sweep(req, REPO, output, runs)
    print_sweep(sweep, path)
    for line in sweep.record.drift:
        warn("drift: %s" % line)
    signed = attest.write_collection(path.parent, [path.name], stack=req.stack, image=image_of(where),
                                     drift=sweep.record.drift, started=started, kind="sweep",
                                     path=attest.sweep_statement_path(path))
    console.print("signed statement: %s (invoke verify-run %s)" % (signed, signed), markup=False)


def expand_results(items: list[str]) -> list[Path]:
    """Result paths from comma-separated entries and globs, in the order given. Raises ChexstackError for an entry
    that matches no file."""
    paths: list[Path] = []
    for entry in items:
        for part in [p.strip() for p in entry.split(",") if p.strip()]:
            matches = sorted(glob.glob(part)) if any(ch in part for ch in "*?[") else [part]
            if not matches:
                raise ChexstackError("result %s: no such file" % part)
            paths += [input_file(m, "result %s" % m, "a sweep JSON file") for m in matches]
    if not paths:
        raise ChexstackError("bench-report: give the result files (the first is the baseline), e.g. "
                             "invoke bench-report bench/reference/seed-densenet121-baremetal.json,bench/results/x.json")
    return paths


def refuse_unverified(items: list[str], also: tuple[str, ...] = ()) -> None:
    """``bench-report --verify``: every result file of ``items`` (and ``also``: the ``--baseline``) must carry a
    signed statement that verifies (``launch.attest.verify_result``: the signature, every subject's SHA-256, the
    file among them); ChexstackError (exit 1) naming each file and its failing check otherwise, before anything is
    drawn or judged."""
    from launch import attest

    paths = expand_results(items) + [input_file(p, "--baseline %s" % p, "a sweep JSON file") for p in also]
    problems = [line for path in paths for line in attest.verify_result(path)]
    if problems:
        raise ChexstackError("bench-report --verify: refused:\n  %s" % "\n  ".join(problems),
                             exit_code=ExitCode.FAILED)
    console.print("verified: %d signed result%s" % (len(paths), "" if len(paths) == 1 else "s"), markup=False)


def _load(items: list[str]) -> list[tuple[Path, Sweep]]:
    return [(p, load_sweep(p)) for p in expand_results(items)]


def report(items: list[str], png: Path, title: str | None = None, strict: bool = False,
           bandwidth: str | None = None) -> figure.Report:
    """``invoke bench-report``: Figure 1 PNG + CSV + Markdown, and the table and its caption on screen; where points
    carry a step split (``invoke bench --timeline``), the gap explained (``bench.attribution.explain``, with
    ``bandwidth``'s prediction: ``--bandwidth``). ``strict`` (``--strict``): refuse (exit 2, ``guard.refuse``)
    when a series differs from the baseline in more than the system, before drawing."""
    loaded = _load(items)
    (base_path, base), sweeps = loaded[0], [s for _, s in loaded]
    if strict:
        guard.refuse([(p, s, base_path, base) for p, s in loaded[1:]], "bench-report --strict")
    gap = attribution.explain(sweeps, attribution.bandwidth(bandwidth) if bandwidth else None)
    result = figure.write_report(sweeps, png, title, gap)
    console.print(figure.rich_table(result.comparison, title="Throughput vs %s (baseline: %s)"
                                    % (result.comparison.count_axis, result.comparison.baseline)))
    for line in figure.caption(result.comparison):
        console.print("[yellow]note:[/] %s" % line)
    for line in result.comparison.cores:
        console.print(line, markup=False, highlight=False)
    for line in gap:
        console.print("[cyan]gap:[/] %s" % line, markup=True, highlight=False)
    for p in (result.png, result.csv, result.markdown):
        console.print("wrote [bold]%s[/]" % p)
    return result


def regression_gate(items: list[str], baseline: str, tolerance_pct: float | None = None) -> None:
    """``invoke bench-report --baseline FILE RESULTS``: judge each result against the baseline sweep (``bench.gate``,
    ``tolerance_pct`` default ``gate.TOLERANCE_PCT``) and print a table per result. Raises ChexstackError: exit 2
    for a result not comparable with the baseline (before any is judged) or sharing no count, exit 1 naming every
    point that fell below the baseline."""
    base_path = input_file(baseline, "--baseline %s" % baseline, "a sweep JSON file")
    base = load_sweep(base_path)
    loaded = _load(items)
    guard.refuse([(p, s, base_path, base) for p, s in loaded], "bench-report --baseline %s" % base_path)
    failed = []
    for path, sweep in loaded:
        verdicts = gate.check(path, sweep, base_path, base,
                              gate.TOLERANCE_PCT if tolerance_pct is None else tolerance_pct)
        console.print(gate.table(verdicts, sweep.unit, "%s vs baseline %s" % (path, base_path)))
        failed += ["%s: %s" % (path, line) for line in gate.drops(verdicts, sweep.unit)]
    if failed:
        raise ChexstackError("bench-report --baseline %s: below the baseline:\n  %s" % (base_path, "\n  ".join(failed)),
                             exit_code=ExitCode.FAILED)
    console.print("no point below the baseline %s" % base_path)
