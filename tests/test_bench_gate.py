"""The comparability guard (stack versions, data, hosts, …; `bench-report --strict`; the seed's own Table 1
comparison fails it) and the regression gate (`bench-report --baseline FILE RESULTS`: pass, drop, refusal)."""
from __future__ import annotations

import pytest

from bench import figure, gate, guard
from bench.results import REFERENCE_DIR, Point, RunRecord, Sweep, load_sweep, save_sweep
from envs.manifest import load_stack
from tests.lib import cli as cmd

SEED = REFERENCE_DIR / "seed-densenet121-baremetal.json"
BASE = [102.0, 100.0, 104.0, 101.0, 103.0]  # 5 repeats: the baseline's 95 % interval is [100, 104] (test_bench_stats)
RECORD = dict(model="densenet121", count_unit="GPUs", image_size=224, batch_size_per_rank=32, amp=False,
              data="synthetic", hosts=["chex1:1", "chex2:1"], versions={"horovod": "0.28.1", "python": "3.11.7"})


def _versions(stack: str) -> dict[str, str]:
    """What a stack's manifest (envs/stacks/<stack>.yaml) says it ships, as a record's versions."""
    c = load_stack(stack).components
    return {"tensorflow": c["tensorflow"].version, "horovod": c["horovod"].version, "openmpi": c["mpi"].version,
            "python": c["python"].version}


def _sweep(label: str, points: dict[int, list[float]], **record) -> Sweep:
    return Sweep(label=label, record=RunRecord(**dict(RECORD, **record)),
                 points=[Point(count=n, repeats=v) if len(v) > 1 else Point(count=n, images_per_sec=v[0])
                         for n, v in points.items()])


def _file(tmp_path, sweep: Sweep) -> str:
    return str(save_sweep(sweep, tmp_path / ("%s.json" % sweep.label)))


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_seed_reference_carries_table_1s_conda_versions():
    """The reference JSON's versions are the conda manifest's (Table 1's conda column), and its notes say so."""
    seed = load_sweep(SEED)
    assert seed.record.versions == _versions("conda")
    assert any("envs/stacks/conda.yaml" in n for n in seed.record.notes)


def test_the_seeds_own_comparison_fails_the_guard():
    """NGC 19.06 (its release notes: Horovod 0.16.2, Open MPI 3.1.3; Table 1 printed 0.15.1) vs the conda column
    (Horovod 0.16.1, Open MPI 4.0.0): not comparable, and the caption says the seed's comparison fails."""
    seed = load_sweep(SEED)
    ngc = Sweep(label="seed: NGC on Kubernetes", record=seed.record.model_copy(update={
        "stack": "ngc", "versions": _versions("ngc"), "notes": []}),
        points=[Point(count=n, images_per_sec=seed.point(n).images_per_sec * 0.92) for n in (1, 2, 4, 8)])
    found = guard.differences(ngc, seed)
    assert found == ("Horovod 0.16.2 vs 0.16.1", "Open MPI 3.1.3 vs 4.0.0", "TensorFlow 1.13.1 vs 1.12.0",
                     "Python 3.5 vs 3.6.8")
    cmp = figure.compare([seed, ngc])
    assert cmp.cells[(ngc.label, 8)].diff is None
    note = ("the seed study's own comparison (Table 1: NGC container 19.06-py3 vs conda environment) fails this "
            "guard")
    assert cmp.notes == (note,) and note in figure.markdown_text(cmp)


@pytest.mark.parametrize("update, named", [
    ({"data": "/shared/data/chestxray14"}, "data /shared/data/chestxray14 vs synthetic"),
    ({"hosts": ["chex1:1", "chex3:1"]}, "hosts chex1,chex3 vs chex1,chex2"),
    ({"versions": {"horovod": "0.28.0", "python": "3.11.7"}}, "Horovod 0.28.0 vs 0.28.1"),
    ({"versions": {"horovod": "0.28.1", "python": "3.11.7", "mpi": "MPICH 4.1"}}, None),  # the other lacks it
    ({"hosts": ["chex1:4", "chex2"]}, None),  # slots are not the host set
    ({"versions": {"horovod": "0.28.1", "python": "3.11.7", "openmpi": "4.1.4"}}, None),  # the other lacks it
    ({"label_sha256": "c0ffee" * 10}, None),  # a record from before the trainer hashed its data: not compared
])
def test_the_guard_compares_data_hosts_and_versions(update, named):
    base, run = _sweep("a", {1: [100.0]}), _sweep("b", {1: [90.0]}, **update)
    assert guard.differences(run, base) == ((named,) if named else ())


def test_strict_refuses_a_comparison_naming_both_files_and_each_difference(tmp_path):
    base = _file(tmp_path, _sweep("base", {1: BASE}))
    other = _file(tmp_path, _sweep("other", {1: BASE}, hosts=["vm:2"], data="/d"))
    same = _file(tmp_path, _sweep("same", {1: [98.0, 99.0, 97.0]}))
    plain = cmd.run("bench-report", "%s,%s,%s" % (base, other, same), "--output", str(tmp_path / "f.png"))
    assert plain.returncode == 0, plain.stderr
    out = _words(plain.stdout)
    assert "note: not compared with base: other: data /d vs synthetic; hosts vm vs chex1,chex2" in out
    strict = cmd.run("bench-report", "%s,%s,%s" % (base, other, same), "--output", str(tmp_path / "g.png"),
                     "--strict")
    assert strict.returncode == 2 and "Traceback" not in strict.stderr and not (tmp_path / "g.png").exists()
    assert _words(strict.stderr) == (
        "error: bench-report --strict: not comparable, they differ in more than the system: %s (other) vs %s (base): "
        "data /d vs synthetic; hosts vm vs chex1,chex2" % (other, base))
    ok = cmd.run("bench-report", "%s,%s" % (base, same), "--output", str(tmp_path / "h.png"), "--strict")
    assert ok.returncode == 0, ok.stderr


def test_strict_refuses_a_drifted_run_even_when_nothing_else_differs(tmp_path):
    """A sweep whose ranks disagreed (launch.drift, carried into the record per count) is refused by --strict,
    named with its drift, whichever side of the comparison it is on; without --strict it is drawn."""
    base = _file(tmp_path, _sweep("base", {1: BASE}))
    line = "2 ranks: ranks disagree on horovod: rank 0 0.28.1, rank 1 0.28.0"
    drifted = _file(tmp_path, _sweep("drifted", {1: [98.0, 99.0, 97.0]}, drift=[line]))
    for files in ((base, drifted), (drifted, base)):
        strict = cmd.run("bench-report", "%s,%s" % files, "--output", str(tmp_path / "g.png"), "--strict")
        assert strict.returncode == 2 and not (tmp_path / "g.png").exists()
        assert _words(strict.stderr) == (
            "error: bench-report --strict: not comparable, they differ in more than the system or drifted: "
            "%s (drifted): its environment drifted at run time: %s" % (drifted, line))
    assert cmd.run("bench-report", "%s,%s" % (base, drifted), "--output", str(tmp_path / "h.png")).returncode == 0


def test_the_gate_passes_within_the_baselines_interval(tmp_path):
    """5 repeats: the floor is the interval's lower bound, 100 images/s; a median of 100 (2 % below 102) passes."""
    base = _file(tmp_path, _sweep("base", {1: BASE, 2: [190.0, 196.0, 188.0, 194.0, 192.0]}))
    run = _file(tmp_path, _sweep("run", {1: [99.0, 100.0, 101.0], 2: [189.0, 190.0, 191.0]}))
    ran = cmd.run("bench-report", "--baseline", base, run)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "no point below the baseline %s" % base in _words(ran.stdout)


def test_the_gate_names_a_drop(tmp_path):
    """Count 2: median 180 against the baseline's 192 [188, 196]: below 188, a drop of 100 (192 - 180) / 192 =
    6.25 %; count 1 passes."""
    base = _file(tmp_path, _sweep("base", {1: BASE, 2: [190.0, 196.0, 188.0, 194.0, 192.0]}))
    run = _file(tmp_path, _sweep("run", {1: [101.0, 102.0, 103.0], 2: [179.0, 180.0, 181.0]}))
    ran = cmd.run("bench-report", "--baseline", base, run)
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert _words(ran.stderr) == (
        "error: bench-report --baseline %s: below the baseline: %s: 2 GPUs: 180.0 images/s vs baseline 192.0, 6.2 %% "
        "drop (below the baseline's 95 %% interval [188.0, 196.0])" % (base, run))
    assert "FAIL" in ran.stdout and "pass" in ran.stdout


def test_without_an_interval_the_gate_uses_the_tolerance(tmp_path):
    """One baseline reading of 100: the floor is 100 (1 - 5 %) = 95 by default; 96 passes, 94 fails; with
    --tolerance 3 the floor is 97 and 96 fails (a 4 % drop)."""
    base = _file(tmp_path, _sweep("base", {1: [100.0]}))
    ok, slow = _file(tmp_path, _sweep("ok", {1: [96.0]})), _file(tmp_path, _sweep("slow", {1: [94.0]}))
    assert cmd.run("bench-report", "--baseline", base, ok).returncode == 0
    failed = cmd.run("bench-report", "--baseline", base, slow)
    assert failed.returncode == 1
    assert ("1 GPUs: 94.0 images/s vs baseline 100.0, 6.0 % drop (below 5 % below the baseline's median (no "
            "interval: 1 repeat(s)))") in _words(failed.stderr)
    tight = cmd.run("bench-report", "--baseline", base, ok, "--tolerance", "3")
    assert tight.returncode == 1 and "96.0 images/s vs baseline 100.0, 4.0 % drop" in _words(tight.stderr)
    assert [v.floor for v in gate.judge(load_sweep(ok), load_sweep(base), 3.0)] == [97.0]


def test_the_gate_refuses_another_stack_or_host_set(tmp_path):
    """A result from other hosts and another Horovod is not judged (exit 2), however fast or slow it is."""
    base = _file(tmp_path, _sweep("base", {1: BASE}))
    moved = _file(tmp_path, _sweep("moved", {1: [50.0]}, hosts=["chex3:1", "chex4:1"],
                                   versions={"horovod": "0.28.0", "python": "3.11.7"}))
    ran = cmd.run("bench-report", "--baseline", base, moved)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert _words(ran.stderr) == (
        "error: bench-report --baseline %s: not comparable, they differ in more than the system: %s (moved) vs %s "
        "(base): Horovod 0.28.0 vs 0.28.1; hosts chex3,chex4 vs chex1,chex2" % (base, moved, base))
    other_counts = _file(tmp_path, _sweep("eight", {8: [800.0]}))
    none = cmd.run("bench-report", "--baseline", base, other_counts)
    assert none.returncode == 2 and "has no count the baseline has (result 8, baseline 1)" in _words(none.stderr)


#: The data's identity as the trainer records it (throughput.json: label_sha256, splits.train.sha256) and the MPI
#: library its ranks mapped (trainer.mpilib: MPI_Get_library_version).
HASHED = dict(label_sha256="a" * 64, train_split_sha256="b" * 64,
              versions={"horovod": "0.28.1", "python": "3.11.7", "openmpi": "4.1.4"})


@pytest.mark.parametrize("update, named", [
    ({"label_sha256": "c" * 64}, "label file SHA-256 cccccccccccc vs aaaaaaaaaaaa"),
    ({"train_split_sha256": "d" * 64}, "training split dddddddddddd vs bbbbbbbbbbbb"),
    ({"versions": {"horovod": "0.28.1", "python": "3.11.7", "openmpi": "4.0.3"}}, "Open MPI 4.0.3 vs 4.1.4"),
    ({}, None),
])
def test_the_guard_compares_the_data_hashes_and_the_mpi_the_trainer_recorded(update, named):
    base, run = _sweep("a", {1: [100.0]}, **HASHED), _sweep("b", {1: [90.0]}, **dict(HASHED, **update))
    assert guard.differences(run, base) == ((named,) if named else ())


def test_a_sweep_takes_the_data_hashes_and_mpi_from_the_trainers_record():
    """bench.results.with_reading: what throughput.json says fills the record (MPI version, the data's hashes)."""
    from bench.results import point_from_throughput, with_reading

    data = {"world_size": 1, "warmup_steps": 1, "step_times_s": [3.0, 0.5, 0.5], "device": "CPU",
            "images_per_sec": {"total": 64.0, "per_rank": [64.0]}, "label_sha256": "a" * 64,
            "splits": {"train": {"images": 197, "patients": 60, "sha256": "b" * 64}},
            "versions": {"horovod": "0.28.1", "python": "3.11.7", "openmpi": "4.1.4"}}
    record = with_reading(RunRecord(data="/d"), point_from_throughput(1, data, "throughput.json"))
    assert (record.label_sha256, record.train_split_sha256, record.versions["openmpi"]) == ("a" * 64, "b" * 64,
                                                                                          "4.1.4")


def test_a_gap_between_network_paths_is_never_called_container_overhead(tmp_path):
    """Issue 41: the network path is a factor of its own. The MPIJob on its nodes' network vs bare metal is the
    system's effect; the MPIJob on the overlay vs bare metal is both effects, never container overhead; the MPIJob
    on the overlay vs on host network is the path's. The figure keeps them apart in its caption, and --strict
    refuses a comparison across paths, saying what its gap would be."""
    base = _sweep("baremetal:host", {1: BASE}, launcher="slurm", image="/venv/bin/python", network_path="host")
    host = _sweep("mpijob:host", {1: [95.0, 96.0, 94.0]}, launcher="k8s", image="cpu", network_path="host")
    overlay = _sweep("mpijob:overlay", {1: [85.0, 86.0, 84.0]}, launcher="k8s", image="cpu", network_path="overlay")
    assert guard.effect(host, base) == "the system's effect (container overhead)"
    assert guard.effect(overlay, base) == ("the system's and the network path's effects together, not container "
                                           "overhead")
    assert guard.effect(overlay, host) == "the network path's effect"
    assert guard.path_difference(overlay, base) == "network path overlay vs host"
    assert guard.differences(overlay, base) == ()  # shown side by side, with their % difference
    cmp = figure.compare([base, host, overlay])
    assert cmp.cells[("mpijob:overlay", 1)].diff is not None
    note = ("mpijob:overlay vs baremetal:host: network path overlay vs host: the gap is the system's and the network "
            "path's effects together, not container overhead; mpijob:host vs baremetal:host is the system's, "
            "mpijob:overlay vs mpijob:host the path's")
    assert cmp.notes == (note,) and note in _words(figure.markdown_text(cmp))
    assert figure.compare([base, host]).notes == ()  # one path: nothing to keep apart

    files = [_file(tmp_path, s) for s in (base, overlay)]
    strict = cmd.run("bench-report", ",".join(files), "--output", str(tmp_path / "g.png"), "--strict")
    assert strict.returncode == 2 and not (tmp_path / "g.png").exists()
    assert _words(strict.stderr) == (
        "error: bench-report --strict: not comparable, they differ in more than the system: %s (mpijob:overlay) vs "
        "%s (baremetal:host): network path overlay vs host (the gap would be the system's and the network path's "
        "effects together, not container overhead)" % (files[1], files[0]))
