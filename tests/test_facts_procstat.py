"""facts.procstat on real /proc text (tests/data/proc, read on this machine: 2 vCPUs of a KVM guest) and the
foreign-load judgement of a run's window."""
from __future__ import annotations

import pytest

from facts import procstat
from tests.lib.paths import REPO

PROC = REPO / "tests" / "data" / "proc"


def text(name: str) -> str:
    return (PROC / name).read_text()


def test_stat_every_cpu_line_and_runnable_tasks():
    stat = procstat.parse_stat(text("stat-2cpu-a.txt"))
    assert sorted(stat.cpus) == ["cpu", "cpu0", "cpu1"] and stat.procs_running == 1
    assert stat.cpus["cpu0"] == procstat.CpuTimes(715587, 29098, 279310, 159823, 6018, 0, 5484, 1913, 0, 0)
    whole, cpu0, cpu1 = stat.cpus["cpu"], stat.cpus["cpu0"], stat.cpus["cpu1"]
    # the cpu line is the sum of the per-CPU lines (to a tick or two: the kernel sums them as it prints)
    assert abs(whole.busy - cpu0.busy - cpu1.busy) <= 4 and whole.steal == 3801 and cpu0.steal + cpu1.steal == 3800


def test_loadavg():
    assert procstat.parse_loadavg(text("loadavg-b.txt")) == procstat.LoadAvg(0.21, 1.05, 2.68, 2, 140)


@pytest.mark.parametrize("bad, message", [("intr 1 2 3\n", "no 'cpu' line"), ("cpu 1 2 x 4\n", "line 1"),
                                          ("cpu 1 2\n", "line 1")])
def test_what_is_not_proc_stat_is_refused_naming_the_line(bad, message):
    with pytest.raises(ValueError, match=message):
        procstat.parse_stat(bad)


def test_loadavg_that_is_not_one_is_refused():
    with pytest.raises(ValueError, match="not /proc/loadavg"):
        procstat.parse_loadavg("0.1 0.2\n")


def test_a_window_on_the_ranks_cpus_between_two_real_readings():
    """3 s between the readings: cpu0 did 4+10 ticks of user+system (0.14 s at USER_HZ 100), cpu1 8+12; no steal."""
    a, b = text("stat-2cpu-a.txt"), text("stat-2cpu-b.txt")
    one = procstat.window(a, b, [0], own_cpu_s=0.10, window_s=3.0, ticks_per_s=100, loadavg_end=text("loadavg-b.txt"))
    assert one.busy_cpu_s == pytest.approx(0.14) and one.steal_cpu_s == 0 and one.cpus == (0,)
    assert one.foreign_cores == pytest.approx(0.04 / 3) and one.foreign == []
    assert one.load1 == 0.21 and one.running == 2
    both = procstat.window(a, b, [0, 1], own_cpu_s=0.0, window_s=3.0, ticks_per_s=100)
    assert both.busy_cpu_s == pytest.approx(0.35)  # cpu1: 8 user + 12 system + 1 softirq
    # a CPU the readings lack (cut to other CPUs' lines): the whole-machine line instead
    assert procstat.window(a, b, [5], 0.0, 3.0, 100).busy_cpu_s == pytest.approx(0.34)


def test_foreign_work_and_steal_over_their_thresholds_flag_the_window():
    start = "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 0 0 0 0 0 0 0 0 0 0\n"
    busy = "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 900 0 100 0 0 0 0 0 0 0\n"  # 10 s of one CPU, all busy
    ours = procstat.window(start, busy, [0], own_cpu_s=9.5, window_s=10.0, ticks_per_s=100)
    assert ours.foreign == [] and ours.foreign_cores == pytest.approx(0.05)
    theirs = procstat.window(start, busy, [0], own_cpu_s=5.0, window_s=10.0, ticks_per_s=100)
    assert theirs.foreign == ["0.50 cores of foreign work on cpus 0 (over 0.2)"]
    stolen = "cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 700 0 0 0 0 0 0 300 0 0\n"
    assert procstat.window(start, stolen, [0], 7.0, 10.0, 100).foreign == ["steal 30.0 % (over 2.0 %)"]


@pytest.mark.parametrize("cpus, shown", [([0], "0"), ([3, 0, 1, 2], "0-3"), ([0, 2, 5, 6, 7], "0,2,5-7")])
def test_cpu_list(cpus, shown):
    assert procstat.cpu_list(cpus) == shown
