"""What a rank's cores did over the timed window of a throughput run (Python 3.5 syntax, no TensorFlow): the CPUs
this rank could use (``os.sched_getaffinity(0)``: what taskset, a cpuset or a container's ``--cpuset-cpus`` left
it), its own CPU time (``os.times()``: user + system of every thread of the process), the window's wall time, and
the kernel's own accounting at both ends (``/proc/stat``'s ``cpu`` line and those of the rank's CPUs,
``procs_running``; ``/proc/loadavg``) with USER_HZ (``os.sysconf("SC_CLK_TCK")``) and the kernel's boot id (ranks
with the same one share a kernel: the test cluster's hosts, pods on one node). ``facts.procstat`` reads these raw
texts on the launcher's side (proc_stat(5): https://man7.org/linux/man-pages/man5/proc_stat.5.html).

``Window`` takes a reading at the start and the end of the timed steps; ``entry()`` is this rank's record, gathered
in rank order into ``throughput.json``'s ``host_load``.
"""
import os
import socket
import time
from collections import OrderedDict

STAT = "/proc/stat"
LOADAVG = "/proc/loadavg"
BOOT_ID = "/proc/sys/kernel/random/boot_id"


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except (IOError, OSError):
        return None


def allowed_cpus():
    """The CPUs this process may run on, sorted; None where the platform cannot say."""
    get = getattr(os, "sched_getaffinity", None)
    return sorted(get(0)) if get else None


def stat_lines(text, cpus):
    """``/proc/stat`` cut to the ``cpu`` line, the lines of ``cpus`` and ``procs_running``/``procs_blocked``."""
    keep = set(["cpu"] + ["cpu%d" % c for c in cpus or ()] + ["procs_running", "procs_blocked"])
    return "".join(line + "\n" for line in (text or "").splitlines() if line.split()[:1]
                   and line.split()[0] in keep)


class Window(object):
    """Readings at the start (``start()``) and the end (``end()``) of the timed window, on this rank."""

    def __init__(self):
        self.cpus = allowed_cpus()
        self.readings = []

    def _reading(self):
        t = os.times()
        return (time.time(), t[0] + t[1], stat_lines(_read(STAT), self.cpus), (_read(LOADAVG) or "").strip())

    def start(self):
        self.readings = [self._reading()]

    def end(self):
        if self.readings:
            self.readings = self.readings[:1] + [self._reading()]

    def entry(self):
        """This rank's record: host, boot_id, cpus, and over the window (when both ends were read) window_s, cpu_s
        (seconds), ticks_per_s, stat and loadavg (the raw texts at start and end)."""
        found = OrderedDict([("host", socket.gethostname()), ("boot_id", (_read(BOOT_ID) or "").strip() or None),
                             ("cpus", self.cpus)])
        if len(self.readings) == 2:
            (t0, c0, s0, l0), (t1, c1, s1, l1) = self.readings
            found.update([("window_s", t1 - t0), ("cpu_s", c1 - c0), ("ticks_per_s", os.sysconf("SC_CLK_TCK")),
                          ("stat", [s0, s1]), ("loadavg", [l0, l1])])
        return found
