"""Issue 24: a failed launch is named by the launcher's line that tells the causes apart (ssh's, the shell's,
horovodrun's, Open MPI's specific message), never by the generic "ORTE was unable to reliably start one or more
daemons" banner printed after it; validate's ``mpi.launch``, a failed ``invoke train`` and ``invoke train
--explain LOG`` use the one classifier (``facts.parsers.mpi.classify_launch``) and the one remedy table
(``launch.failure.launch_remedy``). Inputs: tests/data/mpi (real Open MPI 4.1.4 outputs, and the lines of public
reports; SOURCES.md there)."""
from __future__ import annotations

import json
import sys

import pytest

from chexstack.errors import ChexstackError
from chexstack.tools import ToolRun
from facts.parsers.horovod import CheckBuild
from facts.parsers.mpi import classify_launch, launch_items
from launch import failure, local
from launch.controller import GLOO_FIXES, GLOO_ON_LOOPBACK
from launch.k8s import is_worker_host
from launch.plans import Plan
from launch.request import TrainRequest
from tests.lib import cli as cmd
from tests.lib.paths import CASES, REPO
from validate.catalogue import CODES
from validate.checks.container import judge_container_gpus
from validate.checks.horovod import judge_build
from validate.checks.mpi import judge_launch_failure
from validate.jobfile import judge_job

MPI_DATA = REPO / "tests" / "data" / "mpi"
BANNER = (MPI_DATA / "openmpi-4.1.4-ssh-port-refused.txt").read_text().split("\n", 1)[1]

#: file -> (cause, the distinguishing line's start, the hosts the lines name)
CLASSIFIED = {
    "issue-ompi599-orted-command-not-found.txt": ("MPI_ORTED_MISSING", "bash: orted: command not found", ()),
    "issue-horovod301-orted-no-such-file.txt": ("MPI_ORTED_MISSING", "bash: /usr/local/bin/orted: No such file", ()),
    "issue-horovod951-hostname-with-slots.txt": ("MPI_HOST_UNKNOWN", "ssh: Could not resolve hostname localhost:4",
                                                 ("localhost:4",)),
    "issue-mpi-operator481-launcher-workers-unresolved.txt": (
        "MPI_HOST_UNKNOWN", "ssh: Could not resolve hostname tensorflow-benchmarks-worker-0",
        ("tensorflow-benchmarks-worker-0.tensorflow-benchmarks-worker",
         "tensorflow-benchmarks-worker-1.tensorflow-benchmarks-worker")),
    "issue-horovod2117-horovodrun-ssh-publickey.txt": (
        "MPI_SSH_AUTH", "root@x.x.x.x: Permission denied (publickey,password).", ("x.x.x.x",)),
    "issue-horovod2043-tcp-connect-failed.txt": (
        "MPI_TCP_UNREACHABLE", "A process or daemon was unable to complete a TCP connection to another process "
        "(Local host: psxi1mzh8, Remote host: psfwnezg3)", ("psfwnezg3",)),
    "openmpi-4.1.4-unresolvable-hosts.txt": ("MPI_HOST_UNKNOWN", "ssh: Could not resolve hostname node1",
                                             ("node1", "node2")),
    "openmpi-4.1.4-ssh-port-refused.txt": ("MPI_HOST_UNREACHABLE", "ssh: connect to host 127.0.0.2 port 1",
                                           ("127.0.0.2",)),
    "openmpi-4.1.4-not-enough-slots.txt": ("MPI_NOT_ENOUGH_SLOTS", "There are not enough slots available", ()),
    "openmpi-4.1.4-executable-missing.txt": ("MPI_EXECUTABLE_MISSING", "mpirun was unable to launch", ()),
    "openmpi-4.1.4-as-root.txt": ("MPI_RUN_AS_ROOT", "mpirun has detected an attempt to run as root.", ()),
    "openmpi-4.1.4-rank-exit-3.txt": ("MPI_RANK_FAILED", "Primary job terminated normally", ()),
    "openmpi-4.1.4-srun-without-pmi.txt": ("MPI_PMI_MISMATCH", 'The application appears to have been direct '
                                           'launched using "srun"', ()),
}


def test_every_launch_output_in_the_data_is_classified_here():
    assert sorted(CLASSIFIED) == sorted(p.name for p in MPI_DATA.glob("*.txt"))


@pytest.mark.parametrize("name", sorted(CLASSIFIED))
def test_the_distinguishing_line_decides_the_cause(name):
    cause, line, hosts = CLASSIFIED[name]
    found = classify_launch((MPI_DATA / name).read_text())
    assert (found.cause, found.hosts) == (cause, hosts)
    assert found.line.startswith(line) and "-----" not in found.line


def test_the_generic_banner_decides_only_when_no_line_says_why():
    """Before issue 24 the banner alone made every such launch "unreachable host"; each cause in front of it has
    its own fix (orted on the remote PATH, ssh keys, DNS)."""
    alone = classify_launch(BANNER)
    assert alone.cause == "MPI_DAEMON_START_FAILED"
    assert alone.line.startswith("ORTE was unable to reliably start one or more daemons")
    assert classify_launch("bash: orted: command not found\n" + BANNER).cause == "MPI_ORTED_MISSING"
    assert classify_launch(BANNER + "Host key verification failed.\n").cause == "MPI_SSH_AUTH"
    assert classify_launch("").cause == "MPI_LAUNCH_FAILED" and classify_launch("").line == ""


def test_a_ranks_own_lines_are_not_the_launchers():
    ranks = ("[1,0]<stderr>:PermissionError: [Errno 13] Permission denied: '/data'\n"
             "[1,1]<stdout>:ssh: this is a rank's text\n")
    assert launch_items(ranks) == []
    assert classify_launch(ranks + BANNER).cause == "MPI_DAEMON_START_FAILED"


@pytest.mark.parametrize("name,remedy", [
    ("issue-ompi599-orted-command-not-found.txt", "`ssh HOST which orted`"),
    ("issue-horovod951-hostname-with-slots.txt", "`localhost:4` is a HOST:SLOTS entry"),
    ("issue-horovod2117-horovodrun-ssh-publickey.txt", "ssh to x.x.x.x is refused or asks for a password"),
    ("issue-horovod2043-tcp-connect-failed.txt", "btl_tcp_if_include"),
])
def test_validate_names_the_same_cause_and_remedy(name, remedy):
    output = (MPI_DATA / name).read_text()
    result = judge_launch_failure(ToolRun(("mpirun", "-np", "2", "prog"), 1, "", output), 2, ["n1", "n2"])
    assert result.diagnosis == CLASSIFIED[name][0] and remedy in result.remedy
    assert remedy in failure.launch_remedy(classify_launch(output), ["n1", "n2"])


def test_an_mpijob_launcher_that_cannot_resolve_its_workers_gets_the_one_remedy_validate_job_gives(tmp_path):
    """New-user report: `ssh: Could not resolve hostname chexnet-worker-1.chexnet-worker` in an MPIJob launcher's log
    got /etc/hosts and DNS advice, while validate --job says launcherCreationPolicy: WaitForWorkersReady for the same
    fault. One cause (the launcher started before the workers' DNS names existed) and one fix, from one place
    (launch.failure.MPIJOB_EARLY_LAUNCHER, MPIJOB_EARLY_LAUNCHER_REMEDY)."""
    log = tmp_path / "launcher.log"
    log.write_text("ssh: Could not resolve hostname chexnet-worker-1.chexnet-worker: Name or service not known\n"
                   + BANNER)
    result = cmd.run("train", "--explain", str(log), expect=1)
    assert ("[MPI_HOST_UNKNOWN]; %s: %s" % (failure.MPIJOB_EARLY_LAUNCHER, failure.MPIJOB_EARLY_LAUNCHER_REMEDY)
            in result.stdout)
    assert "/etc/hosts" not in result.stdout and "launcherCreationPolicy: WaitForWorkersReady" in result.stdout
    manifest = tmp_path / "job.yaml"
    manifest.write_text((REPO / "tests" / "golden" / "launch" / "mpijob-2x4gpu-rdma.yaml").read_text().replace(
        "  launcherCreationPolicy: WaitForWorkersReady\n", ""))
    (policy,) = [f for f in judge_job(str(manifest))[1] if f.rule == "job.launcher_policy"]
    assert (policy.code, policy.remedy) == ("MPI_HOST_UNKNOWN", failure.MPIJOB_EARLY_LAUNCHER_REMEDY)
    # a host that is no MPIJob worker keeps the name-resolution fix
    plain = failure.launch_remedy(classify_launch((MPI_DATA / "openmpi-4.1.4-unresolvable-hosts.txt").read_text()))
    assert plain.startswith("node1,node2 does not resolve from this node") and "launcherCreationPolicy" not in plain


def test_the_names_of_an_mpijobs_workers():
    assert all(is_worker_host(h) for h in ("chexnet-worker-1.chexnet-worker", "a-worker-0.a-worker.ml.svc",
                                           "tensorflow-benchmarks-worker-12.tensorflow-benchmarks-worker"))
    assert not any(is_worker_host(h) for h in ("node1", "chexnet-worker-1", "a-worker-0.b-worker", "localhost:4",
                                               "a-worker-x.a-worker"))


def _failing_plan(name: str) -> Plan:
    """A plan whose command prints a recorded launcher output (ranks first, when given) and exits 1, as
    horovodrun/mpirun do."""
    code = "import sys; sys.stdout.write(open(%r).read()); sys.exit(1)" % str(MPI_DATA / name)
    return Plan([sys.executable, "-c", code], {}, "mpi", "test")


def test_a_failed_train_names_the_distinguishing_line_not_the_banners_end(tmp_path):
    """``launch.local.execute`` is what ``invoke train`` runs every plan through. The ssh line comes before 25
    banner lines: the last lines of the output (what a failed run printed before) never showed it."""
    request = TrainRequest(argv=("--data", "synthetic", "--output", str(tmp_path / "run")))
    with pytest.raises(ChexstackError) as raised:
        local.execute(request, _failing_plan("issue-mpi-operator481-launcher-workers-unresolved.txt"),
                      cwd=str(tmp_path))
    message = str(raised.value)
    assert raised.value.exit_code == 1
    assert ("the launch failed before the ranks ran: ssh: Could not resolve hostname tensorflow-benchmarks-worker-0"
            ".tensorflow-benchmarks-worker: Name or service not known [MPI_HOST_UNKNOWN]") in message
    assert failure.MPIJOB_EARLY_LAUNCHER_REMEDY in message  # an MPIJob's workers: the launcher came first
    assert "last lines" not in message and "network routing requirements" not in message

    log = tmp_path / "run" / "launch.log"
    explained = cmd.run("train", "--explain", str(log))
    assert explained.returncode == 1, explained.stderr
    assert message.split("; ", 1)[1].split("\nfull log:")[0] in explained.stdout  # the same message, from the log
    assert "training failed (from its log)" in explained.stdout


def test_not_enough_slots_for_gpu_ranks_lowers_np_and_never_oversubscribes(tmp_path):
    """New-user report: MPI_NOT_ENOUGH_SLOTS for a GPU job suggested --oversubscribe, which puts two ranks on one
    GPU (NCCL's "Duplicate GPU detected"). For GPU ranks the fix is fewer ranks (or more hosts with GPUs); CPU ranks
    keep theirs; where the log does not say which, both, each said for whom."""
    output = (MPI_DATA / "openmpi-4.1.4-not-enough-slots.txt").read_text()
    found = classify_launch(output)
    gpu, cpu = failure.launch_remedy(found, gpus=True), failure.launch_remedy(found, gpus=False)
    assert gpu == failure.GPU_LAUNCH_REMEDY["MPI_NOT_ENOUGH_SLOTS"] and gpu.startswith("one rank per GPU: lower -np")
    assert "not --oversubscribe" in gpu and "or --oversubscribe" not in gpu
    assert cpu == failure.LAUNCH_REMEDY["MPI_NOT_ENOUGH_SLOTS"] == failure.launch_remedy(found)  # validate's mpi.launch
    assert failure.launch_remedy(found, gpus=None) == "GPU ranks: %s; CPU ranks: %s" % (gpu, cpu)
    assert failure.launch_remedy(classify_launch(BANNER), gpus=True) == failure.launch_remedy(classify_launch(BANNER))

    request = TrainRequest(gpus=2, np=4, argv=("--data", "synthetic", "--output", str(tmp_path / "run")))
    with pytest.raises(ChexstackError) as raised:
        local.execute(request, _failing_plan("openmpi-4.1.4-not-enough-slots.txt"), cwd=str(tmp_path))
    assert "[MPI_NOT_ENOUGH_SLOTS]; %s" % gpu in str(raised.value) and "CPU ranks" not in str(raised.value)
    # a log does not say: both
    explained = cmd.run("train", "--explain", str(tmp_path / "run" / "launch.log"), expect=1)
    assert "[MPI_NOT_ENOUGH_SLOTS]; GPU ranks: one rank per GPU" in explained.stdout


@pytest.mark.parametrize("name,what", [
    ("openmpi-4.1.4-srun-without-pmi.txt", "[MPI_PMI_MISMATCH]; start the ranks with mpirun, or with srun "
                                           "--mpi=pmix"),  # as a Slurm job's slurm-N.out
    ("issue-horovod2117-horovodrun-ssh-publickey.txt", "root@x.x.x.x: Permission denied (publickey,password). "
                                                       "[MPI_SSH_AUTH]"),
])
def test_train_explain_reads_a_saved_launcher_log(tmp_path, name, what):
    log = tmp_path / "slurm-42.out"
    log.write_text((MPI_DATA / name).read_text())
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == 1 and what in result.stdout and "full log: %s" % log in result.stdout


def test_train_explain_of_a_rank_failure_names_the_rank(tmp_path):
    log = tmp_path / "launch.log"
    log.write_text("\n".join([
        "[1,1]<stderr>:trainer: error: --data /x: no such directory",
        "Primary job  terminated normally, but 1 process returned",
        "a non-zero exit code. Per user-direction, the job has been aborted.",
        "  Process name: [[51023,1],1]",
        "  Exit code:    2"]) + "\n")
    result = cmd.run("train", "--explain", str(log), expect=1)
    assert "rank 1 exited first, with code 2; rank 1: --data /x: no such directory" in result.stdout
    assert "the launch failed" not in result.stdout


def test_train_explain_refusals(tmp_path):
    done = tmp_path / "done.log"
    done.write_text('[0]<stdout>:@chexstack {"event": "done"}\n')
    assert "no failure in %s" % done in cmd.run("train", "--explain", str(done), expect=0).stdout
    missing = cmd.run("train", "--explain", str(tmp_path / "nope.log"))
    assert missing.returncode == 2 and "--explain %s: no such file" % (tmp_path / "nope.log") in missing.stderr
    mixed = cmd.run("train", "--explain", str(done), "--gpus", "2", "--lr", "0.1")
    assert mixed.returncode == 2 and "leave out --gpus, --lr" in mixed.stderr
    binary = tmp_path / "core"
    binary.write_bytes(b"\x1b[2J" + bytes(range(256)))
    refused = cmd.run("train", "--explain", str(binary))
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout
    assert ("--explain %s: not a text file (a NUL byte at offset 4); expected a launcher log" % binary
            in refused.stderr.replace("\n", " ")), refused.stderr


@pytest.mark.parametrize("text,what", [
    ("", "it is empty"),
    ("hello\nall good\n", "no rank's exit code, error or exception and no launcher failure in its 2 line(s); last "
                           "lines:\nhello\nall good"),
])
def test_train_explain_of_a_log_without_a_failure_says_none_was_found(tmp_path, text, what):
    """New-user report: an empty log, or one saying "hello / all good", was explained as "training failed (from its
    log)". Explain is informational: a log without a failure says so and exits 0 (an unreadable one is exit 2)."""
    log = tmp_path / "launch.log"
    log.write_text(text)
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "no failure found in %s: %s\n" % (log, what)
    assert "training failed" not in result.stdout


INTERRUPTED_RUN = [
    "$ /venv/bin/horovodrun -np 2 -H localhost:2 --gloo /venv/bin/python -m trainer --output /runs/int1",
    '[0]<stdout>:@chexstack {"event": "run", "hosts": ["vm", "vm"], "world_size": 2}',
    '[0]<stdout>:@chexstack {"epoch": 1, "event": "epoch_begin", "steps": 19}',
    '[0]<stdout>:@chexstack {"epoch": 1, "event": "epoch_end", "loss": 0.1}',
    "[1]<stderr>:Terminated",
    "[0]<stderr>:Terminated",
    "Process 0 exit with status code 143.",
    "RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to "
    "be terminated. The first process to do so was:",
    "Process name: 0",
    "Exit code: 143",
    "",
    failure.hr.INTERRUPTED % "SIGINT",
]


def test_train_explain_of_a_run_stopped_by_ctrl_c_says_so_not_a_failure(tmp_path):
    """New-user report: the log of a Ctrl-C'd run, ending with launch.stream's own line `[chexstack] interrupted by
    SIGINT`, was explained as "training failed … rank 0 exited first, with code 143 (SIGTERM)". It was the user's
    stop: the ranks' 143 is the stop's, and the run continues with --resume after the epoch the log shows ended."""
    log = tmp_path / "launch.log"
    log.write_text("\n".join(INTERRUPTED_RUN) + "\n")
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("interrupted by SIGINT in %s: the run was stopped (Ctrl-C, or kill -INT), not a "
                                    "failure; rank 0's exit code 143 (SIGTERM) follows from it" % log)
    assert "the last epoch the log shows ended is 1: continue with --resume" in result.stdout
    assert "training failed" not in result.stdout
    early = [line for line in INTERRUPTED_RUN if "epoch_end" not in line]
    log.write_text("\n".join(early).replace("SIGINT", "SIGTERM") + "\n")
    stopped = cmd.run("train", "--explain", str(log)).stdout
    assert stopped.startswith("interrupted by SIGTERM in %s: the run was stopped (kill, scancel or a shutdown)" % log)
    assert "the log shows no epoch ended: start the run again" in stopped


def test_train_explain_reads_the_last_run_of_an_appended_launch_log(tmp_path):
    """A run's launch.log takes every run of its output folder, each from its `$ command` line: the last run is
    explained, and the message says which."""
    failed = ["$ /venv/bin/horovodrun -np 2 -H localhost:2 python -m trainer --output /runs/int1",
              "[1]<stderr>:trainer: error: --data /x: no such directory", "Process 1 exit with status code 2."]
    log = tmp_path / "launch.log"
    log.write_text("\n".join(INTERRUPTED_RUN + failed) + "\n")
    result = cmd.run("train", "--explain", str(log), expect=1).stdout
    assert result.startswith("the trainer refused its input (from its log; the last of its 2 runs, from line %d); "
                             "rank 1 exited "
                             "first, with code 2; rank 1: --data /x: no such directory" % (len(INTERRUPTED_RUN) + 1))
    log.write_text("\n".join(failed + INTERRUPTED_RUN) + "\n")
    assert cmd.run("train", "--explain", str(log), expect=0).stdout.startswith(
        "interrupted by SIGINT in %s (the last of its 2 runs, from line 4)" % log)
    log.write_text("\n".join(INTERRUPTED_RUN + failed[:1] + ['[0]<stdout>:@chexstack {"event": "done"}']) + "\n")
    assert cmd.run("train", "--explain", str(log), expect=0).stdout.startswith(
        "no failure in %s (the last of its 2 runs, from line %d): the run's trainer reported it done"
        % (log, len(INTERRUPTED_RUN) + 1))


def test_the_log_line_of_an_interrupted_run_is_the_one_the_reader_reads():
    reader = failure.OutputReader()
    for line in INTERRUPTED_RUN:
        reader.feed(line)
    outcome = reader.outcome(None, "launch.log")
    assert (outcome.interrupted, outcome.last_epoch, outcome.first_failure) == (2, 1, (0, 143))
    assert reader.outcome(1, "launch.log", 15).interrupted == 15  # a live run's own signal first


def test_train_explain_names_the_nccl_cause_validate_names(tmp_path):
    """Case 35's run (two ranks on one GPU) as a saved log: the explanation gives the cause and remedy validate's
    nccl.init gives (the same classifier, facts.parsers.nccl, and the same remedy, launch.failure.NCCL_REMEDY), not
    a network remedy."""
    log = tmp_path / "launch.log"
    log.write_text((CASES / "35-nccl-duplicate-gpu-local-rank-zero.txt").read_text())
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == 1, result.stderr
    assert "NCCL: gpu-node-1:67917:67949 [0] init.cc:748 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both " \
           "on CUDA device 3b000 [NCCL_DUPLICATE_GPU]; " + failure.NCCL_REMEDY["NCCL_DUPLICATE_GPU"] in result.stdout
    assert "GID" not in result.stdout


# --- the NCCL cause wherever its lines fall in the log (case 04) -------------------------------------------------
def _case04_nccl_lines() -> list[str]:
    """Case 04's NCCL_DEBUG lines and the rank's exception, as its mpirun printed them."""
    text = (CASES / "04-nccl-shm-too-small.txt").read_text()
    return text.split("python tensorflow_mnist.py\n", 1)[1].splitlines()


#: what follows NCCL's WARN lines in a real log: the failing rank's traceback, the other ranks' aborts, Open MPI's
#: banner; more than ``TAIL_LINES`` of them
_AFTER = (["[1,1]<stderr>:  File \"/usr/lib/python3/dist-packages/tensorflow/x%d.py\", line %d, in f" % (i, i)
           for i in range(8)]
          + ["gpu-node-01:214%d:255%d [%d] NCCL INFO comm 0x5%d rank %d nranks 4 cudaDev %d busId %d000 - Abort "
             "COMPLETE" % (r, r, r, r, r, r, r) for r in (0, 2, 3) for _ in range(6)]
          + (MPI_DATA / "openmpi-4.1.4-rank-exit-3.txt").read_text().splitlines())


def test_the_nccl_cause_is_named_when_many_lines_follow_its_warn_lines(tmp_path):
    """Case 04: the WARN lines of /dev/shm were followed by more than TAIL_LINES unprefixed lines, and the explanation
    lost the cause; every NCCL line is kept, and the line quoted is the one that tells the cause apart, not the
    framework's "unhandled system error"."""
    assert len(_AFTER) > failure.TAIL_LINES
    log = tmp_path / "launch.log"
    log.write_text("\n".join(_case04_nccl_lines() + _AFTER) + "\n")
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == 1, result.stderr
    assert ("NCCL: gpu-node-01:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space "
            "left on device [NCCL_SHM_EXHAUSTED]; " + failure.SHM_REMEDY) in result.stdout
    assert "NCCL: tensorflow" not in result.stdout and "NCCL: [1,1]" not in result.stdout


def test_the_nccl_lines_of_a_rank_outlive_its_tail():
    """Rank-prefixed NCCL lines behind more than RANK_TAIL_LINES of the same rank's output."""
    reader = failure.OutputReader()
    lines = ["[1,1]<stderr>:" + line for line in _case04_nccl_lines() if line.strip()]
    for line in lines + ["[1,1]<stderr>:step %d" % i for i in range(failure.RANK_TAIL_LINES + 5)] + _AFTER:
        reader.feed(line)
    outcome = reader.outcome(1, "/tmp/r/launch.log")
    assert not any("posix_fallocate" in line for line in outcome.rank_tails[1] + outcome.tail)
    assert failure.nccl_diagnosis(outcome).startswith(
        "NCCL: gpu-node-01:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed")


def test_the_quoted_nccl_line_is_the_distinguishing_one_not_the_first_error():
    """The generic lines come first here (a transport selected, then the framework's error): the quote is still the
    line that names the cause, for each cause a single line proves."""
    head = ["node1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
            "node1:1:1 [0] NCCL INFO Using network Socket",
            "[1,0]<stderr>:tensorflow.python.framework.errors_impl.UnknownError: ncclCommInitRank failed: unhandled "
            "system error"]
    causes = {"NCCL_SHM_EXHAUSTED": _case04_nccl_lines()[5],
              "NCCL_IB_MEMREG_FAILED": "node1:1:1 [0] misc/ibvwrap.cc:153 NCCL WARN Call to ibv_reg_mr failed",
              "NCCL_DUPLICATE_GPU": "node1:1:1 [0] init.cc:748 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 "
                                    "both on CUDA device 3b000"}
    for cause, line in causes.items():
        reader = failure.OutputReader()
        for each in head + [line] + _AFTER:
            reader.feed(each)
        assert failure.nccl_diagnosis(reader.outcome(1, "x")) == "NCCL: %s [%s]; %s" % (
            line.strip(), cause, failure.NCCL_REMEDY[cause])


# --- exit 139 under Gloo: the loopback cause only where the ranks were on loopback (case 23) ---------------------
def _case23_run(command: str | None = None, run_hosts: list[str] | None = None) -> str:
    """Case 23's first run (both Gloo ranks exit 139) as a saved log, its ``$`` line replaced by ``command``."""
    first = (CASES / "23-horovod-gloo-loopback-only.txt").read_text().split("\n\n", 1)[0].splitlines()
    lines = ([command if command is not None else first[0]] + first[1:]) if command != "" else first[1:]
    if run_hosts:
        lines.insert(1, '[0]<stdout>:@chexstack {"event": "run", "hosts": %s}' % json.dumps(run_hosts))
    return "\n".join(lines) + "\n"


def _case23_commands():
    """Case 23's own command lines: the --network none container, and the same with lo named explicitly."""
    text = (CASES / "23-horovod-gloo-loopback-only.txt").read_text()
    return [line for line in text.splitlines() if line.startswith("$ docker run") and "--gloo" in line]


@pytest.mark.parametrize("command,why", [
    (0, "the container was started with --network none"),
    (1, "the container was started with --network none"),
    ("$ horovodrun -np 2 -H localhost:2 --gloo --network-interface lo python train.py", "the ranks were pointed at lo"),
])
def test_a_gloo_segfault_on_loopback_gets_the_loopback_cause(tmp_path, command, why):
    log = tmp_path / "launch.log"
    log.write_text(_case23_run(_case23_commands()[command] if isinstance(command, int) else command))
    result = cmd.run("train", "--explain", str(log), expect=1)
    assert "exit 139 is a segmentation fault; %s: %s: %s" % (why, GLOO_ON_LOOPBACK, GLOO_FIXES) in result.stdout


@pytest.mark.parametrize("command,run_hosts,why", [
    ("$ horovodrun -np 2 -H node1:1,node2:1 --gloo python train.py", None, "the ranks ran on 2 hosts, node1, node2"),
    ("$ horovodrun -np 2 --hostfile hosts.txt --gloo python train.py", ["node1.cluster", "node2.cluster"],
     "the ranks ran on 2 hosts, node1, node2"),
    ("$ horovodrun -np 2 -H localhost:2 --gloo --network-interface eth0 python train.py", None,
     "the ranks were pointed at eth0"),
    ("$ docker run --rm --network host IMAGE horovodrun -np 2 -H localhost:2 --gloo python train.py", None,
     "the container had the host network"),
])
def test_a_gloo_segfault_off_loopback_is_a_segfault_not_the_loopback_cause(tmp_path, command, run_hosts, why):
    """The reviewer's case: a multi-host run over ib0 cannot have had loopback only; its exit 139 is a crash in the
    rank's own process, named with the libraries of its stack trace."""
    log = tmp_path / "launch.log"
    text = _case23_run(command, run_hosts).replace(
        "[1]<stderr>:Segmentation fault\n", "[1]<stderr>:*** BEGIN MANGLED STACK TRACE ***\n[1]<stderr>:/usr/lib/"
        "python3/dist-packages/tensorflow/libtensorflow_framework.so.2(+0x1a3b1c1)[0x7f1e0d5a11c1]\n"
        "[1]<stderr>:Segmentation fault\n")
    log.write_text(text)
    result = cmd.run("train", "--explain", str(log), expect=1)
    assert GLOO_ON_LOOPBACK not in result.stdout and "--controller mpi" not in result.stdout
    assert ("exit 139 is a segmentation fault in rank 1's own process, not Gloo's loopback crash (%s); its stack "
            "trace is in libtensorflow_framework.so.2: rerun with PYTHONFAULTHANDLER=1" % why) in result.stdout
    assert "last lines of rank 1:" in result.stdout


def test_a_gloo_segfault_without_evidence_names_the_loopback_cause_as_a_possibility(tmp_path):
    for command, why in [("", "the log names neither the hosts nor the interfaces"),
                         ("$ horovodrun -np 2 -H localhost:2 --gloo python train.py",
                          "the ranks ran on one host, localhost")]:
        log = tmp_path / "launch.log"
        log.write_text(_case23_run(command))
        result = cmd.run("train", "--explain", str(log), expect=1)
        assert ("exit 139 is a segmentation fault; if the ranks' host had no network interface but loopback (%s; "
                "a --network none container), it is Gloo's crash: %s" % (why, GLOO_ON_LOOPBACK)) in result.stdout


# --- a rank's failure validate diagnoses too: its code and its remedy (cases 02 and 06) ---------------------------
def _case02_observed() -> str:
    """Case 02's observed exception line, as every rank printed it."""
    text = (CASES / "02-horovod-tf-version-mismatch.expected.md").read_text()
    return next(part for part in text.split("`") if part.startswith("horovod.common.exceptions."))


def _rank_failure_log(tmp_path, rank_lines: list[str], prefix: str = "[1,0]<stderr>:", after: str = "") -> str:
    log = tmp_path / "launch.log"
    log.write_text("\n".join([prefix + "Traceback (most recent call last):",
                              prefix + '  File "train.py", line 3, in <module>']
                             + [prefix + line for line in rank_lines]) + "\n" + after
                   + (MPI_DATA / "openmpi-4.1.4-rank-exit-3.txt").read_text())
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == 1, result.stderr
    return result.stdout


@pytest.mark.parametrize("prefix", ["[1,0]<stderr>:", "[0]<stderr>:"], ids=["mpi", "gloo"])
def test_horovod_built_for_another_tensorflow_gets_validates_code_and_remedy(tmp_path, prefix):
    out = _rank_failure_log(tmp_path, [_case02_observed()], prefix)
    assert ("Horovod was built for tensorflow 2.3.0, the ranks import tensorflow 2.4.1 [HOROVOD_TF_MISMATCH]; "
            + failure.RUNTIME_REMEDY["HOROVOD_TF_MISMATCH"]) in out


def test_an_older_horovods_undefined_tensorflow_symbol_is_the_same_fault(tmp_path):
    """Case 02's sources: older Horovod shows the condition as an undefined TensorFlow symbol in its library."""
    line = ("ImportError: /usr/local/lib/python3.6/dist-packages/horovod/tensorflow/mpi_lib.cpython-36m-x86_64-linux-"
            "gnu.so: undefined symbol: _ZN10tensorflow8OpKernel11TraceStringEPNS_15OpKernelContextEb")
    out = _rank_failure_log(tmp_path, [line])
    assert ("Horovod's library misses TensorFlow's symbol _ZN10tensorflow8OpKernel11TraceStringEPNS_15OpKernelContextEb"
            ": it was built for another TensorFlow [HOROVOD_TF_MISMATCH]; "
            + failure.RUNTIME_REMEDY["HOROVOD_TF_MISMATCH"]) in out


def test_both_spellings_of_a_driver_older_than_the_cuda_get_validates_code_and_remedy(tmp_path):
    """Case 06: the CUDA runtime's (cudaError 35) in a rank, nvidia-container-cli's from the container engine."""
    text = (CASES / "06-cuda-driver-too-old.txt").read_text()
    runtime = next(line for line in text.splitlines() if "insufficient" in line)
    engine = next(line for line in text.splitlines() if "unsatisfied condition" in line)
    remedy = failure.RUNTIME_REMEDY["CUDA_DRIVER_TOO_OLD"]
    out = _rank_failure_log(tmp_path, [runtime, "tensorflow.python.framework.errors_impl.InternalError: "
                                       "cudaGetDevice() failed. Status: CUDA driver version is insufficient for "
                                       "CUDA runtime version"])
    assert "the NVIDIA driver is older than the CUDA the ranks need [CUDA_DRIVER_TOO_OLD]; " + remedy in out
    out = _rank_failure_log(tmp_path, ["SystemExit: 1"], after=engine + "\n")
    assert "the NVIDIA driver is older than the CUDA the ranks need (%s) [CUDA_DRIVER_TOO_OLD]; %s" % (
        engine, remedy) in out


@pytest.mark.parametrize("lines,where", [
    (["[1,0]<stderr>:2024-01-01 10:00:00.000000: W tensorflow/core/framework/op_kernel.cc:1816] OP_REQUIRES failed "
      "at conv_ops.cc:1068 : RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[64,256,56,56] and type float "
      "on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
      "[1,0]<stderr>:tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor"],
     " on GPU:0 allocating a tensor of shape [64,256,56,56]"),
    (["[0]<stderr>:tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
      "shape[32,1024,14,14] and type float on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
      "Process 0 exit with status code 1."], " on CPU:0 allocating a tensor of shape [32,1024,14,14]"),
    (["[1,1]<stderr>:ResourceExhaustedError: OOM when allocating tensor"], ""),  # TF 1.x, cut short
], ids=["tf2-gpu", "cpu", "bare"])
def test_tensorflow_out_of_memory_gets_its_cause_and_remedy(tmp_path, lines, where):
    """New-user report: a TensorFlow OOM (ResourceExhaustedError: OOM when allocating tensor …) was explained with
    the exception line alone. It is TF_OUT_OF_MEMORY (validate/catalogue.py): the batch per rank does not fit the
    device; the device and the tensor's shape where the log gives them."""
    log = tmp_path / "oom.log"
    log.write_text("\n".join(lines) + "\n")
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == 1, result.stderr
    assert ("; TensorFlow ran out of memory%s [TF_OUT_OF_MEMORY]; %s\n" % (where, failure.RUNTIME_REMEDY[
        "TF_OUT_OF_MEMORY"])) in result.stdout
    assert failure.RUNTIME_REMEDY["TF_OUT_OF_MEMORY"].startswith("lower --batch-size, the batch of each rank")
    assert "TF_OUT_OF_MEMORY" in CODES and result.stdout.startswith("training failed (from its log)")


def test_validate_gives_these_faults_the_same_remedy():
    """One remedy per code: what validate's horovod.env and container.gpus say for the same faults."""
    build = CheckBuild("0.21.3", {"framework": {"TensorFlow": True}})
    mismatch = judge_build(build, [("framework", "TensorFlow")], tf_version="2.4.1", built_for="2.3.0")
    assert (mismatch.diagnosis, mismatch.remedy) == ("HOROVOD_TF_MISMATCH",
                                                     failure.RUNTIME_REMEDY["HOROVOD_TF_MISMATCH"])
    engine = next(line for line in (CASES / "06-cuda-driver-too-old.txt").read_text().splitlines()
                  if "unsatisfied condition" in line)
    driver = judge_container_gpus(engine, False, 1, None)
    assert (driver.diagnosis, driver.remedy) == ("CUDA_DRIVER_TOO_OLD", failure.RUNTIME_REMEDY["CUDA_DRIVER_TOO_OLD"])


# --- a pyxis step whose image pyxis pulled from a registry (case 29) ---------------------------------------------
def _case29_pyxis_lines() -> str:
    """What pyxis printed for `--container-image=chexstack-cpu.sqsh` in case 29 (a Slurm job's output)."""
    text = (CASES / "29-pyxis-relative-sqsh-image.txt").read_text()
    return text.split("(no leading / or ./):\n", 1)[1]


def test_train_explain_names_the_pyxis_import_of_a_squashfs_name(tmp_path):
    """Case 29: the line that tells the cause apart is pyxis' import of the file name as a docker image (and the
    registry's answer), not its generic "couldn't start container" lines; the remedy names both forms pyxis reads as
    a file."""
    log = tmp_path / "slurm-42.out"
    log.write_text(_case29_pyxis_lines())
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == 1, result.stderr
    assert ("the step's container did not start: pyxis: importing docker image: chexstack-cpu.sqsh … URL "
            "https://registry-1.docker.io/v2/library/chexstack-cpu.sqsh/manifests/latest returned error code: 401 "
            "Unauthorized [PYXIS_SQUASHFS_AS_REGISTRY]; " + failure.pyxis_remedy("PYXIS_SQUASHFS_AS_REGISTRY",
                                                                                "chexstack-cpu.sqsh")) in result.stdout
    assert "/shared/images/chexstack-cpu.sqsh" in result.stdout and "./chexstack-cpu.sqsh" in result.stdout
    assert "last lines" not in result.stdout


@pytest.mark.parametrize("image,cause", [("chexstack-cpu.squashfs", "PYXIS_SQUASHFS_AS_REGISTRY"),
                                         ("images/chexstack-cpu.sqfs", "PYXIS_SQUASHFS_AS_REGISTRY"),
                                         ("chexstack-cpu.sif", "PYXIS_SIF_IMAGE"),
                                         ("chexstack/cpu:0.1.0", None)])
def test_every_image_pyxis_misreads_is_named(image, cause):
    reader = failure.OutputReader()
    for line in _case29_pyxis_lines().replace("chexstack-cpu.sqsh", image).splitlines():
        reader.feed(line)
    found = failure.pyxis_diagnosis(reader.outcome(1, "x"))
    if cause is None:  # a registry image the registry refused: not this fault
        assert found is None
    else:
        assert found.startswith("the step's container did not start: pyxis: importing docker image: %s … URL "
                                % image) and found.endswith("[%s]; %s" % (cause, failure.pyxis_remedy(cause, image)))


def test_a_long_nccl_log_keeps_its_first_lines_and_its_warnings(monkeypatch):
    """NCCL_DEBUG_SUBSYS=COLL logs a line per collective: the reader keeps the first NCCL_KEEP NCCL lines and, as
    many again, the warnings after them, not every line."""
    from launch import failure

    monkeypatch.setattr(failure, "NCCL_KEEP", 5)
    reader = failure.OutputReader()
    for i in range(100):
        reader.feed("[1,0]<stdout>:node1:1:1 [0] NCCL INFO AllReduce: opCount %x" % i)
    reader.feed("[1,0]<stdout>:node1:1:1 [0] transport/shm.cc:590 NCCL WARN Error while creating shared memory")
    kept = reader.nccl
    assert len(kept) == 6 and kept[0].endswith("opCount 0") and "NCCL WARN" in kept[-1]
