"""Drift at run time: what the ranks really imported (``trainer.asrun``, the run record's ``as_run``) against the
stack's manifest, and the ranks against each other.

- Every as-run fact must be the same on every rank (the package set's SHA-256 included): ranks that disagree are
  drift, whatever the stack (a node whose environment was edited by hand; mixed TensorFlow/Horovod builds make
  Horovod stall on mismatched tensors, horovod/horovod#604).
- With a stack (``--stack``), each manifest row with a version (``envs/stacks/<stack>.yaml``: tensorflow, horovod,
  Open MPI, CUDA, cuDNN, NCCL, Python) must match what the ranks report, by the manifest's rule
  (``images.verify.matches``: "3.11" matches "3.11.2"); a fact a library gives at a coarser precision than the pin
  (TensorFlow's build info names cuDNN "9" for a pinned "9.7.1") is compared on the parts it gives, which it does not
  contradict. A row the manifest pins that no rank reports is drift: unknown is not a match.
- A run without a stack (this machine's environment) is compared between its ranks only: no manifest describes it.

``drift(as_run, stack) -> [str]`` names each difference in one line; an empty list is no drift. A run record
without ``as_run`` (a trainer from before it recorded one) is itself drift: nothing was observed.
"""
from __future__ import annotations

import json

from envs.manifest import Stack
from images.verify import matches

#: manifest row -> the as-run key that reports it (the MPI row: ``openmpi`` for Open MPI, else ``mpi``).
ROWS = (("tensorflow", "tensorflow"), ("horovod", "horovod"), ("python", "python"), ("cuda", "cuda"),
        ("cudnn", "cudnn"), ("nccl", "nccl"))


def _shown(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def between_ranks(as_run: list[dict]) -> list[str]:
    """One line per as-run fact whose value differs between ranks, naming each rank's value."""
    out = []
    keys = []
    for facts in as_run:
        keys += [k for k in facts if k not in keys]
    for key in keys:
        values = [facts.get(key) for facts in as_run]
        if any(v != values[0] for v in values[1:]):
            out.append("ranks disagree on %s: %s" % (key, ", ".join(
                "rank %d %s" % (rank, _shown(v)) for rank, v in enumerate(values))))
    return out


def against_manifest(facts: dict, stack: Stack) -> list[str]:
    """One line per manifest row with a version that ``facts`` (one rank's) does not match."""
    rows = list(ROWS)
    mpi = stack.components["mpi"]
    rows.append(("mpi", "openmpi" if (mpi.name or "Open MPI") == "Open MPI" else "mpi"))
    out = []
    for row, key in rows:
        expected = stack.version(row)
        if expected is None:
            continue
        found = facts.get(key)
        if key == "mpi" and found:
            found = found.split()[-1]
        if found is None:
            out.append("%s: stack %s pins %s, the ranks report none" % (row, stack.name, expected))
        elif not matches(".".join(expected.split(".")[:len(str(found).split("."))]), str(found)):
            out.append("%s: stack %s pins %s, the ranks run %s" % (row, stack.name, expected, found))
    return out


def drift(as_run: list[dict] | None, stack: Stack | None) -> list[str]:
    """Every difference (``between_ranks``, then ``against_manifest`` of rank 0's facts when ``stack``); a record
    without as-run facts is one line saying so."""
    if not as_run:
        return ["the run record has no as-run facts (as_run): what the ranks imported was not observed"]
    found = between_ranks(as_run)
    if stack is not None:
        found += against_manifest(as_run[0], stack)
    return found
