"""The parsers of a launcher's output (``facts.parsers.horovodrun``, ``facts.parsers.slurm``) on real outputs: the
recorded Slurm 22.05 records in tests/data/slurm and the horovodrun/mpirun transcripts of ../shared/cases."""
from __future__ import annotations

from facts.parsers.horovodrun import (
    LOST_DAEMON,
    MISSING_LIBRARY,
    RANK_LINE,
    Failures,
    LaunchNetwork,
    crash_libraries,
    describe_code,
    is_cause,
    last_exception,
    launch_network,
    without_tracebacks,
)
from facts.parsers.slurm import LOST_NODE_LINE, PREFIX, NodeState, parse_nodes, parse_scontrol
from tests.lib.paths import CASES, REPO

SLURM_DATA = REPO / "tests" / "data" / "slurm"


def _first_failure(lines):
    failures = Failures()
    for line in lines:
        failures.feed(line)
    return failures.first, failures.host


def test_job_state_read_from_scontrol_output():
    """The final state of real `scontrol -o show job` lines (Slurm 22.05, tests/data/slurm)."""
    done = parse_scontrol((SLURM_DATA / "scontrol-show-job-completed.txt").read_text())
    assert (done.state, done.exit_code, done.nodes, done.final, done.status()) == (
        "COMPLETED", "0:0", "chex[1-2]", True, 0)
    failed = parse_scontrol((SLURM_DATA / "scontrol-show-job-failed.txt").read_text())
    assert (failed.state, failed.reason, failed.status()) == ("FAILED", "NonZeroExitCode", 3)
    assert parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None
    assert done.restarts == 0
    requeued = parse_scontrol((SLURM_DATA / "scontrol-show-job-requeued.txt").read_text())
    assert (requeued.state, requeued.reason, requeued.restarts, requeued.final) == ("PENDING", "BeginTime", 1, False)


def test_lost_nodes_read_from_scontrol_show_node():
    """The nodes Slurm lost in real `scontrol -o show node` output (Slurm 22.05, tests/data/slurm): chex2
    after its link went down is DOWN+NOT_RESPONDING with Slurm's reason; chex1 is not."""
    nodes = parse_nodes((SLURM_DATA / "scontrol-show-node-link-down.txt").read_text())
    assert [(n.name, n.lost) for n in nodes] == [("chex1", False), ("chex2", True)]
    assert nodes[1].state == "DOWN+NOT_RESPONDING" and nodes[1].reason.startswith("Not responding [root@")
    assert nodes[0].reason == ""
    assert parse_nodes("Node chex9 not found") == []


def test_a_lost_nodes_line_reads_back_as_the_node_and_its_state():
    """``NodeState.line()`` is what ``launch.slurmjob`` prints and ``LOST_NODE_LINE`` what ``launch.stream`` reads:
    the prefix is declared once, so the two agree."""
    node = parse_nodes((SLURM_DATA / "scontrol-show-node-link-down.txt").read_text())[1]
    line = node.line()
    assert line.startswith(PREFIX + "Slurm node chex2 is DOWN+NOT_RESPONDING (reason: Not responding [root@")
    assert LOST_NODE_LINE.match(line).groups() == ("chex2", line.split(" is ", 1)[1])
    assert LOST_NODE_LINE.match(NodeState("chex9", "DOWN").line()).groups() == ("chex9", "DOWN")


def test_gloo_first_failure_of_case23():
    """Case 23 (Gloo on a loopback-only network): rank 1 exits first with 139, a segmentation fault; horovodrun's
    own summary that follows (``Process name: 1`` / ``Exit code: 139``) changes nothing."""
    lines = (CASES / "23-horovod-gloo-loopback-only.txt").read_text().split("\n$ ", 2)[0].splitlines()
    assert _first_failure(lines) == ((1, 139), None)
    assert describe_code(139) == " (SIGSEGV)" and describe_code(-11) == " (SIGSEGV)" and describe_code(2) == ""
    assert [RANK_LINE.match(l).group(1, 2, 3) for l in lines[1:3]] == [
        ("1", "stderr", "Segmentation fault"), ("0", "stderr", "Segmentation fault")]
    assert without_tracebacks(lines)[-3:] == ["Process 0 exit with status code 139.", "Process name: 1",
                                              "Exit code: 139"]


def test_mpirun_first_failure_and_lost_daemon():
    """Open MPI 4.1's reports: the first process to exit non-zero, a rank killed by a signal on a host (128 + N,
    with the host), a daemon (a host) that stopped answering."""
    assert _first_failure(["  Process name: [[51023,1],1]", "  Exit code:    2"]) == ((1, 2), None)
    assert _first_failure(["mpirun noticed that process rank 3 with PID 4242 on node chex2 exited on signal 9 "
                           "(Killed)."]) == ((3, 137), "chex2")
    assert LOST_DAEMON.search("  Remote daemon: [[13043,0],1] on node chex2").group(1) == "chex2"
    assert RANK_LINE.match("[1,2]<stdout>:x").group(1, 2, 3) == ("2", "stdout", "x")


def test_causes_and_consequences_of_a_ranks_exception():
    """A rank's own exception is a cause; Horovod's shutdown error on the other ranks and horovodrun's summary are
    consequences; the last exception line of a rank leaves horovodrun's summary out."""
    assert is_cause("OSError: Unable to open file /data/x.png")
    assert is_cause("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM")
    assert not is_cause("tensorflow.python.framework.errors_impl.UnknownError: Horovod has been shut down. This was")
    assert not is_cause("RuntimeError: Horovod detected that one or more processes exited with non-zero status")
    assert not is_cause("Segmentation fault")
    assert last_exception(["OSError: x", "RuntimeError: Horovod detected that one or more processes exited"]) == \
        "OSError: x"
    assert last_exception(["loading", "Segmentation fault (core dumped)"]) is None


def test_missing_cuda_libraries_of_case32():
    """Case 32: TensorFlow 2.4.1's warnings name the CUDA libraries it could not load, in order."""
    text = (CASES / "32-tf-cuda-libs-missing-trains-on-cpu.txt").read_text()
    found = list(dict.fromkeys(m.group(1) for m in MISSING_LIBRARY.finditer(text)))
    assert found[:2] == ["libcudart.so.11.0", "libcudnn.so.8"]


def test_the_network_a_launch_command_gives_its_ranks():
    """Case 23's command lines, read as the shell runs them: the container's --network, horovodrun's -H and
    --network-interface, HOROVOD_GLOO_IFACE given to the container; docker's own -H (its daemon) is not a host."""
    commands = [line[2:] for line in (CASES / "23-horovod-gloo-loopback-only.txt").read_text().splitlines()
                if line.startswith("$ docker run")]
    assert launch_network(commands[0]) == LaunchNetwork(("localhost",), (), "none")
    assert launch_network(commands[1]) == LaunchNetwork(("localhost",), ("lo",), "none")
    assert launch_network("sudo docker -H unix:///run/docker.sock run --net=host IMAGE horovodrun -np 8 "
                          "--hosts=node1:4,node2:4 --network-interfaces ib0,ib1 python x") == LaunchNetwork(
        ("node1", "node2"), ("ib0", "ib1"), "host")
    assert launch_network("NCCL_SOCKET_IFNAME=^lo mpirun -H a,b,a python x") == LaunchNetwork(("a", "b"))
    assert launch_network("NCCL_SOCKET_IFNAME==lo horovodrun python x") == LaunchNetwork((), ("lo",))
    assert launch_network("apptainer exec --net --network none x.sif horovodrun -np 2 python x").container_network \
        == "none"
    assert launch_network(None) == launch_network("") == LaunchNetwork()


def test_the_libraries_of_a_native_stack_trace():
    lines = ["*** Received signal 11 ***", "*** BEGIN MANGLED STACK TRACE ***",
             "/usr/lib/python3/dist-packages/tensorflow/python/../libtensorflow_framework.so.2(+0x1a3b1c1)[0x7f1e0d5]",
             "/lib/x86_64-linux-gnu/libc.so.6(+0x42520)[0x7f1e0c242520]",
             "/usr/lib/python3/dist-packages/horovod/tensorflow/mpi_lib.cpython-310-x86_64-linux-gnu.so"
             "(_ZN7horovod6common8GlooContext10InitializeEv+0x2f)[0x7f1dd0a1b2cf]",
             "*** END MANGLED STACK TRACE ***", "Segmentation fault (core dumped)"]
    assert crash_libraries(lines) == ["libtensorflow_framework.so.2", "libc.so.6",
                                      "mpi_lib.cpython-310-x86_64-linux-gnu.so"]
    assert crash_libraries(["Segmentation fault"]) == []
