"""``invoke study`` (issue 23 part 1, issue 41 part 3) without a cluster: the paired rounds' seeded order, the
stopping rule of ``--resolve``, the refusals before anything runs, the rendered jobs of every system (golden), the
placement of the pods and the Slurm node list that put every system on the same hosts."""
from __future__ import annotations

import dataclasses
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from bench import study
from chexstack.errors import ChexstackError
from envs.manifest import load_stack
from launch import k8s, slurm
from launch.job import JobSpec
from launch.pods import PodNetwork
from tests.lib.cli import run
from tests.lib.golden import assert_golden
from tests.lib.k8s import validate_mpijob
from tests.lib.sweeps import sweep_request

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
SITE = study.Site(repo=Path("/shared/chexstack"), mpirun_version_output="mpirun (Open MPI) 4.1.4\n",
                  render_host="login01")


def _req(**kw) -> study.StudyRequest:
    sweep = sweep_request(counts=kw.pop("counts", (1, 2)), gpus=False, label="study", launcher="slurm", stack="cpu",
                         model="mobilenet", batch_size=4, image_size=32, steps=2, warmup_steps=1,
                         repeats=kw.pop("repeats", 3))
    base = dict(sweep=sweep, systems=("baremetal", "apptainer", "mpijob"), hosts=("chex1", "chex2"), seed=7,
                results="/shared/study", python="/shared/venv/bin/python", sif="/shared/sif/chexstack-cpu.sif",
                image="chexstack/cpu:test")
    base.update(kw)
    return study.StudyRequest(**base)


SYSTEMS = ("baremetal", "apptainer", "mpijob")


def test_each_round_runs_every_system_once_in_an_order_drawn_from_the_seed():
    """Every system once per round; the order is the seed's and the round's alone (the same seed gives the same
    order, a round added later the order it would have had), and over many rounds every system goes first."""
    runs = study.order(SYSTEMS, 12, seed=7)
    rounds = [tuple(s for r, s in runs if r == k) for k in range(1, 13)]
    assert all(sorted(r) == sorted(SYSTEMS) for r in rounds) and len(runs) == 36
    assert study.order(SYSTEMS, 12, seed=7) == runs and study.order(SYSTEMS, 4, seed=7) == runs[:12]
    assert [study.round_order(SYSTEMS, 7, k) for k in range(1, 13)] == rounds
    assert {r[0] for r in rounds} == set(SYSTEMS)
    assert study.order(SYSTEMS, 12, seed=8) != runs


def test_the_seed_is_drawn_when_not_given_and_kept_when_given():
    assert _req(seed=None).check().seed is not None and _req(seed=123).check().seed == 123


def test_without_resolve_the_rounds_asked_are_run():
    assert study.stopping([None, None], 1, 2) is None
    assert study.stopping([None, None], 2, 2) == "2 rounds (--repeats)"


def test_resolve_adds_rounds_until_every_gap_is_narrow_enough():
    """Each stop in order: not before --repeats rounds; resolved when every half-width is at most X (a gap without
    an interval is not); else --max-repeats; else the budget when another round of the mean length would pass it."""
    assert study.stopping([1.0, 2.0], 3, 5, resolve=3.0) is None  # fewer than --repeats
    assert study.stopping([1.0, 3.0], 5, 5, resolve=3.0).startswith("resolved after 5 rounds")
    assert study.stopping([1.0, 3.1], 5, 5, resolve=3.0) is None
    assert study.stopping([1.0, None], 5, 5, resolve=3.0) is None
    at_most = study.stopping([1.0, 4.2], 8, 5, resolve=3.0, max_rounds=8)
    assert at_most == ("not resolved: --max-repeats 8 rounds reached with 1 gap(s) wider than ±3 % (the widest "
                       "±4.2 %)")
    # 6 rounds in 60 s: a 7th (10 s on average) fits a 70 s budget, not a 69 s one
    assert study.stopping([4.2], 6, 5, resolve=3.0, elapsed_s=60.0, budget_s=70.0) is None
    assert study.stopping([4.2], 6, 5, resolve=3.0, elapsed_s=60.0, budget_s=69.0).startswith(
        "not resolved: the --budget of 1.15 min would be passed")
    assert study.stopping([1.0], 6, 5, resolve=3.0, elapsed_s=60.0, budget_s=1.0).startswith("resolved")


def test_resolve_stops_when_a_synthetic_gap_is_resolved():
    """The study's loop on synthetic rounds: a system 5 % slower than the baseline in every round, each round's
    noise (up to ±20 %) common to both: ``gaps`` pairs them per round, and ±1 % is resolved at the fewest rounds."""
    import numpy as np

    from bench.results import Point, Reading

    rng = np.random.default_rng(1)
    reads = {"baremetal": [], "mpijob": []}
    for r in range(1, 6):
        common = rng.uniform(0.8, 1.2)
        for system, factor in (("baremetal", 1.0), ("mpijob", 0.95 * rng.uniform(0.998, 1.002))):
            reads[system].append(Reading(Point(count=2, images_per_sec=100.0 * common * factor), "CPU", {}, {}))
    found, = study.gaps(reads, ("baremetal", "mpijob"))
    assert found.paired and found.n == 5 and found.interval.holds(-5.0) and found.half_width < 0.5
    assert study.stopping([found.half_width], 5, 5, resolve=1.0).startswith("resolved after 5 rounds")


def test_render_golden():
    """Each system's jobs of the first repeat: two batch scripts (bare metal's mpirun from the checkout, the hybrid
    model's mpirun around singularity exec), each pinned to the study's hosts, and one MPIJob per count whose pods
    are kept on those hosts; the same trainer command line everywhere but its output folder."""
    text = study.render(_req(), now=NOW, site=SITE)
    assert_golden("bench/study-render.txt", text)
    parts = text.split("# --- ")
    scripts = [p.split("\n", 1)[1] for p in parts[1:3]]
    for script in scripts:
        check = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        assert "#SBATCH --nodelist=chex1,chex2" in script and "#SBATCH --nodes=2" in script
    assert "cd /shared/chexstack" in scripts[0] and "singularity exec" in scripts[1]
    jobs = list(yaml.safe_load_all(parts[3].split("\n", 1)[1]))
    assert [j["metadata"]["name"] for j in jobs] == ["bench-study-mpijob-overlay-np1", "bench-study-mpijob-overlay-np2"]
    for job in jobs:
        validate_mpijob(job)
    commands = [line.split(" -m trainer ")[1].split(" --output ")[0] for line in text.splitlines()
                if " -m trainer " in line]
    assert len(commands) == 4 and len(set(commands)) == 1, commands  # two counts x two Slurm systems
    assert text.splitlines()[0].endswith("seed 7; run order: round 1: %s; round 2: %s; round 3: %s" % tuple(
        " ".join(study.round_order(tuple(":".join(study.series(x)) for x in SYSTEMS), 7, r)) for r in (1, 2, 3)))
    assert "round 2: " in text.splitlines()[0] and "mpijob:overlay" in text.splitlines()[0]
    assert "# --- mpijob:overlay, round 1: Kubernetes" in text and "network path overlay: the pod overlay" in text
    assert "dnsPolicy" not in text  # no pod on its node's network


def test_the_pods_of_a_count_stay_on_the_study_hosts():
    """K8sOptions.nodes: a required node affinity on both pods and a spread of one Worker per node; the local pod
    runner places Workers the same way, and refuses more Workers than it has addresses for."""
    spec = JobSpec(name="x", stack=load_stack("cpu"), image="img", nodes=2, ranks_per_node=1, gpus=False,
                   trainer_args=())
    obj = k8s.mpijob(spec, k8s.K8sOptions(nodes=("chex1", "chex2")))
    validate_mpijob(obj)
    worker = obj["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    launcher = obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    terms = worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                            "values": ["chex1", "chex2"]}]}]
    assert launcher["affinity"] == worker["affinity"] and "topologySpreadConstraints" not in launcher
    spread, = worker["topologySpreadConstraints"]
    assert spread["maxSkew"] == 1 and spread["labelSelector"]["matchLabels"][
        "app.kubernetes.io/component"] == "worker"
    assert "affinity" not in k8s.mpijob(spec)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    network = PodNetwork(plug=("plug",), launcher_address="10.0.0.100", worker_addresses=("10.0.0.101", "10.0.0.102"),
                         nodes=("chex1", "chex2"))
    assert network.placement(2) == ("chex1", "chex2") and network.placement(1) == ("chex1",)
    # each node's CPUs (scripts/testcluster cpus) for its Workers' --cpuset-cpus; a node not named is not restricted
    pinned = dataclasses.replace(network, node_cpus=(("chex1", "0"), ("chex2", "1")))
    assert [pinned.cpus(n) for n in ("chex1", "chex2", "chex3", None)] == ["0", "1", None, None]
    with pytest.raises(ChexstackError, match="3 Worker pods, but the pod network has 2 Worker addresses"):
        network.placement(3)


def test_the_slurm_node_list_is_checked():
    spec = JobSpec(name="x", stack=None, image="/venv/bin/python", nodes=2, ranks_per_node=1, gpus=False,
                   trainer_args=(), workdir="/shared/chexstack")
    assert "#SBATCH --nodelist=chex1,chex2" in slurm.directives(spec, slurm.SlurmOptions(nodelist=("chex1", "chex2")))
    with pytest.raises(ChexstackError, match=r"--nodelist chex1: expected 2 node\(s\)"):
        slurm.directives(spec, slurm.SlurmOptions(nodelist=("chex1",)))
    with pytest.raises(ChexstackError, match="expected node names .* got 'chex 2'"):
        slurm.directives(spec, slurm.SlurmOptions(nodelist=("chex1", "chex 2")))


@pytest.mark.parametrize("change, message", [
    (dict(systems=("baremetal", "docker")), "--systems: unknown system 'docker' in 'docker'; expected one of "
                                            "baremetal, apptainer, mpijob, slurm-oci, each optionally :PATH"),
    (dict(systems=("baremetal", "baremetal:host")), "expected two or more distinct series SYSTEM.:PATH."),
    (dict(systems=("mpijob",)), "--systems mpijob: expected two or more distinct series"),
    (dict(systems=("baremetal", "mpijob:flannel")), "--systems: unknown network path 'flannel' in 'mpijob:flannel'; "
                                                    "expected one of host, overlay, bridge"),
    (dict(systems=("apptainer:overlay", "mpijob")), "--systems apptainer:overlay: apptainer cannot run on the "
                                                    "overlay path; it takes host"),
    (dict(hosts=("chex1",)), "--hosts chex1: the largest count (2) needs 2 node(s) at --per-node 1"),
    (dict(per_node=0), "--per-node 0: expected 1 or more ranks per node"),
    (dict(results="runs/study"), "--results runs/study"),
    (dict(counts=(1, 1)), "--np 1,1: expected distinct counts"),
    (dict(resolve=0.0), "--resolve 0.0: expected a half-width in % above 0"),
    (dict(resolve=3.0, max_repeats=2), "--max-repeats 2: expected at least --repeats (3)"),
    (dict(resolve=3.0, budget=-1.0), "--budget -1.0: expected minutes above 0"),
    (dict(max_repeats=9), "--max-repeats and --budget bound --resolve's added rounds: give --resolve X"),
    (dict(seed=-1), "--seed -1: expected 0 to 4294967295"),
    (dict(systems=("mpijob", "baremetal+200mbit")), "or a planted one (mpijob.RATE, e.g. mpijob.400mbit"),
    (dict(systems=("mpijob", "mpijob+fast")), "unknown system .mpijob.fast. in .mpijob.fast.; expected one of"),
    (dict(systems=("mpijob", "mpijob+0mbit")), "unknown system .mpijob.0mbit.*or a planted one .mpijob.RATE"),
])
def test_a_study_that_cannot_work_is_refused_before_anything_runs(change, message):
    with pytest.raises(ChexstackError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _req(**change).check()


def test_a_planted_system_is_the_mpijob_on_links_limited_by_the_test_cluster():
    """``mpijob+RATE``: the same MPIJob (its own job names and folder), its pods plugged by ``plug-shaped`` with the
    rate; ``mpijob+none`` by the same command with nothing limited; the plain mpijob's pods by ``plug``."""
    req = _req(systems=("mpijob", "mpijob+200mbit", "mpijob+none")).check()
    assert req.systems == ("mpijob:overlay", "mpijob+200mbit:bridge", "mpijob+none:bridge")
    objs, folder = study.mpijobs(req, "mpijob+200mbit:bridge", 2, Path("/r"))
    assert folder == Path("/r/mpijob-200mbit-bridge/repeat-2")
    assert [o["metadata"]["name"] for o in objs] == ["bench-study-mpijob-200mbit-bridge-np1",
                                                     "bench-study-mpijob-200mbit-bridge-np2"]
    for obj in objs:
        validate_mpijob(obj)
    planted = study.pod_network("bridge", ("chex1", "chex2"), "200mbit")
    assert planted.plug == (str(study.TESTCLUSTER), "plug-shaped", "200mbit") and planted.nodes == ("chex1", "chex2")
    assert study.pod_network("bridge", ("chex1",), "none").plug == (str(study.TESTCLUSTER), "plug-shaped", "none")
    assert study.pod_network("bridge", ("chex1",)).plug == (str(study.TESTCLUSTER), "plug")
    with pytest.raises(ChexstackError, match="mpijob\\+200mbit cannot run on the overlay path; it takes bridge"):
        study.series("mpijob+200mbit:overlay")
    assert study.describe("mpijob+200mbit").endswith("each pod's link limited to 200mbit both ways (tc tbf)")
    assert study.describe("mpijob+none").endswith("planted: nothing (the same pods and path, no limit)")
    assert study.base_system("mpijob+none") == "mpijob" and study.plant("mpijob") is None
    text = study.render(req, now=NOW, site=SITE)
    assert "# --- mpijob+200mbit:bridge, round 1: " in text and text.count("kind: MPIJob") == 6


def test_the_network_path_is_a_factor_of_its_own_series():
    """Issue 41: the MPIJob on its nodes' network and on the overlay are two series of one study, each labelled with
    its path; the host path's MPIJob says hostNetwork, the overlay's does not; each series' pod network puts its
    pods where the path says (the overlay's in each node's pod subnet, the host's on the nodes' own addresses)."""
    req = _req(systems=("baremetal", "mpijob:host", "mpijob:overlay")).check()
    assert req.systems == ("baremetal:host", "mpijob:host", "mpijob:overlay")
    text = study.render(req, now=NOW, site=SITE)
    parts = {p.split(",", 1)[0]: p for p in text.split("# --- ")[1:]}
    host = list(yaml.safe_load_all(parts["mpijob:host"].split("\n", 1)[1]))
    overlay = list(yaml.safe_load_all(parts["mpijob:overlay"].split("\n", 1)[1]))
    assert [j["metadata"]["name"] for j in host] == ["bench-study-mpijob-host-np1", "bench-study-mpijob-host-np2"]
    for job in host:
        validate_mpijob(job)
        assert job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["hostNetwork"] is True
    assert "hostNetwork" not in str(overlay) and "dnsPolicy" not in str(overlay)
    assert study.pod_network("overlay", ("chex1", "chex2")).worker_addresses == ("10.244.1.10", "10.244.2.11")
    assert study.pod_network("overlay", ("chex1", "chex2")).plug[-1] == "--overlay"
    on_hosts = study.pod_network("host", ("chex1", "chex2"))
    assert on_hosts.worker_addresses == ("10.213.57.11", "10.213.57.12") and on_hosts.node_netns == "/run/netns/%s"
    assert on_hosts.launcher_address == "10.213.57.100" and on_hosts.plug[-1] == "plug"  # the Launcher on the bridge
    assert study.pod_network("bridge", ("chex1", "chex2")).worker_addresses[:2] == ("10.213.57.101", "10.213.57.102")
    with pytest.raises(ChexstackError, match="the host path runs on the test cluster's hosts chexK"):
        study.pod_network("host", ("node1", "node2"))


def test_container_systems_need_a_stack():
    req = _req()
    sweep = req.sweep.__class__(**{**req.sweep.__dict__, "stack": None})
    with pytest.raises(ChexstackError, match="apptainer and mpijob run the stack's image: give --stack"):
        _req(sweep=sweep).check()


def test_study_render_from_the_command_line():
    """The task end to end in this process: options parsed, --render prints the plan (no Slurm, no engine)."""
    ran = run("study", "--np", "1,2", "--stack", "cpu", "--hosts", "chex1,chex2", "--repeats", "2",
              "--results", "/shared/study", "--sif", "/shared/sif/cpu.sif", "--image", "chexstack/cpu:test",
              "--model", "mobilenet", "--seed", "11", "--resolve", "2.5", "--budget", "90", "--render")
    assert ran.returncode == 0, ran.stderr
    assert "seed 11; run order: round 1: " in ran.stdout and "within ±2.5 % (at most 30 rounds, 90 min)" in ran.stdout
    assert ran.stdout.count("#SBATCH --nodelist=chex1,chex2") == 2 and ran.stdout.count("kind: MPIJob") == 2
    refused = run("study", "--np", "1,2", "--gpus", "1", "--render")
    assert refused.returncode == 2 and "--gpus 1 and --np 1,2: give one" in refused.stderr
