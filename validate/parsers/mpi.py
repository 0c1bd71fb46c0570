"""Output of chexstack's MPI launch test (``validate/checks/data/mpi_allreduce.c``): one line per rank,
``chexstack-mpi rank R size N sum S host H``, possibly behind an mpirun ``--tag-output`` prefix."""
from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(r"chexstack-mpi rank (\d+) size (\d+) sum (\d+) host (\S+)")


@dataclass(frozen=True)
class RankLine:
    rank: int
    size: int
    sum: int
    host: str


def parse_mpi_test(text: str) -> list[RankLine]:
    return [RankLine(int(r), int(n), int(s), h) for r, n, s, h in _LINE.findall(text or "")]


def world_problems(lines: list[RankLine], np: int) -> list[str]:
    """What is wrong with a world of ``np`` ranks: missing ranks, a size other than ``np``, a wrong allreduce sum
    (N(N+1)/2 of the rank+1 values); empty when the world formed."""
    problems = []
    ranks = sorted(l.rank for l in lines)
    if ranks != list(range(np)):
        problems.append("ranks %s reported, expected 0..%d" % (ranks or "none", np - 1))
    sizes = sorted({l.size for l in lines})
    if sizes and sizes != [np]:
        problems.append("world size %s, expected %d" % ("/".join(map(str, sizes)), np))
    want = np * (np + 1) // 2
    bad = sorted({l.sum for l in lines if l.sum != want})
    if bad:
        problems.append("allreduce sum %s, expected %d" % ("/".join(map(str, bad)), want))
    return problems
