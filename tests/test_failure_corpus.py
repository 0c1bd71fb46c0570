"""Issue 40, item 7: a corpus of real failures, not a handful. Every case of ``tests/data/failures`` (public issues
and forum threads of Horovod, NCCL, Open MPI, Apptainer, Slurm, the NVIDIA container toolkit and driver, each with
its sources and what is posted vs reconstructed in its input's comment header) runs through its product entry in
this process (``train --explain``, ``validate --from``, ``validate --job``; ``tests/lib/failure_corpus.py``).

Expected classes (``case.yaml``'s ``class``) are one of this vocabulary (``failure_corpus.CLASSES``):

    oom, killed, time_limit, gpu_init, cuda_driver, version_mismatch, build, container_start, mpi_init, launch,
    memlock, nccl_network, nccl_shm, hang, crash, scheduler, python_exception

The class the product gives is read from its output (``failure_corpus.given_class``): its first bracketed cause code
(``[NCCL_IB_COMPLETION_ERROR]`` -> nccl_network), else the class whose words come first in the explanation; "no
failure found"/PASS reads ``none``, "unclassified failure: LINE" ``unclassified`` (whatever LINE says), a bare
"rank N exited" ``rank_exit``. A case is right when the given class is the expected one, every cause group has a
phrase in the explanation, no must-not phrase is in the output, and it is not told "no failure" (an exit status 0
is "no failure" for every entry: ``train --explain`` exits 1 for a log that shows a failure, validate 0 for a PASS).

``pytest -s tests/test_failure_corpus.py -k report`` (or ``python -m tests.lib.failure_corpus``) prints the table and
the confusion of expected vs given classes.
"""
from __future__ import annotations

import pytest

from tests.lib import failure_corpus as corpus

CASES = corpus.load_cases()


def test_the_corpus_is_a_corpus():
    """At least 24 cases, real variety of kinds, each with an https source, a class of the vocabulary (load_cases
    refuses the rest) and at least one cause phrase."""
    assert len(CASES) >= 24
    assert len({c.expected for c in CASES}) >= 12
    assert all(c.meta["causes"] for c in CASES)
    assert all(c.input.read_text().startswith("#") for c in CASES if c.meta["entry"] != "validate --from")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_through_its_entry(case):
    outcome = corpus.run_case(case)
    assert outcome.returncode != 2, outcome.output  # refused as bad input: the entry could not read the evidence
    assert not outcome.no_failure, "%s: given no failure/PASS:\n%s" % (case.name, outcome.output)
    assert outcome.given == case.expected, "%s: class %s, expected %s:\n%s" % (
        case.name, outcome.given, case.expected, outcome.output)
    assert not outcome.missing, "%s: no phrase of %s in:\n%s" % (case.name, outcome.missing, outcome.output)
    assert not outcome.forbidden, "%s: says %s:\n%s" % (case.name, outcome.forbidden, outcome.output)


def test_report_counts_no_failure_apart():
    """The report (printed with -s): every case's expected and given class and the confusion; the cases given no
    failure or a PASS are counted apart, and there must be none."""
    outcomes = [corpus.run_case(c) for c in CASES]
    text = corpus.report(outcomes)
    print("\n" + text)
    none = [o.case.name for o in outcomes if o.no_failure]
    assert text.startswith("failure corpus: %d cases" % len(CASES))
    assert not none, "%d case(s) given no failure/PASS: %s" % (len(none), ", ".join(none))


@pytest.mark.parametrize("output,given", [
    ("no failure found in x.log: no rank's exit code, error or exception", "none"),
    ("unclassified failure: FATAL:   container creation failed: ...\nfull log: x", "unclassified"),
    ("unclassified failure: something odd happened\nfull log: x", "unclassified"),
    ("training failed (from its log); rank 1 exited first, with code 1\nlast lines:\nout of memory", "rank_exit"),
    ("training failed (from its log); the launch failed before the ranks ran: x [MPI_PMI_MISMATCH]; ...", "mpi_init"),
    ("training failed; NCCL: ... [NCCL_SHM_EXHAUSTED]; start the container with shm", "nccl_shm"),
    ("training failed; rank 0 ran out of GPU memory (OOM); then Horovod has been shut down", "oom"),
    ("training failed; rank 0: Traceback ... KeyError: 'x'", "python_exception"),
    ("hang: Horovod stalled on tensor x [ready ranks: 0]", "hang"),
])
def test_given_class_is_read_from_the_explanation(output, given):
    """The reading of the given class: codes first, else the earliest class words, never the quoted log tail."""
    assert corpus.given_class(output) == given


def test_the_header_is_not_evidence():
    assert corpus.without_header("# a\n# b\n$ cmd\n# not header\nx\n") == "$ cmd\n# not header\nx\n"
