"""Repeats and their statistics: a point's repeat readings (backward compatible with one reading), the sweep's
round-robin over counts, the median's 95 % interval and the % difference with its interval, unpaired and paired
by round, checked against hand computations and synthetic rounds whose answer is known; the tables with intervals
(golden) and the figure's error bars."""
from __future__ import annotations

import csv
import io
import json
import math

import pytest
from matplotlib.container import ErrorbarContainer

from bench import figure, stats
from bench.results import REFERENCE_DIR, Point, RunRecord, Sweep, load_sweep, merge_repeats, save_sweep
from chexstack.errors import ChexstackError
from launch import dispatch
from launch.plans import Plan
from tests.lib import cli as cmd
from tests.lib.golden import assert_golden
from tests.lib.paths import REPO
from tests.lib.sweeps import sweep_request

SEED = REFERENCE_DIR / "seed-densenet121-baremetal.json"
RESULTS = REPO / "bench" / "results"
GLOO = RESULTS / "cpu-horovodrun-gloo-20261129T185204Z.json"
MPI = RESULTS / "cpu-horovodrun-mpi-20261129T185332Z.json"

# Five repeats per point (a fixture, not a measurement), sorted: baseline 100..104, system 94..98 images/s.
BASE = [102.0, 100.0, 104.0, 101.0, 103.0]
SYSTEM = [96.0, 94.0, 98.0, 95.0, 97.0]
SAME = [101.0, 99.0, 103.0, 100.0, 102.0]


def _median_pmf(n: int) -> list[float]:
    """P(a bootstrap resample's median is the j-th smallest of n distinct readings), n odd: the median is at most
    the j-th smallest when at least (n + 1) / 2 of the n draws are, P(Bin(n, j / n) >= (n + 1) / 2)."""
    def at_most(j):
        return sum(math.comb(n, k) * (j / n) ** k * (1 - j / n) ** (n - k) for k in range((n + 1) // 2, n + 1))
    return [at_most(j) - at_most(j - 1) for j in range(1, n + 1)]


def test_the_median_distribution_by_hand():
    """n = 5: P(median <= x(1)) = C(5,3) .2^3 .8^2 + C(5,4) .2^4 .8 + .2^5 = .0512 + .0064 + .00032 = .05792;
    P(median <= x(2)) = 10 .4^3 .6^2 + 5 .4^4 .6 + .4^5 = .2304 + .0768 + .01024 = .31744; by symmetry the rest."""
    assert [round(p, 5) for p in _median_pmf(5)] == [0.05792, 0.25952, 0.36512, 0.25952, 0.05792]


def test_median_interval_of_five_repeats_is_their_range():
    """P(median = smallest) = .05792 > .025 (above): the 2.5th percentile is the smallest reading, the 97.5th the
    largest. [100, 104] for BASE."""
    assert stats.median_interval(BASE) == stats.Interval(100.0, 104.0)
    assert stats.median_interval(SYSTEM) == stats.Interval(94.0, 98.0)


def test_median_interval_of_seven_repeats_drops_the_extremes():
    """n = 7: P(median <= x(1)) = P(Bin(7, 1/7) >= 4) = .0102 < .025 < P(median <= x(2)) = P(Bin(7, 2/7) >= 4) =
    .1083: the interval is [x(2), x(6)]."""
    pmf = _median_pmf(7)
    assert round(pmf[0], 4) == 0.0102 and round(pmf[0] + pmf[1], 4) == 0.1083
    assert stats.median_interval([10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]) == stats.Interval(11.0, 15.0)


def test_fewer_than_three_repeats_have_no_interval():
    assert stats.median_interval([100.0, 101.0]) is None
    d = stats.difference([96.0, 97.0], BASE)
    assert d.interval is None and d.distinguishable is None and round(d.pct, 6) == round(100 * (96.5 / 102 - 1), 6)


def test_difference_and_its_interval_by_hand():
    """Medians 96 and 102: 100 (96 / 102 - 1) = -5.882 %. The ratio's bootstrap distribution: ratio s(i) / b(j)
    with probability p(i) p(j) (p: the n = 5 pmf above). Smallest: 94/104 (p1 p5 = .003355), 94/103 (p1 p4 =
    .015031), 95/104 (p2 p5 = .015031): cumulative .018386 < .025 < .033418, so the 2.5th percentile is 95/104,
    -8.654 %. Largest: 98/100 (.003355), 98/101 = .970297 (.015031), 97/100 = .97 (.015031): the 97.5th percentile
    is 97/100, -3.000 %. The interval holds no 0: distinguishable."""
    p = _median_pmf(5)
    assert round(p[0] * p[4], 6) == 0.003355 and round(p[0] * p[3], 6) == 0.015031
    d = stats.difference(SYSTEM, BASE)
    assert round(d.pct, 3) == -5.882
    assert (round(d.interval.low, 3), round(d.interval.high, 3)) == (round(100 * (95 / 104 - 1), 3), -3.0) == (
        -8.654, -3.0)
    assert d.distinguishable is True


def test_an_interval_holding_zero_is_not_distinguishable():
    """SAME (99..103, median 101) vs BASE: -0.980 %; as above the 2.5th percentile is 100/104 (-3.846 %), the
    97.5th 103/101 (+1.980 %; 102/100 = 1.02 lies above it with 103/100): the interval holds 0."""
    d = stats.difference(SAME, BASE)
    assert round(d.pct, 3) == -0.980
    assert (round(d.interval.low, 3), round(d.interval.high, 3)) == (-3.846, 1.980)
    assert d.distinguishable is False and figure.verdict(d) == "not distinguishable"


def test_recorded_single_readings_differ_without_an_interval():
    """The recorded gloo and MPI sweeps (bench/results, one reading per count): at 2 CPU ranks 100 (9.000342 /
    18.635388 - 1) = -51.70 %, no interval; scaling efficiency per system E(2) = X(2) / (2 X(1)): gloo 18.635388 /
    (2 x 24.176910) = 38.54 %, MPI 9.000342 / (2 x 23.199571) = 19.40 %."""
    gloo, mpi = load_sweep(GLOO), load_sweep(MPI)
    cmp = figure.compare([gloo, mpi])
    assert cmp.comparable == (True, True)  # "localhost:2" is the recording host "vm"
    cell = cmp.cells[(mpi.label, 2)]
    assert round(cell.diff.pct, 2) == -51.70 and cell.diff.interval is None and cell.interval is None
    assert round(100 * cmp.cells[(gloo.label, 2)].efficiency, 2) == 38.54 and round(100 * cell.efficiency, 2) == 19.40
    assert figure.diff_text(cmp, mpi.label, cell) == "-51.7 (no interval)"


def test_a_point_with_repeats_is_their_median_and_old_files_are_one_repeat(tmp_path):
    old = load_sweep(GLOO)
    assert all(p.repeats == [] and p.readings == [p.images_per_sec] for p in old.points)
    point = Point(count=1, repeats=BASE)
    assert point.images_per_sec == 102.0 and point.readings == BASE
    sweep = Sweep(label="r", points=[point, Point(count=2, repeats=[150.0, 160.0, 170.0])])
    assert round(sweep.point(2).scaling_efficiency, 6) == round(160 / (2 * 102), 6)
    assert load_sweep(save_sweep(sweep, tmp_path / "r.json")) == sweep
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"label": "x", "points": [{"count": 1, "images_per_sec": 5, "repeats": [1, 2, 3]}]}))
    with pytest.raises(ChexstackError, match=r"bad.json: field points.0: .*images_per_sec 5.0 is not the median 2.0"):
        load_sweep(bad)


def test_merge_repeats_keeps_every_reading_in_run_order():
    readings = [Point(count=2, images_per_sec=x, images_per_sec_by_rank=[x / 2 - 1, x / 2 + 1], step_times_s=[t])
                for x, t in ((10.0, 0.5), (14.0, 0.3), (12.0, 0.4))]
    merged = merge_repeats(readings)
    assert merged.repeats == [10.0, 14.0, 12.0] and merged.images_per_sec == 12.0
    assert merged.images_per_sec_by_rank == [5.0, 7.0] and merged.step_times_s == [0.5, 0.3, 0.4]
    assert merged.median_step_time_s == 0.4
    assert merge_repeats(readings[:1]) is readings[0]
    with pytest.raises(ValueError, match="one count"):
        merge_repeats(readings + [Point(count=1, images_per_sec=1.0)])


def test_repeats_run_round_robin_over_the_counts(tmp_path, monkeypatch):
    """``--repeats 3`` runs counts 1,2,1,2,1,2 (each in its own repeat-<r>/np-<N> folder): a stub target writes
    each run's throughput.json (no trainer starts); each count's three readings become one point."""
    from bench import sweep

    recorded = json.loads((REPO / "tests" / "data" / "bench" / "cpu-sweep" / "np-1" / "throughput.json").read_text())
    order = []

    def fake(request, **options):
        n, out = request.ranks(), request.options.output
        order.append((n, out.split("/")[-2], out.split("/")[-1]))
        data = dict(recorded, world_size=n, images_per_sec={"total": 10.0 * n + len(order), "per_rank": []})
        return Plan(["sh", "-c", 'mkdir -p "$0" && printf %s "$1" > "$0/throughput.json"', out, json.dumps(data)],
                    {}, "gloo", "test")

    monkeypatch.setitem(dispatch.TARGETS, "local", fake)
    req = sweep_request(counts=(2, 1), label="rr", gpus=False, model="resnet50", image_size=64, repeats=3)
    result, path = sweep.run_sweep(req, REPO, tmp_path / "out", tmp_path / "runs")
    assert order == [(1, "repeat-1", "np-1"), (2, "repeat-1", "np-2"), (1, "repeat-2", "np-1"),
                     (2, "repeat-2", "np-2"), (1, "repeat-3", "np-1"), (2, "repeat-3", "np-2")]
    assert [p.repeats for p in load_sweep(path).points] == [[11.0, 13.0, 15.0], [22.0, 24.0, 26.0]]
    assert result.point(2).images_per_sec == 24.0 and stats.median_interval(result.point(1).readings)


def test_repeats_are_checked():
    from tests.lib.sweeps import sweep_request

    with pytest.raises(ChexstackError, match="--repeats 0: expected 1 or more"):
        sweep_request(counts=(1,), label="x", gpus=False, repeats=0).check()
    sweep_request(counts=(1,), label="x", gpus=False, launcher="slurm", repeats=2, data="/d").check()  # job steps
    run = cmd.run("bench", "--np", "1", "--repeats", "x")
    assert run.returncode == 2 and "Traceback" not in run.stderr


def _repeated(label, values_by_count, **record):
    return Sweep(label=label, record=RunRecord(model="densenet121", count_unit="GPUs", **record),
                 points=[Point(count=n, repeats=v) for n, v in values_by_count.items()])


def _three_systems():
    same = {"versions": {"horovod": "0.16.1"}}
    base = _repeated("bare metal", {1: BASE, 2: [190.0, 196.0, 188.0, 194.0, 192.0]}, **same)
    container = _repeated("container", {1: SYSTEM, 2: [189.0, 193.0, 191.0, 195.0, 187.0]}, **same)
    other = _repeated("other stack", {1: SAME, 2: [180.0, 182.0, 181.0]}, versions={"horovod": "0.16.2"})
    return [base, container, other]


def test_tables_with_intervals_golden():
    """Count 1: -5.9 % [-8.7, -3.0]; count 2: medians 191 vs 192, an interval holding 0 (not distinguishable); the
    third series differs in Horovod: not compared, named in the table and the caption."""
    cmp = figure.compare(_three_systems())
    assert cmp.cells[("container", 2)].diff.distinguishable is False
    assert_golden("bench/figure1-repeats.csv", figure.csv_text(cmp))
    assert_golden("bench/figure1-repeats.md", figure.markdown_text(cmp))


def test_the_figure_draws_error_bars_and_the_annotated_difference(tmp_path):
    sweeps = _three_systems()
    fig = figure.figure(figure.compare(sweeps), sweeps)
    try:
        ax = fig.axes[0]
        bars = [c.lines[2][0].get_segments() for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert [[(seg[0][1], seg[1][1]) for seg in series] for series in bars] == [
            [(100.0, 104.0), (188.0, 196.0)], [(94.0, 98.0), (187.0, 195.0)], [(99.0, 103.0), (180.0, 182.0)]]
        texts = [t.get_text() for t in ax.texts]
        # each difference with its interval and the smallest difference it resolved (the interval's half-width)
        assert "96.0\n-5.9 %\n[-8.7, -3.0]\n±2.8" in texts and "191\n-0.5 %\n[-3.6, +2.6] n.d.\n±3.1" in texts
        captions = [t.get_text() for t in fig.texts]
        assert any("percentile bootstrap" in t and "not compared with bare metal: other stack: Horovod 0.16.2 vs "
                   "0.16.1" in t for t in captions)
    finally:
        figure.plt.close(fig)
    report = figure.write_report(sweeps, tmp_path / "f.png")
    assert report.png.read_bytes()[:4] == b"\x89PNG"


def _rounds(effect: float, rounds: int = 8, seed: int = 3) -> tuple[list[float], list[float]]:
    """Synthetic rounds (a fixture, not a measurement): the baseline 100 images/s times each round's common noise
    (±15 %: another job, a slower core), the system ``effect`` times that, with ±0.3 % of its own noise."""
    import numpy as np

    rng = np.random.default_rng(seed)
    common = rng.uniform(0.85, 1.15, rounds)
    own = rng.uniform(0.997, 1.003, rounds)
    return list(100.0 * common * effect * own), list(100.0 * common)


def test_paired_rounds_cancel_the_noise_common_to_a_round():
    """The right answer is known: the system is 4 % slower in every round. Paired, the ratios hold only the
    system's own noise, and the interval (±0.3 % at most) holds -4 % and not 0; pooled (unpaired), the rounds'
    common noise (±15 %) widens both sides and the same readings are not distinguishable."""
    system, base = _rounds(0.96)
    paired, pooled = stats.paired_difference(system, base), stats.difference(system, base)
    assert paired.paired and paired.n == 8 and paired.design == "paired, 8 rounds" and pooled.design == "unpaired"
    assert paired.interval.holds(-4.0) and paired.distinguishable and paired.half_width < 0.3
    assert pooled.distinguishable is False and pooled.half_width > 10 * paired.half_width


def test_nothing_planted_is_not_distinguishable_paired():
    system, base = _rounds(1.0)
    d = stats.paired_difference(system, base)
    assert d.distinguishable is False and abs(d.pct) < 0.3 and d.half_width < 0.3


def test_paired_difference_by_hand():
    """Ratios 0.95, 0.97, 0.96 (rounds of 3): the median 0.96 (-4 %); 3 rounds' percentile interval of a median is
    their range (as above, P(median = smallest) = 7/27 > 2.5 %): [-5, -3] %, half-width 1 %."""
    d = stats.paired_difference([95.0, 194.0, 48.0], [100.0, 200.0, 50.0])
    assert round(d.pct, 9) == -4.0 and (round(d.interval.low, 9), round(d.interval.high, 9)) == (-5.0, -3.0)
    assert round(d.half_width, 9) == 1.0
    assert stats.paired_difference([95.0, 97.0], [100.0, 100.0]).interval is None
    with pytest.raises(ValueError, match="the same rounds on both sides, got 2 and 3"):
        stats.paired_difference([1.0, 2.0], [1.0, 2.0, 3.0])


def test_the_table_pairs_only_sweeps_of_the_same_rounds():
    """Two sweeps of one study (the same ``paired_rounds``) get the paired difference, named so in the table,
    the CSV and the caption; the same readings as separate sweeps (bench-report) the unpaired one."""
    system, base = _rounds(0.96)
    same = dict(paired_rounds="study-20261206T000000Z seed 7")
    cmp = figure.compare([_repeated("baremetal", {2: base}, **same), _repeated("mpijob", {2: system}, **same)])
    d = cmp.cells[("mpijob", 2)].diff
    assert d.paired and figure.diff_text(cmp, "mpijob", cmp.cells[("mpijob", 2)]).endswith(
        "(±%.1f, paired, 8 rounds)" % d.half_width)
    row = list(csv.DictReader(io.StringIO(figure.csv_text(cmp))))[1]
    assert row["design"] == "paired, 8 rounds" and float(row["vs baremetal resolved ± (%)"]) < 0.3
    assert any(line.startswith("paired: the median of the per-round ratios") for line in figure.caption(cmp))
    apart = figure.compare([_repeated("baremetal", {2: base}), _repeated("mpijob", {2: system})])
    d = apart.cells[("mpijob", 2)].diff
    assert not d.paired and "unpaired) not distinguishable" in figure.diff_text(apart, "mpijob",
                                                                                 apart.cells[("mpijob", 2)])
