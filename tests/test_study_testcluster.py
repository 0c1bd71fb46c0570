"""Issue 23: ``invoke study`` on the test cluster, the CI's short version of the seed study: bare metal (Slurm, this
.venv), the HPC container (Slurm's hybrid model around the signed cpu SIF) and Kubernetes' way (the cpu image's
MPIJob as pods, once on the flannel-style VXLAN overlay and once on the hosts' network: issue 41's network path as a
factor of its own) at 1 and 2 CPU ranks, one rank per host, 2 paired rounds in the seed's order, on the real
sample (a prepared copy at 32 px, which every system reads as the trainer does), with Horovod's timeline; then
the four-series Figure 1, its tables and the gap. The MPIJob's pods pull the cpu image from the test cluster's
registry by digest (pushed here by chexstack.registry.push, as invoke build --push does) into the pods' engine,
which held no copy before (issue 42 item 4).
The numbers of a few steps on 2 shared cores mean little: the test is of the method (every system on the same hosts
with the same versions and data, the order, the comparison), not of the speed.

Issue 41 part 4, the instrument checked, in one study of paired rounds: the MPIJob against itself with its pods'
links limited (``mpijob+400mbit``, a token bucket on each pod's veth) and with nothing planted (``mpijob+none``, the
same path); the planted one must be found slower, with an interval that holds the slowdown measured directly from
Horovod's timeline (the step plus the exposed allreduce the plant added), and attributed to exposed allreduce; the
unplanted one must be not distinguishable."""
from __future__ import annotations

import csv
import json
import re
import subprocess

import pytest

from bench import guard, study
from bench.results import load_sweep
from bench.study import pod_engine
from tests.lib.cli import INVOKE
from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import FAST_MODEL

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.slow]

SYSTEMS = ("baremetal:host", "apptainer:host", "mpijob:overlay", "mpijob:host")
_RUN_LINE = re.compile(r"^\s+([\w:+]+)\s+round (\d+),\s+(\d+) CPU ranks: ([0-9.]+) images/s", re.M)
SEED = 41


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """The real sample prepared at 32 px (``invoke prepare``), which every system reads as the trainer does."""
    folder = tmp_path_factory.mktemp("study") / "cxr14-32"
    prepare = subprocess.run([INVOKE, "prepare", "--images", str(SAMPLE / "images-64"), "--labels",
                              str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"), "--image-size", "32", "--output",
                              str(folder)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert prepare.returncode == 0, prepare.stdout[-3000:] + prepare.stderr[-3000:]
    return folder


def _pushed(testcluster, built) -> str:
    """The verified cpu image pushed to the cluster's registry under the project's name by the product's own push
    (``chexstack.registry.push``, what ``invoke build --push`` runs): its reference by digest."""
    from chexstack import registry

    target = registry.parse("%s/chexstack/cpu:study" % testcluster.registry)
    return target.pinned(registry.push(built.image_id, target))


def test_three_systems_interleaved_on_both_hosts_then_figure1_with_the_gap(testcluster, client, cpu_build, cpu_sif,
                                                                           prepared, tmp_path):
    results, output = tmp_path / "runs", tmp_path / "figures"
    pinned = _pushed(testcluster, cpu_build)
    pods = pod_engine()
    assert cpu_build.image_id not in [i.id for i in pods.images.list()], "the pods' engine holds no copy before"
    ran = subprocess.run(
        [INVOKE, "study", "--systems", "baremetal,apptainer,mpijob:overlay,mpijob:host", "--np", "1,2",
         "--per-node", "1", "--repeats", "2", "--seed", str(SEED),
         "--hosts", "chex1,chex2", "--stack", "cpu", "--sif", str(cpu_sif.path), "--image", pinned,
         *FAST_MODEL, "--image-size", "32", "--batch-size", "4", "--steps", "3", "--warmup-steps", "1",
         "--data", str(prepared), "--timeline", "--results", str(results), "--output", str(output)],
        cwd=REPO, env=testcluster.env(COLUMNS="200"), capture_output=True, text=True, timeout=1800)
    text = ran.stdout + ran.stderr
    assert ran.returncode == 0, text[-6000:]

    # the order: round by round, every count of a system, the systems in the order the seed drew for the round
    runs = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in _RUN_LINE.finditer(ran.stdout)]
    assert runs == [(s, r, n) for r, s in study.order(SYSTEMS, 2, SEED) for n in (1, 2)], text[-4000:]
    assert "stopped: 2 rounds (--repeats)" in ran.stdout

    # each system's ranks ran where it says: both hosts at 2 ranks (a pod per host for the MPIJob; with hostNetwork
    # the pods have their nodes' names)
    run_root, = results.glob("study-*")
    for system in SYSTEMS:
        two = json.loads((run_root / system.replace(":", "-") / "repeat-1" / "np-2" / "throughput.json").read_text())
        assert two["world_size"] == 2, two
        want = (["bench-study-mpijob-overlay-np2-worker-0", "bench-study-mpijob-overlay-np2-worker-1"]
                if system == "mpijob:overlay" else ["chex1", "chex2"])
        assert two["hosts"] == want, (system, two["hosts"])
        # every system's ranks ran on their host's own CPU (scripts/testcluster: chex1 cpu 0, chex2 cpu 1; the
        # MPIJob's Worker pods get their node's as --cpuset-cpus): real scale-out at 2 ranks, not core sharing
        assert [r["cpus"] for r in two["host_load"]] == [[0], [1]], (system, two["host_load"])

    # one sweep per system, comparable with bare metal: same versions, data, model, sizes and hosts
    folder, = output.glob("study-*")
    sweeps = {s: load_sweep(folder / ("%s.json" % s.replace(":", "-"))) for s in SYSTEMS}
    for system, sweep in sweeps.items():
        assert [p.count for p in sweep.points] == [1, 2] and [len(p.repeats) for p in sweep.points] == [2, 2]
        assert sweep.record.hosts == ["chex1", "chex2"] and sweep.record.count_unit == "CPU ranks"
        assert sweep.record.label_sha256 and sweep.record.train_split_sha256
        assert sweep.record.paired_rounds == "%s seed %d" % (folder.name, SEED)
        assert all(sweep.record.versions.get(k) for k in ("tensorflow", "horovod", "python")), sweep.record.versions
        assert guard.differences(sweep, sweeps["baremetal:host"]) == (), (system, sweep.record.versions,
                                                                          sweeps["baremetal:host"].record.versions)
        assert all(p.step_split is not None for p in sweep.points if p.count == 2), system
        # the path declared, and what the ranks' namespaces showed: VXLAN on the nodes for the overlay only
        assert sweep.record.network_path == system.split(":")[1]
        seen = [o["encapsulation"] for o in sweep.record.network["observed"]]
        assert len(seen) == 2 and all(e.startswith("VXLAN VNI 1, UDP 8472") if system == "mpijob:overlay"
                                      else e == "none" for e in seen), (system, sweep.record.network)
        assert sweep.record.network["transport"].startswith("MPI"), sweep.record.network
    assert sweeps["apptainer:host"].record.image == str(cpu_sif.path)
    assert (sweeps["apptainer:host"].record.image_id == sweeps["mpijob:overlay"].record.image_id
            == sweeps["mpijob:host"].record.image_id == cpu_build.image_id)
    for series in ("mpijob:overlay", "mpijob:host"):
        record = sweeps[series].record
        assert record.image == pinned and pinned in record.image_repo_digests, (series, record.image)
    # the pods' engine pulled the image by digest once, at the first MPIJob; every later pod found it (IfNotPresent)
    events = [line for log in sorted(run_root.glob("mpijob-*/repeat-*/np-*-events.log"))
              for line in log.read_text().splitlines()]
    assert events.count('Pulling image "%s"' % pinned) == 1 and sum(e.startswith("Successfully pulled") for e in
                                                                    events) == 1, events
    assert events.count('Container image "%s" already present on machine' % pinned) == 7, events
    assert cpu_build.image_id in [i.id for i in pods.images.list()]  # pulled by digest: the very image

    # Figure 1 with every system, the % difference of each container system against bare metal, and the gap
    with open(folder / "figure1.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["CPU ranks"]), r["system"]) for r in rows] == [(n, s) for n in (1, 2) for s in SYSTEMS], rows
    assert all(r["vs baremetal:host (%)"] for r in rows if r["system"] != "baremetal:host"), rows  # a difference
    assert all(r["verdict"] == "no interval" for r in rows if r["system"] != "baremetal:host"), rows  # 2 repeats
    assert all(r["design"] == "paired, 2 rounds" for r in rows if r["system"] != "baremetal:host"), rows
    assert (folder / "figure1.png").stat().st_size > 0
    markdown = (folder / "figure1.md").read_text()
    assert "not comparable" not in markdown, markdown
    for system in SYSTEMS:
        assert "%s, 1 → 2 CPU ranks: step" % system in markdown, markdown
    for system in SYSTEMS[1:]:
        assert "%s vs baremetal:host at 2 CPU ranks:" % system in markdown, markdown
    # the overlay's gap is never the container's alone: the caption names the pair that shows each effect
    assert ("mpijob:overlay vs baremetal:host: network path overlay vs host: the gap is the system's and the network "
            "path's effects together, not container overhead; mpijob:host vs baremetal:host is the system's, "
            "mpijob:overlay vs mpijob:host the path's") in " ".join(markdown.split()), markdown
    assert not client.containers.list(all=True, filters={"label": "org.chexstack.pod"})
    assert not pods.containers.list(all=True)  # every pod removed from the pods' engine too

    # the study's statement names every job that ran it: each Slurm repeat's batch job, each count's MPIJob
    from launch import attest

    jobs = attest.payload(json.loads((folder / attest.STATEMENT).read_text()))["predicate"]["jobs"]
    assert sorted((j["scheduler"], j["artifact"]) for j in jobs) == sorted(
        [("slurm-baremetal", "batch script")] * 2 + [("slurm-hybrid", "batch script")] * 2
        + [("k8s-mpijob", "MPIJob")] * 8), jobs
    assert all(len(j["sha256"]) == 64 and j["id"] for j in jobs), jobs
    verified = subprocess.run([INVOKE, "verify-run", str(folder), "--allow-drift"], cwd=REPO, capture_output=True,
                              text=True)
    assert verified.returncode == 0 and "job: k8s-mpijob bench-study-mpijob-overlay-np2" in verified.stdout, (
        verified.stdout + verified.stderr)

#: The planted limit: MobileNet's float32 gradients (about 13 MB) take some 0.26 s a step through it at 2 ranks
#: (13 MB x 2(n-1)/n x 8 / 400 Mbit/s), against tens of ms on the bridge unlimited: a slowdown well above the noise.
PLANTED = "mpijob+400mbit"
#: the series as the study names them: the plant is plugged on the bridge, its only path, and so is its baseline
BASE, PLANTED_SERIES, NOTHING = "mpijob:bridge", "mpijob+400mbit:bridge", "mpijob+none:bridge"


def test_the_study_finds_a_planted_slowdown_and_nothing_where_nothing_is_planted(testcluster, client, cpu_build,
                                                                                 prepared, tmp_path):
    results, output = tmp_path / "runs", tmp_path / "figures"
    ran = subprocess.run(
        [INVOKE, "study", "--systems", "mpijob:bridge,%s,mpijob+none" % PLANTED, "--np", "2", "--per-node", "1",
         "--repeats", "5", "--seed", str(SEED), "--hosts", "chex1,chex2", "--stack", "cpu", "--image",
         cpu_build.image_id, *FAST_MODEL, "--image-size", "32", "--batch-size", "4", "--steps", "8",
         "--warmup-steps", "2", "--data", str(prepared), "--timeline", "--results", str(results), "--output",
         str(output)], cwd=REPO, env=testcluster.env(COLUMNS="200"), capture_output=True, text=True, timeout=1800)
    text = ran.stdout + ran.stderr
    assert ran.returncode == 0, text[-6000:]
    folder, = output.glob("study-*")
    with open(folder / "figure1.csv") as f:
        rows = {r["system"]: r for r in csv.DictReader(f) if r["system"] != BASE}
    assert all(r["design"] == "paired, 5 rounds" for r in rows.values()), rows
    bounds = {s: (float(r["vs %s 95 %% low (%%)" % BASE]), float(r["vs %s 95 %% high (%%)" % BASE]))
              for s, r in rows.items()}
    gap = {line.split(" vs ")[0][2:]: line for line in (folder / "figure1.md").read_text().splitlines()
           if " vs %s at 2 CPU ranks:" % BASE in line}

    # nothing planted: not distinguishable, from the same code path
    assert rows[NOTHING]["verdict"] == "not distinguishable", (rows, text[-3000:])
    assert "not distinguishable" in gap[NOTHING], gap
    # planted: found slower, the interval away from 0 ...
    low, high = bounds[PLANTED_SERIES]
    assert rows[PLANTED_SERIES]["verdict"] == "distinguishable" and high < 0, (rows, text[-3000:])
    # ... holding the slowdown measured directly beside it by another instrument: Horovod's timeline's step of the
    # plain MPIJob against the planted one's (medians over the rounds), as images/s. Not the plain step plus the
    # exposed allreduce alone: with one core per host the ranks' MPI progress spins on that core while the limited
    # link drains, so compute grows too (seen: +133 ms beside +180 ms of exposed allreduce, 2026-12-06)
    plain, planted = (load_sweep(folder / ("%s.json" % s)).point(2).step_split
                      for s in ("mpijob-bridge", "mpijob-400mbit-bridge"))
    direct = 100.0 * (plain.step_s / planted.step_s - 1.0)
    assert low <= direct <= high, (direct, rows[PLANTED_SERIES], gap[PLANTED_SERIES])
    # ... and attributed to exposed allreduce, not compute
    planted_gap = gap[PLANTED_SERIES]
    assert "of which exposed allreduce +" in planted_gap and "(the largest;" in planted_gap, planted_gap
