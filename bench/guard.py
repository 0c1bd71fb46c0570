"""The comparability guard: two sweeps are compared only when they differ in the system alone (bare metal,
container, Kubernetes: how the ranks are started), never in what runs or on what.

``COMPARED`` lists what must be equal, each read from a sweep's run record: device kind, model, image size, batch
size per rank, precision; the stack's versions as the ranks reported them (``record.versions``: Horovod, Open
MPI/MPI, TensorFlow, Python; the trainer reports the MPI library its ranks mapped, ``trainer.mpilib``); the data
(``record.data``: ``synthetic`` or the ChestX-ray14 folder given, and its content as the trainer hashed it:
``record.label_sha256``, the label file's SHA-256, and ``record.train_split_sha256``, the training split's sorted
image names); the hosts (names without ``:slots``, ``localhost`` as the recording host). A field one record does
not give (a published series states no batch size; a sweep from before the trainer recorded MPI and the data's
hashes) is not compared.

The network path (``record.network_path``: host, overlay, bridge; ``bench.netpath``) is a factor of its own, not
compared here: series on different paths are shown side by side, but their gap is never called container overhead.
``effect`` names what a gap between two series measures: the system's (container overhead) only when both ran on
the same path; the network path's when the same system ran on two; both together otherwise. ``path_notes`` are the
caption's sentences that keep them apart.

``differences`` names what differs; ``bench.figure`` shows a series with differences as its own group, without a %
difference, naming them in the table and the caption; ``refuse`` is ``bench-report --strict``'s and the regression
gate's refusal. When the two records are the seed study's two Table 1 stacks (``envs/table1.yaml``: NGC 19.06 vs
conda), ``table1_note`` says that the seed's own comparison fails this guard.
"""
from __future__ import annotations

from pathlib import Path

from bench.results import Sweep
from chexstack.errors import ChexstackError, ExitCode


def _version(key: str):
    return lambda s: s.record.versions.get(key) or None


def _short(digest: str | None) -> str | None:
    """A SHA-256's first 12 hex digits (enough to tell two data sets apart in a caption)."""
    return digest[:12] if digest else None


LOCAL_NAMES = ("localhost", "127.0.0.1")


def _hosts(sweep: Sweep) -> str | None:
    """The record's host names, sorted, without ``:slots``; ``localhost`` is the recording host (``hostname``)."""
    names = {h.split(":")[0] for h in sweep.record.hosts}
    here = sweep.record.hostname
    return ",".join(sorted({here if here and n in LOCAL_NAMES else n for n in names})) or None


#: What must be equal for a % difference to mean something: (name in messages, value of a sweep or None when its
#: record does not say). A 32 px sweep is not "−90 %" of a 224 px one; Horovod 0.16.2 against 0.16.1 is not the
#: container's cost.
COMPARED = (
    ("device kind", lambda s: s.unit),
    ("model", lambda s: s.record.model),
    ("image size", lambda s: None if s.record.image_size is None else "%d px" % s.record.image_size),
    ("batch size per rank", lambda s: s.record.batch_size_per_rank),
    ("precision", lambda s: None if s.record.amp is None else ("mixed float16" if s.record.amp else "float32")),
    ("Horovod", _version("horovod")),
    ("Open MPI", _version("openmpi")),
    ("MPI", _version("mpi")),
    ("TensorFlow", _version("tensorflow")),
    ("Python", _version("python")),
    ("data", lambda s: s.record.data),
    ("label file SHA-256", lambda s: _short(s.record.label_sha256)),
    ("training split", lambda s: _short(s.record.train_split_sha256)),
    ("hosts", _hosts),
)


def differences(sweep: Sweep, base: Sweep) -> tuple[str, ...]:
    """What differs between ``sweep`` and ``base`` among ``COMPARED``, e.g. ``("image size 32 px vs 224 px",
    "Horovod 0.16.2 vs 0.16.1")``; empty when they compare like with like."""
    out = []
    for name, value in COMPARED:
        mine, theirs = value(sweep), value(base)
        if mine is not None and theirs is not None and mine != theirs:
            out.append("%s %s vs %s" % (name, mine, theirs))
    return tuple(out)


def comparable(sweep: Sweep, base: Sweep) -> bool:
    """Whether a % difference against ``base`` means something: nothing of ``COMPARED`` differs."""
    return not differences(sweep, base)


def table1_note(sweep: Sweep, base: Sweep) -> str | None:
    """A sentence when ``sweep`` and ``base`` run the seed study's two Table 1 stacks (``record.stack``: one each
    of ``envs/table1.yaml``'s columns) and the guard finds differences: the seed's own comparison fails it (the
    differences themselves are ``differences``)."""
    from envs.table1 import load_table1

    columns = {c.stack: c.title for c in load_table1().columns}
    stacks = {sweep.record.stack, base.record.stack}
    if len(stacks) != 2 or not stacks <= set(columns) or not differences(sweep, base):
        return None
    return ("the seed study's own comparison (Table 1: %s vs %s) fails this guard"
            % (columns[sweep.record.stack], columns[base.record.stack]))


def path_difference(sweep: Sweep, base: Sweep) -> str | None:
    """``network path overlay vs host`` when both records declare a path and they differ; else None."""
    mine, theirs = sweep.record.network_path, base.record.network_path
    return "network path %s vs %s" % (mine, theirs) if mine and theirs and mine != theirs else None


def _same_system(sweep: Sweep, base: Sweep) -> bool:
    """The same launcher running the same thing (image, or Python environment): one system, whatever its path."""
    a, b = sweep.record, base.record
    return (a.launcher, a.image_id or a.image) == (b.launcher, b.image_id or b.image)


#: What a gap between two series measures (``effect``).
SYSTEM_EFFECT = "the system's effect (container overhead)"
PATH_EFFECT = "the network path's effect"
BOTH_EFFECTS = "the system's and the network path's effects together, not container overhead"


def effect(sweep: Sweep, base: Sweep) -> str:
    """What the gap of ``sweep`` against ``base`` measures: ``SYSTEM_EFFECT`` on one path (or no path declared),
    ``PATH_EFFECT`` for one system on two paths, ``BOTH_EFFECTS`` when system and path both differ."""
    if not path_difference(sweep, base):
        return SYSTEM_EFFECT
    return PATH_EFFECT if _same_system(sweep, base) else BOTH_EFFECTS


def path_notes(sweeps: list[Sweep]) -> tuple[str, ...]:
    """Caption sentences for the series whose path differs from the first's (the baseline): what their gap measures,
    and which pair shows each effect alone (the same system on the baseline's path; the same system on two paths).
    Empty when every series declares the same path or none."""
    base, notes = sweeps[0], []
    for sweep in sweeps[1:]:
        found = path_difference(sweep, base)
        if not found:
            continue
        alone = [s.label for s in sweeps if s is not sweep and _same_system(s, sweep) and not path_difference(s, base)]
        notes.append("%s vs %s: %s: the gap is %s%s" % (
            sweep.label, base.label, found, effect(sweep, base),
            "; %s vs %s is the system's, %s vs %s the path's" % (alone[0], base.label, sweep.label, alone[0])
            if alone else ""))
    return tuple(notes)


def refuse(pairs: list[tuple[Path, Sweep, Path, Sweep]], why: str) -> None:
    """Raise ChexstackError (exit 2) naming both files of every pair (result, its baseline) that ``differences``
    finds not comparable, and each difference, and every file whose run drifted (``record.drift``: its ranks
    disagreed, or differed from the stack's manifest, ``launch.drift``); ``why`` starts the message (the option
    that refuses). Returns when every pair compares like with like on undrifted runs."""
    lines = []
    for path, sweep in dict((p, s) for pair in pairs for p, s in (pair[2:], pair[:2])).items():
        if sweep.record.drift:
            lines.append("%s (%s): its environment drifted at run time: %s" % (path, sweep.label,
                                                                            "; ".join(sweep.record.drift)))
    for path, sweep, base_path, base in pairs:
        found = differences(sweep, base) + tuple(filter(None, [path_difference(sweep, base)]))
        if found:
            note = table1_note(sweep, base)
            if path_difference(sweep, base):
                note = "; ".join(filter(None, [note, "the gap would be %s" % effect(sweep, base)]))
            lines.append("%s (%s) vs %s (%s): %s%s" % (path, sweep.label, base_path, base.label, "; ".join(found),
                                                     " (%s)" % note if note else ""))
    if lines:
        drifted = any(": its environment drifted at run time: " in line for line in lines)
        raise ChexstackError("%s: not comparable, they differ in more than the system%s:\n  %s"
                             % (why, " or drifted" if drifted else "", "\n  ".join(lines)), exit_code=ExitCode.USAGE)
