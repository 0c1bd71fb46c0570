"""Each run's cores and load in the bench/study records (``bench.results.host_load``, ``bench.cores``): from a real
2-rank throughput.json taken while other test suites loaded this 2-vCPU machine (tests/data/bench/host-load)."""
from __future__ import annotations

import copy
import json

import pytest

from bench import cores, figure
from bench.results import Point, RunRecord, Sweep, load_sweep, merge_repeats, point_from_throughput, save_sweep
from chexstack.errors import ChexstackError
from tests.lib.golden import assert_golden
from tests.lib.paths import REPO

UNDER_LOAD = REPO / "tests" / "data" / "bench" / "host-load" / "throughput-2ranks-under-load.json"


def data() -> dict:
    return json.loads(UNDER_LOAD.read_text())


def test_cores_cpu_seconds_and_foreign_load_of_a_real_run():
    load, = point_from_throughput(2, data(), "run").point.host_load
    assert load.cpus_by_rank == [[0, 1], [0, 1]] and load.hosts_by_rank == ["vm", "vm"]
    assert load.cpu_s == pytest.approx(0.59 + 0.48) and load.window_s == pytest.approx(1.8195, abs=1e-4)
    assert load.images_per_cpu_s == pytest.approx(6 * 4 * 2 / 1.07)  # timed steps x batch x ranks / CPU seconds
    # one kernel (both ranks' boot_id): rank 0's readings on cpus 0-1, (146+36 + 151+29+3) ticks busy at USER_HZ 100
    assert load.foreign_cores == pytest.approx((3.65 - 1.07) / 1.8195, abs=1e-3) and load.steal_pct == 0
    assert load.load1 == 9.47 and load.running == 8
    assert load.foreign == ["1.42 cores of foreign work on cpus 0-1 (over 0.2)"]


def test_a_record_without_host_load_or_without_windows():
    old = data()
    del old["host_load"]
    assert point_from_throughput(2, old, "old").point.host_load == []
    partial = data()
    del partial["host_load"][1]["stat"]
    load, = point_from_throughput(2, partial, "run").point.host_load
    assert load.cpus_by_rank == [[0, 1], [0, 1]] and load.cpu_s is None and load.foreign == []


def test_readings_that_are_not_proc_text_name_the_file():
    bad = data()
    bad["host_load"][0]["stat"][0] = "intr 1 2\n"
    with pytest.raises(ChexstackError, match="^run: host_load: not /proc/stat text"):
        point_from_throughput(2, bad, "run")


def test_repeats_keep_each_runs_load_and_it_survives_the_sweep_file(tmp_path):
    one = point_from_throughput(2, data(), "r1").point
    pinned = data()
    for rank, entry in enumerate(pinned["host_load"]):
        entry.update(host="chex%d" % (rank + 1), cpus=[rank], boot_id="k%d" % rank)
    two = point_from_throughput(2, pinned, "r2").point
    merged = merge_repeats([one, two])
    assert [h.cpus_by_rank for h in merged.host_load] == [[[0, 1], [0, 1]], [[0], [1]]]
    sweep = Sweep(label="cpu", record=RunRecord(count_unit="CPU ranks"), points=[merged])
    back = load_sweep(save_sweep(sweep, tmp_path / "s.json"))
    assert back.points[0].host_load == merged.host_load
    assert cores.ranks_text(back.points[0]) == "vm cpu 0-1 | vm cpu 0-1; chex1 cpu 0 | chex2 cpu 1"


def test_table_lines_golden():
    """The Markdown table's lines below it: each point's cores and load, the flagged repeat, how flagging works;
    the figure's caption carries the flagged line only."""
    base = Point(count=1, images_per_sec=15.0)
    point = point_from_throughput(2, data(), "run").point
    sweep = Sweep(label="baremetal", record=RunRecord(count_unit="CPU ranks"), points=[base, point])
    cmp = figure.compare([sweep])
    assert_golden("bench/figure1-host-load.md", figure.markdown_text(cmp))
    fig = figure.figure(cmp, [sweep])
    shown = [t.get_text() for t in fig.texts]
    figure.plt.close(fig)
    assert any("FOREIGN LOAD: baremetal, 2 CPU ranks, repeat 1" in t for t in shown)
    assert not any(t.startswith("cores:") or "\ncores:" in t for t in shown)


def test_no_host_load_adds_no_line():
    sweep = Sweep(label="x", points=[Point(count=1, images_per_sec=1.0)])
    assert cores.caption_lines([sweep]) == [] and figure.compare([sweep]).cores == ()
    assert copy.deepcopy(sweep).points[0].host_load == []
