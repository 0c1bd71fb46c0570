"""On the test cluster (scripts/testcluster: 2 hosts in their own network and UTS namespaces, a real Slurm 22.05):
its hosts, and `invoke train --launcher slurm --submit` for real, bare metal, 2 nodes × 2 ranks on the sample.

The session fixture ``testcluster`` (tests/lib/testcluster.py) brings the cluster up once and takes it down at the end;
these tests skip, saying why, only when it cannot be brought up here (not root, packages or namespaces missing).
"""
from __future__ import annotations

import csv
import gzip
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from bench.results import load_sweep
from tests.lib import cli as cmd
from tests.lib.cli import INVOKE
from tests.lib.cluster_runs import SAMPLE_ARGS, kill_chex2_and_expect_a_bounded_end, ranks_on, when_epoch_committed
from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import FAST_MODEL

pytestmark = pytest.mark.cluster

def invoke(cluster, *args, timeout=600):
    """``invoke ARGS`` as a process with Slurm's commands pointed at the test cluster."""
    return cmd.invoke(*args, env=cluster.env(COLUMNS="160", PYTHONPATH=str(REPO)), inherit=False, timeout=timeout)


def test_hosts_have_their_own_name_and_address_and_slurm_runs_across_them(testcluster, tmp_path):
    again = subprocess.run([str(REPO / "scripts" / "testcluster"), "up"], capture_output=True, text=True)
    assert again.returncode == 0 and "up already" in again.stdout  # idempotent
    for k, host in enumerate(testcluster.hosts, start=1):
        name = subprocess.run([str(REPO / "scripts" / "testcluster"), "exec", host, "hostname"],
                              capture_output=True, text=True)
        assert name.stdout.strip() == host
        ssh = subprocess.run(["ssh", "-F", testcluster.ssh_config, host, "hostname -I"], capture_output=True,
                             text=True, timeout=30)
        # its own address on the bridge first; then, once a study or an MPIJob test built the pod overlay, only its
        # pod subnet's (cni0 10.244.K.1, flannel.1 10.244.K.0)
        addresses = ssh.stdout.split()
        assert ssh.returncode == 0 and addresses[:1] == ["10.213.57.%d" % (10 + k)], (addresses, ssh.stderr)
        assert all(a.startswith("10.244.%d." % k) for a in addresses[1:]), addresses
    job = testcluster.run("sbatch", "--parsable", "--wait", "--nodes=2", "--ntasks-per-node=1",
                          "--output=%s/%%j.out" % tmp_path, "--wrap", "srun hostname", timeout=60)
    assert job.returncode == 0, job.stderr
    job_id = job.stdout.strip()
    assert sorted((tmp_path / ("%s.out" % job_id)).read_text().split()) == list(testcluster.hosts)
    assert re.search(r"\b%s\b.*chex\[1-2\]\s+COMPLETED" % job_id, testcluster.run("sacct", "-c", "-j", job_id).stdout)


def test_detach_prints_the_job_name_and_id_and_returns(testcluster, tmp_path):
    out = tmp_path / "detached"
    run = invoke(testcluster, "train", "--launcher", "slurm", "--submit", "--detach", "--nodes", "2",
                 "--ntasks-per-node", "1", "--data", "synthetic", "--time", "00:05:00", "--output", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    name = re.search(r"job name: (chexstack-baremetal-detached-[0-9a-f]{6}) \(2 nodes × 1 rank\)", run.stdout)
    job_id = re.search(r"submitted: (\d+)", run.stdout)
    assert name and job_id, run.stdout
    try:
        shown = testcluster.run("scontrol", "-o", "show", "job", job_id.group(1)).stdout
        assert "JobName=%s " % name.group(1) in shown and "TimeLimit=00:05:00" in shown
    finally:
        testcluster.run("scancel", job_id.group(1))


@pytest.mark.slow
def test_baremetal_two_nodes_of_two_ranks_pool_their_auroc_and_a_dead_host_ends_the_job(testcluster, tmp_path):
    """2 nodes × 2 CPU ranks of the shared .venv on the real sample, in one job. Epoch 1 commits: every rank's host
    is recorded and the AUROC is the pooled one (every validation row, from all ranks, as on one host). Then
    chex2's ranks are killed (SIGKILL) in epoch 2: the job ends by itself within a bounded time, the message names
    the host, the rank and the cause, and Slurm's accounting has it FAILED. BatchNorm statistics are Keras' moving
    averages (--bn-images 0): the epoch-end recomputation is not what is shown here."""
    import time

    out = tmp_path / "r1"
    # 3 epochs: the job is still running whenever chex2's ranks are killed (it never gets past epoch 2)
    proc = subprocess.Popen([INVOKE, "train", "--launcher", "slurm", "--submit", "--nodes", "2",
                             "--ntasks-per-node", "2", "--epochs", "3", "--bn-images", "0", "--time", "00:15:00",
                             "--output", str(out), *SAMPLE_ARGS],
                            cwd=REPO, env=testcluster.env(COLUMNS="160", PYTHONPATH=str(REPO)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        job_id = when_epoch_committed(out, 1, proc)
        deadline = time.monotonic() + 120
        while not ranks_on("chex2") and time.monotonic() < deadline:
            time.sleep(0.5)
    except BaseException:
        proc.kill()
        raise
    text = kill_chex2_and_expect_a_bounded_end(proc)
    assert "submitted Slurm job %s" % job_id in text and "epoch 1: loss" in text and "mean AUROC" in text, text
    assert re.search(r"\b%s\b.*FAILED" % job_id, testcluster.run("sacct", "-c", "-j", job_id).stdout)

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["run"]["world_size"] == 4
    assert metrics["run"]["hosts"] == ["chex1", "chex1", "chex2", "chex2"]
    assert [e["epoch"] for e in metrics["epochs"]] == [1], metrics["epochs"]  # epoch 2 never committed
    last = metrics["epochs"][-1]
    assert last["val_rows"]["evaluated"] == last["val_rows"]["expected"] == last["n_val"]
    from trainer import evaluation
    from trainer.labels import CLASSES

    with open(out / "predictions.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == last["n_val"]
    labels = np.array([[float(r["label_" + c]) for c in CLASSES] for r in rows])
    scores = np.array([[float(r["score_" + c]) for c in CLASSES] for r in rows])
    pooled = evaluation.auroc_per_class(labels, scores)
    for name, value in zip(CLASSES, pooled):
        assert (value is None and last["auroc"][name] is None) or abs(value - last["auroc"][name]) < 1e-6
    with gzip.open(SAMPLE / "Data_Entry_2017_v2020.csv.gz", "rt") as f:
        known = {row["Image Index"] for row in csv.DictReader(f)}
    assert {r["Image Index"] for r in rows} <= known


def test_validate_hosts_reports_the_allreduce_bandwidth_beside_raw_tcp(testcluster, tmp_path):
    """`invoke validate --hosts chex1,chex2` from chex1 (mpirun reaches chex2 over ssh): the MPI launch spans both
    hosts, and mpi.bandwidth reports MPI_Allreduce's bus bandwidth beside iperf3's between the same two hosts; its
    verdict follows the measured ratio (PASS only at >= 0.5)."""
    report = tmp_path / "report.json"
    run = subprocess.run([str(REPO / "scripts" / "testcluster"), "exec", "chex1", INVOKE, "validate", "--hosts",
                          "chex1,chex2", "--only", "mpi.launch,mpi.bandwidth", "--json", str(report)],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=testcluster.env(COLUMNS="200", PYTHONPATH=str(REPO),
                                             OMPI_MCA_plm_rsh_agent="ssh -F %s" % testcluster.ssh_config))
    assert run.returncode == 0, run.stdout + run.stderr
    results = {r["id"]: r for r in json.loads(report.read_text())["results"]}
    launch = results["mpi.launch"]
    assert launch["status"] == "PASS" and "4 ranks on chex1,chex2 joined one world" in launch["measured"], launch
    bandwidth = results["mpi.bandwidth"]
    found = re.match(r"MPI_Allreduce 64 MiB busbw ([\d.]+) Gbit/s, raw TCP ([\d.]+) Gbit/s \(iperf3 chex2→chex1\): "
                     r"ratio ([\d.]+) \(median of the rounds' ratios\); both ways at once ([\d.]+) Gbit/s per "
                     r"direction", bandwidth["measured"])
    assert found, bandwidth
    mpi, tcp, ratio, _ = map(float, found.groups())
    assert mpi > 0 and tcp > 0
    assert bandwidth["status"] == ("PASS" if ratio >= 0.5 else "WARN"), bandwidth
    assert len(bandwidth["details"]) >= 2  # every round's numbers, PASS or not


@pytest.mark.slow
def test_allreduce_transport_benchmark_prints_both_ratios_before_and_after_tuning(testcluster):
    """bench/ratios/allreduce_transport.py on chex1 and chex2 (small buffer, one round: the script, not the
    numbers): Horovod / MPI_Allreduce and MPI_Allreduce / iperf3 for Open MPI's defaults and the launchers'
    settings, side by side in one run."""
    run = subprocess.run([sys.executable, str(REPO / "bench" / "ratios" / "allreduce_transport.py"), "--mib", "4",
                          "--rounds", "1", "--iters", "1", "--tcp-seconds", "1"], cwd=REPO, capture_output=True,
                         text=True, timeout=600, env=testcluster.env(PYTHONPATH=str(REPO)))
    assert run.returncode == 0, run.stdout + run.stderr
    text = run.stdout
    assert "Open MPI and Horovod defaults: 4 MiB float32, 2 ranks on chex1,chex2" in text, text
    assert "Open MPI and Horovod as the launchers set them: 4 MiB float32, 2 ranks on chex1,chex2" in text, text
    assert len(re.findall(r"ratio Horovod/MPI = \d+\.\d+ \(goal >= 0\.95: (?:met|MISSED)\)", text)) == 2, text
    assert len(re.findall(r"ratio MPI/TCP     = \d+\.\d+ \(goal >= 0\.50: (?:met|MISSED)\)", text)) == 2, text
    assert re.search(r"tuned / defaults, mpi busbw: \d+\.\d+", text), text
    assert "error:" not in text, text


#: 4 epochs of a synthetic run (2 nodes × 1 CPU rank), each long enough (1024 images, 16 steps) that it cannot
#: end between a commit and the restart the test makes then: what the restart test needs, no more.
RESUME_ARGS = ("--launcher", "slurm", "--submit", "--nodes", "2", "--ntasks-per-node", "1", "--data", "synthetic",
               "--synthetic-images", "1024", *FAST_MODEL, "--image-size", "32", "--batch-size", "32",
               "--epochs", "4", "--bn-images", "0", "--time", "00:20:00")


def _start(cluster, out, *extra, args=RESUME_ARGS):
    return subprocess.Popen([INVOKE, "train", *args, "--output", str(out), *extra], cwd=REPO,
                            env=cluster.env(COLUMNS="160", PYTHONPATH=str(REPO)), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _epochs_once_each(out) -> None:
    metrics = json.loads((out / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3, 4], metrics["epochs"]
    assert metrics["run"]["world_size"] == 2


def _release_requeued(cluster, job_id: str, restarts: int = 1) -> None:
    """Start a requeued job now. Slurm holds it back about two minutes (``Reason=BeginTime``, its StartTime set
    past the job credential's lifetime); ``scontrol update jobid=ID StartTime=now`` lifts the hold
    (https://slurm.schedmd.com/scontrol.html) once the job is PENDING (no longer COMPLETING), no host still runs a
    step of the job's last start (``_steps_ended``) and slurmctld has no message in flight (``_agents_idle``). Fails
    unless the job was seen held (its ``restarts``-th requeue) and then started before
    the StartTime of its hold (the hold was skipped, not waited out)."""
    import time

    field = lambda line, name: re.search(r"\b%s=(\S+)" % name, line).group(1)
    held = shown = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        shown = cluster.run("scontrol", "-o", "show", "job", job_id).stdout
        if (held is None and "Restarts=%d " % restarts in shown and "Reason=BeginTime" in shown
                and field(shown, "JobState") == "PENDING"):  # not COMPLETING: its last start's end is delivered
            held = shown
            _steps_ended(cluster, job_id)
            _agents_idle(cluster)
            update = cluster.run("scontrol", "update", "jobid=%s" % job_id, "StartTime=now")
            assert update.returncode == 0, update.stderr
        elif held and field(shown, "JobState") not in ("PENDING", "CONFIGURING"):
            # ISO 8601 local times of one clock: their order is their text's order
            assert field(shown, "StartTime") < field(held, "StartTime"), (held, shown)
            return
        time.sleep(0.5)
    pytest.fail("requeued job %s was not held and then started within 5 minutes: %s" % (job_id, shown))


def _steps_ended(cluster, job_id: str, timeout_s: float = 120) -> None:
    """Wait until no host of ``cluster`` runs a step of ``job_id`` (``scontrol listpids JOB NODE``, the form for
    several slurmd on one machine, lists none); fail when one is left after ``timeout_s``.

    A requeued job keeps its id. A host that lost its link keeps running the steps of the job's last start until it
    registers again, and slurmctld then has its slurmd kill them ("Registered PENDING JobId=.. StepId=.. on node"):
    a start on that host before they are gone races that kill (seen: the new start's Open MPI daemon there lost,
    exit 205). Slurm's hold of a requeued job leaves time for this; a test that lifts the hold must wait for it."""
    import time

    deadline, running = time.monotonic() + timeout_s, {}
    while time.monotonic() < deadline:
        running = {}
        for host in cluster.hosts:
            listed = cluster.run("scontrol", "listpids", job_id, host)
            if listed.returncode == 0:
                rows = listed.stdout.splitlines()[1:]
            elif re.search(r"There are no steps for job|does not exist on node", listed.stdout + listed.stderr):
                rows = []
            else:  # not evidence that none runs
                rows = ["scontrol listpids failed: %s" % (listed.stderr or listed.stdout).strip()]
            if rows:
                running[host] = rows
        if not running:
            return
        time.sleep(0.5)
    pytest.fail("steps of Slurm job %s still run %.0f s after its requeue: %s" % (job_id, timeout_s, running))


def _agents_idle(cluster, timeout_s: float = 120) -> None:
    """Wait until slurmctld has no message to a node in flight or queued (``sdiag``: "Agent count: 0" and "Agent
    queue size: 0", twice in a row a second apart); fail after ``timeout_s``.

    A host back from a dead link is sent what slurmctld could not deliver meanwhile: the end of the job's last
    start (its terminate and credential revocation, retried by an agent until the host answers). The job keeps its
    id, so a new start there before that has been delivered is killed by it (CI, twice: the new start's Open MPI
    daemon on chex2 lost at once, exit 205; here, with chex2's link down, a requeued job stayed COMPLETING with
    "Agent count: 1" until the link was back). The hold Slurm puts on a requeued job covers this; a test that lifts
    it must wait for it."""
    import time

    deadline, quiet, shown = time.monotonic() + timeout_s, 0, ""
    while time.monotonic() < deadline:
        shown = cluster.run("sdiag").stdout
        counts = dict(re.findall(r"^(Agent count|Agent queue size):\s*(\d+)", shown, re.M))
        quiet = quiet + 1 if counts == {"Agent count": "0", "Agent queue size": "0"} else 0
        if quiet >= 2:
            return
        time.sleep(1)
    pytest.fail("slurmctld still had messages in flight %.0f s after the requeue: %s" % (timeout_s, shown[:600]))


def _link(host: str, state: str) -> None:
    """Set the bridge end of ``host``'s veth (scripts/testcluster: ``<host>-v``) ``up`` or ``down``: the host's
    only link, as a switch port or a cable failing."""
    subprocess.run(["ip", "link", "set", "%s-v" % host, state], check=True, timeout=30)


def _node_back(cluster, node: str, timeout_s: float = 60) -> None:
    """Return ``node`` to service as an admin does once its link is repaired (``scontrol update nodename=NODE
    state=resume``: Slurm 22.05 asks a DOWN node to register again only every few minutes) and wait until Slurm
    has it back (not DOWN/NOT_RESPONDING); fail when it is not back in time."""
    import time

    from facts.parsers.slurm import parse_nodes

    if [n.lost for n in parse_nodes(cluster.run("scontrol", "-o", "show", "node", node).stdout)] == [True]:
        resume = cluster.run("scontrol", "update", "nodename=%s" % node, "state=resume")
        assert resume.returncode == 0, resume.stderr
    deadline, shown = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        shown = cluster.run("scontrol", "-o", "show", "node", node).stdout
        if [n.lost for n in parse_nodes(shown)] == [False]:
            return
        time.sleep(1)
    pytest.fail("Slurm did not return node %s within %.0f s of state=resume: %s" % (node, timeout_s, shown))


def _restarted_log(out, job_id: str, initial_epoch: int) -> None:
    """The job's Slurm output (rewritten at each start) is its last start's: it continued after
    ``initial_epoch``, which it did not train again."""
    log = (out / ("slurm-%s.out" % job_id)).read_text()
    assert '"initial_epoch": %d' % initial_epoch in log, log[-3000:]
    assert '"epoch": %d, "event": "epoch_begin"' % initial_epoch not in log, log[-3000:]


@pytest.mark.slow
def test_a_job_requeued_by_scontrol_and_by_a_dead_link_then_cancelled_and_resubmitted_has_every_epoch_once(
        testcluster, tmp_path):
    """One run of 4 epochs through every way a Slurm job is restarted, each continuing after the committed epoch
    (the script passes --resume on a restart):

    1. `invoke train --requeue`; once epoch 1 is committed, `scontrol requeue` restarts the job (same id; Slurm's
       two-minute hold lifted, ``_release_requeued``), which continues at epoch 2;
    2. once epoch 2 is committed chex2's link goes down (its veth's bridge end): Slurm stops hearing chex2's slurmd
       (SlurmdTimeout=30 s), sets it DOWN and requeues the job (NODE_FAIL) within 3 minutes, no hang; `invoke
       train` names chex2, its state and Slurm's reason; with the link back and chex2 resumed, the job continues
       at epoch 3;
    3. once epoch 3 is committed it is cancelled (scancel); `invoke train ... --resume` submits it again and the
       new job runs epoch 4 only.

    metrics.json has epochs 1, 2, 3, 4 once each."""
    import time

    out = tmp_path / "restarted"
    proc = _start(testcluster, out, "--requeue")
    try:
        job_id = when_epoch_committed(out, 1, proc)
        requeue = testcluster.run("scontrol", "requeue", job_id)
        assert requeue.returncode == 0, requeue.stderr
        _release_requeued(testcluster, job_id, restarts=1)
        assert when_epoch_committed(out, 2, proc) == job_id

        _link("chex2", "down")
        down_at, shown = time.monotonic(), ""
        while time.monotonic() - down_at < 180 and "Restarts=2 " not in shown:
            shown = testcluster.run("scontrol", "-o", "show", "job", job_id).stdout
            time.sleep(1)
        requeued_s = time.monotonic() - down_at
        time.sleep(5)  # invoke train (polling each second) reads chex2's state before the link is back
        _link("chex2", "up")
        assert "Restarts=2 " in shown, "job %s not requeued within 180 s of chex2's link going down: %s" % (
            job_id, shown)
        _node_back(testcluster, "chex2")
        _release_requeued(testcluster, job_id, restarts=2)
        assert when_epoch_committed(out, 3, proc) == job_id
        _restarted_log(out, job_id, 2)

        assert testcluster.run("scancel", job_id).returncode == 0
        text, _ = proc.communicate(timeout=180)
    finally:
        _link("chex2", "up")
        if proc.poll() is None:
            proc.kill()
            testcluster.run("scontrol", "update", "nodename=chex2", "state=resume")  # for the next tests
    assert requeued_s < 180
    assert re.search(r"Slurm job %s requeued \(restart 1" % job_id, text), text
    assert "Slurm restart 1: continuing from the last committed checkpoint" in text, text
    assert re.search(r"Slurm job %s requeued \(restart 2" % job_id, text), text
    assert re.search(r"Slurm node chex2 is \S*(?:DOWN|NOT_RESPONDING)\S* \(reason: ", text), text
    assert proc.returncode != 0 and re.search(r"Slurm job %s CANCELLED" % job_id, text), text

    again = invoke(testcluster, "train", *RESUME_ARGS, "--output", str(out), "--resume")
    assert again.returncode == 0, again.stdout + again.stderr
    resumed = re.search(r"submitted Slurm job (\d+)", again.stdout).group(1)
    assert resumed != job_id and re.search(r"Slurm job %s COMPLETED" % resumed, again.stdout), again.stdout
    _restarted_log(out, resumed, 3)
    _epochs_once_each(out)
    # the followed job's end left its signed statement: the resumed job's id, its batch script and log as subjects
    verified = invoke(testcluster, "verify-run", str(out))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "job: slurm-baremetal %s (batch script sha256 " % resumed in verified.stdout, verified.stdout
    assert (out / "job.sbatch").is_file() and "signed statement: %s" % (out / "chexstack.intoto.jsonl") in again.stdout


def _wait_for_job(cluster, job_id: str, timeout_s: float = 600):
    """The job's final state (``facts.parsers.slurm.parse_scontrol``), polled from ``scontrol show job``."""
    import time

    from facts.parsers.slurm import parse_scontrol

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = parse_scontrol(cluster.run("scontrol", "-o", "show", "job", job_id).stdout)
        if state is not None and state.final:
            return state
        time.sleep(1)
    cluster.run("scancel", job_id)
    pytest.fail("Slurm job %s did not end within %.0f s" % (job_id, timeout_s))


@pytest.mark.slow
def test_bench_sweeps_cpu_ranks_through_slurm_across_both_hosts_then_bench_report(testcluster, tmp_path):
    """`invoke bench --launcher slurm --submit --np 1,2 --repeats 2` without a stack (bare metal, this .venv; the
    hosts have no GPUs): one job on chex1 and chex2, 1 rank per node, a step per count and repeat, round-robin
    (2 ranks span both hosts); then `invoke bench --collect`, one point per count with both repeats, and `invoke
    bench-report`, whose tables have each count and its scaling efficiency (a throughput run's few steps: the
    pipeline, not the numbers)."""
    results, sweeps = tmp_path / "results", tmp_path / "sweeps"
    run = invoke(testcluster, "bench", "--launcher", "slurm", "--submit", "--np", "1,2", "--per-node", "1",
                 "--results", str(results), "--label", "testcluster", *FAST_MODEL, "--image-size", "32",
                 "--batch-size", "4", "--repeats", "2",
                 "--steps", "2", "--warmup-steps", "1")
    assert run.returncode == 0, run.stdout + run.stderr
    job_id = re.search(r"submitted Slurm job (\d+)", run.stdout).group(1)
    state = _wait_for_job(testcluster, job_id)
    log = (results / ("bench-testcluster-%s.out" % job_id)).read_text()
    assert state.state == "COMPLETED" and state.nodes == "chex[1-2]", (state, log[-3000:])
    folder, = results.glob("testcluster-*")
    assert (folder / "hosts.txt").read_text().split() == ["chex1", "chex2"]
    throughput = [json.loads((folder / ("repeat-%d" % r) / ("np-%d" % n) / "throughput.json").read_text())
                  for r in (1, 2) for n in (1, 2)]
    assert [t["world_size"] for t in throughput] == [1, 2, 1, 2] and throughput[3]["hosts"] == ["chex1", "chex2"]
    # each host owns its cores (scripts/testcluster: one CPU per host): the 2-rank runs' ranks had different single
    # CPUs, chex1's and chex2's, as the cluster assigned them
    owned = dict(line.split() for line in subprocess.run([str(REPO / "scripts" / "testcluster"), "cpus"],
                                                          capture_output=True, text=True).stdout.splitlines())
    for t in throughput[1::2]:
        assert [(r["host"], r["cpus"]) for r in t["host_load"]] == [("chex1", [int(owned["chex1"])]),
                                                                    ("chex2", [int(owned["chex2"])])], t["host_load"]
        assert owned["chex1"] != owned["chex2"] and all(r["cpu_s"] > 0 for r in t["host_load"])
    assert not (folder / "np-1").exists()

    collect = invoke(testcluster, "bench", "--collect", str(folder), "--output", str(sweeps))
    assert collect.returncode == 0, collect.stdout + collect.stderr
    sweep, = sweeps.glob("testcluster-*.json")
    # --collect signed the sweep and its results folder, naming the job --submit kept (its id, its script)
    for signed in (sweep.with_name(sweep.stem + ".intoto.jsonl"), folder):
        verified = invoke(testcluster, "verify-run", str(signed))
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "job: slurm-baremetal %s (batch script sha256 " % job_id in verified.stdout, verified.stdout
    report = invoke(testcluster, "bench-report", str(sweep), "--verify", "--output", str(tmp_path / "v.png"))
    assert report.returncode == 0 and "verified: 1 signed result" in report.stdout, report.stdout + report.stderr
    points = load_sweep(sweep).points
    assert [len(p.repeats) for p in points] == [2, 2] and [p.count for p in points] == [1, 2]
    assert [[h.cpus_by_rank for h in p.host_load] for p in points] == [
        [[[int(owned["chex1"])]]] * 2, [[[int(owned["chex1"])], [int(owned["chex2"])]]] * 2]
    assert all(h.images_per_cpu_s > 0 for p in points for h in p.host_load)
    assert [p.repeats[i] for i in (0, 1) for p in points] == pytest.approx(
        [t["images_per_sec"]["total"] for t in throughput]), throughput
    report = invoke(testcluster, "bench-report", str(sweep), "--output", str(tmp_path / "figure1.png"))
    assert report.returncode == 0, report.stdout + report.stderr
    assert (tmp_path / "figure1.png").stat().st_size > 0
    with open(tmp_path / "figure1.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["CPU ranks"]) for r in rows] == [1, 2], rows
    efficiency = [r[k] for r in rows for k in r if k.startswith("scaling efficiency")]
    assert efficiency[0] == "100.00" and all(float(e) > 0 for e in efficiency), rows
