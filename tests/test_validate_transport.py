"""facts/transport.py's arithmetic and result line, and how ``mpi.bandwidth`` judges a measurement (the real run
across two hosts is in tests/test_launch_testcluster.py)."""
from __future__ import annotations

import json

from chexstack.tools import ToolRun
from facts import transport
from validate.checks.mpi import judge_bandwidth

HOSTS = ["chex1", "chex2"]
ARGV = ("mpirun", "-H", "chex1:1,chex2:1", "-np", "2", "python", "facts/transport.py")


def _result(rounds, errors=()):
    return {"hosts": HOSTS, "processors": HOSTS, "mib": 64, "ranks": 2, "iters": 3, "rounds": rounds,
            "errors": list(errors)}


def _ran(result) -> ToolRun:
    return ToolRun(ARGV, 0, "banner\n%s%s\n" % (transport.PREFIX, json.dumps(result)))


def test_bus_bandwidth_is_nccl_tests_convention():
    mib64 = 64 * 2 ** 20
    assert abs(transport.busbw_gbits(mib64, 1.0, 2) - mib64 * 8 / 1e9) < 1e-9  # n = 2: busbw = algbw
    assert abs(transport.busbw_gbits(mib64, 1.0, 4) - 1.5 * mib64 * 8 / 1e9) < 1e-9  # × 2(n-1)/n


def test_result_line_and_side_by_side_medians():
    result = _result([{"tcp": 10.0, "mpi": 6.0}, {"tcp": 4.0, "mpi": 1.0}, {"tcp": 8.0, "mpi": 2.0}])
    assert transport.parse(_ran(result).stdout) == result
    assert transport.parse("no result here\n") is None
    assert transport.median_of(result, "tcp") == 8.0
    assert transport.median_ratio(result, "mpi", "tcp") == 0.25  # of 0.6, 0.25, 0.25: per round, not 2/8
    assert transport.median_of(result, "horovod") is None


def test_bandwidth_passes_only_on_a_measured_ratio_at_the_goal():
    good = _result([{"tcp": 10.0, "mpi": 6.0, "tcp_bidir": 7.0}])
    verdict = judge_bandwidth(good, _ran(good), HOSTS)
    assert verdict.status.value == "PASS"
    assert verdict.measured == ("MPI_Allreduce 64 MiB busbw 6.00 Gbit/s, raw TCP 10.00 Gbit/s (iperf3 chex2→chex1): "
                                "ratio 0.60 (median of the rounds' ratios); both ways at once 7.00 Gbit/s per "
                                "direction")
    low = _result([{"tcp": 10.0, "mpi": 3.0}])
    assert judge_bandwidth(low, _ran(low), HOSTS).status.value == "WARN"


def test_bandwidth_without_a_tcp_baseline_or_a_run_never_passes():
    no_iperf3 = _result([{"tcp": None, "mpi": 6.0}], ["iperf3 not found on chex1"])
    verdict = judge_bandwidth(no_iperf3, _ran(no_iperf3), HOSTS)
    assert verdict.status.value == "WARN" and "raw TCP not measured (iperf3 not found on chex1)" in verdict.measured
    failed = ToolRun(ARGV, 1, "", "ssh: Could not resolve hostname chex2")
    verdict = judge_bandwidth(None, failed, HOSTS)
    assert verdict.status.value == "FAIL" and "Could not resolve hostname chex2" in verdict.measured
    no_mpi4py = ToolRun(ARGV, 1, "", "ModuleNotFoundError: No module named 'mpi4py'")
    assert judge_bandwidth(None, no_mpi4py, HOSTS).status.value == "SKIP"


def test_a_wrong_allreduce_sum_fails_however_fast():
    wrong = _result([{"tcp": 10.0, "mpi": 9.0}], [transport.WRONG_SUM + ": expected 2 in every element"])
    verdict = judge_bandwidth(wrong, _ran(wrong), HOSTS)
    assert verdict.status.value == "FAIL" and "MPI_Allreduce sum wrong" in verdict.measured
