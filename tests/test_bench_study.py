"""``invoke study`` (issue 23 part 1) without a cluster: the run order, the refusals before anything runs, the
rendered jobs of every system (golden), the placement of the pods and the Slurm node list that put every system
on the same hosts."""
from __future__ import annotations

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
    base = dict(sweep=sweep, systems=("baremetal", "apptainer", "mpijob"), hosts=("chex1", "chex2"),
                results="/shared/study", python="/shared/venv/bin/python", sif="/shared/sif/chexstack-cpu.sif",
                image="chexstack/cpu:test")
    base.update(kw)
    return study.StudyRequest(**base)


def test_the_systems_take_turns_and_their_order_rotates_each_repeat():
    """Every system runs once per repeat; which goes first rotates, so none always runs after the pause."""
    runs = study.order(("baremetal", "apptainer", "mpijob"), 4)
    assert runs == [(1, "baremetal"), (1, "apptainer"), (1, "mpijob"),
                    (2, "apptainer"), (2, "mpijob"), (2, "baremetal"),
                    (3, "mpijob"), (3, "baremetal"), (3, "apptainer"),
                    (4, "baremetal"), (4, "apptainer"), (4, "mpijob")]
    firsts = [runs[i][1] for i in range(0, 12, 3)]
    assert sorted(set(firsts)) == ["apptainer", "baremetal", "mpijob"]


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
    assert "repeat 2: apptainer:host mpijob:overlay baremetal:host" in text.splitlines()[0]
    assert "# --- mpijob:overlay, repeat 1: Kubernetes" in text and "network path overlay: the pod overlay" in text
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
                                            "baremetal, apptainer, mpijob, each optionally :PATH"),
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
])
def test_a_study_that_cannot_work_is_refused_before_anything_runs(change, message):
    with pytest.raises(ChexstackError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _req(**change).check()


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
              "--model", "mobilenet", "--render")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.count("#SBATCH --nodelist=chex1,chex2") == 2 and ran.stdout.count("kind: MPIJob") == 2
    refused = run("study", "--np", "1,2", "--gpus", "1", "--render")
    assert refused.returncode == 2 and "--gpus 1 and --np 1,2: give one" in refused.stderr
