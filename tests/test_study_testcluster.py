"""Issue 23: ``invoke study`` on the test cluster, the CI's short version of the seed study: bare metal (Slurm,
this .venv), the HPC container (Slurm's hybrid model around the signed cpu SIF) and Kubernetes' way (the cpu
image's MPIJob as pods, each on the bridge) at 1 and 2 CPU ranks, one rank per host, 2 repeats interleaved, on the
real sample (a prepared copy at 32 px, which every system reads as the trainer does), with Horovod's timeline; then
the three-system Figure 1, its tables and the gap. The MPIJob's pods pull the cpu image from the test cluster's
registry by digest (pushed here with skopeo) into the pods' engine, which held no copy before (issue 42 item 4).
The numbers of a few steps on 2 shared cores mean little: the
test is of the method (every system on the same hosts with the same versions and data, the order, the comparison),
not of the speed."""
from __future__ import annotations

import csv
import json
import re
import subprocess

import pytest

from bench import guard
from bench.results import load_sweep
from bench.study import pod_engine
from tests.lib.cli import INVOKE
from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import FAST_MODEL

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.slow]

SYSTEMS = ("baremetal", "apptainer", "mpijob")
_RUN_LINE = re.compile(r"^\s+(\w+)\s+repeat (\d+)/2,\s+(\d+) CPU ranks: ([0-9.]+) images/s", re.M)


def _pushed(testcluster, built, tmp_path) -> str:
    """The verified cpu image copied to the cluster's registry under the project's name (skopeo): its reference by
    digest."""
    digest = tmp_path / "digest"
    copy = subprocess.run(["skopeo", "copy", "-q", "--digestfile", str(digest), "docker-daemon:" + built.ref,
                           "docker://%s/chexstack/cpu:study" % testcluster.registry], capture_output=True, text=True,
                          timeout=900)
    assert copy.returncode == 0, copy.stderr
    return "%s/chexstack/cpu@%s" % (testcluster.registry, digest.read_text().strip())


def test_three_systems_interleaved_on_both_hosts_then_figure1_with_the_gap(testcluster, client, cpu_build, cpu_sif,
                                                                           tmp_path):
    results, output, prepared = tmp_path / "runs", tmp_path / "figures", tmp_path / "cxr14-32"
    prepare = subprocess.run([INVOKE, "prepare", "--images", str(SAMPLE / "images-64"), "--labels",
                              str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"), "--image-size", "32", "--output",
                              str(prepared)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert prepare.returncode == 0, prepare.stdout[-3000:] + prepare.stderr[-3000:]
    pinned = _pushed(testcluster, cpu_build, tmp_path)
    pods = pod_engine()
    assert cpu_build.image_id not in [i.id for i in pods.images.list()], "the pods' engine holds no copy before"
    ran = subprocess.run(
        [INVOKE, "study", "--systems", ",".join(SYSTEMS), "--np", "1,2", "--per-node", "1", "--repeats", "2",
         "--hosts", "chex1,chex2", "--stack", "cpu", "--sif", str(cpu_sif.path), "--image", pinned,
         *FAST_MODEL, "--image-size", "32", "--batch-size", "4", "--steps", "3", "--warmup-steps", "1",
         "--data", str(prepared), "--timeline", "--results", str(results), "--output", str(output)],
        cwd=REPO, env=testcluster.env(COLUMNS="200"), capture_output=True, text=True, timeout=1800)
    text = ran.stdout + ran.stderr
    assert ran.returncode == 0, text[-6000:]

    # the order: repeat by repeat, every count of a system, the systems' order rotated in repeat 2
    runs = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in _RUN_LINE.finditer(ran.stdout)]
    assert runs == [(s, r, n) for r, systems in ((1, SYSTEMS), (2, SYSTEMS[1:] + SYSTEMS[:1]))
                    for s in systems for n in (1, 2)], text[-4000:]

    # each system's ranks ran where it says: both hosts at 2 ranks (a pod per host for the MPIJob)
    run_root, = results.glob("study-*")
    for system in SYSTEMS:
        two = json.loads((run_root / system / "repeat-1" / "np-2" / "throughput.json").read_text())
        assert two["world_size"] == 2, two
        want = (["bench-study-mpijob-np2-worker-0", "bench-study-mpijob-np2-worker-1"] if system == "mpijob"
                else ["chex1", "chex2"])
        assert two["hosts"] == want, (system, two["hosts"])

    # one sweep per system, comparable with bare metal: same versions, data, model, sizes and hosts
    folder, = output.glob("study-*")
    sweeps = {s: load_sweep(folder / ("%s.json" % s)) for s in SYSTEMS}
    for system, sweep in sweeps.items():
        assert [p.count for p in sweep.points] == [1, 2] and [len(p.repeats) for p in sweep.points] == [2, 2]
        assert sweep.record.hosts == ["chex1", "chex2"] and sweep.record.count_unit == "CPU ranks"
        assert sweep.record.label_sha256 and sweep.record.train_split_sha256
        assert all(sweep.record.versions.get(k) for k in ("tensorflow", "horovod", "python")), sweep.record.versions
        assert guard.differences(sweep, sweeps["baremetal"]) == (), (system, sweep.record.versions,
                                                                     sweeps["baremetal"].record.versions)
        assert all(p.step_split is not None for p in sweep.points if p.count == 2), system
    assert sweeps["apptainer"].record.image == str(cpu_sif.path)
    assert sweeps["apptainer"].record.image_id == sweeps["mpijob"].record.image_id == cpu_build.image_id
    assert sweeps["mpijob"].record.image == pinned and pinned in sweeps["mpijob"].record.image_repo_digests
    events = (run_root / "mpijob" / "repeat-1" / "np-1-events.log").read_text().splitlines()
    assert events[0] == 'Pulling image "%s"' % pinned and events[1].startswith("Successfully pulled"), events
    assert cpu_build.image_id in [i.id for i in pods.images.list()]  # pulled by digest: the very image
    again = (run_root / "mpijob" / "repeat-2" / "np-1-events.log").read_text()
    assert again == 'Container image "%s" already present on machine\n' % pinned  # IfNotPresent, as a kubelet

    # Figure 1 with every system, the % difference of each container system against bare metal, and the gap
    with open(folder / "figure1.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["CPU ranks"]), r["system"]) for r in rows] == [(n, s) for n in (1, 2) for s in SYSTEMS], rows
    assert all(r["vs baremetal (%)"] for r in rows if r["system"] != "baremetal"), rows  # compared: a difference
    assert all(r["verdict"] == "no interval" for r in rows if r["system"] != "baremetal"), rows  # 2 repeats
    assert (folder / "figure1.png").stat().st_size > 0
    markdown = (folder / "figure1.md").read_text()
    assert "not comparable" not in markdown, markdown
    for system in SYSTEMS:
        assert "%s, 1 → 2 CPU ranks: step" % system in markdown, markdown
    for system in SYSTEMS[1:]:
        assert "%s vs baremetal at 2 CPU ranks:" % system in markdown, markdown
    assert not client.containers.list(all=True, filters={"label": "org.chexstack.pod"})
    assert not pods.containers.list(all=True)  # every pod removed from the pods' engine too
