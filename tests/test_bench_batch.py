"""Scheduled sweeps: the Slurm sweep script (`bash -n`, its stored record), one MPIJob per count (schemas),
and collecting a result folder written by real trainer runs."""
from __future__ import annotations

import shutil
import subprocess
from datetime import datetime, timezone

import pytest
import yaml

from bench import batch
from bench.results import RunRecord, load_sweep
from chexstack.errors import ChexstackError
from tests.lib.golden import assert_golden
from tests.lib.k8s import validate_mpijob
from tests.lib.paths import REPO
from tests.lib.sweeps import sweep_request

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
CPU_SWEEP = REPO / "tests" / "data" / "bench" / "cpu-sweep"


def _req(**kw):
    base = dict(counts=(1, 2, 3, 4, 8), label="ngc-pyxis", launcher="slurm", stack="cpu", model="densenet121",
                batch_size=32, steps=50, warmup_steps=10)
    base.update(kw)
    return sweep_request(**base)


def _bash_n(text):
    proc = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_slurm_pyxis_sweep_golden(tmp_path):
    target = batch.BatchTarget(image="nvcr.io/example/chexstack-ngc:1", per_node=4, gpus=True, results="/shared/bench")
    text = batch.render_slurm(_req(), target, tmp_path, "pyxis", now=NOW)  # tmp_path: no git -> stable record
    assert_golden("bench/slurm-sweep-pyxis.sbatch", text)
    _bash_n(text)
    assert "#SBATCH --nodes=2" in text and text.count("srun --mpi=pmix") == 5
    assert "srun --mpi=pmix --nodes=2 --ntasks=8 --ntasks-per-node=4" in text
    record = text.split("<<'CHEXSTACK_RECORD'\n")[1].split("\nCHEXSTACK_RECORD")[0]
    assert RunRecord.model_validate_json(record).image == "nvcr.io/example/chexstack-ngc:1"


def test_slurm_hybrid_sweep_golden(tmp_path):
    target = batch.BatchTarget(image="/shared/chexstack-cpu.sif", per_node=4, gpus=True, results="/shared/bench")
    text = batch.render_slurm(_req(label="cpu-hybrid"), target, tmp_path, "hybrid",
                              mpirun_version_output="mpirun (Open MPI) 4.1.4\n", now=NOW, render_host="login01")
    assert_golden("bench/slurm-sweep-hybrid.sbatch", text)
    _bash_n(text)
    assert text.count("singularity exec --nv") == 5 and "*'(Open MPI) 4.1.'*" in text


def test_slurm_baremetal_sweep_golden(tmp_path):
    """Without a stack, each count is `mpirun -np N -map-by ppr:K:node` of the environment's Python from the
    checkout (Open MPI starts its daemons through Slurm), CPU ranks seeing no GPU; the job's log is in --results."""
    target = batch.BatchTarget(image="/shared/venv/bin/python", per_node=2, gpus=False, results="/shared/bench",
                               workdir="/shared/chexstack")
    req = _req(counts=(1, 2, 4), label="testcluster", stack=None, gpus=False, batch_size=4, image_size=32, steps=2,
               warmup_steps=1)
    text = batch.render_slurm(req, target, tmp_path, now=NOW)
    assert_golden("bench/slurm-sweep-baremetal.sbatch", text)
    _bash_n(text)
    assert "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n" in text and "--gpus-per-node" not in text
    assert "#SBATCH --output=/shared/bench/bench-testcluster-%j.out" in text
    assert "mpirun --tag-output -np 4 -bind-to none -map-by ppr:2:node" in text
    assert text.count("\nmpirun --tag-output ") == 3
    assert "cd /shared/chexstack\n" in text and "export CUDA_VISIBLE_DEVICES=''" in text


def test_k8s_sweep_is_one_valid_mpijob_per_count():
    target = batch.BatchTarget(image="registry.example.com/chexstack/cpu:1", per_node=4, gpus=True,
                               results="bench-results")
    text = batch.render_k8s(_req(launcher="k8s", counts=(1, 8)), target, now=NOW)
    assert_golden("bench/k8s-sweep-1-8.yaml", text)
    docs = list(yaml.safe_load_all(text))
    assert [d["metadata"]["name"] for d in docs] == ["bench-ngc-pyxis-np1", "bench-ngc-pyxis-np8"]
    for doc in docs:
        validate_mpijob(doc)
    worker = docs[1]["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 2 and docs[1]["spec"]["slotsPerWorker"] == 4
    assert {"name": "mount-0", "persistentVolumeClaim": {"claimName": "bench-results", "readOnly": False}} in \
        worker["template"]["spec"]["volumes"]
    assert "/results/ngc-pyxis-20240501T120000Z/np-8" in docs[1]["spec"]["mpiReplicaSpecs"]["Launcher"][
        "template"]["spec"]["containers"][0]["command"]


def test_repeats_through_a_scheduler_are_round_robin_job_steps_and_one_mpijob_each(tmp_path):
    """--repeats 2 on Slurm: one job, its steps 1,2,1,2 each writing repeat-<r>/np-<N>; on Kubernetes one MPIJob
    per count and repeat, named apart, in the same order."""
    target = batch.BatchTarget(image="/shared/venv/bin/python", per_node=2, gpus=False, results="/shared/bench",
                               workdir="/shared/chexstack")
    req = _req(counts=(1, 2), label="rr", stack=None, gpus=False, batch_size=4, image_size=32, steps=2,
               warmup_steps=1, repeats=2)
    text = batch.render_slurm(req, target, tmp_path, now=NOW)
    _bash_n(text)
    root = "/shared/bench/rr-20240501T120000Z"
    outputs = [line.split("--output ", 1)[1].split()[0] for line in text.splitlines() if "--throughput" in line]
    assert outputs == ["%s/repeat-%d/np-%d" % (root, r, n) for r in (1, 2) for n in (1, 2)]
    assert text.count("#SBATCH --nodes=") == 1
    k8s = batch.BatchTarget(image="registry.example.com/chexstack/cpu:1", per_node=1, gpus=False, results="claim")
    docs = list(yaml.safe_load_all(batch.render_k8s(_req(launcher="k8s", counts=(1, 2), gpus=False, repeats=2,
                                                         label="rr"), k8s, now=NOW)))
    assert [d["metadata"]["name"] for d in docs] == ["bench-rr-np1-r1", "bench-rr-np2-r1", "bench-rr-np1-r2",
                                                     "bench-rr-np2-r2"]
    for doc in docs:
        validate_mpijob(doc)


def test_collect_merges_a_scheduled_sweeps_repeats(tmp_path):
    """repeat-<r>/np-<N> folders (real throughput.json files) become one point per count with its repeats in run
    order; a folder holding both forms is refused."""
    folder = tmp_path / "rr-20240501T120000Z"
    for r in (1, 2, 10):
        shutil.copytree(CPU_SWEEP, folder / ("repeat-%d" % r))
    sweep, _ = batch.collect(folder, tmp_path / "out")
    single, _ = batch.collect(CPU_SWEEP, tmp_path / "one", label="one")
    for point, one in zip(sweep.points, single.points):
        assert point.repeats == [one.images_per_sec] * 3 and point.images_per_sec == one.images_per_sec
        assert point.step_times_s == one.step_times_s * 3
    shutil.copytree(CPU_SWEEP / "np-1", folder / "np-1")
    with pytest.raises(ChexstackError, match="holds both np-<N>/ and repeat-<r>/np-<N>/"):
        batch.collect(folder, tmp_path / "out")


def test_scheduled_sweeps_need_a_stack_and_an_even_layout(tmp_path):
    target = batch.BatchTarget(image="x", per_node=4, gpus=True, results="/r")
    with pytest.raises(ChexstackError, match="give --stack"):
        batch.render_slurm(_req(stack=None), target, tmp_path)
    with pytest.raises(ChexstackError, match="5 ranks cannot be spread evenly"):
        batch.render_slurm(_req(counts=(5,)), target, tmp_path)


def test_collect_a_result_folder(tmp_path):
    """np-1 and np-2 are real throughput.json files of the trainer (2 CPU ranks, this machine)."""
    folder = tmp_path / "cpu-batch-20240501T120000Z"
    shutil.copytree(CPU_SWEEP, folder)
    (folder / "hosts.txt").write_text("node01\nnode02\n")
    (folder / "record.json").write_text(RunRecord(time=NOW.isoformat(), stack="cpu", launcher="slurm",
                                                  model="resnet50").model_dump_json())
    sweep, path = batch.collect(folder, tmp_path / "out")
    assert path.name == "cpu-batch-20240501T120000Z.json" and load_sweep(path) == sweep
    assert sweep.label == "cpu-batch" and [p.count for p in sweep.points] == [1, 2]
    assert sweep.record.hosts == ["node01", "node02"] and sweep.record.count_unit == "CPU ranks"
    assert sweep.record.versions["tensorflow"] == "2.15.1"
    (folder / "nvidia-smi.csv").write_text("NVIDIA H200, 570.211.01\n")
    sweep, _ = batch.collect(folder, tmp_path / "out", label="again")
    # GPUs listed on the nodes, but the trainer reports CPU: the record trusts the trainer and says so
    assert sweep.record.device == "cpu" and sweep.record.gpu_model == "NVIDIA H200"
    assert "the trainer ran on CPU" in sweep.record.notes[-1]
    with pytest.raises(ChexstackError, match="no np-<N>/throughput.json"):
        batch.collect(tmp_path / "out", tmp_path / "x")


def test_collect_checks_its_output_folder_first(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ChexstackError, match="--output .*/file/out: cannot create the folder"):
        batch.collect(CPU_SWEEP, blocker / "out")


def test_scheduled_sweeps_take_the_clusters_data_path_as_given():
    """The data folder is the cluster's: absolute, not looked for here, mounted and passed unchanged."""
    with pytest.raises(ChexstackError, match="--launcher slurm: --data cxr is a path relative to this machine"):
        _req(data="cxr").check()
    target = batch.BatchTarget(image="registry.example.com/chexstack/cpu:1", per_node=4, gpus=True,
                               results="bench-results")
    text = batch.render_k8s(_req(launcher="k8s", counts=(1,), data="/nfs/cxr"), target, now=NOW)
    assert "path: /nfs/cxr" in text and "- /nfs/cxr" in text
