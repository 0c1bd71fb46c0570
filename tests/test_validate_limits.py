"""Issue 12 item 3: the limits that count are the ones a rank gets — measured in a process started the way the
launcher starts ranks (mpirun as horovodrun --mpi, or docker run with invoke train --stack's flags)."""
from __future__ import annotations

import shutil

import pytest

from validate.checks import Context
from validate.checks.container import RANK_PROBE, judge_rank_limits, parse_rank_limits, rank_limits


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI not installed (scripts/setup installs it)")
def test_limits_are_measured_in_a_rank_started_by_mpirun():
    result = rank_limits(Context())
    assert result.status.value == "PASS", result
    assert result.measured.startswith("ranks started by mpirun (as horovodrun --mpi): ")
    assert "memlock " in result.measured and "/dev/shm " in result.measured and "cgroup memory " in result.measured


def test_a_limited_memlock_in_the_ranks_fails_with_rdma_and_every_host_is_named():
    ranks = parse_rank_limits("chexstack-limits host=node1 memlock=64 stack=8192 nofile=1024 shm_kb=65536 "
                              "cgroup_mem=max\n[1,1]<stdout>:chexstack-limits host=node2 memlock=unlimited "
                              "stack=8192 nofile=1024 shm_kb=33554432 cgroup_mem=17179869184\n")
    assert [r["host"] for r in ranks] == ["node1", "node2"]
    result = judge_rank_limits(ranks, "mpirun (as horovodrun --mpi) on node1,node2", 2, rdma=True, local_ranks=4)
    assert result.status.value == "FAIL" and result.diagnosis == "MEMLOCK_LIMITED"
    assert result.measured == "node1: memlock 64 KiB in a rank with an RDMA device present"
    assert "node1: /dev/shm 64 MiB in a rank, 4 local ranks" in result.details
    assert any(d.startswith("node2: memlock unlimited") and "cgroup memory 16.0 GiB" in d for d in result.details)
    assert "limits.conf" in result.remedy
    missing = judge_rank_limits(ranks[:1], "mpirun", 2, rdma=False, local_ranks=1)
    assert missing.status.value == "FAIL" and missing.diagnosis == "RANK_PROBE_FAILED"
    assert "ulimit -l" in RANK_PROBE
