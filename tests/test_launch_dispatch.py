"""The launcher seam (``launch.dispatch``): ``where`` checks where a run goes once, ``plan`` picks the target from
``TARGETS``, and the targets never import the package face. No target runs: each is replaced by a recorder."""
from __future__ import annotations

import ast

import pytest

import launch
from chexstack.errors import ChexstackError
from launch import dispatch
from launch.plans import Plan
from launch.request import TrainRequest
from tests.lib.paths import REPO
from tests.lib.runs import request as train_request
from tests.lib.sweeps import sweep_request


@pytest.fixture
def targets(monkeypatch):
    """Every target replaced by one that records (target, options) and returns a plain plan."""
    called = []
    for name in dispatch.TARGETS:
        def record(request, _name=name, **options):
            called.append((_name, options))
            return Plan(["true"], {}, "gloo", "test")
        monkeypatch.setitem(dispatch.TARGETS, name, record)
    return called


def _request(tmp_path) -> TrainRequest:
    return train_request(gpus=0, np=1, data="synthetic", output=str(tmp_path / "out"))


def test_the_face_is_the_seam():
    assert launch.plan is dispatch.plan and launch.run is dispatch.run and launch.where is dispatch.where
    assert launch.LAUNCHERS == ("local", "mpirun", "slurm", "k8s") and launch.SCHEDULED == ("slurm", "k8s")
    assert not hasattr(launch, "train")  # the old entry is gone, not silently another


def test_where_is_checked_once_and_frozen():
    here = launch.where()
    assert here == dispatch.Where() and here.cluster is None
    with pytest.raises(AttributeError):
        here.launcher = "slurm"
    slurm = launch.where("slurm", {"render": True}, render=True, nodes=2)
    assert slurm.cluster.launcher == "slurm" and slurm.cluster.nodes == 2 and slurm.cluster.render
    with pytest.raises(ChexstackError, match="unknown launcher 'mpirun': expected local, slurm or k8s"):
        launch.where("mpirun")  # invoke train's launchers: mpirun is --hosts with --controller mpi
    assert launch.where("mpirun", known=launch.LAUNCHERS, hosts=["a:1"]).hosts == ("a:1",)
    with pytest.raises(ChexstackError, match="--render applies to --launcher slurm or k8s only"):
        launch.where("local", {"render": True})
    with pytest.raises(ChexstackError, match="--hosts applies to --launcher local without --stack"):
        launch.where(stack="cpu", hosts=["a:1"])
    with pytest.raises(ChexstackError, match="--ssh-key applies with --hosts"):
        launch.where(ssh_key="id")
    with pytest.raises(ChexstackError, match="--requeue applies to --launcher slurm on bare metal"):
        launch.where("slurm", stack="cpu", requeue=True)


def test_plan_picks_the_target(targets, tmp_path):
    request = _request(tmp_path)
    launch.plan(request, launch.where())
    launch.plan(request, launch.where(hosts=["a:2", "b:2"], ssh_key="id"))
    launch.plan(request, launch.where("mpirun", known=launch.LAUNCHERS, hosts=["a:2"]))
    launch.plan(request, launch.where(stack="cpu", runtime="singularity", image="/x/cpu.sif", as_root=True))
    assert targets == [("local", {"hosts": None, "ssh_identity_file": None}),
                       ("local", {"hosts": ["a:2", "b:2"], "ssh_identity_file": "id"}),
                       ("mpirun", {"hosts": ["a:2"], "ssh_identity_file": None}),
                       ("singularity", {"sif": "/x/cpu.sif", "as_root": True})]
    with pytest.raises(ChexstackError, match="--runtime 'podman': expected one of docker, singularity"):
        launch.plan(request, launch.where(stack="cpu", runtime="podman"))
    with pytest.raises(ChexstackError, match="--launcher k8s goes through its scheduler"):
        launch.plan(request, launch.where("k8s", stack="cpu", render=True))


def test_a_stack_with_docker_is_its_verified_tag_with_the_drift_warning(targets, tmp_path, monkeypatch):
    from envs.manifest import load_stack
    from images.naming import image_ref

    monkeypatch.setattr("launch.dispatch.shutil.which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr("launch.container.trainer_drift", lambda image, stack: "drift of %s (%s)" % (image, stack))
    plan = launch.plan(_request(tmp_path), launch.where(stack="cpu", network="none"))
    ref = image_ref(load_stack("cpu"))
    assert targets == [("docker", {"image": ref, "network": "none", "stack": "cpu", "as_root": False})]
    assert plan.warnings == ("drift of %s (cpu)" % ref,)


def test_no_launch_module_imports_the_package_face():
    """Targets return plans; only the face imports the seam (``launch.dispatch``), and nothing below imports the
    face: the circle launch -> launch.local -> launch is gone for good."""
    importers = []
    for path in sorted((REPO / "launch").glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            if "launch" in names and not (isinstance(node, ast.ImportFrom) and all(
                    (REPO / "launch" / (a.name + ".py")).exists() for a in node.names)):
                importers.append(path.name)
    assert importers == []


def test_a_sweep_plans_its_counts_through_the_seam(targets, tmp_path, monkeypatch):
    """``invoke bench`` names no target: its counts are planned by ``launch.plan`` at one ``bench.sweep.place``,
    and each plan runs (here: a recorded ``throughput.json`` copied into the count's folder)."""
    from bench import sweep

    recorded = REPO / "tests" / "data" / "bench" / "cpu-sweep"

    def copy(request, **options):
        targets.append(("local", options))
        source = recorded / ("np-%d" % request.ranks()) / sweep.THROUGHPUT_FILE
        return Plan(["sh", "-c", 'mkdir -p "$0" && cp "$1" "$0"', request.options.output, str(source)], {}, "gloo",
                    "test")

    monkeypatch.setitem(dispatch.TARGETS, "local", copy)
    req = sweep_request(counts=(1, 2), label="seam", gpus=False, model="resnet50", image_size=64)
    assert sweep.place(req) == launch.Where()
    result, path = sweep.run_sweep(req, REPO, tmp_path / "out", tmp_path / "runs")
    assert [p.count for p in result.points] == [1, 2] and path.parent == tmp_path / "out"
    assert targets == [("local", {"hosts": None, "ssh_identity_file": None})] * 2
    mpirun = sweep.SweepRequest(counts=(1,), label="seam", gpus=False, launcher="mpirun", hosts=("a:2", "b:2"))
    assert sweep.place(mpirun) == launch.Where("mpirun", hosts=("a:2", "b:2"))


def test_a_sweeps_count_runs_through_the_one_execute(targets, tmp_path, monkeypatch, capsys):
    """Each count is run by ``launch.local.execute``, as ``invoke train``'s run is: its heading before the launch
    line, and a failing count is the sweep's error naming it (exit 1, as before the seam)."""
    from bench import sweep

    def failing(request, **options):
        return Plan(["sh", "-c", "echo 'rank 0 broke' >&2; exit 3"], {}, "gloo", "test")

    monkeypatch.setitem(dispatch.TARGETS, "local", failing)
    req = sweep_request(counts=(1,), label="seam", gpus=False, model="resnet50", image_size=64)
    with pytest.raises(ChexstackError) as err:
        sweep.run_sweep(req, REPO, tmp_path / "out", tmp_path / "runs")
    assert str(err.value).startswith("throughput run with 1 ranks: ") and err.value.exit_code == 1
    assert "1 CPU ranks — launch: sh -c" in " ".join(capsys.readouterr().out.split())
    [log] = (tmp_path / "runs").glob("seam-*/np-1/launch.log")
    assert "rank 0 broke" in log.read_text()
