"""Output of chexstack's MPI launch test (``validate/checks/data/mpi_allreduce.c``): one line per rank,
``chexstack-mpi rank R size N sum S host H``, possibly behind an mpirun ``--tag-output`` prefix; and why a failed
``mpirun`` failed (``launch_failure``: the line that matters, not Open MPI's help banners)."""
from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(r"chexstack-mpi rank (\d+) size (\d+) sum (\d+) host (\S+)")
#: Open MPI's help messages (show_help) are framed by lines of dashes.
_RULE = re.compile(r"^\s*-{20,}\s*$")
#: ``Executable: /x``, ``Node: vm``, ``target node:  node2``, ``Exit code: 3`` inside a help message.
_DETAIL = re.compile(r"^\s*([A-Za-z][A-Za-z ]{0,20}):\s+(\S.*)$")


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


def _blocks(text: str) -> tuple[list[str], list[list[str]]]:
    """(lines outside Open MPI's dash-framed help messages, the lines of each message)."""
    outside, banners, inside = [], [], None
    for line in (text or "").splitlines():
        if _RULE.match(line):
            if inside is None:
                inside = []
            else:
                banners.append(inside)
                inside = None
        elif inside is not None:
            inside.append(line)
        elif line.strip():
            outside.append(line.strip())
    if inside:  # cut off before its closing rule
        banners.append(inside)
    return outside, banners


def _banner_summary(lines: list[str]) -> str:
    """A help message's first paragraph as one line, plus its ``key: value`` details."""
    first, rest = [], iter(lines)
    for line in rest:
        if not line.strip():
            if first:
                break
            continue
        first.append(line.strip())
    details = ["%s: %s" % m.groups() for m in map(_DETAIL.match, rest) if m]
    summary = " ".join(" ".join(first).split()).rstrip(":")
    return summary + (" (%s)" % ", ".join(details[:3]) if details else "")


def launch_failure(text: str, limit: int = 3) -> str:
    """Why ``mpirun`` failed, in one line, from its output (stderr, or stdout + stderr): the lines it printed
    outside Open MPI's dash-framed help messages (ssh's own errors such as ``ssh: Could not resolve hostname
    node1: …``, a shell's ``orted: command not found``) come first; otherwise each help message's first paragraph
    and details (``There are not enough slots available …``, ``Executable: /x``). At most ``limit`` items, joined
    by "; ", with "(+N more)"; "" when the text has nothing (tests: tests/data/mpi, real Open MPI 4.1.4 outputs)."""
    outside, banners = _blocks(text)
    items = list(dict.fromkeys(outside)) or [s for s in dict.fromkeys(map(_banner_summary, banners)) if s]
    more = " (+%d more)" % (len(items) - limit) if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


#: Why a launch was refused, by cause: (diagnosis code, pattern). Open MPI's own texts (tests/data/mpi, real
#: Open MPI 4.1.4 outputs); ssh's messages are the same under MPICH's and Intel MPI's Hydra launcher.
_CAUSES = (
    ("MPI_RUN_AS_ROOT", r"attempt to run as root"),
    ("MPI_HOST_UNREACHABLE", r"ssh: |Host key verification failed|Permission denied \(publickey|"
                             r"ORTE was unable to reliably start one or more daemons"),
    ("MPI_PMI_MISMATCH", r"direct launched using \"srun\"|PMI support|PMIX ERROR|PMIx_Init|OPAL ERROR: Unreachable"),
    ("MPI_NOT_ENOUGH_SLOTS", r"not enough slots\s+available"),
    ("MPI_EXECUTABLE_MISSING", r"could not access\s+or execute an executable"),
    ("MPI_RANK_FAILED", r"process(?:es)? returned\s+a non-zero exit code|exited on signal"),
)


def launch_cause(text: str) -> str:
    """The diagnosis code of a failed launch (``MPI_RUN_AS_ROOT``, ``MPI_HOST_UNREACHABLE``,
    ``MPI_PMI_MISMATCH``, ``MPI_NOT_ENOUGH_SLOTS``, ``MPI_EXECUTABLE_MISSING``, ``MPI_RANK_FAILED``), or
    ``MPI_LAUNCH_FAILED`` when the output names none of them."""
    for code, pattern in _CAUSES:
        if re.search(pattern, text or ""):
            return code
    return "MPI_LAUNCH_FAILED"
