"""Horovod's stall warnings: which tensors the ranks wait on, and which ranks are ready for each.

Horovod's coordinator warns when a collective was submitted by some ranks and not by the others for more than
``HOROVOD_STALL_CHECK_TIME_SECONDS`` (60 s), repeating it at that interval while the job hangs: "One or more tensors
were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks ...
This may indicate that different ranks are trying to submit different tensors or that only subset of ranks is
submitting tensors, which will cause deadlock." Its formats, each read here:

* Horovod 0.9-0.13, one line: ``Stalled ops: HorovodBroadcast_TFOptimizer_iterations_0 [ready ranks: 0],
  HorovodBroadcast_iterations_0 [ready ranks: 1]`` (https://github.com/horovod/horovod/issues/67);
* Horovod 0.13-0.16 (https://github.com/horovod/horovod/pull/342, operations.cc): ``Stalled ops:`` then one tensor
  per line (or per log line), ``HorovodBroadcast_global_step_0 [missing ranks: 1]``
  (https://github.com/horovod/horovod/issues/1012, #534);
* Horovod >= 0.19 (horovod/common/stall_inspector.cc): ``Missing ranks:`` then one line per rank that did NOT submit
  them, ``0: [allreduce.noname.1, allreduce.noname.2 ...]`` (at most 6 names), ``0!:`` for a rank past
  ``HOROVOD_STALL_SHUTDOWN_TIME_SECONDS`` (https://github.com/horovod/horovod/issues/2640, #3950).

``StallReader`` reads a run's lines in order; ``Stall.mismatch`` says whether the ranks wait on tensors of different
names (each ready on a tensor another never submits: the ranks built different graphs, so different code or
framework versions: horovod/horovod#67, #100, #2640), else the stalled ranks never reached the collective.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

#: the warning's own words, in every format
WARNING = re.compile(r"submitted to be reduced, gathered or broadcasted by subset of ranks")
_OLD_ENTRY = re.compile(r"([^\s,\[\]]+) \[(ready|missing) ranks:\s*([\d,\s]*)\]")
_MISSING_HEAD = re.compile(r"Missing ranks:\s*$")
_NEW_ENTRY = re.compile(r"^\s*(\d+)(!?): \[(.*?)(?: \.\.\.)?\]\s*$")
#: the prefixes of a rank's line that may stand before an entry line (Open MPI's --tag-output, horovodrun's, a bare
#: ``[0] ``, srun's ``0: ``): tried one after the other
_PREFIX = re.compile(r"^(?:\[(?:[^\]\[,]*@)?(?:\d+,)?\d+\]<(?:stdout|stderr)>:\s?|\[\d{1,5}\] | {0,4}\d{1,5}: )")


def _ranks(text: str) -> frozenset[int]:
    return frozenset(int(r) for r in re.findall(r"\d+", text))


@dataclass
class Stall:
    """What the warnings said: ``ready`` and ``missing`` ranks by tensor name (first-seen order; a format gives one or
    the other), the first warning's ``line`` (its text) and ``number`` (1-based line), how many warnings (``count``),
    and whether Horovod said it shuts the ranks down (``shutdown``)."""

    line: str
    number: int
    count: int = 1
    ready: dict[str, frozenset[int]] = field(default_factory=dict)
    missing: dict[str, frozenset[int]] = field(default_factory=dict)
    shutdown: bool = False

    def tensors(self) -> list[str]:
        return list(dict.fromkeys(list(self.ready) + list(self.missing)))

    def ranks(self, world: int | None = None) -> frozenset[int]:
        """Every rank: ``range(world)`` where the world size is known, else those the warnings name."""
        if world:
            return frozenset(range(world))
        return frozenset(r for ranks in list(self.ready.values()) + list(self.missing.values()) for r in ranks)

    def ready_ranks(self, tensor: str, world: int | None = None) -> frozenset[int]:
        """The ranks that submitted ``tensor`` (the warning's, else every rank but the missing ones)."""
        if tensor in self.ready:
            return self.ready[tensor]
        return self.ranks(world) - self.missing.get(tensor, frozenset())

    def by_ready(self, world: int | None = None) -> list[tuple[frozenset[int], list[str]]]:
        """The tensors grouped by the ranks ready for them (the group of the lowest rank first; tensors in
        first-seen order)."""
        groups: dict[frozenset[int], list[str]] = {}
        for tensor in self.tensors():
            groups.setdefault(self.ready_ranks(tensor, world), []).append(tensor)
        return sorted(groups.items(), key=lambda item: (min(item[0], default=1 << 30), sorted(item[0])))

    def mismatch(self, world: int | None = None) -> bool:
        """Some rank is ready on a tensor another rank never submitted while that other rank is ready on one the first
        never submitted: the ranks submit tensors of different names."""
        groups = [ready for ready, _ in self.by_ready(world) if ready]
        return any(a - b and b - a for a in groups for b in groups)

    def idle(self, world: int | None = None) -> frozenset[int]:
        """The ranks that submitted none of the stalled tensors (they never reached the collective)."""
        ranks = self.ranks(world)
        return frozenset(r for r in ranks if all(r not in self.ready_ranks(t, world) for t in self.tensors()))


class StallReader:
    """Reads a run's lines (``feed``) and keeps its first ``Stall`` (later warnings add their tensors and count)."""

    def __init__(self) -> None:
        self.stall: Stall | None = None
        self._listing = False  # after ``Stalled ops:``/``Missing ranks:``: the entry lines follow

    def feed(self, line: str, number: int) -> bool:
        """Read one line (as the log has it, the launcher's prefix and all; ``number`` its 1-based number); True when
        it is part of a stall warning."""
        if WARNING.search(line):
            if self.stall is None:
                self.stall = Stall(_PREFIX.sub("", line, count=1).strip(), number, 0)
            self.stall.count += 1
            self._listing = True
            self._entries(line, number)
            return True
        if self._entries(line, number):  # a tensor's own line names its ranks: it needs no heading
            return True
        if self.stall is None or not self._listing:
            return False
        if _MISSING_HEAD.search(line) or line.strip().endswith("Stalled ops:"):
            return True
        if "Will shutdown" in line:
            self.stall.shutdown = True
            return True
        once = _PREFIX.sub("", line, count=1)
        for candidate in (line, once, _PREFIX.sub("", once, count=1)):
            m = _NEW_ENTRY.match(candidate)
            if m:
                rank_missing = int(m.group(1))
                self.stall.shutdown = self.stall.shutdown or bool(m.group(2))
                for name in (n.strip() for n in m.group(3).split(",")):
                    if name:
                        self.stall.missing[name] = self.stall.missing.get(name, frozenset()) | {rank_missing}
                return True
        self._listing = False
        return False

    def _entries(self, line: str, number: int) -> bool:
        found = False
        for name, which, ranks in _OLD_ENTRY.findall(line):
            if self.stall is None:
                self.stall = Stall(_PREFIX.sub("", line, count=1).strip(), number)
            table = self.stall.ready if which == "ready" else self.stall.missing
            table[name] = table.get(name, frozenset()) | _ranks(ranks)
            found = True
        return found
