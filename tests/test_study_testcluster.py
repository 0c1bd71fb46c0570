"""Issue 23: ``invoke study`` on the test cluster, the CI's short version of the seed study: bare metal (Slurm, this
.venv), the HPC container (Slurm's hybrid model around the signed cpu SIF) and Kubernetes' way (the cpu image's
MPIJob as pods, once on the flannel-style VXLAN overlay and once on the hosts' network: issue 41's network path as a
factor of its own) at 1 and 2 CPU ranks, one rank per host, 2 repeats interleaved, on the real sample (a prepared
copy at 32 px, which every system reads as the trainer does), with Horovod's timeline; then the four-series Figure
1, its tables and the gap. The numbers of a few steps on 2 shared cores mean little: the test is of the method
(every system on the same hosts with the same versions and data, the order, the comparison), not of the speed."""
from __future__ import annotations

import csv
import json
import re
import subprocess

import pytest

from bench import guard
from bench.results import load_sweep
from tests.lib.cli import INVOKE
from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import FAST_MODEL

pytestmark = [pytest.mark.docker, pytest.mark.cluster, pytest.mark.slow]

SYSTEMS = ("baremetal:host", "apptainer:host", "mpijob:overlay", "mpijob:host")
_RUN_LINE = re.compile(r"^\s+([\w:]+)\s+repeat (\d+)/2,\s+(\d+) CPU ranks: ([0-9.]+) images/s", re.M)


def test_three_systems_interleaved_on_both_hosts_then_figure1_with_the_gap(testcluster, client, cpu_build, cpu_sif,
                                                                           tmp_path):
    results, output, prepared = tmp_path / "runs", tmp_path / "figures", tmp_path / "cxr14-32"
    prepare = subprocess.run([INVOKE, "prepare", "--images", str(SAMPLE / "images-64"), "--labels",
                              str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"), "--image-size", "32", "--output",
                              str(prepared)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert prepare.returncode == 0, prepare.stdout[-3000:] + prepare.stderr[-3000:]
    ran = subprocess.run(
        [INVOKE, "study", "--systems", "baremetal,apptainer,mpijob:overlay,mpijob:host", "--np", "1,2",
         "--per-node", "1", "--repeats", "2",
         "--hosts", "chex1,chex2", "--stack", "cpu", "--sif", str(cpu_sif.path), "--image", cpu_build.image_id,
         *FAST_MODEL, "--image-size", "32", "--batch-size", "4", "--steps", "3", "--warmup-steps", "1",
         "--data", str(prepared), "--timeline", "--results", str(results), "--output", str(output)],
        cwd=REPO, env=testcluster.env(COLUMNS="200"), capture_output=True, text=True, timeout=1800)
    text = ran.stdout + ran.stderr
    assert ran.returncode == 0, text[-6000:]

    # the order: repeat by repeat, every count of a system, the systems' order rotated in repeat 2
    runs = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in _RUN_LINE.finditer(ran.stdout)]
    assert runs == [(s, r, n) for r, systems in ((1, SYSTEMS), (2, SYSTEMS[1:] + SYSTEMS[:1]))
                    for s in systems for n in (1, 2)], text[-4000:]

    # each system's ranks ran where it says: both hosts at 2 ranks (a pod per host for the MPIJob; with hostNetwork
    # the pods have their nodes' names)
    run_root, = results.glob("study-*")
    for system in SYSTEMS:
        two = json.loads((run_root / system.replace(":", "-") / "repeat-1" / "np-2" / "throughput.json").read_text())
        assert two["world_size"] == 2, two
        want = (["bench-study-mpijob-overlay-np2-worker-0", "bench-study-mpijob-overlay-np2-worker-1"]
                if system == "mpijob:overlay" else ["chex1", "chex2"])
        assert two["hosts"] == want, (system, two["hosts"])

    # one sweep per system, comparable with bare metal: same versions, data, model, sizes and hosts
    folder, = output.glob("study-*")
    sweeps = {s: load_sweep(folder / ("%s.json" % s.replace(":", "-"))) for s in SYSTEMS}
    for system, sweep in sweeps.items():
        assert [p.count for p in sweep.points] == [1, 2] and [len(p.repeats) for p in sweep.points] == [2, 2]
        assert sweep.record.hosts == ["chex1", "chex2"] and sweep.record.count_unit == "CPU ranks"
        assert sweep.record.label_sha256 and sweep.record.train_split_sha256
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

    # Figure 1 with every system, the % difference of each container system against bare metal, and the gap
    with open(folder / "figure1.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["CPU ranks"]), r["system"]) for r in rows] == [(n, s) for n in (1, 2) for s in SYSTEMS], rows
    assert all(r["vs baremetal:host (%)"] for r in rows if r["system"] != "baremetal:host"), rows  # a difference
    assert all(r["verdict"] == "no interval" for r in rows if r["system"] != "baremetal:host"), rows  # 2 repeats
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
