"""Issue 40, part 3: a failure's explanation names the first anomaly. Every rank's lines are read in the order the log
has them (each launcher's prefix: Open MPI's ``[1,0]<stderr>:``, horovodrun's ``[0]<stdout>:``, srun's ``0: ``), and
the earliest fault-class line on any rank (``facts.parsers.faults``) is named before what followed from it;
Horovod's stall warnings are a hang of their own (``facts.parsers.horovod_stall``); an Apptainer/Singularity
``FATAL:`` is a container that did not start; "no failure found" only where no fault-class line is present, else at
least an "unclassified failure" naming the first such line. Cases 45 and 50 of ../shared/cases go through ``invoke
train --explain``, as their expected.md says."""
from __future__ import annotations

import pytest

from facts.parsers.faults import FaultScanner, classify_line, split_rank
from facts.parsers.horovod_stall import StallReader
from facts.parsers.horovodrun import rank_hosts
from launch import failure
from tests.lib import cli as cmd
from tests.lib.paths import CASES, REPO

MPI_DATA = REPO / "tests" / "data" / "mpi"
#: Open MPI 4's banner after a rank's non-zero exit, naming rank 0 the first to exit with code 1
BANNER = """--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[41203,1],0]
  Exit code:    1
--------------------------------------------------------------------------
"""


def transcript(prefix: str) -> str:
    """A case's transcript below its comment header (the job's output as its log holds it)."""
    text = next(CASES.glob(prefix + "-*.txt")).read_text()
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


def explained(tmp_path, text: str, status: int = 1) -> str:
    """``invoke train --explain`` of ``text``: its output; its exit status must be ``status`` (1: the log shows a
    failure, 0: no failure found)."""
    log = tmp_path / "job.log"
    log.write_text(text)
    result = cmd.run("train", "--explain", str(log))
    assert result.returncode == status, result.stdout + result.stderr
    return result.stdout


def parts(out: str) -> list[str]:
    """The message's parts after its header, in order (its first line split at ``; ``)."""
    return out.split("\n", 1)[0].split("); ", 1)[1].split("; ")


# --- case 45: Apptainer's FATAL on three of four ranks --------------------------------------------------------------

def test_45_containers_that_never_started_for_want_of_loop_devices(tmp_path):
    out = explained(tmp_path, transcript("45"))
    assert out.startswith("training did not start (from its log); ")  # `$ singularity --version` starts no run
    fatal = ("FATAL:   container creation failed: mount /proc/self/fd/3->/usr/local/var/singularity/mnt/session/rootfs "
             "error: while mounting image /proc/self/fd/3: failed to find loop device: could not attach image file to "
             "loop device: no loop devices available")
    assert parts(out)[0].startswith("the ranks' containers never started (a container start failure on the node, "
                                    "before any training): `%s` (line " % fatal), out
    assert "on 3 of 4 ranks" in out and "[APPTAINER_NO_LOOP_DEVICE]" in out
    # the cause: setuid mode, one loop device per container, on-demand loop devices when max_loop is unset
    assert "setuid mode mounts the SIF through one loop device per container" in out
    assert "creates loop devices on demand when max_loop is unset" in out
    # each remedy with its source
    for remedy, source in [("max_loop=N", "kernel-parameters"), ("options loop max_loop=N", "kernel-parameters"),
                           ("losetup -f", "sylabs/singularity/issues/1499"),
                           ("LOOP_CTL_ADD", "sylabs/singularity/pull/1504"), ("#1541", "1504"),
                           ("squashfuse", "apptainer.org/docs/admin/main/user_namespace.html")]:
        assert remedy in out and source in out, remedy
    # Open MPI's banner follows from it, and is no reason
    assert out.index("APPTAINER_NO_LOOP_DEVICE") < out.index("what followed from it: rank 1 exited first, with code "
                                                             "255")
    for wrong in ("max loop devices", "no failure found", "CONTAINER_IMAGE_MISSING", "image is missing",
                  "disk full", "No space left", "ssh", "MPI_HOST", "last lines"):
        assert wrong not in out, wrong


@pytest.mark.parametrize("line,code", [
    ("FATAL:   could not open image /shared/chexstack.sif: failed to retrieve path for /shared/chexstack.sif: lstat "
     "/shared/chexstack.sif: no such file or directory", "CONTAINER_IMAGE_MISSING"),
    ("FATAL:   kernel too old", "CONTAINER_START_FAILED"),
])
def test_every_apptainer_fatal_is_a_container_start_failure_quoted(tmp_path, line, code):
    """Generalised: any FATAL of Apptainer/Singularity is a container that did not start, its text quoted; a known
    sub-cause gets its code and fix, an unknown one the generic code."""
    text = transcript("45").replace(
        "FATAL:   container creation failed: mount /proc/self/fd/3->/usr/local/var/singularity/mnt/session/rootfs "
        "error: while mounting image /proc/self/fd/3: failed to find loop device: could not attach image file to "
        "loop device: no loop devices available", line)
    out = explained(tmp_path, text)
    assert "the ranks' containers never started" in out and "`%s`" % line in out and "[%s]" % code in out
    assert "on 3 of 4 ranks" in out and "APPTAINER_NO_LOOP_DEVICE" not in out and "max_loop" not in out


# --- case 50: Horovod's stall, different tensor names on the two hosts ---------------------------------------------

def test_50_a_stall_on_tensors_of_different_names_is_a_hang_of_different_software(tmp_path):
    out = explained(tmp_path, transcript("50"))
    assert out.startswith("training hung (from its log); the ranks hung in a broadcast (Horovod broadcasts the "
                          "initial variables before the first step: the first collective): Horovod's stall check "
                          "warned 3 times, first at line 4: WARNING: One or more tensors were submitted"), out
    assert ("Stalled ops: HorovodBroadcast_TFOptimizer_iterations_0 [ready ranks: 0], HorovodBroadcast_iterations_0 "
            "[ready ranks: 1]") in out
    assert ("rank 0 (192.168.12.50) submitted HorovodBroadcast_TFOptimizer_iterations_0; rank 1 (192.168.12.49) "
            "submitted HorovodBroadcast_iterations_0") in out
    assert "different code or different TensorFlow/Keras versions on those hosts" in out
    assert "[HOROVOD_STALL_MISMATCH]" in out
    for remedy in ("one image (invoke train --stack ...)", "one shared venv and checkout", "pip freeze",
                   "mpirun -H 192.168.12.50,192.168.12.49 python -c 'import tensorflow as tf, keras; "
                   "print(tf.__version__, keras.__version__)'", "horovod/horovod/issues/67"):
        assert remedy in out, remedy
    for wrong in ("no failure found", "NCCL", "network", "InfiniBand", "HOROVOD_STALL_CHECK", "STALL_SHUTDOWN",
                  "timeout", "exited first", "failed first", "training failed", "last lines"):
        assert wrong not in out, wrong


def test_a_hung_run_stopped_by_ctrl_c_says_it_hung_first(tmp_path):
    out = explained(tmp_path, transcript("50") + failure.hr.INTERRUPTED % "SIGINT" + "\n")
    assert out.startswith("interrupted by SIGINT in %s: the run was stopped (Ctrl-C, or kill -INT) after it hung; "
                          "the ranks hung in a broadcast" % (tmp_path / "job.log"))
    assert "[HOROVOD_STALL_MISMATCH]" in out and "not a failure" not in out


#: Horovod >= 0.19's format (horovod/common/stall_inspector.cc): the ranks that did NOT submit each tensor
NEW_FORMAT = [
    "[0]<stderr>:[2021-02-10 10:00:00.000000: W /tmp/pip-install/horovod/common/stall_inspector.cc:107] One or more "
    "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of "
    "ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different tensors or "
    "that only subset of ranks is submitting tensors, which will cause deadlock. ",
    "[0]<stderr>:Missing ranks:",
    "[0]<stderr>:0: [allreduce.noname.5]",
    "[0]<stderr>:1: [allreduce.noname.1, allreduce.noname.2]",
]


def test_the_newer_stall_format_names_the_ranks_ready_for_each_tensor(tmp_path):
    """https://github.com/horovod/horovod/issues/2640's format: rank 1 never submitted allreduce.noname.1 and .2,
    which rank 0 did, and rank 0 never submitted .5, which rank 1 did: names that differ between the ranks."""
    command = "$ horovodrun -np 2 -H node1:1,node2:1 python train.py"
    out = explained(tmp_path, "\n".join([command] + NEW_FORMAT) + "\n")
    assert ("rank 0 (node1) submitted allreduce.noname.1, allreduce.noname.2; rank 1 (node2) submitted "
            "allreduce.noname.5") in out
    assert "[HOROVOD_STALL_MISMATCH]" in out and "mpirun -H node1,node2 python -c" in out
    assert "ranks hung in a collective" in out


def test_a_stall_where_one_rank_submits_nothing_is_a_rank_that_never_reached_the_collective(tmp_path):
    """horovod/horovod#1012's form (one tensor a line, ``[missing ranks: 1]``): rank 1 submitted none of them; not a
    difference of names, and no advice to raise the stall check's time."""
    lines = ["[1,0]<stderr>:[2019-04-13 13:53:31.851506: W horovod/common/operations.cc:588] %s [missing ranks: 1]" % t
             for t in ("HorovodBroadcast_dense_kernel_0", "HorovodBroadcast_global_step_0")]
    warning = NEW_FORMAT[0].replace("[0]<stderr>:", "[1,0]<stderr>:") + "Stalled ops:"
    out = explained(tmp_path, "\n".join(["$ mpirun -np 2 python train.py", warning] + lines) + "\n")
    assert "rank 0 submitted HorovodBroadcast_dense_kernel_0, HorovodBroadcast_global_step_0; rank 1 submitted none " \
           "of them [HOROVOD_STALL]" in out
    assert "HOROVOD_STALL_MISMATCH" not in out and "STALL_CHECK" not in out and "timeout" not in out


# --- the first fault in time across ranks, not the last ------------------------------------------------------------

CUDA_FIRST = "2024-03-01 10:00:01.000000: E tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:268] failed " \
             "call to cuInit: CUDA_ERROR_SYSTEM_NOT_READY: system not yet initialized"
HOROVOD_AFTER = "tensorflow.python.framework.errors_impl.UnknownError: Horovod has been shut down. This was caused " \
                "by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor " \
                "after one of the ranks finished execution."


@pytest.mark.parametrize("prefix", ["[1,%d]<stderr>:", "[%d]<stderr>:", "%d: "], ids=["openmpi", "gloo", "srun"])
def test_a_ranks_cuda_failure_first_in_time_is_the_cause_and_horovods_errors_follow(tmp_path, prefix):
    lines = ["$ mpirun -np 3 -H n1:1,n2:1,n3:1 python -m trainer",
             prefix % 0 + "Using TensorFlow backend.",
             prefix % 2 + CUDA_FIRST,
             prefix % 2 + "RuntimeError: rank 2 found no GPU",
             prefix % 0 + "Traceback (most recent call last):",
             prefix % 0 + '  File "train.py", line 3, in <module>',
             prefix % 0 + HOROVOD_AFTER,
             prefix % 1 + "horovod.common.exceptions.HorovodInternalError: ncclAllReduce failed",
             prefix % 1 + HOROVOD_AFTER]
    out = explained(tmp_path, "\n".join(lines) + "\n" + BANNER)
    first = parts(out)[0]
    assert first == "the first fault (rank 2 (n3), line 3): `%s`, a GPU could not be initialised [CUDA_INIT_FAILED]" \
        % CUDA_FIRST, out
    assert "nvidia-fabricmanager" in out  # 802's fix
    assert out.index(CUDA_FIRST) < out.index("what followed from it: rank 0 exited first, with code 1")
    assert "Horovod has been shut down" not in out.split("what followed from it")[0]


def test_the_live_run_names_the_same_first_fault():
    """The one classifier serves a live run (``launch.stream``'s OutputReader, horovodrun's exit status)."""
    reader = failure.OutputReader()
    for line in ["[1,2]<stderr>:" + CUDA_FIRST, "[1,0]<stderr>:" + HOROVOD_AFTER] + BANNER.splitlines():
        reader.feed(line)
    message = failure.explain_failure(reader.outcome(1, "/runs/x/launch.log"), "mpi", gpus=True)
    assert message.startswith("training failed (horovodrun exit status 1); the first fault (rank 2, line 1): `%s`"
                              % CUDA_FIRST)


@pytest.mark.parametrize("last,what", [
    ("Fatal Python error: Aborted", "the first fault (rank 1, line 3): `Fatal Python error: Aborted`, a process "
                                    "crashed: SIGABRT (it aborted) [CRASH_ABORT]; rerun with PYTHONFAULTHANDLER=1"),
    ("Segmentation fault (core dumped)", "the first fault (rank 1, line 3): `Segmentation fault (core dumped)`, a "
                                         "process crashed: SIGSEGV (a segmentation fault) [CRASH_SEGFAULT]; rerun with "
                                         "PYTHONFAULTHANDLER=1"),
    ("Killed", "unclassified failure: the first fault (rank 1, line 3): `Killed`, a process was killed; something "
               "outside the process killed it (SIGKILL): the kernel's out-of-memory killer"),
    ("Out of memory: Killed process 4242 (python) total-vm:61234567kB", "the first fault (rank 1, line 3): `Out of "
     "memory: Killed process 4242 (python) total-vm:61234567kB`, a process ran out of memory: the out-of-memory "
     "killer [HOST_OUT_OF_MEMORY]; the host's (or the job's cgroup's) memory ran out"),
], ids=["fatal-python-error", "segfault", "killed", "oom-kill"])
def test_a_log_that_ends_in_a_crash_is_a_failure_never_no_failure_found(tmp_path, last, what):
    lines = ["$ mpirun -np 2 python -m trainer", "[1,0]<stdout>:epoch 1", "[1,1]<stderr>:" + last]
    out = explained(tmp_path, "\n".join(lines) + "\n")
    assert out.startswith("training failed (from its log); " + what), out
    assert "no failure found" not in out


def test_slurms_oom_kill_line_of_the_launcher_is_the_cause(tmp_path):
    lines = ["0: epoch 1", "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.0. Some of your processes "
             "may have been killed by the cgroup out-of-memory handler.",
             "srun: error: node1: task 1: Out Of Memory", "srun: error: node1: task 0: Exited with exit code 1"]
    out = explained(tmp_path, "\n".join(lines) + "\n")
    assert "[HOST_OUT_OF_MEMORY]" in out and "(line 2)" in out and "no failure found" not in out


def test_a_launcher_summary_alone_is_an_unclassified_failure(tmp_path):
    out = explained(tmp_path, (MPI_DATA / "openmpi-4.1.4-rank-exit-3.txt").read_text().split("Process name")[0])
    assert "unclassified failure: the first fault (line 2): `Primary job  terminated normally, but 1 process " \
           "returned`, a rank ended with a failure status" in out


@pytest.mark.parametrize("text", [
    "hello\nall good\n",
    # TensorFlow 2.4-2.10's warning on a node without a driver: a CPU run, no fault
    "[1,0]<stderr>:2021-01-01 10:00:00.000000: W tensorflow/stream_executor/cuda/cuda_driver.cc:326] failed call to "
    "cuInit: UNKNOWN ERROR (303)\n[1,0]<stdout>:epoch 1\n",
])
def test_no_failure_found_only_without_a_fault_class_line(tmp_path, text):
    assert explained(tmp_path, text, status=0).startswith("no failure found in ")


# --- the parsers -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line,rank,text", [
    ("[1,2]<stderr>:x", 2, "x"), ("[prterun-n1-123@1,3]<stdout>: x", 3, "x"), ("[0]<stdout>:x", 0, "x"),
    ("[4] x", 4, "x"), (" 3: x", 3, "x"), ("12: x", 12, "x"), ("FATAL:   x", None, "FATAL:   x"),
    ("node1:1:1 [0] NCCL WARN x", None, "node1:1:1 [0] NCCL WARN x"),
])
def test_every_launchers_rank_prefix_is_read(line, rank, text):
    assert split_rank(line) == (rank, text)


@pytest.mark.parametrize("line,kind", [
    ("FATAL:   container creation failed: x", ("container_start", False)),
    ("Fatal Python error: Aborted", ("crash", False)), ("Bus error (core dumped)", ("crash", False)),
    ("Aborted (core dumped)", ("crash", False)),
    ("It looks like MPI_INIT failed for some reason; your parallel process is", ("mpi_init", False)),
    ("RuntimeError: CUDA error: out of memory", ("out_of_memory", False)),
    ("node1:1:1 [0] transport/net_ib.cc:148 NCCL WARN NET/IB : Unable to open device", ("nccl", False)),
    ("horovod.common.exceptions.HorovodInternalError: Horovod has been shut down", ("exception", True)),
    ("srun: error: node1: task 0: Exited with exit code 1", ("exit", True)),
    ("Using TensorFlow backend.", None), ("INFO:    Use cached image", None),
    ("node1:1:1 [0] NCCL INFO Using network IB", None),
])
def test_fault_kinds(line, kind):
    assert classify_line(line) == kind


def test_the_scanner_keeps_the_first_cause_apart_from_the_first_consequence():
    scanner = FaultScanner()
    for line in ["[1,0]<stderr>:" + HOROVOD_AFTER, "[1,2]<stderr>:" + CUDA_FIRST]:
        scanner.feed(line)
    assert (scanner.first.rank, scanner.first.kind, scanner.first.number) == (2, "gpu_init", 2)
    assert scanner.first_summary.rank == 0 and scanner.first_summary.consequence


def test_the_stall_reader_reads_every_format():
    old = StallReader()
    old.feed(transcript("50").splitlines()[3], 4)
    assert old.stall.ready == {"HorovodBroadcast_TFOptimizer_iterations_0": frozenset({0}),
                               "HorovodBroadcast_iterations_0": frozenset({1})}
    assert old.stall.mismatch()
    new = StallReader()
    for number, line in enumerate(NEW_FORMAT, 1):
        assert new.feed(line, number)
    assert new.stall.missing == {"allreduce.noname.5": frozenset({0}), "allreduce.noname.1": frozenset({1}),
                                 "allreduce.noname.2": frozenset({1})}
    assert new.stall.mismatch(2) and not new.feed("[0]<stdout>:epoch 1", 5)


def test_each_ranks_host_from_the_launch_command():
    assert rank_hosts("mpirun -np 2 -H 192.168.12.50:1,192.168.12.49:1 python x.py") == ["192.168.12.50",
                                                                                          "192.168.12.49"]
    assert rank_hosts("horovodrun -np 3 -H a:2,b:2 python x.py") == ["a", "a", "b"]
    assert rank_hosts("mpirun -np 4 --map-by ppr:2:node -H a,b python x.py") is None
    assert rank_hosts("mpirun -np 4 --hostfile h python x.py") is None


def test_every_remedy_table_is_keyed_by_catalogued_codes():
    """One code family, one meaning (validate/catalogue.py), whichever table gives its fix."""
    from validate.catalogue import CODES

    for table in (failure.LAUNCH_REMEDY, failure.GPU_LAUNCH_REMEDY, failure.NCCL_REMEDY, failure.RUNTIME_REMEDY,
                  failure.PYXIS_REMEDY, failure.FAULT_REMEDY):
        assert set(table) <= set(CODES), set(table) - set(CODES)


@pytest.mark.parametrize("line,fix", [
    ("RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable", "the GPU is busy"),
    ("tensorflow.python.framework.errors_impl.InternalError: cudaGetDevice() failed. Status: cudaGetErrorString "
     "symbol not found.", "run invoke validate on that node"),
    ("RuntimeError: No CUDA GPUs are available", "the rank sees no GPU"),
])
def test_a_ranks_cuda_exception_is_named_with_its_code_and_fix(tmp_path, line, fix):
    """The CUDA failure is the rank's own exception here: it is named once, as the first fault, with its code."""
    out = explained(tmp_path, "\n".join(["[1,1]<stderr>:" + line, "[1,0]<stderr>:" + HOROVOD_AFTER]) + "\n" + BANNER)
    assert parts(out)[0] == "the first fault (rank 1, line 1): `%s`, a GPU could not be initialised " \
                            "[CUDA_INIT_FAILED]" % line, out
    assert fix in out and out.count(line) == 1


def test_fatal_lines_of_tagged_ranks_count_the_ranks_they_hit(tmp_path):
    """Under mpirun --tag-output each rank's FATAL carries its rank (and its own session folder): the ranks are
    counted, not the lines; the world size from -np."""
    fatal = ("FATAL:   container creation failed: mount /proc/self/fd/3->/var/lib/apptainer/mnt/session/%d/rootfs "
             "error: while mounting image /proc/self/fd/3: failed to find loop device: could not attach image file to "
             "loop device: no loop devices available")
    lines = ["$ mpirun -np 8 --tag-output apptainer exec --nv /shared/chexstack.sif python -m trainer"]
    lines += ["[1,%d]<stderr>:%s" % (rank, fatal % rank) for rank in (3, 5, 5, 6)]
    out = explained(tmp_path, "\n".join(lines) + "\n" + BANNER.replace("],0]", "],3]").replace("1\n--", "255\n--"))
    assert "(rank 3, line 2) on 3 of 8 ranks" in out and "[APPTAINER_NO_LOOP_DEVICE]" in out
    assert "what followed from it: rank 3 exited first, with code 255" in out


def test_a_stall_horovod_shut_down_is_the_cause_of_the_exits_after_it(tmp_path):
    """HOROVOD_STALL_SHUTDOWN_TIME_SECONDS: the stall, then Horovod's shutdown of the ranks and their exits; the stall
    is named first, the shutdown is no reason of its own."""
    lines = ["$ horovodrun -np 2 -H a:1,b:1 python train.py", NEW_FORMAT[0], NEW_FORMAT[1],
             "[0]<stderr>:1!: [allreduce.noname.7]",
             '[0]<stderr>:One or more rank (marked by "!") is stalled for longer than 120 seconds. Will shutdown.',
             "[0]<stderr>:" + HOROVOD_AFTER.replace("tensorflow.python.framework.errors_impl.UnknownError",
                                                    "horovod.common.exceptions.HorovodInternalError"),
             "Process 0 exit with status code 1."]
    out = explained(tmp_path, "\n".join(lines) + "\n")
    assert out.startswith("training failed (from its log); the ranks hung in a collective")
    assert "rank 0 (a) submitted allreduce.noname.7; rank 1 (b) submitted none of them [HOROVOD_STALL]" in out
    assert out.split("\n")[0].endswith("what followed from it: rank 0 exited first, with code 1")


# --- a GPU's fault while training, apart from its initialisation (issue 40 item 3, fresh-user trial M5/M6) ---------

#: The trainer's progress event (trainer/events.py) and Keras' epoch line: training has begun.
PROGRESS = ['@chexstack {"event": "epoch_begin", "epoch": 1, "steps": 100}', "Epoch 1/10"]


@pytest.mark.parametrize("progress", PROGRESS, ids=["event", "keras"])
@pytest.mark.parametrize("error", ["RuntimeError: CUDA error: unknown error",
                                   "2024-01-01 10:00:00.000000: E tensorflow/core/common_runtime/gpu/gpu_event_mgr.cc:"
                                   "208] Unexpected Event status: 1 CUDA_ERROR_UNKNOWN"])
def test_a_cuda_error_after_training_began_is_a_runtime_fault_not_an_init_failure(tmp_path, progress, error):
    """CUDA's text names no init cause (999 unknown error): its position, after the first progress line, does."""
    out = explained(tmp_path, "[1,0]<stdout>:%s\n[1,1]<stderr>:%s\n" % (progress, error))
    assert "[CUDA_RUNTIME_ERROR]" in out and "CUDA_INIT_FAILED" not in out, out
    assert "rank 1, line 2" in out and "compute-sanitizer" in out and "gpu.xid" in out
    before = explained(tmp_path, "[1,1]<stderr>:%s\n[1,0]<stdout>:%s\n" % (error, progress))
    assert "[CUDA_INIT_FAILED]" in before and "CUDA_RUNTIME_ERROR" not in before, before


@pytest.mark.parametrize("error,code", [
    ("RuntimeError: CUDA error: no CUDA-capable device is detected", "CUDA_INIT_FAILED"),
    ("RuntimeError: CUDA error: system not yet initialized", "CUDA_INIT_FAILED"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "CUDA_RUNTIME_ERROR"),
    ("RuntimeError: CUDA error: unspecified launch failure", "CUDA_RUNTIME_ERROR"),
    ("CUDA runtime error (710) : device-side assert triggered at /pytorch/aten/src/THC/generic/THCTensorMath.cu:29",
     "CUDA_RUNTIME_ERROR"),
])
def test_the_cuda_error_itself_tells_init_from_runtime_wherever_it_comes(tmp_path, error, code):
    for text in ("0: %s\n" % error, "0: Epoch 1/10\n0: %s\n" % error):
        out = explained(tmp_path, text)
        assert "[%s]" % code in out, out


def test_an_xid_before_the_kill_is_the_first_fault_and_the_kill_follows(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("0: Epoch 1/10\nNVRM: Xid (PCI:0000:3b:00): 79, pid=123, GPU has fallen off the bus.\n"
                   "srun: error: node01: task 0: Killed\n")
    out = cmd.run("train", "--explain", str(log), expect=1).stdout
    first, followed = out.split("what followed from it")
    assert "line 2): `NVRM: Xid (PCI:0000:3b:00): 79" in first and "[GPU_LOST]" in first
    assert "drain the node" in first and "https://docs.nvidia.com/deploy/xid-errors/" in first
    assert "rank 0 on host node01 exited first, with code 137 (SIGKILL)" in followed


def test_an_unknown_fatal_line_first_is_the_first_fault_and_the_exception_follows(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("[0]<stderr>:FOOBAR: fatal: widget overflow\n[0]<stderr>:Traceback (most recent call last):\n"
                   "[0]<stderr>:  File \"x.py\", line 1, in <module>\n[0]<stderr>:KeyError: 'gizmo'\n")
    out = cmd.run("train", "--explain", str(log), expect=1).stdout
    assert "unclassified failure: the first fault (rank 0, line 1): `FOOBAR: fatal: widget overflow`" in out, out
    assert out.index("widget overflow") < out.index("KeyError: 'gizmo'")


# --- a transcript's runs: a launch command starts one, not every shell line (fresh-user trial L1) -------------------

def test_47_a_transcripts_shell_lines_are_no_runs_and_its_802_is_named(tmp_path):
    """Case 47: gpu_burn's abort on CUDA's 802 (an uncaught exception's what()) is the first fault, with the Fabric
    Manager's fix; the `$ nvidia-smi` / `$ systemctl` lines after it are no runs of their own."""
    out = explained(tmp_path, transcript("47"))
    head = out.split("\n", 1)[0]
    assert "no failure found" not in out and "runs, from line" not in out, out
    assert "system not yet initialized`, a GPU could not be initialised [CUDA_INIT_FAILED]" in head, head
    assert "nvidia-fabricmanager" in head and "CRASH_ABORT" not in head


def test_45_a_version_query_is_no_run(tmp_path):
    out = explained(tmp_path, transcript("45"))
    assert "runs, from line" not in out and "[APPTAINER_NO_LOOP_DEVICE]" in out, out


@pytest.mark.parametrize("launch", ["horovodrun -np 2 -H n1:1,n2:1 python -m trainer train",
                                    "/usr/bin/mpirun -np 2 python3 -m trainer", "srun --label python -m trainer",
                                    "/opt/venv/bin/python -m launch.slurmjob job.sbatch 'slurm-%j.out'"])
def test_an_earlier_runs_fault_is_named_when_the_last_run_shows_none(tmp_path, launch):
    """A launch.log of several runs: the last one is judged, and an earlier failed one is named, never hidden under
    "no failure found" and never with exit 0; a shell line inside a run (`$ nvidia-smi`) starts none."""
    lines = ["$ " + launch, "0: Epoch 1/10", "$ nvidia-smi -L", "GPU 0: NVIDIA A100", "0: Traceback (most recent call "
             "last):", "0: RuntimeError: CUDA error: an illegal memory access was encountered",
             "$ " + launch, "0: Epoch 1/10"]
    log = tmp_path / "launch.log"
    log.write_text("\n".join(lines) + "\n")
    out = cmd.run("train", "--explain", str(log), expect=1).stdout  # a fault-class line: a failure's status
    assert out.startswith("an earlier run failed in %s: run 1 of 2 (from line 1): the first fault (rank 0" % log), out
    assert "no failure found" not in out and "the last run shows no failure" in out \
        and "line 6): `RuntimeError: " \
           "CUDA error: an illegal memory access was encountered`" in out and "[CUDA_RUNTIME_ERROR]" in out, out


def test_a_log_whose_runs_all_show_no_fault_says_no_failure_found(tmp_path):
    log = tmp_path / "launch.log"
    log.write_text("$ horovodrun -np 1 python -m trainer\n[0]<stdout>:Epoch 1/2\n$ horovodrun -np 1 python -m "
                   "trainer\n[0]<stdout>:Epoch 1/2\n")
    out = cmd.run("train", "--explain", str(log), expect=0).stdout
    assert out.startswith("no failure found in %s (the last of its 2 runs, from line 3)" % log)
    assert "earlier run" not in out
