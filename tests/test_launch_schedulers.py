"""The scheduler seam (``launch.schedulers``): one object per scheduler in one table, picked in one place, never a
default branch; the request checked once, at the seam; and a new scheduler added as one module plus one table entry
(docs/launchers.md, "Adding a scheduler"), shown here with a toy one run through the public entry.

What counts as a launcher or scheduler comparison, read from the source (ast) of every module of ``launch/`` and
``bench/``, nothing executed:

- comparing with (``==``, ``!=``, ``in``, ``not in``) a scheduler's name: a launcher or model of the table
  (``slurm``, ``k8s``, ``hybrid``) or ``pyxis``, alone or in a literal tuple, list or set: anywhere but the table
  (``launch/schedulers.py``); the Slurm renderer (``launch/slurm.py``) may compare its own ``model`` argument, which
  picks its template (the schedulers pass it: ``SlurmBatch.script_model``);
- comparing a ``launcher`` (a name or an attribute) with a string: anywhere but the two tables of where a run goes,
  ``launch/dispatch.py`` (``TARGETS``, the launchers that run from here) and ``launch/options.py`` (the launchers'
  names and which option applies where).
"""
from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest

import launch
from chexstack.errors import ChexstackError
from launch import cluster, dispatch, schedulers
from launch.options import TRAIN_LAUNCHERS
from launch.plans import Plan
from launch.request import TrainRequest
from launch.scheduler import Scheduler
from tests.lib.paths import REPO
from tests.lib.runs import request as train_request

#: the table, and the renderer that compares its own model argument
TABLE = "launch/schedulers.py"
RENDERER = "launch/slurm.py"
#: the tables of where a run goes, which compare the launchers that run from here
WHERE_TABLES = {"launch/dispatch.py", "launch/options.py"}


def scheduler_words() -> set[str]:
    return ({s.launcher for s in schedulers.SCHEDULERS.values()} | {s.model for s in schedulers.SCHEDULERS.values()
                                                                     if s.model} | {"pyxis"})


def _strings(node: ast.AST) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]


def _named(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name or isinstance(node, ast.Attribute) and node.attr == name


def comparisons(source: str, module: str, words: set[str]) -> list[tuple[int, str]]:
    """(line, the comparison) for every launcher or scheduler comparison of ``source`` (the module docstring's
    rules) in ``module`` (its path from the repository root)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or not any(
                isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            continue
        sides = [node.left, *node.comparators]
        names = {w for side in sides for w in _strings(side)} & words
        renderers_own = module == RENDERER and any(_named(side, "model") for side in sides)
        if names and module != TABLE and not renderers_own:
            found.append((node.lineno, ast.unparse(node)))
        elif module not in WHERE_TABLES | {TABLE} and any(_named(side, "launcher") for side in sides) and any(
                _strings(side) for side in sides):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_the_detector_finds_each_form():
    words = scheduler_words()
    caught = ['launcher == "slurm"', 'opts.launcher != "k8s"', 'model == "hybrid"', '"k8s" in (launcher, x)',
              'x in ("slurm", "local")', 'req.launcher == "mpirun"', 'launcher not in ("local",)']
    for source in caught:
        assert comparisons(source, "launch/x.py", words), source
    spared = ['SCHEDULERS["slurm-baremetal"]', 'launcher = "slurm"', 'system == "mpijob"', 'x is None',
              'launch.where("slurm")']
    for source in spared:
        assert comparisons(source, "launch/x.py", words) == [], source
    assert comparisons('launcher == "slurm"', TABLE, words) == []
    assert comparisons('model == "hybrid"', RENDERER, words) == []
    assert comparisons('where.launcher == "mpirun"', "launch/dispatch.py", words) == []
    assert comparisons('where.launcher == "slurm"', "launch/dispatch.py", words)


def test_no_launcher_or_scheduler_comparison_outside_the_table():
    """``launch/`` and ``bench/`` ask the table (``select``, a scheduler's attributes and methods), never compare
    names: a third scheduler cannot silently take another's branch."""
    words = scheduler_words()
    modules = sorted([*(REPO / "launch").glob("*.py"), *(REPO / "bench").rglob("*.py")])
    found = {"%s:%d" % (Path(p).relative_to(REPO), line): text for p in modules
             for line, text in comparisons(p.read_text(), str(Path(p).relative_to(REPO)), words)}
    assert not found, found


def test_the_table_picks_each_scheduler_and_refuses_what_it_has_not():
    table = schedulers.SCHEDULERS
    assert schedulers.select("slurm", None) is table["slurm-baremetal"]
    assert schedulers.select("slurm", "cpu") is table["slurm-pyxis"]
    assert schedulers.select("slurm", "cpu", "hybrid") is table["slurm-hybrid"]
    assert schedulers.select("k8s", "cpu") is table["k8s-mpijob"]
    assert launch.SCHEDULED == schedulers.launchers() == ("slurm", "k8s")
    for scheduler in table.values():
        assert isinstance(scheduler, Scheduler) and scheduler.explain() and scheduler.tool in scheduler.explain()
        for method in ("render", "submit", "follow", "explain", "image", "job_env", "render_steps", "submit_steps"):
            assert callable(getattr(scheduler, method)), (scheduler, method)
    with pytest.raises(ChexstackError, match="unknown scheduler 'flux': expected slurm or k8s"):
        schedulers.select("flux", "cpu")
    with pytest.raises(ChexstackError, match="--launcher k8s has no model 'hybrid'"):
        schedulers.select("k8s", "cpu", "hybrid")
    with pytest.raises(ChexstackError, match="unknown scheduler 'lsf'"):
        cluster.ClusterOptions("lsf", "cpu")
    # no stack where the model runs one: that scheduler says what is missing, with the bare-metal hint
    with pytest.raises(ChexstackError, match=r"--launcher slurm runs a stack's image: give --stack .*without --hybrid "
                                             r"and --stack, Slurm runs this Python environment"):
        schedulers.select("slurm", None, "hybrid").image(cluster.ClusterOptions("slurm", None, slurm_model="hybrid"))


def _counted(monkeypatch) -> dict[str, int]:
    """Counts of ``TrainRequest.check`` and ``check_paths`` calls."""
    counts = {"check": 0, "check_paths": 0}
    for name in counts:
        original = getattr(TrainRequest, name)

        def counting(self, _name=name, _original=original):
            counts[_name] += 1
            return _original(self)
        monkeypatch.setattr(TrainRequest, name, counting)
    return counts


def test_the_request_is_checked_once_at_the_seam(monkeypatch, tmp_path, capsys):
    """``launch.plan`` checks the values and this machine's paths once and the target not again; a rendered job
    checks the values once and no path here (they are the cluster's)."""
    monkeypatch.setitem(dispatch.TARGETS, "local", lambda request, **options: Plan(["true"], {}, "gloo", "test"))
    counts = _counted(monkeypatch)
    launch.plan(train_request(np=1, data="synthetic", output=str(tmp_path / "o")), launch.where())
    assert counts == {"check": 1, "check_paths": 1}
    counts.update(check=0, check_paths=0)
    launch.run(train_request(np=2, data="synthetic", output="/shared/runs/r1"),
               launch.where("slurm", stack="cpu", render=True))
    assert counts == {"check": 1, "check_paths": 0} and "srun --mpi=pmix" in capsys.readouterr().out


class Flux(Scheduler):
    """A toy scheduler, as a new module would state it: a ``flux batch`` script handed to a submit command."""

    launcher = "flux"
    artifact = "flux batch script"
    tool = "flux"
    command: tuple[str, ...] = ("flux", "batch")

    def explain(self) -> str:
        return "a flux batch script: flux run starts the stack's image on every node, handed to flux"

    def render(self, spec, request, opts) -> str:
        return "#!/bin/bash\n#FLUX: -N %d\n#FLUX: --tasks-per-node=%d\nflux run %s %s\n" % (
            spec.nodes, spec.ranks_per_node, shlex.quote(spec.image), shlex.join(spec.command))

    def submit(self, text, request, opts) -> str:
        from chexstack.tools import run_checked

        return run_checked(list(self.command), "submitting the flux script", input=text, timeout=60).stdout.strip()


def test_a_new_scheduler_is_one_module_and_one_table_entry(monkeypatch, tmp_path, capsys):
    """A toy scheduler registered in the table alone renders and submits a training request through the public
    entry (``launch.where`` -> ``launch.run``), with the seam's checks and the shared job rules (paths, layout,
    the stack's image): no other file knows it."""
    fake = tmp_path / "flux"
    fake.write_text("#!/bin/sh\ncat > %s\necho f1234\n" % (tmp_path / "submitted"))
    fake.chmod(0o755)
    toy = Flux()
    toy.command = (str(fake), "batch")
    monkeypatch.setitem(schedulers.SCHEDULERS, "flux-batch", toy)
    known = TRAIN_LAUNCHERS + ("flux",)
    request = train_request(np=4, data="synthetic", output="/shared/runs/toy")

    assert launch.run(request, launch.where("flux", known=known, stack="cpu", per_node=2, render=True)) is None
    rendered = capsys.readouterr()
    assert "#FLUX: -N 2\n#FLUX: --tasks-per-node=2\nflux run chexstack/cpu:" in rendered.out
    assert "python -m trainer --data synthetic --output /shared/runs/toy" in rendered.out
    assert "cannot pull it" in rendered.err  # the shared local-image warning

    pinned = "registry.example.com/chexstack/cpu@sha256:" + "1" * 64  # by digest: nothing to resolve
    job = launch.run(request, launch.where("flux", known=known, stack="cpu", per_node=2, submit=True, image=pinned))
    assert job == "f1234" and "submitted: f1234" in capsys.readouterr().out
    assert "flux run %s python -m trainer" % pinned in (tmp_path / "submitted").read_text()
    # the seam's refusals hold for it too: paths that are not the cluster's, a bad request, no stack
    with pytest.raises(ChexstackError, match="--launcher flux: --output runs/x is a path relative to this machine"):
        launch.run(train_request(np=1, data="synthetic", output="runs/x"),
                   launch.where("flux", known=known, stack="cpu", render=True))
    with pytest.raises(ChexstackError, match="--launcher flux runs a stack's image: give --stack"):
        launch.run(request, launch.where("flux", known=known, render=True))
    with pytest.raises(ChexstackError, match="--launcher flux: add --render to print the flux batch script or "
                                             "--submit to hand it to flux"):
        launch.run(request, launch.where("flux", known=known, stack="cpu"))


@pytest.mark.parametrize("launcher, stack, model, key", [
    ("slurm", None, None, "slurm-baremetal"), ("slurm", "cpu", None, "slurm-pyxis"),
    ("slurm", "cpu", "hybrid", "slurm-hybrid"), ("k8s", "cpu", None, "k8s-mpijob")])
def test_a_sweep_goes_to_the_scheduler_a_training_run_goes_to(launcher, stack, model, key, capsys):
    """``invoke bench`` builds its ``launch.Where`` as ``invoke train`` does (``bench.main.place``), with the same
    ``ClusterOptions`` (no second option bag) and so the same scheduler, whose image rules it takes
    (``bench.batch.sweep_target``) and whose steps it renders."""
    from bench import batch, main
    from bench.sweep import SweepRequest

    assert not hasattr(main, "Scheduled") and not hasattr(main, "_target")
    image = "/shared/cpu.sif" if model else None
    results = "claim" if launcher == "k8s" else "/shared/bench"
    where = main.place(launcher, {}, stack=stack, image=image, hosts=(), slurm_model=model, results=results,
                       render=True)
    trained = launch.where(launcher, stack=stack, image=image, slurm_model=model, render=True)
    assert where.cluster.scheduler is trained.cluster.scheduler is schedulers.SCHEDULERS[key]
    req = SweepRequest(counts=(1, 2), label="seam", gpus=False, launcher=launcher, stack=stack)
    target = batch.sweep_target(req, where.cluster)
    text, root = batch.render(req, target, where.cluster, REPO, render_host="login01",
                              mpirun_version_output="mpirun (Open MPI) 4.1.4\n")
    assert text.count("--throughput") == 2 and root.rsplit("/", 1)[1].startswith("seam-")
    assert (target.workdir is None) == schedulers.SCHEDULERS[key].runs_stack
