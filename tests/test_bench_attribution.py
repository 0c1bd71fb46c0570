"""The gap explained (issue 23, part 4): Horovod's timeline parsed (facts.parsers.horovod_timeline), a step split
into compute, input wait and exposed allreduce (bench.attribution) and the report's sentences, on a real
timeline recorded here (tests/data/bench/timeline/) and checked against hand computations."""
from __future__ import annotations

from facts.parsers import horovod_timeline as tl


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
