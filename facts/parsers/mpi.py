"""Output of chexstack's MPI launch test (``validate/checks/data/mpi_allreduce.c``): one line per rank,
``chexstack-mpi rank R size N sum S host H``, possibly behind an mpirun ``--tag-output`` prefix; and why a failed
``mpirun`` failed (``launch_failure``: the line that matters, not Open MPI's help banners)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from facts.parsers.horovodrun import RANK_LINE

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


def _split(text: str) -> list[tuple[bool, str | list[str]]]:
    """The output in printed order: (False, a line outside Open MPI's dash-framed help messages, stripped) or
    (True, the lines of one message); blank outside lines left out, a message cut off before its closing rule
    kept."""
    parts, inside = [], None
    for line in (text or "").splitlines():
        if _RULE.match(line):
            if inside is None:
                inside = []
            else:
                parts.append((True, inside))
                inside = None
        elif inside is not None:
            inside.append(line)
        elif line.strip():
            parts.append((False, line.strip()))
    if inside:
        parts.append((True, inside))
    return parts


def _banner_summary(lines: list[str]) -> str:
    """A help message's first paragraph as one line, plus its ``key: value`` details (after a blank line, or
    indented right under the paragraph as in the TCP BTL's ``Local host:`` / ``Remote host:``)."""
    first, rest, details = [], iter(lines), []
    for line in rest:
        if not line.strip():
            if first:
                break
            continue
        if first and line[:1].isspace() and (m := _DETAIL.match(line)):  # details right under the paragraph
            details.append("%s: %s" % m.groups())
            break
        first.append(line.strip())
    details += ["%s: %s" % m.groups() for m in map(_DETAIL.match, rest) if m]
    summary = " ".join(" ".join(first).split()).rstrip(":")
    return summary + (" (%s)" % ", ".join(details[:3]) if details else "")


def launch_failure(text: str, limit: int = 3) -> str:
    """Why ``mpirun`` failed, in one line, from its output (stderr, or stdout + stderr): the lines it printed
    outside Open MPI's dash-framed help messages (ssh's own errors such as ``ssh: Could not resolve hostname
    node1: …``, a shell's ``orted: command not found``) come first; otherwise each help message's first paragraph
    and details (``There are not enough slots available …``, ``Executable: /x``). At most ``limit`` items, joined
    by "; ", with "(+N more)"; "" when the text has nothing (tests: tests/data/mpi, real Open MPI 4.1.4 outputs).
    Lines that name a cause of ``LAUNCH_CAUSES`` lead, in printed order, ahead of the launcher's own notices
    (Open MPI's ``plm:rsh: Warning: setpgid(...) failed in parent``, printed before ssh's error under load: it
    is ignored by Open MPI itself, orte/mca/plm/rsh/plm_rsh_module.c)."""
    parts = _split(text)
    outside = [part for banner, part in parts if not banner]
    items = list(dict.fromkeys(outside)) or [s for s in dict.fromkeys(
        _banner_summary(part) for banner, part in parts if banner) if s]
    items.sort(key=lambda item: not any(re.search(pattern, item) for _, pattern in LAUNCH_CAUSES))
    more = " (+%d more)" % (len(items) - limit) if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


#: Why a launch was refused, by cause: (diagnosis code, pattern), most specific first. Each pattern is matched
#: against one item of the launcher's own output (``launch_items``: a line outside Open MPI's help messages, or a
#: help message's first paragraph), never against the text as a whole, so that the line that tells the causes
#: apart decides, not the generic banner printed after it. A ``host`` group names the host the line is about.
#: Texts: Open MPI 4.1.4's own (tests/data/mpi); ssh's and the shell's lines as printed before Open MPI's
#: "ORTE was unable to reliably start one or more daemons" (https://github.com/open-mpi/ompi/issues/599,
#: https://github.com/horovod/horovod/issues/301, https://github.com/horovod/horovod/issues/2117); Horovod's
#: ``ssh not successful for host H:`` (horovod/runner/launch.py, check_all_hosts_ssh_successful); Open MPI's TCP
#: BTL ``unable to complete a TCP connection`` (https://github.com/horovod/horovod/issues/2043); Slurm's srun
#: ``mpi/pmix`` plugin errors (srun(1), --mpi). ssh's messages are the same under MPICH's and Intel MPI's Hydra.
LAUNCH_CAUSES: tuple[tuple[str, str], ...] = (
    ("MPI_RUN_AS_ROOT", r"attempt to run as root"),
    ("MPI_ORTED_MISSING", r"(?:orted|prted): (?:command not found|No such file or directory)|"
                          r"(?:orted|prted): error while loading shared libraries"),
    ("MPI_SSH_AUTH", r"(?:^|[\s@])(?P<host>[^\s@:]+): Permission denied \("),
    ("MPI_SSH_AUTH", r"Permission denied \((?:publickey|password)|Permission denied, please try again|"
                     r"Host key verification failed"),
    ("MPI_HOST_UNKNOWN", r"Could not resolve hostname (?P<host>\S+?): "),
    ("MPI_HOST_UNREACHABLE", r"ssh: connect to host (?P<host>\S+) port \d+: "),
    ("MPI_HOST_UNREACHABLE", r"^ssh: "),
    ("MPI_PMI_MISMATCH", r'direct launched using "srun"|PMI support|mpi/pmix|invalid MPI type'),
    ("MPI_PMI_MISMATCH", r"PMIX ERROR|PMIx_Init|OPAL ERROR: Unreachable"),
    ("MPI_NOT_ENOUGH_SLOTS", r"not enough slots\s+available"),
    ("MPI_EXECUTABLE_MISSING", r"could not access\s+or execute an executable"),
    ("MPI_TCP_UNREACHABLE", r"unable to complete a TCP\s+connection(?:.*Remote host: (?P<host>[^\s,)]+))?"),
    ("MPI_RANK_FAILED", r"process(?:es)? returned\s+a non-zero exit code|exited on signal|"
                        r"srun: error: \S+: tasks? [\d,-]+: (?:Exited with exit code|Killed|Segmentation)"),
    # the generic banner: only when no line before or after it says why
    ("MPI_DAEMON_START_FAILED", r"unable to reliably start one or more daemons"),
)


@dataclass(frozen=True)
class LaunchFailure:
    """Why a launch failed: ``cause`` a diagnosis code of ``LAUNCH_CAUSES`` (``MPI_LAUNCH_FAILED`` when the
    output names none), ``line`` the item of the output that says so (a line, or a help message's first
    paragraph with its details; "" when none), ``hosts`` the hosts such lines name, in order."""

    cause: str
    line: str = ""
    hosts: tuple[str, ...] = ()


def launch_items(text: str) -> list[str]:
    """The launcher's own output in printed order, one item each: every line outside Open MPI's dash-framed help
    messages (stripped), and each help message as its first paragraph and details (``_banner_summary``). A
    rank's own line (``[1,0]<stderr>:...``, ``facts.parsers.horovodrun.RANK_LINE``) is the workload's, not the
    launcher's: it is left out."""
    items = [_banner_summary(part) if banner else part for banner, part in _split(text)
             if banner or not RANK_LINE.match(part)]
    return [item for item in items if item]


def classify_launch(text: str) -> LaunchFailure:
    """The cause of a failed launch from its output (mpirun's, horovodrun's, a Slurm job's or an MPIJob
    launcher's log): the first rule of ``LAUNCH_CAUSES`` that one of ``launch_items(text)`` matches decides, and
    that item is the distinguishing line; the hosts are those every item matching the same cause names."""
    items = launch_items(text)
    for code, pattern in LAUNCH_CAUSES:
        regex = re.compile(pattern)
        found = [(item, m) for item in items if (m := regex.search(item))]
        if found:
            hosts = [m.group("host") for _, m in found if m.groupdict().get("host")]
            return LaunchFailure(code, found[0][0], tuple(dict.fromkeys(hosts)))
    return LaunchFailure("MPI_LAUNCH_FAILED")


def launch_cause(text: str) -> str:
    """The diagnosis code of a failed launch (``classify_launch(text).cause``)."""
    return classify_launch(text).cause
