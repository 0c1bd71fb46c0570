"""The gap explained (issue 23, part 4): Horovod's timeline parsed (facts.parsers.horovod_timeline), a step split
into compute, input wait and exposed allreduce (bench.attribution) and the report's sentences, on a real
timeline recorded here (tests/data/bench/timeline/) and checked against hand computations."""
from __future__ import annotations

import json

import pytest

from bench import attribution, figure
from bench.results import Point, RunRecord, StepSplit, Sweep, load_sweep, save_sweep
from facts import transport
from facts.parsers import horovod_timeline as tl
from tests.lib import cli as cmd
from tests.lib.paths import REPO


def _step(t: int) -> str:
    """Step 1 of two gradients ``t`` µs after LEGACY's (grad_a ready at 1120, grad_b at 1300, done at 1350)."""
    return "".join('{"ph": "%s", %s"ts": %d, "pid": %d},\n' % (ph, '"name": "%s", ' % name if name else "", t + ts, pid)
                   for ph, name, ts, pid in [("B", "NEGOTIATE_ALLREDUCE", 1100, 1), ("E", None, 1120, 1),
                                             ("B", "ALLREDUCE", 1130, 1), ("E", None, 1200, 1),
                                             ("B", "NEGOTIATE_ALLREDUCE", 1150, 2), ("E", None, 1300, 2),
                                             ("B", "ALLREDUCE", 1300, 2), ("E", None, 1350, 2)])


#: Two steps of two gradients as Horovod 0.16 writes them (never closed: each event ends "},"), one metric
#: allreduce at the epoch's end (once: not a step's), and a broadcast (not an allreduce).
LEGACY = """[
{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "grad_a"}},
{"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "grad_b"}},
{"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "loss"}},
{"name": "process_name", "ph": "M", "pid": 4, "args": {"name": "weights"}},
{"ph": "B", "name": "NEGOTIATE_BROADCAST", "ts": 0, "pid": 4},
{"ph": "E", "ts": 10, "pid": 4},
{"ph": "B", "name": "BROADCAST", "ts": 10, "pid": 4},
{"ph": "E", "ts": 90, "pid": 4},
{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 100, "pid": 1},
{"ph": "X", "name": "0", "ts": 100, "pid": 1, "dur": 0},
{"ph": "X", "name": "1", "ts": 150, "pid": 1, "dur": 0},
{"ph": "E", "ts": 150, "pid": 1},
{"ph": "B", "name": "ALLREDUCE", "ts": 160, "pid": 1},
{"ph": "B", "name": "MPI_ALLREDUCE", "ts": 165, "pid": 1},
{"ph": "E", "ts": 300, "pid": 1},
{"ph": "E", "ts": 310, "pid": 1, "args": {"dtype": "float32", "shape": "[10]"}},
{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 200, "pid": 2},
{"ph": "E", "ts": 400, "pid": 2},
{"ph": "B", "name": "ALLREDUCE", "ts": 410, "pid": 2},
{"ph": "E", "ts": 700, "pid": 2},
""" + _step(0) + """{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 2000, "pid": 3},
{"ph": "E", "ts": 2010, "pid": 3},
{"ph": "B", "name": "ALLREDUCE", "ts": 2010, "pid": 3},
{"ph": "E", "ts": 2020, "pid": 3},
"""


def test_a_legacy_unclosed_timeline_gives_each_tensors_times_and_each_steps():
    """By hand: grad_a negotiates 50 + 20 µs and allreduces 150 + 70 µs; step 0 is ready at 400 (grad_b's
    negotiation end) and ends at 700: 300 µs exposed; step 1 ready at 1300, ends at 1350: 50 µs."""
    timeline = tl.parse(LEGACY)
    assert timeline.problems == [] and timeline.start_unix_us is None
    times = {t.tensor: t for t in tl.per_tensor(timeline)}
    assert list(times) == ["grad_a", "grad_b", "loss"]
    assert (times["grad_a"].count, round(times["grad_a"].negotiation_s * 1e6), round(times["grad_a"].allreduce_s
                                                                                      * 1e6)) == (2, 70, 220)
    first = next(s for s in timeline.spans if s.tensor == "grad_a" and s.op == "ALLREDUCE")
    assert first.activities == (("MPI_ALLREDUCE", 165, 300),) and first.args["shape"] == "[10]"
    assert next(s for s in timeline.spans if s.op == "NEGOTIATE_ALLREDUCE").ranks == (0, 1)
    assert sorted(tl.gradients(timeline)) == ["grad_a", "grad_b"]
    steps = tl.steps(timeline)
    assert [(s.start_us, s.ready_us, s.end_us, round(s.exposed_s * 1e6)) for s in steps] == [
        (100, 400, 700, 300), (1100, 1300, 1350, 50)]
    assert round(steps[0].allreduce_s * 1e6) == 150 + 290 and round(steps[0].negotiation_s * 1e6) == 50 + 200


def test_a_cut_off_timeline_keeps_what_is_complete_and_says_what_is_not():
    """A third step whose grad_b allreduce was being written when the run ended: two whole steps are kept."""
    cut = LEGACY + _step(2000)[:-len('"ts": 3350, "pid": 2},\n')] + '"ts": 33'
    timeline = tl.parse(cut)
    assert timeline.problems[0].startswith("the file ends inside an event")
    assert any("grad_b: ALLREDUCE from 3300 µs never ended" in p for p in timeline.problems)
    assert sorted(tl.gradients(timeline)) == ["grad_a", "grad_b"]  # grad_b 2 allreduces, grad_a 3
    assert [s.end_us for s in tl.steps(timeline)] == [700, 1350]  # the third lacks grad_b's allreduce
    closed = tl.parse(LEGACY + _step(2000).rstrip().rstrip(",") + "]")  # Horovod 0.28 closes after each event
    assert closed.problems == [] and [round(s.exposed_s * 1e6) for s in tl.steps(closed)] == [300, 50, 50]
    assert tl.parse("not json").problems and tl.steps(tl.parse("[]")) == []


def _split(step_ms: float, wait_ms: float, exposed_ms: float) -> StepSplit:
    return StepSplit(steps=5, step_s=step_ms / 1e3, compute_s=(step_ms - wait_ms - exposed_ms) / 1e3,
                     input_wait_s=wait_ms / 1e3, exposed_allreduce_s=exposed_ms / 1e3, negotiation_s=0.004,
                     allreduce_s=0.030, gradients=83, gradient_bytes=12_000_000)


def _system(label: str, one: tuple, two: tuple, readings: dict[int, list[float]]) -> Sweep:
    record = RunRecord(model="mobilenet", count_unit="CPU ranks", image_size=32, batch_size_per_rank=32,
                       data="/d", label_sha256="a" * 64, versions={"horovod": "0.28.1", "openmpi": "4.1.4"})
    return Sweep(label=label, record=record, points=[
        Point(count=1, repeats=readings[1], step_split=_split(*one)),
        Point(count=2, repeats=readings[2], step_split=_split(*two))])


#: Two systems, 5 repeats each; the container's step at 2 ranks is 9 ms of exposed allreduce longer.
BARE = _system("bare metal", (100.0, 2.0, 0.0), (110.0, 2.0, 6.0),
               {1: [320.0, 318.0, 322.0, 321.0, 319.0], 2: [580.0, 582.0, 578.0, 581.0, 579.0]})
BOXED = _system("container", (100.0, 2.0, 0.0), (120.0, 2.5, 15.0),
                {1: [319.0, 321.0, 320.0, 318.0, 322.0], 2: [556.0, 558.0, 554.0, 557.0, 555.0]})


def test_the_report_names_the_largest_share_between_counts_and_systems():
    """By hand: bare metal 1 -> 2 ranks: step 100 -> 110 ms, per-rank images/s 100/110 - 1 = -9.1 %; compute
    98 -> 102 (+4), input wait +0, exposed allreduce 0 -> 6 (+6): the largest. Container vs bare metal at 2:
    medians 556 vs 580 = -4.1 %; exposed +9 ms (15 - 6) beats compute +0.5 (102.5 - 102) and input wait +0.5.
    12 MB of gradients over 2 ranks at 10 Gbit/s: 12e6 x 8 x 2(1)/2 / 10e9 = 9.6 ms."""
    lines = attribution.explain([BARE, BOXED], (10.0, "mpi.bandwidth of report.json"))
    assert lines[0] == ("bare metal, 1 → 2 CPU ranks: step 100.0 → 110.0 ms (+10.0 ms/step, per-rank images/s "
                        "-9.1 %), of which compute +4.0 ms, input wait +0.0 ms, exposed allreduce +6.0 ms; the "
                        "largest share: exposed allreduce")
    assert lines[1].startswith("bare metal at 2 CPU ranks: 12.0 MB of float32 gradients at busbw 10.00 Gbit/s "
                               "(mpi.bandwidth of report.json) predict 9.6 ms/step of ring allreduce; the timeline "
                               "shows 30.0 ms/step of allreduce (summed over 83 tensors, overlapping), 6.0 ms/step "
                               "exposed")
    system = lines[-1]
    assert system.startswith("container vs bare metal at 2 CPU ranks: -4.1 % images/s (95 % interval [")
    assert system.endswith("of which exposed allreduce +9.0 ms/step (the largest; compute +0.5 ms, input wait "
                           "+0.5 ms, exposed allreduce +9.0 ms)")
    assert attribution.predicted_allreduce_s(12_000_000, 1, 10.0) == 0.0


def test_bench_report_prints_and_writes_the_gap_with_a_validate_reports_bandwidth(tmp_path):
    """--bandwidth reads mpi.bandwidth's measured figure from `invoke validate --json`'s report (the same words
    validate writes: facts.transport.measured_text); a report without it is refused naming the file."""
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"results": [{"id": "mpi.bandwidth", "measured": transport.measured_text(64, 10.0)
                                               + ", raw TCP 12.00 Gbit/s (iperf3 b→a): ratio 0.83"}]}))
    files = [str(save_sweep(s, tmp_path / ("%s.json" % s.label.replace(" ", "-")))) for s in (BARE, BOXED)]
    ran = cmd.run("bench-report", ",".join(files), "--output", str(tmp_path / "f.png"), "--bandwidth", str(report))
    assert ran.returncode == 0, ran.stderr
    out = " ".join(ran.stdout.split())
    assert "gap: container vs bare metal at 2 CPU ranks: -4.1 % images/s" in out
    assert "predict 9.6 ms/step of ring allreduce" in out
    markdown = (tmp_path / "f.md").read_text()
    assert figure.GAP_HEADING in markdown and "- bare metal, 1 → 2 CPU ranks: step 100.0 → 110.0 ms" in markdown
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"results": []}))
    refused = cmd.run("bench-report", ",".join(files), "--output", str(tmp_path / "g.png"), "--bandwidth", str(empty))
    assert refused.returncode != 0 and "%s: no mpi.bandwidth measurement in it" % empty in refused.stderr


RECORDED = REPO / "tests" / "data" / "bench" / "timeline"  # README.md there: how it was recorded and trimmed


def test_a_recorded_two_rank_timeline_by_hand():
    """By hand, from np-2/horovod-timeline.json (83 gradients of MobileNet, 4 timed steps; the end of each step's
    last NEGOTIATE_ALLREDUCE and of its last ALLREDUCE, µs): 32521953 -> 32526062, 32709614 -> 32715663,
    32857944 -> 32865989, 33194342 -> 33196091: 4.109, 6.049, 8.045, 1.749 ms exposed, median 5.079 ms.
    throughput.json: timed steps 314.8, 189.4, 150.8, 330.4 ms (median (189.4 + 314.8) / 2 = 252.1 ms), input
    waits 3.59, 2.89, 2.53, 3.58 ms (median 3.23 ms); compute 252.09 - 3.23 - 5.08 = 243.77 ms."""
    run = RECORDED / "np-2"
    timeline = tl.parse((run / "horovod-timeline.json").read_text())
    assert timeline.problems == [] and timeline.start_unix_us is not None
    times = {t.tensor: t for t in tl.per_tensor(timeline)}
    grads = tl.gradients(timeline)
    assert len(times) == 84 and len(grads) == 83 and all(times[g].count == 4 for g in grads)
    assert all("HorovodAllreduce_grads_" in g for g in grads)
    steps = tl.steps(timeline)
    assert [(s.ready_us, s.end_us) for s in steps] == [(32521953, 32526062), (32709614, 32715663),
                                                       (32857944, 32865989), (33194342, 33196091)]
    assert [round(s.exposed_s * 1e6) for s in steps] == [4109, 6049, 8045, 1749]
    data = json.loads((run / "throughput.json").read_text())
    found = attribution.split_run(run, data)
    assert (found.steps, found.gradients, found.gradient_bytes) == (4, 83, 3_221_326 * 4)
    assert round(found.exposed_allreduce_s * 1e6) == 5079
    assert round(found.step_s * 1e3, 2) == 252.09 and round(found.input_wait_s * 1e3, 2) == 3.23
    assert round(found.compute_s * 1e3, 2) == 243.77


def test_the_recorded_sweep_reads_back_and_explains_its_1_to_2_loss():
    """The sweep's points as `invoke bench` read them (bench.sweep.read_point) and its report's sentence: 1 rank
    148.95 ms (its 4 timed steps' median, no allreduce at world size 1), 2 ranks 252.09 ms: +103.1 ms/step,
    per-rank images/s 148.95 / 252.09 - 1 = -40.9 %; compute 144.73 -> 243.77 (+99.0 ms), input wait 4.23 -> 3.23
    (-1.0 ms), exposed allreduce 0 -> 5.1 ms: two ranks on 2 cores lose most to compute (each rank has half the
    cores), not to the allreduce."""
    from bench.sweep import read_point

    swept = load_sweep(RECORDED / "sweep.json")
    points = [read_point(n, RECORDED / ("np-%d" % n)).point for n in (1, 2)]
    for point in points:  # the trimmed timelines give what the untrimmed ones gave
        assert point.step_split.model_dump() == pytest.approx(swept.point(point.count).step_split.model_dump())
    assert points[0].step_split.exposed_allreduce_s == 0 and points[0].step_split.gradients == 0
    assert swept.record.label_sha256.startswith("dc1d2df67fdc") and swept.record.versions["openmpi"] == "4.1.4"
    line = attribution.scaling_line(swept, 2)
    assert line == ("h23t-cpu, 1 → 2 CPU ranks: step 149.0 → 252.1 ms (+103.1 ms/step, per-rank images/s -40.9 %), "
                    "of which compute +99.0 ms, input wait -1.0 ms, exposed allreduce +5.1 ms; the largest share: "
                    "compute")
