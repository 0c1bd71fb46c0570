"""The check registry and the context every check reads.

A check is ``fn(ctx) -> CheckResult`` registered with ``@check("area.name", "what it checks")``. Checks run
concurrently (``validate.report.run_checks``); tools they share (``nvidia-smi``, ``ibstat``, the NCCL test run) are
run once per ``Context`` through ``ctx.tool`` / ``ctx.memo``. A check reads the node only through ``ctx.tool``,
``ctx.read``, ``ctx.glob`` and ``ctx.fact``: live, recorded into a bundle, or replayed from one
(``validate.evidence``). A tool's output is read by an ``Observation`` of ``facts.parsers`` (``ctx.observe`` runs
it, ``ctx.first`` finds a bundle's recorded run of it): a check observes, then judges.

The context also keeps which evidence each check read (``read_by``): every tool run, file and fact a check asked
for, also through a shared ``memo`` another check computed first. ``validate.report`` scans it for fault signals
(``facts.signals``).
"""
from __future__ import annotations

import contextlib
import functools
import threading
from dataclasses import dataclass, field
from typing import Callable

from chexstack.tools import DEFAULT_TIMEOUT_S, ToolRun
from envs.manifest import Stack
from facts.parsers.observation import Observation, Observed
from validate.evidence import Live
from validate.result import CheckResult, Reason, skipped


@dataclass
class Context:
    """What the checks know: the ``stack`` to validate against (None: node-only checks), the ``hosts`` of a
    multi-node run (empty: this node only), the ``gpus`` the run will use (0: all the node has), the user's
    ``images`` folder (``--images``: the input-capacity check times a few of its PNGs), and where the evidence comes
    from (``validate.evidence``: this node, optionally recorded, or a bundle)."""

    stack: Stack | None = None
    hosts: list[str] = field(default_factory=list)
    gpus: int = 0
    images: str | None = None
    evidence: object = field(default_factory=Live)
    _memo: dict = field(default_factory=dict, repr=False)
    _locks: dict = field(default_factory=dict, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _touched: dict = field(default_factory=dict, repr=False)
    _read_by: dict = field(default_factory=dict, repr=False)
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def memo(self, key, compute: Callable[[], object]):
        """``compute()`` once per key for this context, even when several checks ask at the same time; the evidence
        ``compute`` read counts as read by every check that asks for the key."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                stack = self._collectors()
                stack.append({})
                try:
                    value = compute()
                finally:
                    touched = stack.pop()
                self._memo[key], self._touched[key] = value, touched
            value, touched = self._memo[key], self._touched[key]
        self._note(touched)
        return value

    def _collectors(self) -> list:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def _note(self, items: dict) -> None:
        """Count ``items`` (``{key: (kind, where, text)}``) as read by the check running in this thread and by
        every memo being computed in it."""
        if not items:
            return
        for collector in self._collectors():
            collector.update(items)
        check_id = getattr(self._local, "check", None)
        if check_id is not None:
            with self._guard:
                self._read_by.setdefault(check_id, {}).update(items)

    def _saw_run(self, res: ToolRun | None, env: dict | None = None) -> None:
        if res is None:
            return
        from facts.signals import evidence_kind

        kind = evidence_kind(res.argv, env)
        items = {}
        for stream in ("stdout", "stderr"):
            text = getattr(res, stream) or ""
            if text:  # a listing's names are its stdout; what it says on stderr is a tool's message
                items[("tool", tuple(res.argv), stream, text)] = (
                    "tool" if kind == "listing" and stream == "stderr" else kind,
                    "%s of `%s`" % (stream, res.command), text)
        self._note(items)

    @contextlib.contextmanager
    def reading(self, check_id: str):
        """Attribute the evidence read in this thread to ``check_id`` while the block runs (``validate.report``)."""
        self._local.check = check_id
        try:
            yield
        finally:
            self._local.check = None

    def read_by(self, check_id: str) -> dict:
        """The evidence ``check_id`` read: ``{key: (kind, where, text)}`` (``kind``: ``facts.signals.KINDS``; a fact's
        ``text`` is its value); the same key for the same evidence read by several checks."""
        with self._guard:
            return dict(self._read_by.get(check_id, {}))

    def tool(self, *argv: str, timeout: float = DEFAULT_TIMEOUT_S, env: dict[str, str] | None = None,
             like: Callable[[tuple, dict], bool] | None = None, attempt: int = 1) -> ToolRun:
        """``chexstack.tools.run(argv)`` once per distinct argv/env for this context. ``like(argv, env)``: other
        recorded runs a bundle may answer with when it lacks this one (``validate.evidence``); the result's ``argv``
        says which run it is. ``attempt``: the try of a repeated measurement (``validate.tries``): run again live,
        the bundle's ``attempt``-th record of it when replayed."""
        key = ("tool", argv, tuple(sorted((env or {}).items())), like, attempt)
        extra = ({"like": like} if like is not None else {}) | ({"attempt": attempt} if attempt != 1 else {})
        res = self.memo(key, lambda: self.evidence.tool(tuple(argv), timeout, env, **extra))
        self._saw_run(res, env)
        return res

    def recorded(self, like: Callable[[tuple, dict], bool], attempt: int = 1) -> ToolRun | None:
        """A bundle's first run ``like(argv, env)`` accepts (outputs captured by hand, e.g. a ``docker run --gpus``
        of another image; ``attempt``: the ``attempt``-th, a repeated measurement's try); None live and when the
        bundle holds none."""
        if attempt == 1:
            res = self.memo(("recorded", like), lambda: self.evidence.recorded(like))
        else:
            res = self.memo(("recorded", like, attempt), lambda: self.evidence.recorded(like, attempt))
        self._saw_run(res)
        return res

    def observe(self, observation: Observation, *argv: str, timeout: float = DEFAULT_TIMEOUT_S,
                env: dict[str, str] | None = None, attempt: int = 1) -> Observed:
        """Run ``argv`` (default ``observation.argv``; given where the command depends on the node: the mpirun
        prefix, the GPU count) through ``tool`` — once per context and ``attempt``; a bundle lacking it answers with
        the first run ``observation.also`` accepts — and parse it. ``MissingEvidence`` as ``tool``."""
        res = self.tool(*(argv or observation.argv), timeout=timeout, env=env, like=observation.also,
                        attempt=attempt)
        return Observed(res, observation.parse(res))

    def first(self, *observations: Observation, attempt: int = 1) -> Observed | None:
        """The first of ``observations`` a bundle holds a run of (outputs captured by hand: ``ompi_info -a | grep
        cuda``, a ``docker run --gpus`` of another image), parsed: the bundle's first run its ``also`` accepts
        (``attempt``: its ``attempt``-th); None live and when the bundle holds none."""
        for observation in observations:
            res = self.recorded(observation.also, attempt)
            if res is not None:
                return Observed(res, observation.parse(res))
        return None

    def read(self, path: str) -> str | None:
        """The text of ``path`` (``/proc``, ``/sys``, a version file), or None when absent or unreadable."""
        text = self.memo(("read", path), lambda: self.evidence.read(path))
        if text:
            from facts.signals import read_kind

            self._note({("read", path): (read_kind(path), path, text)})
        return text

    def glob(self, pattern: str) -> list[str]:
        """Sorted paths matching ``pattern`` (``/sys/class/infiniband/*``)."""
        return self.memo(("glob", pattern), lambda: self.evidence.glob(pattern))

    def fact(self, name: str, compute: Callable[[], object]):
        """A JSON-serialisable fact about this node that no tool prints (an rlimit, ``docker info``, the euid):
        ``compute()`` live, recorded under ``name`` in a bundle, read back from it with ``--from``."""
        value = self.memo(("fact", name), lambda: self.evidence.fact(name, compute))
        self._note({("fact", name): ("fact", "fact %s" % name, value)})
        return value

    @property
    def host(self) -> str:
        """The node the evidence comes from (this one, or the bundle's)."""
        return self.evidence.host


@dataclass(frozen=True)
class Check:
    """A registered check: ``fast`` when it fits a Slurm prolog (seconds, no launch: no mpirun, srun, docker run,
    apptainer/singularity exec, all_reduce_perf, ib_write_bw, nor a tool run over minutes); ``invoke validate
    --fast`` runs only those."""

    id: str
    title: str
    fn: Callable[[Context], CheckResult]
    fast: bool


#: Every registered check, in registration order (the order of the report).
CHECKS: dict[str, Check] = {}


def check(id: str, title: str, requires: tuple[Callable[[Context], Reason | None], ...] = (), *, fast: bool):
    """Register ``fn(ctx) -> CheckResult`` under ``id``. Each of ``requires`` returns why the check does not apply
    on this node (a ``Reason`` with its SKIP code, e.g. "not a GPU node …", ``NOT_APPLICABLE``) or None; the first
    reason makes the check a SKIP without running it. ``fast``: every check says whether it fits a prolog
    (``Check``)."""

    def register(fn: Callable[[Context], CheckResult]) -> Callable[[Context], CheckResult]:
        if id in CHECKS:
            raise ValueError("check %s registered twice" % id)

        @functools.wraps(fn)
        def guarded(ctx: Context) -> CheckResult:
            for requirement in requires:
                why = requirement(ctx)
                if why:
                    return skipped(id, why)
            return fn(ctx)

        CHECKS[id] = Check(id, title, guarded, fast)
        return guarded

    return register
