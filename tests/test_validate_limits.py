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


def test_inside_a_slurm_job_the_probe_runs_under_srun_on_every_node(tmp_path):
    """A bundle recorded in a 2-node Slurm job (constructed outputs): the probe ran as srun tasks, one per node, and
    node02's slurmd gave its tasks a limited memlock."""
    from chexstack.tools import ToolRun
    from validate.evidence import Bundle, Replay

    bundle = Bundle()
    for name, value in (("SLURM_JOB_ID", "4242"), ("SLURM_JOB_NUM_NODES", "2"), ("RLIMIT_MEMLOCK", [-1, -1])):
        bundle.add({"kind": "fact", "name": name, "value": value})
    bundle.add({"kind": "glob", "pattern": "/sys/class/infiniband/*", "paths": ["/sys/class/infiniband/mlx5_0"]})
    bundle.add_tool(ToolRun(("srun", "--version"), 0, "slurm 23.02.7\n"))
    bundle.add_tool(ToolRun(("srun", "--ntasks-per-node=1", "sh", "-c", RANK_PROBE), 0,
                            "chexstack-limits host=node01 memlock=unlimited stack=8192 nofile=131072 "
                            "shm_kb=263921112 cgroup_mem=max\nchexstack-limits host=node02 memlock=65536 stack=8192 "
                            "nofile=131072 shm_kb=263921112 cgroup_mem=max\n"))
    result = rank_limits(Context(evidence=Replay(bundle)))
    assert result.status.value == "FAIL" and result.diagnosis == "MEMLOCK_LIMITED"
    assert result.measured == "node02: memlock 65536 KiB in a rank with an RDMA device present"
    assert "LimitMEMLOCK=infinity for slurmd" in result.remedy
