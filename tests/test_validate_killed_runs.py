"""A milestone is not health (../shared/cases/31): an all_reduce_perf run that was stopped — timed out, killed by
``timeout`` (exit 124), by SIGKILL (137, or -9 as Python records it), by Ctrl-C (130) — before its first result
row hung, whatever milestone it reached before (``Init COMPLETE``, the P2P channels): ``nccl.busbw`` is
``NCCL_HANG`` and ``nccl.transport`` no PASS. The hang says how long it was observed as the record gives it (the
recorded seconds, the ``timeout`` wrapper's limit, else "killed after an unknown time"), never this check's own
timeout as if observed."""
from __future__ import annotations

import pytest

from chexstack.tools import ToolRun
from facts.parsers import nccl
from facts.parsers.observation import stopped
from tests.lib.bundle_corpus import judged
from tests.lib.paths import CASES

CASE31 = "case31-acs-redirect-p2p-hang"
COMMAND = "NCCL_DEBUG=INFO ./build/all_reduce_perf -b 8 -e 256M -f 2 -g 2"
IDS = ["nccl.busbw", "nccl.transport", "nccl.init"]


@pytest.mark.parametrize("run, how, seconds", [
    (ToolRun(("all_reduce_perf",), None, timed_out=True, seconds=180.2), "timed out", 180.2),
    (ToolRun(("all_reduce_perf",), None, timed_out=True), "timed out", None),
    (ToolRun(("sh", "-c", "timeout 600 env NCCL_DEBUG=INFO ./all_reduce_perf -g 2"), 124), "`timeout 600`, exit 124",
     600),
    (ToolRun(("sudo", "timeout", "10m", "all_reduce_perf"), 124), "`timeout 10m`, exit 124", 600),
    (ToolRun(("timeout", "600", "all_reduce_perf"), 124, seconds=412.0), "`timeout 600`, exit 124", 412),
    (ToolRun(("all_reduce_perf",), 124), "exit 124, `timeout`'s status", None),
    (ToolRun(("sh", "-c", COMMAND), 137), "SIGKILL, exit 137", None),
    (ToolRun(("all_reduce_perf",), -9), "SIGKILL, exit -9", None),
    (ToolRun(("sh", "-c", COMMAND + " 2>&1 | tee log"), 130), "SIGINT, exit 130", None),
    (ToolRun(("all_reduce_perf",), 143, seconds=30), "SIGTERM, exit 143", 30),
    (ToolRun(("timeout", "-s", "KILL", "300", "all_reduce_perf"), 137), "SIGKILL from `timeout -s KILL 300`, exit 137",
     300),
    (ToolRun(("timeout", "-k", "30", "600", "all_reduce_perf"), 137), "SIGKILL from `timeout -k 30 600`, exit 137",
     630),
])
def test_how_a_run_was_stopped_and_for_how_long_as_recorded(run, how, seconds):
    stop = stopped(run)
    assert (stop.how, stop.seconds) == (how, seconds)
    assert stop.observed == ("in %g s" % seconds if seconds is not None else "killed after an unknown time")


@pytest.mark.parametrize("run", [ToolRun(("all_reduce_perf",), 0), ToolRun(("all_reduce_perf",), 1),
                                 ToolRun(("all_reduce_perf",), 139),  # SIGSEGV: a crash of its own, not a stop
                                 ToolRun(("all_reduce_perf",), -6), ToolRun(("all_reduce_perf",), None, missing=True)])
def test_a_run_that_ended_by_itself_was_not_stopped(run):
    assert stopped(run) is None


def _variant(tmp_path, argv, env=None, rc=None, timed_out=False, seconds=None, output=None):
    """Case 31's bundle with its all_reduce_perf run recorded as ``argv`` (``env``) with that end."""
    def rewrite(entry):
        if entry.get("argv", [""])[0] == "./build/all_reduce_perf":
            entry.update(argv=list(argv), env=env or {}, rc=rc, timed_out=timed_out, seconds=seconds)
            if output is not None:
                (tmp_path / "bundle" / entry["stdout"]).write_text(output)
    return judged(CASE31, tmp_path, rewrite, IDS)


@pytest.mark.parametrize("argv, rc, timed_out, seconds, observed", [
    (["sh", "-c", "timeout 600 env " + COMMAND], 124, False, None, "no result row in 600 s (`timeout 600`, exit 124)"),
    (["sh", "-c", COMMAND], 137, False, None, "no result row, killed after an unknown time (SIGKILL, exit 137)"),
    (["sh", "-c", COMMAND], -9, False, None, "no result row, killed after an unknown time (SIGKILL, exit -9)"),
    (["sh", "-c", COMMAND + " 2>&1"], 130, False, 95.5, "no result row in 95.5 s (SIGINT, exit 130)"),
    (["sh", "-c", COMMAND], None, True, None, "no result row, killed after an unknown time (timed out)"),
    (["sh", "-c", COMMAND], None, True, 600.0, "no result row in 600 s (timed out)"),
])
def test_case_31_killed_however_is_a_hang_and_no_transport_pass(tmp_path, argv, rc, timed_out, seconds, observed):
    got = _variant(tmp_path, argv, rc=rc, timed_out=timed_out, seconds=seconds)
    busbw, transport, init = (got[i] for i in IDS)
    assert (busbw["status"], busbw["diagnosis"]) == ("FAIL", "NCCL_HANG"), busbw
    assert observed in busbw["measured"] and "180 s" not in busbw["measured"], busbw["measured"]
    assert busbw["measured"].startswith("all_reduce_perf hung after the communicator initialised (channels "
                                        "P2P/CUMEM)")
    assert "ACS" in busbw["remedy"] or "NCCL_P2P_DISABLE=1" in busbw["remedy"]
    assert (transport["status"], transport["diagnosis"]) == ("FAIL", "NCCL_HANG"), transport
    assert transport["measured"] == "single node: P2P/CUMEM set up, then no result: the all-reduce hung"
    assert init["status"] == "PASS"  # the communicator did initialise: the milestone is true, just not health


def test_killed_after_its_result_rows_is_judged_on_them_not_a_hang(tmp_path):
    rows = ("   268435456      67108864     float     sum      -1   1234.5  217.44  217.44      0   1230.1  218.22  "
            "218.22      0\n")
    output = (CASES / "31-nccl-p2p-hang-pcie-acs.txt").read_text().split("$ " + COMMAND + "\n")[1] + rows
    got = _variant(tmp_path, ["sh", "-c", COMMAND], rc=137, output=output)
    busbw = got["nccl.busbw"]
    assert busbw["diagnosis"] != "NCCL_HANG" and busbw["measured"].startswith("busbw 218.22 GB/s"), busbw
    assert "the run was stopped (SIGKILL, exit 137) after 1 result row(s), killed after an unknown time" \
        in busbw["details"]
    assert got["nccl.transport"]["status"] == "PASS"


def test_an_error_exit_before_any_result_is_no_transport_pass(tmp_path):
    """Not stopped, but ended with exit 1 after ``Init COMPLETE`` and before a result row: the transport moved no
    data, so nccl.transport FAILs (``NCCL_RUN_FAILED``) instead of passing on the milestone."""
    got = _variant(tmp_path, ["sh", "-c", COMMAND], rc=1)
    transport = got["nccl.transport"]
    assert (transport["status"], transport["diagnosis"]) == ("FAIL", "NCCL_RUN_FAILED"), transport
    assert transport["measured"].startswith("single node: P2P/CUMEM set up, then the run ended before any result")
    assert "exited 1" in transport["measured"] and "nccl.busbw" in transport["remedy"]
    assert got["nccl.busbw"]["status"] == "FAIL"


def test_a_stopped_training_job_is_no_hang():
    """A training job's NCCL log has no result rows to wait for: being stopped (after hours, by Ctrl-C) proves no
    hang; only an all_reduce_perf run's does."""
    from facts.parsers.observation import Observed
    from validate.checks.nccl import _outcome

    job = ToolRun(("mpirun", "-x", "NCCL_DEBUG=INFO", "python", "train.py"), 130, "x NCCL INFO Init COMPLETE\n")
    assert _outcome(Observed(job, nccl.ALL_REDUCE_PERF.parse(job))) == (False, False, None)
    perf = ToolRun(("all_reduce_perf", "-g", "2"), 130, "x NCCL INFO Init COMPLETE\n")
    assert _outcome(Observed(perf, nccl.ALL_REDUCE_PERF.parse(perf))) == (False, True, None)


def test_a_hung_single_node_socket_run_is_no_pass():
    """One node, no HCA, NCCL on its Socket network: a PASS when the run completed, a hang when it did not."""
    from facts.parsers.nccl import parse_nccl_log
    from validate.checks.nccl import judge_transport

    log = parse_nccl_log("h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
                         "h:1:1 [0] NCCL INFO Using network Socket\n"
                         "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct\n"
                         "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n")
    assert judge_transport(log, [], results=True).status.value == "PASS"
    hung = judge_transport(log, [], hung=True)
    assert (hung.status.value, hung.diagnosis) == ("FAIL", "NCCL_HANG")
