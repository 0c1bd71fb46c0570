"""The corpus of recorded node bundles (``tests/data/bundles/*.yaml``), built at test time from ../shared.

Each spec names the evidence a node gave — the tool runs with their outputs taken from ../shared/fixtures or a
section of a ../shared/cases file (never copied into this repository), sysfs reads, facts — and the verdict table
``invoke validate --from`` must give (checks not listed must be SKIP) and its exit code::

    about: what the node is, where the outputs come from
    stack: null            # or a stack name
    hosts: []
    evidence:
      - tool: [ibstat]                              # argv exactly as the check runs it
        stdout: {fixture: ibstat-h100-ndr400-all-active.txt}
        rc: 0                                       # default 0; missing: true for "not on PATH"
        env: {NCCL_DEBUG: INFO}                     # optional
        seconds: 600                                # optional: how long it ran (timed_out: true, a kill)
      - tool: [nvidia-smi, topo, -m]
        stdout: {case: "31", after: "$ nvidia-smi topo -m"}   # the lines after that one up to the next "$ "
      - tool: [nvidia-smi, {query_gpu_of: FIXTURE}, --format=csv]   # --query-gpu= the fields of its CSV header
      - tool: [lspci, -vvv]                         # a list of sources is joined
        stdout: [{case: "31", after: "$ sudo lspci -s 40:03.1 -vvv | …"}, {case: "31", after: "…"}]
      - sysfs_grep: {fixture: sysfs-infiniband-ports-grep-edr-active.txt}   # `grep "" FILES` → reads + globs
      - glob: /sys/class/infiniband/*
        paths: [/sys/class/infiniband/mlx5_0]
      - read: /proc/driver/nvidia/version
        text: {fixture: ...}
      - fact: RLIMIT_MEMLOCK
        value: [65536, 65536]
    expect:
      ib.ports: [PASS, "8/8 IB ports Active/LinkUp at 400 Gb/s"]    # status, text in measured/expected/details
    exit: 0
"""
from __future__ import annotations

import os
from pathlib import Path

import yaml

from chexstack.tools import ToolRun
from tests.lib.paths import CASES, FIXTURES, REPO
from validate.evidence import Bundle

CORPUS = REPO / "tests" / "data" / "bundles"


def specs() -> list[Path]:
    return sorted(CORPUS.glob("*.yaml"))


def text_of(source) -> str:
    """A literal string, ``{fixture: NAME}``, ``{case: "NN", after: LINE}`` (a section of a case file: the lines
    after LINE up to the next ``$ `` line, or the next line starting with ``until``), or a list of them (joined)."""
    if isinstance(source, list):
        return "".join(map(text_of, source))
    if source is None or isinstance(source, str):
        return source or ""
    if "fixture" in source:
        return (FIXTURES / source["fixture"]).read_text()
    text = next(CASES.glob("%s-*.txt" % source["case"])).read_text()
    if "after" not in source:
        return text
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.rstrip("\n") == source["after"]) + 1
    stops = ("$ ",) + ((source["until"],) if "until" in source else ())
    end = next((i for i in range(start, len(lines)) if lines[i].startswith(stops)), len(lines))
    return "".join(lines[start:end])


def argv_of(tool: list) -> tuple[str, ...]:
    """The argv of a spec's ``tool``: strings, or ``{query_gpu_of: FIXTURE}`` for ``--query-gpu=`` with the fields
    the fixture's CSV header names (units dropped): the command line that printed it."""
    out = []
    for a in tool:
        if isinstance(a, dict):
            header = (FIXTURES / a["query_gpu_of"]).read_text().splitlines()[0]
            a = "--query-gpu=" + ",".join(f.split(" [")[0].strip() for f in header.split(","))
        out.append(a)
    return tuple(out)


def build(spec_path: Path, folder: Path) -> dict:
    """Write the bundle of ``spec_path`` into ``folder``; returns the spec."""
    spec = yaml.safe_load(spec_path.read_text())
    bundle = Bundle({"host": spec.get("host", spec_path.stem), "time": None, "stack": spec.get("stack"),
                     "hosts": spec.get("hosts") or [], "about": spec["about"]})
    for e in spec["evidence"]:
        if "tool" in e:
            missing = bool(e.get("missing"))
            bundle.add_tool(ToolRun(argv_of(e["tool"]), None if missing or e.get("timed_out") else e.get("rc", 0),
                                    text_of(e.get("stdout")), text_of(e.get("stderr")), missing,
                                    bool(e.get("timed_out")), seconds=e.get("seconds")), e.get("env"))
        elif "sysfs_grep" in e:
            reads = {}
            for line in text_of(e["sysfs_grep"]).splitlines():
                path, _, value = line.partition(":")
                reads[path] = value + "\n"
            for path, value in reads.items():
                bundle.add({"kind": "read", "path": path, "text": value})
            root = "/sys/class/infiniband"
            bundle.add({"kind": "glob", "pattern": root + "/*/ports/*/*", "paths": sorted(reads)})
            bundle.add({"kind": "glob", "pattern": root + "/*",
                        "paths": sorted({os.path.join(root, p[len(root) + 1:].split("/")[0]) for p in reads})})
        elif "glob" in e:
            bundle.add({"kind": "glob", "pattern": e["glob"], "paths": e.get("paths") or []})
        elif "read" in e:
            text = None if e.get("text") is None else text_of(e["text"])  # null: the file is absent
            bundle.add({"kind": "read", "path": e["read"], "text": text})
        else:
            bundle.add({"kind": "fact", "name": e["fact"], "value": e.get("value")})
    bundle.save(folder)
    return spec


def judged(spec: str, folder: Path, rewrite=None, only: list[str] | None = None) -> dict[str, dict]:
    """Build the corpus bundle ``spec`` (its stem) in ``folder``, let ``rewrite(evidence)`` change its entries in
    place (a variant of the recorded node: a command recorded as typed, another exit status; entries it returns
    False for are dropped), then ``validate --from`` it: ``{check id: result}`` of ``only`` (default: every check)."""
    import json

    from validate.report import validate

    bundle = folder / "bundle"
    build(CORPUS / ("%s.yaml" % spec), bundle)
    index = bundle / "bundle.json"
    doc = json.loads(index.read_text())
    if rewrite is not None:
        doc["evidence"] = [entry for entry in doc["evidence"] if rewrite(entry) is not False]
    index.write_text(json.dumps(doc))
    validate(json_path=str(folder / "report.json"), from_bundle=str(bundle), only=only)
    return {r["id"]: r for r in json.loads((folder / "report.json").read_text())["results"]}
