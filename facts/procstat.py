"""The kernel's CPU accounting as a run saw it: ``/proc/stat`` and ``/proc/loadavg`` parsed, and a run's window
judged for foreign load (another job's tasks on the run's cores, or a hypervisor's steal).

Sources (proc_stat(5), https://man7.org/linux/man-pages/man5/proc_stat.5.html; proc_loadavg(5),
https://man7.org/linux/man-pages/man5/proc_loadavg.5.html):

- ``/proc/stat``: a ``cpu`` line (all CPUs) and one ``cpuN`` line per CPU, each the time spent since boot in user,
  nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice, in units of USER_HZ (``sysconf(_SC_CLK_TCK)``,
  usually 100 per second); guest and guest_nice are already counted in user and nice. ``procs_running``: runnable
  tasks (threads) now. Older kernels give fewer columns: absent ones are 0.
- ``/proc/loadavg``: the 1, 5 and 15 minute load averages, then ``running/total`` scheduling entities, then the
  last PID.

Over a run's window (two readings), a CPU's *busy* time is user + nice + system + irq + softirq (idle, iowait and
steal are not work done here); ``steal`` is time a hypervisor gave this virtual CPU to someone else. The run's own
work is the CPU time of its rank processes (``os.times``/``time.process_time`` of each rank); what the run's CPUs
did beyond it is *foreign*: another job's tasks that got the run's cores.

A window is taken under foreign load (``RunLoad.foreign``) when, on the CPUs the ranks could use, foreign busy time
averages more than ``FOREIGN_CORES`` cores over the window, or steal exceeds ``STEAL_PCT`` % of those CPUs' time.
Errors: ValueError naming the line for text that is not /proc/stat or /proc/loadavg.
"""
from __future__ import annotations

from dataclasses import dataclass

#: Foreign busy time above this many cores' worth (averaged over the window) flags the run. The run's own mpirun,
#: orted, sshd and slurmstepd stay well below it (a few % of a core on the test cluster).
FOREIGN_CORES = 0.2
#: Steal above this share (%) of the run's CPUs' time flags the run.
STEAL_PCT = 2.0

FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")


@dataclass(frozen=True)
class CpuTimes:
    """One ``cpu``/``cpuN`` line: ticks (USER_HZ) per field of ``FIELDS``."""

    user: int = 0
    nice: int = 0
    system: int = 0
    idle: int = 0
    iowait: int = 0
    irq: int = 0
    softirq: int = 0
    steal: int = 0
    guest: int = 0
    guest_nice: int = 0

    @property
    def busy(self) -> int:
        """Ticks of work done on the CPU (user, nice, system, irq, softirq; guest is inside user and nice)."""
        return self.user + self.nice + self.system + self.irq + self.softirq

    @property
    def total(self) -> int:
        """All ticks but guest's (counted in user/nice already)."""
        return self.busy + self.idle + self.iowait + self.steal

    def minus(self, earlier: "CpuTimes") -> "CpuTimes":
        return CpuTimes(*(getattr(self, f) - getattr(earlier, f) for f in FIELDS))


@dataclass(frozen=True)
class ProcStat:
    """``/proc/stat``: ``cpus`` ("cpu" for all, "cpu0"... each), ``procs_running`` (None when the text lacks it)."""

    cpus: dict[str, CpuTimes]
    procs_running: int | None = None


@dataclass(frozen=True)
class LoadAvg:
    """``/proc/loadavg``: the 1/5/15-minute averages and the runnable entities now (``running`` of
    ``running/total``)."""

    one: float
    five: float
    fifteen: float
    running: int
    total: int


def parse_stat(text: str) -> ProcStat:
    """``/proc/stat`` (whole, or only its ``cpu*`` and ``procs_*`` lines). ValueError naming the line when a cpu
    line is not numbers, or when there is no ``cpu`` line at all."""
    cpus: dict[str, CpuTimes] = {}
    running = None
    for n, line in enumerate(text.splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            if parts[0].startswith("cpu"):
                values = [int(v) for v in parts[1:len(FIELDS) + 1]]
                if len(values) < 4:
                    raise ValueError
                cpus[parts[0]] = CpuTimes(*values)
            elif parts[0] == "procs_running":
                running = int(parts[1])
        except (ValueError, IndexError):
            raise ValueError("/proc/stat line %d: expected '%s' and numbers (ticks), got %r"
                             % (n, parts[0], line[:80])) from None
    if "cpu" not in cpus:
        raise ValueError("not /proc/stat text: no 'cpu' line (expected 'cpu  USER NICE SYSTEM IDLE ...')")
    return ProcStat(cpus, running)


def parse_loadavg(text: str) -> LoadAvg:
    """``/proc/loadavg`` ("0.23 1.07 2.70 1/144 31853"). ValueError for anything else."""
    parts = text.split()
    try:
        running, total = parts[3].split("/")
        return LoadAvg(float(parts[0]), float(parts[1]), float(parts[2]), int(running), int(total))
    except (ValueError, IndexError):
        raise ValueError("not /proc/loadavg text: expected '1MIN 5MIN 15MIN RUNNING/TOTAL LASTPID', got %r"
                         % text.strip()[:80]) from None


@dataclass(frozen=True)
class RunLoad:
    """One kernel's share of a run's window. ``cpus``: the CPUs its ranks could use; ``window_s``: the window's
    wall time; ``own_cpu_s``: the ranks' CPU time; ``busy_cpu_s``/``steal_cpu_s``: those CPUs' busy and stolen
    time (seconds); ``load1``: the 1-minute load average at the window's end; ``running``: runnable tasks at its
    end (the kernel's, all CPUs)."""

    cpus: tuple[int, ...]
    window_s: float
    own_cpu_s: float
    busy_cpu_s: float
    steal_cpu_s: float
    load1: float | None = None
    running: int | None = None

    @property
    def foreign_cores(self) -> float:
        """Cores' worth of work on the run's CPUs that was not its ranks', averaged over the window (>= 0)."""
        return max(0.0, self.busy_cpu_s - self.own_cpu_s) / self.window_s if self.window_s > 0 else 0.0

    @property
    def steal_pct(self) -> float:
        """Stolen time as % of the run's CPUs' time over the window."""
        capacity = self.window_s * len(self.cpus)
        return 100.0 * self.steal_cpu_s / capacity if capacity > 0 else 0.0

    @property
    def foreign(self) -> list[str]:
        """Why this window counts as taken under foreign load (``FOREIGN_CORES``, ``STEAL_PCT``); [] when not."""
        why = []
        if self.foreign_cores > FOREIGN_CORES:
            why.append("%.2f cores of foreign work on cpus %s (over %.1f)"
                       % (self.foreign_cores, cpu_list(self.cpus), FOREIGN_CORES))
        if self.steal_pct > STEAL_PCT:
            why.append("steal %.1f %% (over %.1f %%)" % (self.steal_pct, STEAL_PCT))
        return why


def window(start: str, end: str, cpus: list[int] | tuple[int, ...], own_cpu_s: float, window_s: float,
           ticks_per_s: float, loadavg_end: str | None = None) -> RunLoad:
    """The ``RunLoad`` of a window between two ``/proc/stat`` texts, on ``cpus`` (the ranks' allowed CPUs; the
    ``cpu`` line when the texts lack any of their lines), given the ranks' CPU seconds and the window's wall
    seconds; ``ticks_per_s``: USER_HZ. ValueError for text that is not /proc/stat or /proc/loadavg."""
    a, b = parse_stat(start), parse_stat(end)
    names = ["cpu%d" % c for c in cpus]
    if not names or any(n not in a.cpus or n not in b.cpus for n in names):
        names = ["cpu"]
    delta = [b.cpus[n].minus(a.cpus[n]) for n in names]
    load = parse_loadavg(loadavg_end) if loadavg_end else None
    return RunLoad(tuple(cpus), window_s, own_cpu_s, sum(d.busy for d in delta) / ticks_per_s,
                   sum(d.steal for d in delta) / ticks_per_s, load.one if load else None,
                   b.procs_running if b.procs_running is not None else (load.running if load else None))


def cpu_list(cpus) -> str:
    """"0", "0-3", "0,2,5-7": a CPU list as taskset(1) and cpuset(7) write it."""
    cpus = sorted(set(cpus))
    runs: list[list[int]] = []
    for c in cpus:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in runs)
