"""Where a check's evidence comes from: this node (live), recorded into a bundle (``invoke validate --collect
DIR``), or a bundle recorded on another node (``invoke validate --from DIR``).

Every tool run, file read, directory listing and system fact (an rlimit, the docker engine's info, the Horovod
import probe …) a check uses goes through ``Context.tool / read / glob / fact`` (``validate.checks.registry``),
which ask one ``Evidence`` source:

* ``Live()`` runs it on this node; ``Live(Bundle())`` also records it (argv, environment, exit status, stdout,
  stderr, start time and duration; each tool's path and version once).
* ``Replay(bundle)`` answers from the bundle. What the bundle does not hold raises ``MissingEvidence``; the report
  turns it into a SKIP "could not run: … not in the bundle" — a check never PASSes on evidence it did not observe.
  A tool run may name, with ``like`` (an ``Observation``'s ``also``, ``facts.parsers.observation``), other command
  lines whose output proves the same thing (a ``--query-gpu`` with other fields, ``nvidia-smi -q``, a
  ``NCCL_DEBUG=INFO`` log of another program, ``horovodrun --check-build``):
  a bundle assembled from outputs captured by hand answers with the first such run when it lacks the exact one,
  and the ``ToolRun`` carries the argv it really came from, for the check to name. Live runs ignore ``like``.

Bundle layout (schema ``chexstack.validate.bundle/1``)::

    DIR/bundle.json     {"schema", "host", "time", "stack", "hosts", "gpus" (--gpus; 0: the node's),
                         "images" (--images), "chexstack",
                         "tools": {name: {"path", "version"}},
                         "evidence": [{"kind": "tool", "argv", "env", "rc", "missing", "timed_out", "error",
                                       "stdout": "tools/003-nvidia-smi.out", "stderr": "tools/003-nvidia-smi.err",
                                       "started", "seconds"},
                                      {"kind": "read", "path", "text"},          # text null: absent/unreadable
                                      {"kind": "glob", "pattern", "paths"},
                                      {"kind": "fact", "name", "value"}]}
    DIR/tools/NNN-<tool>.out / .err   the raw output, byte for byte as decoded
    DIR/report.json     the report of the collecting run (the same JSON as --json)
"""
from __future__ import annotations

import glob as globlib
import json
import os
import platform
import re
import threading
import time
from pathlib import Path
from typing import Callable

from chexstack.errors import ChexstackError
from chexstack.tools import ToolRun, run, which

SCHEMA = "chexstack.validate.bundle/1"
#: How each tool says its version, for the bundle's ``tools`` table (first line kept); tools not named here get
#: only their path (their outputs carry the version: nvidia-smi's header, ``mpirun --version``).
VERSION_ARGV = {"nvidia-smi": ("nvidia-smi", "--version"), "ibstat": ("ibstat", "-V"),
                "dcgmi": ("dcgmi", "--version"), "docker": ("docker", "--version"), "lspci": ("lspci", "--version"),
                "df": ("df", "--version"), "ldconfig": ("ldconfig", "--version"), "dmesg": ("dmesg", "--version")}


class MissingEvidence(Exception):
    """The bundle being judged holds no record of ``what`` (a tool run, a file, a fact)."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


def _tool_key(argv, env) -> str:
    return json.dumps([list(argv), sorted((env or {}).items())])


class Bundle:
    """The evidence of one ``invoke validate`` run, in memory; ``save(folder)`` / ``Bundle.load(folder)``."""

    def __init__(self, meta: dict | None = None, entries: list[dict] | None = None):
        self.meta = dict(meta or {})
        self.meta.setdefault("tools", {})
        self.entries: list[dict] = list(entries or [])
        self._lock = threading.Lock()

    def add(self, entry: dict) -> None:
        with self._lock:
            self.entries.append(entry)

    def add_tool(self, res: ToolRun, env: dict | None = None, started: float | None = None,
                 seconds: float | None = None) -> None:
        self.add({"kind": "tool", "argv": list(res.argv), "env": dict(env or {}), "rc": res.rc,
                  "missing": res.missing, "timed_out": res.timed_out, "error": res.error, "stdout": res.stdout,
                  "stderr": res.stderr, "started": started,
                  "seconds": seconds if seconds is not None else res.seconds})

    def save(self, folder: str | Path) -> Path:
        """Write ``bundle.json`` and ``tools/NNN-<tool>.out|.err`` into ``folder`` (created)."""
        folder = Path(folder)
        (folder / "tools").mkdir(parents=True, exist_ok=True)
        out = []
        for n, entry in enumerate(self.entries, 1):
            entry = dict(entry)
            if entry["kind"] == "tool":
                stem = "tools/%03d-%s" % (n, re.sub(r"[^\w.-]", "_", os.path.basename(entry["argv"][0]))[:40])
                for stream, ext in (("stdout", ".out"), ("stderr", ".err")):
                    (folder / (stem + ext)).write_text(entry[stream] or "")
                    entry[stream] = stem + ext
            out.append(entry)
        doc = dict(self.meta, schema=SCHEMA, evidence=out)
        (folder / "bundle.json").write_text(json.dumps(doc, indent=1) + "\n")
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> "Bundle":
        """Read a saved bundle; ChexstackError naming the file and field when it is not one."""
        folder = Path(folder)
        index = folder / "bundle.json"
        if not folder.is_dir():
            raise ChexstackError("--from %s: %s (expected a bundle folder: write one with invoke validate --collect "
                                 "DIR)" % (folder, "not a folder" if folder.exists() else "no such folder"))
        try:
            doc = json.loads(index.read_text())
        except FileNotFoundError:
            raise ChexstackError("--from %s: no bundle.json there (write one with invoke validate --collect DIR)"
                                 % folder) from None
        except (OSError, ValueError) as e:
            raise ChexstackError("--from %s: cannot read %s: %s" % (folder, index, e)) from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ChexstackError("%s: field schema: expected %r, found %r"
                                 % (index, SCHEMA, doc.get("schema") if isinstance(doc, dict) else doc))
        entries = []
        for i, entry in enumerate(doc.get("evidence") or []):
            where = "%s: evidence[%d]" % (index, i)
            if not isinstance(entry, dict) or entry.get("kind") not in ("tool", "read", "glob", "fact"):
                raise ChexstackError("%s: field kind: expected tool, read, glob or fact" % where)
            entry = dict(entry)
            if entry["kind"] == "tool":
                if not entry.get("argv"):
                    raise ChexstackError("%s: field argv: expected the command line" % where)
                for stream in ("stdout", "stderr"):
                    rel = entry.get(stream)
                    if rel and not (folder / rel).resolve().is_relative_to(folder.resolve()):
                        raise ChexstackError("%s: field %s: %r is outside the bundle folder" % (where, stream, rel))
                    try:
                        entry[stream] = (folder / rel).read_text(errors="replace") if rel else ""
                    except OSError as e:
                        raise ChexstackError("%s: field %s: cannot read %s (%s)"
                                             % (where, stream, folder / rel, e.strerror or e)) from None
            entries.append(entry)
        meta = {k: v for k, v in doc.items() if k not in ("schema", "evidence")}
        return cls(meta, entries)


class Live:
    """Evidence from this node; with ``recorder`` every answer is also added to that bundle."""

    def __init__(self, recorder: Bundle | None = None):
        self.recorder = recorder
        self.host = platform.node()

    def tool(self, argv: tuple[str, ...], timeout: float, env: dict | None, like=None, attempt: int = 1) -> ToolRun:
        """Run ``argv`` here (``attempt``: a repeated measurement's try runs again; a bundle keeps every try, in
        order)."""
        started = time.time()
        res = run(list(argv), timeout=timeout, env=env)
        if self.recorder is not None:
            self.recorder.add_tool(res, env, started, round(time.time() - started, 3))
            self._tool_version(argv[0], res)
        return res

    def _tool_version(self, name: str, res: ToolRun) -> None:
        tools = self.recorder.meta["tools"]
        with self.recorder._lock:
            if name in tools:
                return
            tools[name] = {"path": None, "version": None}
        if res.missing:
            return
        version = None
        if name in VERSION_ARGV and tuple(res.argv) != VERSION_ARGV[name]:
            v = run(list(VERSION_ARGV[name]), timeout=5)
            lines = [l.strip() for l in v.output.splitlines() if l.strip()]
            version = lines[0] if v.ok and lines else None
        tools[name] = {"path": which(name), "version": version}

    def recorded(self, like: Callable[[tuple, dict], bool], attempt: int = 1) -> None:
        """Live evidence has no record to look up: None (the check runs its own command)."""
        return None

    def read(self, path: str) -> str | None:
        try:
            with open(path, errors="replace") as f:
                text = f.read()
        except OSError:
            text = None
        if self.recorder is not None:
            self.recorder.add({"kind": "read", "path": path, "text": text})
        return text

    def glob(self, pattern: str) -> list[str]:
        paths = sorted(globlib.glob(pattern))
        if self.recorder is not None:
            self.recorder.add({"kind": "glob", "pattern": pattern, "paths": paths})
        return paths

    def fact(self, name: str, compute: Callable[[], object]):
        value = compute()
        if self.recorder is not None:
            self.recorder.add({"kind": "fact", "name": name, "value": json.loads(json.dumps(value))})
        return value


def _seconds(value) -> float | None:
    """A recorded run's duration: a number of seconds, else None (not recorded, or not a number)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


class Replay:
    """Evidence from a bundle recorded elsewhere; what it lacks raises ``MissingEvidence``."""

    def __init__(self, bundle: Bundle):
        self.bundle = bundle
        self.host = bundle.meta.get("host") or "?"
        self._tools, self._reads, self._globs, self._facts = {}, {}, {}, {}
        self._runs = [e for e in bundle.entries if e["kind"] == "tool"]
        for e in bundle.entries:
            if e["kind"] == "tool":
                self._tools.setdefault(_tool_key(e["argv"], e.get("env")), []).append(e)
            elif e["kind"] == "read":
                self._reads[e["path"]] = e.get("text")
            elif e["kind"] == "glob":
                self._globs[e["pattern"]] = list(e.get("paths") or [])
            else:
                self._facts[e["name"]] = e.get("value")

    def tool(self, argv: tuple[str, ...], timeout: float, env: dict | None,
             like: Callable[[tuple, dict], bool] | None = None, attempt: int = 1) -> ToolRun:
        """The recorded run of ``argv`` with ``env``; without one, the first recorded run ``like(argv, env)``
        accepts (in bundle order); ``MissingEvidence`` when neither is there. ``attempt``: the ``attempt``-th such
        record (a repeated measurement's try, ``validate.tries``)."""
        runs = self._tools.get(_tool_key(argv, env))
        if not runs and like is not None:
            runs = [t for t in self._runs if like(tuple(t["argv"]), dict(t.get("env") or {}))]
        e = runs[attempt - 1] if runs and len(runs) >= attempt else None
        if e is None:
            raise MissingEvidence("`%s`%s%s" % (" ".join(argv), " with %s" % " ".join("%s=%s" % kv for kv in
                                                                                     sorted(env.items()))
                                                 if env else "", " (try %d)" % attempt if attempt > 1 else ""))
        return self._run(e)

    @staticmethod
    def _run(e: dict) -> ToolRun:
        return ToolRun(tuple(e["argv"]), e.get("rc"), e.get("stdout") or "", e.get("stderr") or "",
                       bool(e.get("missing")), bool(e.get("timed_out")), e.get("error"), _seconds(e.get("seconds")))

    def recorded(self, like: Callable[[tuple, dict], bool], attempt: int = 1) -> ToolRun | None:
        """The first recorded run ``like(argv, env)`` accepts (``attempt``: the ``attempt``-th), or None."""
        runs = [t for t in self._runs if like(tuple(t["argv"]), dict(t.get("env") or {}))]
        return self._run(runs[attempt - 1]) if len(runs) >= attempt else None

    def read(self, path: str) -> str | None:
        if path not in self._reads:
            raise MissingEvidence(path)
        return self._reads[path]

    def glob(self, pattern: str) -> list[str]:
        if pattern not in self._globs:
            raise MissingEvidence("the listing of %s" % pattern)
        return self._globs[pattern]

    def fact(self, name: str, compute: Callable[[], object]):
        if name not in self._facts:
            raise MissingEvidence(name)
        return self._facts[name]
