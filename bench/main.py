"""What ``invoke bench`` and ``invoke bench-report`` do, behind the thin task glue in tasks.py."""
from __future__ import annotations

import glob
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench import attribution, batch, figure, gate, guard
from bench.results import Sweep, load_sweep
from bench.sweep import SweepRequest, run_sweep
from chexstack.console import console, warn
from chexstack.errors import ChexstackError, ExitCode
from chexstack.inputs import input_file
from launch import k8s, submit
from launch.cluster import cluster_path, local_image_warning
from launch.options import SCHEDULED

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Scheduled:
    """Options of a sweep that runs through Slurm or Kubernetes (``bench.batch``)."""

    per_node: int = 4
    slurm_model: str = "pyxis"
    results: str | None = None
    rdma_resource: str | None = None
    render: bool = False
    submit: bool = False
    wait_s: int = 6 * 3600


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
    Raises ChexstackError when both are given or one does not parse."""
    from bench.sweep import FIGURE1_COUNTS

    if gpus and np:
        raise ChexstackError("--gpus %s and --np %s: give one (GPU counts, or CPU rank counts)" % (gpus, np))
    if np:
        return parse_counts(np, "--np"), False
    return (parse_counts(gpus) if gpus else FIGURE1_COUNTS), True


def print_sweep(sweep: Sweep, path: Path) -> None:
    console.print(figure.rich_table(figure.compare([sweep]), title="%s (%s)" % (sweep.label, sweep.unit)))
    for note in sweep.record.notes:
        console.print("[yellow]note:[/] %s" % note)
    console.print("sweep written to [bold]%s[/]" % path)


def _target(req: SweepRequest, opts: Scheduled) -> batch.BatchTarget:
    """Image (``--image``, else the stack's verified tag), ranks per node (GPUs for a GPU stack, else CPU ranks).
    Slurm without ``--stack`` (and without ``--hybrid``) is bare metal, as ``invoke train --launcher slurm``: this
    Python environment and checkout, which every node must see at the same paths."""
    import sys

    from envs.manifest import load_stack
    from images.naming import image_ref

    if req.stack is None and req.launcher == "slurm" and opts.slurm_model != "hybrid":
        if req.image:
            raise ChexstackError("--image applies to a stack's image; a bare-metal Slurm sweep runs this Python (%s)"
                                 % sys.executable)
        if not opts.results:
            raise ChexstackError("--launcher slurm: give --results DIR, an absolute path on storage every node and "
                                 "this checkout see (e.g. --results /shared/chexstack/bench), for the counts' "
                                 "results")
        cluster_path(req.launcher, "--results", opts.results)
        return batch.BatchTarget(image=sys.executable, per_node=opts.per_node, gpus=req.gpus, results=opts.results,
                                 workdir=str(REPO))
    if req.stack is None:
        raise ChexstackError("--launcher %s runs the stack's image: give --stack%s" % (
            req.launcher, "" if req.launcher == "k8s" else "; without --hybrid and --stack, Slurm runs this Python "
            "environment on the nodes (bare metal)"))
    stack = load_stack(req.stack)
    image = req.image or image_ref(stack)
    if req.launcher == "k8s" and not opts.results:
        raise ChexstackError("--launcher k8s: give --results CLAIM, a ReadWriteMany PersistentVolumeClaim where "
                             "every count's rank 0 writes its throughput.json")
    if req.launcher == "slurm" and not opts.results:
        raise ChexstackError("--launcher slurm: give --results DIR, an absolute path on storage every node and this "
                             "checkout see (e.g. --results /shared/chexstack/bench), for the counts' results")
    if req.launcher == "slurm":
        cluster_path(req.launcher, "--results", opts.results)
    if req.launcher == "slurm" and opts.slurm_model == "hybrid" and not req.image:
        raise ChexstackError("--hybrid runs `singularity exec` on a SIF: give --image /shared/path/%s.sif" % stack.name)
    warning = local_image_warning(stack, image, req.launcher)
    if warning:
        warn(warning)
    if req.gpus and not stack.gpu:
        raise ChexstackError("--gpus %s: stack %s has no GPU build; sweep CPU ranks with --np %s"
                             % (",".join(map(str, req.counts)), stack.name, ",".join(map(str, req.counts))))
    return batch.BatchTarget(image=image, per_node=opts.per_node, gpus=req.gpus, results=opts.results)


def scheduled(req: SweepRequest, opts: Scheduled) -> None:
    """Render (and with ``opts.submit`` submit) a Slurm or Kubernetes sweep."""
    if not (opts.render or opts.submit):
        raise ChexstackError("--launcher %s goes through its scheduler: add --render to print the job(s) or "
                             "--submit to hand them over; then `invoke bench --collect FOLDER`" % req.launcher)
    target = _target(req, opts)
    if req.launcher == "slurm":
        now = datetime.now(timezone.utc)
        text = batch.render_slurm(req, target, REPO, opts.slurm_model, now=now)
        if opts.render:
            print(text, end="")
        if opts.submit:
            try:  # sbatch opens the job's log in --results before the script runs: create it where this sees it
                Path(target.results).mkdir(parents=True, exist_ok=True)
            except OSError:
                pass
            console.print("submitted Slurm job [bold]%s[/]; when it has ended: invoke bench --collect %s"
                          % (submit.submit_slurm(text), batch.results_root(req, target, now)))
        return
    documents = batch.render_k8s(req, target, k8s.K8sOptions(rdma_resource=opts.rdma_resource))
    if opts.render:
        print(documents, end="")
    if opts.submit:
        for document in documents.split("---\n"):
            name = submit.submit_k8s(document)
            console.print("created [bold]%s[/]; waiting for it to succeed (counts run one after another)" % name)
            submit.wait_k8s(name, opts.wait_s)


def default_label(stack: str | None, launcher: str) -> str:
    return "%s-%s" % (stack or "host", launcher)


def collect(folder: str, output: Path, label: str | None, launcher: str = "local") -> None:
    """``invoke bench --collect FOLDER``: the sweep JSON from a scheduled sweep's results; the record keeps the
    launcher it names unless ``launcher`` is another than the default ``local``."""
    sweep, path = batch.collect(Path(folder), output, label=label, launcher=None if launcher == "local" else launcher)
    print_sweep(sweep, path)


def bench(req: SweepRequest, output: Path, runs: Path, opts: Scheduled) -> None:
    """``invoke bench``: go through a scheduler (slurm, k8s) or run the sweep here (local, mpirun)."""
    if req.launcher in SCHEDULED:
        scheduled(req.check(), opts)
        return
    sweep, path = run_sweep(req, REPO, output, runs)
    print_sweep(sweep, path)


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
