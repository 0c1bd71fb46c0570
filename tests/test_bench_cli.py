"""The real commands: `invoke bench` on CPU ranks (horovodrun, TensorFlow, Horovod), `invoke bench-report`,
and `invoke train --launcher slurm|k8s --render|--submit`."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from bench.results import REFERENCE_DIR, load_sweep
from chexstack.errors import ChexstackError
from images.sif import KEY_ENV, signing_key
from launch import attest
from tests.lib import cli as cmd
from tests.lib.cli import INVOKE
from tests.lib.k8s import validate_mpijob
from tests.lib.paths import REPO
from tests.lib.readonly import run_with_read_only
from tests.lib.runs import FAST_MODEL

SMALL = [*FAST_MODEL, "--batch-size", "4", "--image-size", "64", "--steps", "5", "--warmup-steps", "2"]


@pytest.mark.slow
def test_cpu_sweep_then_figure(tmp_path, monkeypatch):
    """`invoke bench --np 1,2 --data synthetic` (CPU ranks, as train --gpus 0 --np N) writes one JSON; bench-report
    draws it next to the seed's bare-metal series."""
    key = tmp_path / "keys" / "site.pem"  # the signing key of the statements (not build/keys of the checkout)
    monkeypatch.setattr("images.sif.DEFAULT_KEY", key)
    signing_key()
    run = cmd.invoke("bench", "--np", "1,2", "--data", "synthetic", "--label", "cpu-test", "--output", str(tmp_path),
                     *SMALL, timeout=900, env={KEY_ENV: str(key)})
    assert run.returncode == 0, run.stdout + run.stderr
    [result] = tmp_path.glob("cpu-test-*.json")
    # each count's run and the sweep leave a signed statement that verifies; as-run facts, no drift
    assert load_sweep(result).record.drift == []
    for count in (1, 2):
        folder = REPO / "runs" / "bench" / result.stem / ("np-%d" % count)
        assert len(json.loads((folder / "throughput.json").read_text())["as_run"]) == count
        verified = cmd.run("verify-run", str(folder), env={KEY_ENV: str(key)})
        assert verified.returncode == 0 and "verified: " in verified.stdout, verified.stdout + verified.stderr
    verified = cmd.run("verify-run", str(attest.sweep_statement_path(result)), env={KEY_ENV: str(key)})
    assert verified.returncode == 0, verified.stdout + verified.stderr
    sweep = load_sweep(result)
    assert [p.count for p in sweep.points] == [1, 2]
    assert sweep.record.count_unit == "CPU ranks" and sweep.record.device == "cpu"
    assert sweep.record.launcher == "local" and sweep.record.git_revision
    assert sweep.points[0].scaling_efficiency == 1.0 and 0 < sweep.points[1].scaling_efficiency < 1.5
    assert all(len(p.step_times_s) == 5 for p in sweep.points)
    raw = json.loads(result.read_text())
    assert raw["schema"] == "chexstack.bench.sweep/1"

    png = tmp_path / "fig" / "figure1.png"
    report = cmd.invoke("bench-report", "%s,%s" % (REFERENCE_DIR / "seed-densenet121-baremetal.json", result),
                        "--output", str(png))
    assert report.returncode == 0, report.stdout + report.stderr
    assert png.read_bytes()[:4] == b"\x89PNG" and png.with_suffix(".csv").is_file()
    assert "cpu-test" in png.with_suffix(".md").read_text() and "not comparable" in report.stdout


def test_counts_beyond_the_slots_stop_before_running():
    cores = len(os.sched_getaffinity(0))
    run = cmd.run("bench", "--np", "1,2,%d" % (cores + 1), "--data", "synthetic")
    assert run.returncode == 2
    assert "exceed the" in run.stderr and "slot(s) of this host" in run.stderr and "Traceback" not in run.stderr
    alone = cmd.run("bench", "--np", str(cores + 1), "--data", "synthetic")
    assert alone.returncode == 2 and "counts up to %d fit: run --np %s" % (
        cores, ",".join(map(str, sorted({n for n in (1, 2, 3, 4, 8) if n <= cores} | {cores})))) in alone.stderr


def test_check_slots_names_the_counts_that_fit():
    from bench.sweep import check_slots

    check_slots((1, 2), 2, "here")
    with pytest.raises(ChexstackError, match="count.s. 3 exceed the 2 slot.s. of here; counts up to 2 fit: run "
                                             "--gpus 1,2, or add hosts"):
        check_slots((3,), 2, "here")
    with pytest.raises(ChexstackError, match="count.s. 8,16 exceed the 6 slot.s. of h; counts up to 6 fit: run "
                                             "--gpus 1,2,3,4,6,"):
        check_slots((8, 16), 6, "h")
    with pytest.raises(ChexstackError, match="count.s. 8 exceed .* run --gpus 1,4,"):
        check_slots((1, 4, 8), 4, "h")


CLUSTER_OUT = ["--output", "/shared/chexstack/runs/r1"]


def test_train_renders_an_mpijob_and_submit_needs_kubectl(tmp_path):
    pinned = "registry.example.com/chexstack/cpu@sha256:" + "1" * 64  # by digest: nothing to resolve
    run = cmd.run("train", "--launcher", "k8s", "--stack", "cpu", "--np", "4", "--per-node", "2", "--data",
                  "synthetic", "--rdma", "rdma/hca_shared_devices_a", "--image", pinned, *CLUSTER_OUT, "--render")
    assert run.returncode == 0, run.stderr
    job = yaml.safe_load(run.stdout)
    validate_mpijob(job)
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2 and job["spec"]["slotsPerWorker"] == 2
    assert run.stderr == "" and not run.stdout.startswith("# warning")
    volumes = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"]
    assert {"path": "/shared/chexstack/runs/r1", "type": "Directory"} in [v.get("hostPath") for v in volumes]
    submit = cmd.run("train", "--launcher", "k8s", "--stack", "cpu", "--data", "synthetic", *CLUSTER_OUT, "--submit",
                     env={"PATH": str(tmp_path)})
    assert submit.returncode == 2 and "kubectl not found on PATH" in submit.stderr


def test_train_renders_a_slurm_script_and_submit_needs_sbatch(tmp_path):
    run = cmd.run("train", "--launcher", "slurm", "--stack", "cpu", "--np", "2", "--data", "synthetic", *CLUSTER_OUT,
                  "--render")
    assert run.returncode == 0, run.stderr
    assert subprocess.run(["bash", "-n"], input=run.stdout, text=True).returncode == 0
    assert "srun --mpi=pmix --container-image=chexstack/cpu:" in run.stdout
    submit = cmd.run("train", "--launcher", "slurm", "--stack", "cpu", "--data", "synthetic", *CLUSTER_OUT, "--submit",
                     env={"PATH": str(tmp_path)})
    assert submit.returncode == 2 and "sbatch not found on PATH" in submit.stderr
    neither = cmd.run("train", "--launcher", "slurm", "--stack", "cpu", "--data", "synthetic")
    assert neither.returncode == 2 and "--render" in neither.stderr


@pytest.mark.parametrize("launcher", ["k8s", "slurm"])
def test_cluster_launches_use_the_clusters_paths_never_this_machines(launcher):
    """Review finding 11: without --output the MPIJob mounted this machine's runs/train as a hostPath."""
    base = ["train", "--launcher", launcher, "--stack", "cpu", "--render"]
    no_output = cmd.run(*base, "--data", "synthetic")
    assert no_output.returncode == 2 and ("error: --launcher %s: --output runs/train is a path relative to this "
                                          "machine" % launcher) in no_output.stderr
    relative_data = cmd.run(*base, "--data", "data/cxr", *CLUSTER_OUT)
    assert relative_data.returncode == 2
    assert "--data data/cxr is a path relative to this machine" in relative_data.stderr
    both = cmd.run(*base, "--data", "data/cxr")  # every offender in one refusal, not one per attempt
    assert both.returncode == 2 and ("--launcher %s: --output runs/train, --data data/cxr are paths relative to this "
                                     "machine" % launcher) in both.stderr
    local_tag = cmd.run(*base, "--data", "/shared/cxr", *CLUSTER_OUT)
    assert local_tag.returncode == 0, local_tag.stdout + local_tag.stderr
    warning = " ".join(local_tag.stderr.split())
    assert warning.startswith("warning: image chexstack/cpu:") and "the cluster's nodes cannot pull it" in warning
    assert "pass --image REGISTRY/chexstack/cpu:" in warning
    assert local_tag.stdout.startswith("# warning: image chexstack/cpu:") == (launcher == "k8s")
    assert "/work" not in local_tag.stdout and str(REPO) not in local_tag.stdout


def test_hybrid_needs_a_sif_and_scheduled_sweeps_their_results_folder():
    hybrid = cmd.run("train", "--launcher", "slurm", "--hybrid", "--stack", "cpu", "--data", "synthetic", *CLUSTER_OUT,
                     "--render")
    assert hybrid.returncode == 2 and "--hybrid runs `singularity exec` on a SIF: give --image" in hybrid.stderr
    # the whole path (job_spec, then the renderer): Open MPI's single copy off exported once, beside run-as-root
    sif = cmd.run("train", "--launcher", "slurm", "--hybrid", "--stack", "cpu", "--data", "synthetic", *CLUSTER_OUT,
                  "--image", "/shared/images/chexstack-cpu.sif", "--render")
    assert sif.returncode == 0, sif.stdout + sif.stderr
    assert sif.stdout.count("export OMPI_MCA_btl_vader_single_copy_mechanism=none") == 1, sif.stdout
    assert "export OMPI_ALLOW_RUN_AS_ROOT=1" in sif.stdout
    sweep = ["bench", "--launcher", "slurm", "--stack", "cpu", "--np", "1,2", "--render"]
    assert "give --results DIR" in cmd.run(*sweep).stderr
    assert "--results bench is a path relative to this machine" in cmd.run(*sweep, "--results", "bench").stderr
    ok = cmd.run(*sweep, "--results", "/shared/bench", "--data", "/shared/cxr")
    assert ok.returncode == 0 and "mkdir -p -- /shared/bench/cpu-slurm-" in ok.stdout
    assert "--container-mounts=/shared/bench/cpu-slurm-" in ok.stdout and "/shared/cxr:/shared/cxr:ro" in ok.stdout
    assert "cannot pull it" in ok.stderr


def test_gpu_check_script_is_clean_and_dry_runs():
    script = REPO / "bench" / "gpu_check.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    dry = subprocess.run([str(script), "--dry-run"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    commands = [line for line in dry.stdout.splitlines() if line.startswith("+ ")]
    bench = [c for c in commands if " bench --gpus 1 --model resnet50 --data synthetic" in c]
    assert len(bench) == 2 and bench[1].endswith("--amp") and "tensorflow\\[and-cuda\\]==2.15.1" in dry.stdout
    assert "HOROVOD_GPU_OPERATIONS=NCCL" in dry.stdout and "bench-report" in commands[-1]
    if subprocess.run(["sh", "-c", "nvidia-smi -L"], capture_output=True).returncode != 0:
        real = subprocess.run([str(script)], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert real.returncode == 2 and "an NVIDIA GPU and driver" in real.stderr and "nothing was run" in real.stderr


def test_unwritable_output_stops_before_the_sweep(tmp_path):
    """Review finding 4: a read-only --output failed after the whole sweep; now nothing runs."""
    read_only = tmp_path / "ro"
    read_only.mkdir()
    run = run_with_read_only(read_only, [INVOKE, "bench", "--np", "1", "--data", "synthetic", "--output",
                                         str(read_only), *SMALL], timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stdout + run.stderr
    assert run.stderr.strip() == "error: --output %s: cannot write in %s (Read-only file system)" % (read_only,
                                                                                                      read_only)


@pytest.mark.slow
def test_a_sweep_whose_output_turns_read_only_is_kept_in_its_run_folder(tmp_path):
    """The folder becomes read-only while the count runs: the sweep JSON goes to runs/bench/<tag>/ and says so."""
    out = tmp_path / "out"
    out.mkdir()
    label = "ro-%d" % os.getpid()
    runs = REPO / "runs" / "bench"
    script = ("mount --bind {o} {o} && ({invoke} bench --np 1 --data synthetic --label {label} --output {o} {small}"
              " & pid=$!; while ! ls {runs}/{label}-*/np-1/launch.log >/dev/null 2>&1; do sleep 0.2; done; "
              "mount -o remount,bind,ro {o}; wait $pid)").format(o=out, invoke=INVOKE, label=label, runs=runs,
                                                                  small=" ".join(SMALL))
    unshare = shutil.which("unshare")
    if not unshare or subprocess.run([unshare, "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot create a mount namespace here (unshare -m)")
    run = subprocess.run([unshare, "-m", "sh", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "COLUMNS": "200"})
    try:
        assert run.returncode == 0, run.stdout + run.stderr
        [kept] = runs.glob("%s-*/%s-*.json" % (label, label))
        assert "warning: cannot write %s/" % out in run.stderr and "the sweep went to %s" % kept in run.stderr
        assert [p.count for p in load_sweep(kept).points] == [1] and list(out.iterdir()) == []
    finally:
        for folder in runs.glob("%s-*" % label):
            shutil.rmtree(folder)


def test_bench_report_names_the_figure_formats_and_what_is_not_a_sweep(tmp_path):
    seed = str(REFERENCE_DIR / "seed-densenet121-baremetal.json")
    run = cmd.run("bench-report", seed, "--output", str(tmp_path / "x.txt"))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "expected a figure file name ending in one of" in run.stderr and ".png" in run.stderr
    assert ".svg" in run.stderr and not list(tmp_path.iterdir())
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"run": {}, "epochs": []}))
    run = cmd.run("bench-report", str(metrics), "--output", str(tmp_path / "f.png"))
    assert run.returncode == 2
    assert ("%s is not a chexstack.bench.sweep/1 result (no 'schema', 'label' or 'points')" % metrics
            in " ".join(run.stderr.split()))
    svg = cmd.run("bench-report", seed, "--output", str(tmp_path / "fig" / "f.svg"))
    assert svg.returncode == 0, svg.stdout + svg.stderr
    assert (tmp_path / "fig" / "f.svg").read_text().startswith("<?xml") and (tmp_path / "fig" / "f.csv").is_file()


def test_bench_gpus_means_what_train_gpus_means():
    """``--gpus N`` is N GPUs (one rank each), refused where there are none, as ``invoke train --gpus N``; CPU
    ranks are ``--np``. A CPU stack on a cluster takes ``--np`` too."""
    from bench.results import RunRecord
    from bench.sweep import SweepRequest, available_slots

    no_gpu = RunRecord(gpu_count=0)  # what host_record finds on a host without GPUs
    with pytest.raises(ChexstackError, match="--gpus 1,2: this host has no GPU .* --np 1,2"):
        available_slots(SweepRequest(counts=(1, 2), label="x"), no_gpu)
    assert available_slots(SweepRequest(counts=(1, 2), label="x", gpus=False), no_gpu)[0] >= 1
    assert available_slots(SweepRequest(counts=(1, 2), label="x"), RunRecord(gpu_count=8))[0] == 8
    both = cmd.run("bench", "--gpus", "1", "--np", "1")
    assert both.returncode == 2 and "give one" in both.stderr
    cpu_stack = cmd.run("bench", "--launcher", "slurm", "--stack", "cpu", "--gpus", "1,2", "--results", "/shared/b",
                        "--render")
    assert cpu_stack.returncode == 2 and "stack cpu has no GPU build; sweep CPU ranks with --np 1,2" in cpu_stack.stderr
    bad = cmd.run("bench", "--np", "0,x")
    assert bad.returncode == 2 and "--np '0,x': expected counts >= 1" in bad.stderr


def test_bench_help_names_the_input_capacity_record():
    """README and docs/benchmarks.md say a GPU sweep records ``input_capacity``; ``invoke bench --help`` says so
    too, by the record's field name (``bench.results.RunRecord``) and the validate check that prints the same line."""
    from bench.results import RunRecord
    assert "input_capacity" in RunRecord.model_fields
    out = cmd.run("bench", "--help")
    assert out.returncode == 0, out.stderr
    docstring = " ".join(out.stdout.split("Options:")[0].split())
    assert "A GPU sweep run here also records input_capacity: can this node's cores decode PNGs as fast as the " \
           "largest count trains (the line of invoke validate --only input.capacity" in docstring


def test_a_gpu_sweep_records_its_input_capacity_against_its_own_one_gpu_rate():
    """The decode rate of this node's cores (the real program on the sample's 1024² PNGs) against the sweep's
    largest count at its own 1-GPU rate; without a 1-GPU point the published rate of the kind; a CPU sweep none."""
    from bench.results import Point, RunRecord
    from bench.sweep import input_capacity
    from chexstack import tools

    def short(argv, timeout):
        argv = list(argv)
        argv[argv.index("--seconds") + 1] = "0.5"
        return tools.run(argv, timeout=timeout)

    record = RunRecord(device="gpu", gpu_model="Tesla V100-SXM2-16GB", image_size=224)
    points = [Point(count=1, images_per_sec=1e6), Point(count=8, images_per_sec=7e6)]
    got = input_capacity(record, points, short)
    assert got["gpus"] == 8 and got["per_gpu"] == 1e6 and got["per_gpu_source"] == "measured here, 1 GPU"
    assert not got["ok"] and got["fed"] == 0 and got["decode"]["pixels"] == 1024 * 1024
    assert got["line"].startswith("8 × Tesla V100-SXM2-16GB need ~8,000,000 img/s at 224²")
    assert got["line"].endswith("input-bound beyond 0 GPUs; `invoke prepare`")
    published = input_capacity(record, points[1:], short)
    assert published["per_gpu"] == 412 and "DeepLearningExamples" in published["per_gpu_source"]
    assert input_capacity(RunRecord(device="cpu"), points, short) is None


def test_an_empty_np_or_gpus_list_is_refused_naming_the_option():
    """``--np ''`` is given, not unset: refused naming --np (never the default GPU counts' --gpus)."""
    p = cmd.run("bench", "--np", "", "--data", "synthetic", expect=2)
    assert "--np '': expected counts >= 1" in p.stderr and "--gpus" not in p.stderr, p.stderr
    p = cmd.run("bench", "--gpus", "", "--data", "synthetic", expect=2)
    assert "--gpus '': expected counts >= 1" in p.stderr, p.stderr
