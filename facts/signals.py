"""The fault-signal lexicon (``facts/signals.yaml``) and the scan of a piece of evidence with it.

A *signal* is one line of a tool's output, a file or a fact that says the node may be unfit: an Xid, a non-zero
uncorrectable ECC count, a fabric state other than Completed, an IB async event, ``FATAL``, ``Segmentation fault``,
any error or failure line. The lexicon is data (each entry with its public source); ``scan`` finds the signals in
a text of one evidence kind (``evidence_kind``: which tool printed it, which file it is). ``validate.report`` scans
every piece of evidence a check read and makes the check say which of them its findings explain.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from facts.parsers.observation import first_command

LEXICON_FILE = Path(__file__).resolve().parent / "signals.yaml"
#: the kinds of evidence an entry may name (``evidence_kind``); ``any`` is every kind but an entry's ``except``
KINDS = ("nvidia-smi-q", "nvidia-smi", "kernel-log", "ib-ports", "ib-counters", "ib-counters-sysfs", "ib-events",
         "dcgm", "nccl-tests", "listing", "tool", "file", "fact")
#: tools whose output lists configuration, names or parameters (an ``error`` in it is a name, not an event):
#: the generic error, failure and crash words do not apply to them
LISTINGS = {"lspci", "ompi_info", "ldconfig", "ls", "find", "env", "printenv", "ip", "ifconfig", "lsmod", "modinfo",
            "sysctl", "ulimit", "df", "cat", "nvcc", "numactl", "lscpu", "lstopo", "mount", "grep"}


@dataclass(frozen=True)
class Signal:
    """One lexicon entry: ``id`` (what a check's result names to claim it), ``klass`` (the family: ``xid``,
    ``ecc``, ``error_line`` …), ``pattern`` (searched in each line), ``kinds`` (the evidence kinds it applies to),
    ``unless`` (benign lines), ``claimed_by`` (verdict codes whose finding explains it), ``source`` (a URL)."""

    id: str
    klass: str
    pattern: re.Pattern
    kinds: frozenset
    unless: tuple
    claimed_by: tuple
    source: str

    def matches(self, line: str) -> bool:
        return bool(self.pattern.search(line)) and not any(u.search(line) for u in self.unless)


@dataclass(frozen=True)
class Hit:
    """A signal found: the entry, the line (stripped) and where (``stdout of `nvidia-smi -q```, ``/proc/…``)."""

    signal: Signal
    line: str
    where: str

    def __str__(self) -> str:
        return "%s: %s (%s)" % (self.signal.id, self.line, self.where)


def _entry(doc: dict, n: int) -> Signal:
    where = "%s: entry %d (%s)" % (LEXICON_FILE.name, n, doc.get("id") if isinstance(doc, dict) else doc)
    try:
        kinds = set(doc["evidence"])
        unknown = kinds - set(KINDS) - {"any"}
        if unknown:
            raise ValueError("unknown evidence kind %s; expected %s or any" % (sorted(unknown), ", ".join(KINDS)))
        if "any" in kinds:
            kinds = set(KINDS) - set(doc.get("except") or [])
        return Signal(doc["id"], doc["class"], re.compile(doc["pattern"]), frozenset(kinds),
                      tuple(re.compile(u) for u in doc.get("unless") or []), tuple(doc.get("claimed_by") or []),
                      doc["source"])
    except (KeyError, TypeError, ValueError, re.error) as e:
        raise ValueError("%s: %s" % (where, e)) from None


@functools.lru_cache(maxsize=None)
def lexicon() -> tuple[Signal, ...]:
    """Every entry of ``facts/signals.yaml``, in order; ValueError naming the entry that is not well formed."""
    docs = yaml.safe_load(LEXICON_FILE.read_text())
    return tuple(_entry(d, n) for n, d in enumerate(docs, 1))


#: the fault kinds of a run's output (``facts.parsers.faults.KINDS``) an entry's ``run_log`` may name
RUN_LOG_KINDS = ("container_start", "out_of_memory", "crash")


@functools.lru_cache(maxsize=None)
def run_log_patterns(kind: str) -> tuple[re.Pattern, ...]:
    """The patterns of a training run's fault lines of ``kind`` (one of ``RUN_LOG_KINDS``) that the lexicon's generic
    entries hold beside their node patterns (their ``run_log``), in file order: ``facts.parsers.faults.KINDS`` reads
    them, so one file holds both readings of FATAL, Aborted, Segmentation fault and out-of-memory lines. ValueError
    naming the entry whose ``run_log`` is not well formed."""
    if kind not in RUN_LOG_KINDS:
        raise ValueError("unknown run-log kind %r; expected one of %s" % (kind, ", ".join(RUN_LOG_KINDS)))
    out = []
    for n, doc in enumerate(yaml.safe_load(LEXICON_FILE.read_text()), 1):
        run_log = doc.get("run_log") or {}
        try:
            unknown = set(run_log) - set(RUN_LOG_KINDS)
            if unknown:
                raise ValueError("unknown run-log kind %s; expected %s" % (sorted(unknown), ", ".join(RUN_LOG_KINDS)))
            out += [re.compile(p) for p in run_log.get(kind) or []]
        except (AttributeError, TypeError, ValueError, re.error) as e:
            raise ValueError("%s: entry %d (%s): run_log: %s" % (LEXICON_FILE.name, n, doc.get("id"), e)) from None
    return tuple(out)


def by_id(signal_id: str) -> Signal:
    return next(s for s in lexicon() if s.id == signal_id)


_KERNEL_LOG_FILES = re.compile(r"(^|/)(kern\.log|messages|syslog|dmesg)(\.\d+)?$")
_IB_COUNTER_FILE = re.compile(r"^/sys/class/infiniband/[^/]+/ports/\d+/(?:hw_)?counters/(?:symbol_error|"
                              r"link_error_recovery|link_downed|port_rcv_errors|port_rcv_remote_physical_errors|"
                              r"port_rcv_switch_relay_errors|port_xmit_discards|port_xmit_constraint_errors|"
                              r"port_rcv_constraint_errors|local_link_integrity_errors|excessive_buffer_overrun_errors|"
                              r"VL15_dropped)$")
_NCCL_TESTS = re.compile(r"^\w+_perf(?:_mpi)?$")


def evidence_kind(argv, env: dict | None = None) -> str:
    """The kind of a tool run's output (``KINDS``), from the first command of its recorded command line (a
    pipeline's filter does not change what the output is)."""
    command = first_command(argv, env)
    name, words = command.name, command.argv
    if name == "nvidia-smi":
        return "nvidia-smi-q" if "-q" in words or "--query" in words else "nvidia-smi"
    if name == "dmesg" or (name == "journalctl" and ("-k" in words or "--dmesg" in words)) or (
            name in ("cat", "tail", "grep", "less", "zcat") and any(_KERNEL_LOG_FILES.search(w) for w in words[1:])):
        return "kernel-log"
    if name in ("ibstat", "ibstatus", "ibv_devinfo", "iblinkinfo"):
        return "ib-ports"
    if name in ("perfquery", "ibqueryerrors", "ethtool"):
        return "ib-counters"
    if name in ("ibv_asyncwatch", "ibdiagnet"):
        return "ib-events"
    if name == "dcgmi":
        return "dcgm"
    if _NCCL_TESTS.match(name):
        return "nccl-tests"
    if name in LISTINGS or (name == "docker" and words[1:2] in (["info"], ["image"], ["inspect"])) or (
            name in ("apptainer", "singularity") and words[1:2] in (["buildcfg"], ["version"], ["inspect"])):
        return "listing"
    return "tool"


def read_kind(path: str) -> str:
    """The kind of a file a check read (``/sys/class/infiniband/…/counters/symbol_error``, a kernel log)."""
    if _IB_COUNTER_FILE.match(path):
        return "ib-counters-sysfs"
    if _KERNEL_LOG_FILES.search(path):
        return "kernel-log"
    return "file"


def scan(text: str | None, kind: str, where: str = "") -> list[Hit]:
    """The signals in ``text`` of evidence ``kind``: one ``Hit`` per line, named by the first entry that matches
    it (``lexicon()`` order: specific entries before the generic error and failure lines)."""
    entries = [s for s in lexicon() if kind in s.kinds]
    out = []
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        hit = next((s for s in entries if s.matches(raw)), None)
        if hit is not None:
            out.append(Hit(hit, line[:300], where))
    return out


def scan_fact(value, where: str = "") -> list[Hit]:
    """The signals in a recorded fact (its strings, e.g. an import probe's error), as ``fact`` evidence."""
    strings: list[str] = []

    def walk(v):
        if isinstance(v, str):
            strings.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    walk(json.loads(json.dumps(value, default=str)))
    return scan("\n".join(strings), "fact", where)
