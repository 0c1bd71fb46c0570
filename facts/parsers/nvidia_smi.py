"""nvidia-smi output -> typed GPU facts: the default table, ``--query-gpu ... --format=csv``, ``--version``,
``-q`` (text), ``-q -x`` (XML), ``nvlink --status``, and the NVML error lines it prints instead of a table.

``driver_max_cuda`` is the "CUDA Version" nvidia-smi prints: the newest CUDA the **driver** supports, never the
installed toolkit (NVIDIA engineer in tensorflow/docs#1616; https://github.com/devcontainers/features/issues/1295). No
field here is called
``cuda_version``.

Fixture numbers refer to ../shared/fixtures/SOURCES.md.
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from facts import signals
from facts.parsers.observation import Observation, first_command, simple_commands


@dataclass
class Gpu:
    """One GPU as reported; every field may be None when the source does not report it.

    ``memory_total_mib`` in MiB; ``persistence``/``ecc_enabled`` True/False for Enabled/On vs Disabled/Off;
    ``ecc_uncorrected_volatile``: uncorrectable ECC errors since the driver loaded; ``retired_pages_pending``
    (pre-A100 page retirement) and ``remapped_rows_pending``/``remapped_rows_failure`` (A100+ row remapping).
    """

    index: int | None = None
    name: str | None = None
    bus_id: str | None = None
    memory_total_mib: int | None = None
    persistence: bool | None = None
    ecc_enabled: bool | None = None
    ecc_uncorrected_volatile: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    #: MIG mode as the driver applies it now ("Current", not "Pending"): True Enabled, False Disabled, None N/A
    mig_enabled: bool | None = None


@dataclass
class NvmlError:
    """A classified nvidia-smi/NVML failure: ``code`` is one of ``NVML_DRIVER_LIBRARY_MISMATCH`` (user-space
    driver upgraded, old kernel module loaded), ``NVIDIA_DRIVER_NOT_LOADED``, ``GPU_LOST`` (a device handle could
    not be obtained / fell off the bus), ``NO_DEVICES`` (driver loaded, nvidia-smi sees no device),
    ``NVML_ERROR`` (another NVML failure). ``message`` is the tool's own line; ``detail`` the library version or
    the lost GPUs' bus ids."""

    code: str
    message: str
    detail: list[str] = field(default_factory=list)


@dataclass
class SmiReport:
    """What one nvidia-smi output said: driver, the driver's max CUDA, GPUs, a classified error, what could not
    be read (``problems``)."""

    driver_version: str | None = None
    driver_max_cuda: str | None = None
    gpus: list[Gpu] = field(default_factory=list)
    error: NvmlError | None = None
    problems: list[str] = field(default_factory=list)


_MISMATCH = re.compile(r"Failed to initialize NVML: Driver/library version mismatch")
_LIBVER = re.compile(r"NVML library version:\s*(\S+)")
_NO_DRIVER = re.compile(r"couldn't communicate with the NVIDIA driver|NVIDIA driver is not loaded")
# "for GPU0000:07:00.0" (newer drivers, fixture 55) and "for GPU 0000:0B:00.0" (older, fixture 56)
_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
_LOST = re.compile(r"Unable to determine the device handle for GPU ?(" + _BUS_ID + r"):\s*(.*)")
_GPU_IS_LOST = re.compile(r"GPU is lost|has fallen off the bus")
_NVML_OTHER = re.compile(r"Failed to initialize NVML: (.*)")
#: "No devices were found" (most releases) and "No devices found" (580.178.04 in
#: https://github.com/zzzhouuu/truenas-nvidia-drivers/issues/20).
_NO_DEVICES = re.compile(r"^No devices (?:were )?found\b.*$", re.M)


def classify_error(text: str) -> NvmlError | None:
    """The NVML failure in nvidia-smi's output, or None. Never says "no GPU": a failing driver is not absence."""
    text = text or ""
    if _MISMATCH.search(text):
        lib = _LIBVER.search(text)
        return NvmlError("NVML_DRIVER_LIBRARY_MISMATCH", _MISMATCH.search(text).group(0),
                         ["NVML library version %s" % lib.group(1)] if lib else [])
    if _NO_DRIVER.search(text):
        line = next(l for l in text.splitlines() if _NO_DRIVER.search(l))
        return NvmlError("NVIDIA_DRIVER_NOT_LOADED", line.strip())
    lost = _LOST.findall(text)
    if lost:
        return NvmlError("GPU_LOST", "Unable to determine the device handle for %s" % ", ".join(b for b, _ in lost),
                         ["%s: %s" % (b, why.strip()) for b, why in lost])
    if _GPU_IS_LOST.search(text):
        return NvmlError("GPU_LOST", next(l for l in text.splitlines() if _GPU_IS_LOST.search(l)).strip())
    other = _NVML_OTHER.search(text)
    if other:
        return NvmlError("NVML_ERROR", other.group(0).strip())
    if _NO_DEVICES.search(text):
        return NvmlError("NO_DEVICES", _NO_DEVICES.search(text).group(0).strip())
    return None


_HEADER = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s*(\S+)\s+CUDA Version:\s*([\d.]+|N/A)")
_ROW = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(On|Off)\s*\|\s*(" + _BUS_ID + ")")
_MEM = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")
#: the third line of a GPU's block in the table of drivers >= R450: only the last cell, "MIG M." (Enabled/Disabled/N/A)
_MIG_CELL = re.compile(r"^\|\s*\|\s*\|\s*(Enabled|Disabled|N/A)\s*\|\s*$")


def parse_table(text: str) -> SmiReport:
    """The default ``nvidia-smi`` output (old and new layouts, fixtures 1-3): header + one block per GPU.

    A GPU whose name nvidia-smi truncated keeps the truncation ("Tesla V100-SXM2..."); the query CSV has
    the full name.
    """
    out = SmiReport(error=classify_error(text))
    head = _HEADER.search(text or "")
    if head:
        out.driver_version = head.group(2)
        out.driver_max_cuda = None if head.group(3) == "N/A" else head.group(3)
    for line in (text or "").splitlines():
        row = _ROW.match(line)
        if row:
            out.gpus.append(Gpu(index=int(row.group(1)), name=row.group(2).strip(), bus_id=row.group(4),
                                persistence=row.group(3) == "On"))
            continue
        mem = _MEM.search(line)
        if mem and out.gpus and out.gpus[-1].memory_total_mib is None:
            out.gpus[-1].memory_total_mib = int(mem.group(2))
            continue
        mig = _MIG_CELL.match(line)
        if mig and out.gpus and out.gpus[-1].memory_total_mib is not None and out.gpus[-1].mig_enabled is None:
            out.gpus[-1].mig_enabled = _flag(mig.group(1))
    if not head and out.error is None:
        out.problems.append("no 'NVIDIA-SMI … Driver Version … CUDA Version' header")
    return out


def parse_version(text: str) -> SmiReport:
    """``nvidia-smi --version`` (key/value form of driver ≥ 5xx, fixture 9): DRIVER version and CUDA Version."""
    kv = dict((k.strip(), v.strip()) for k, _, v in
              (line.partition(":") for line in (text or "").splitlines() if ":" in line))
    out = SmiReport(driver_version=kv.get("DRIVER version"), driver_max_cuda=kv.get("CUDA Version"),
                    error=classify_error(text))
    if out.driver_version is None and out.error is None:
        out.problems.append("no 'DRIVER version' line")
    return out


#: nvidia-smi's placeholders for "no value": ``[N/A]``, ``[Not Supported]``, ``[Requested functionality has been
#: deprecated]`` (fixture 7), ``N/A``.
def _value(raw: str, unit: str | None) -> str | None:
    v = raw.strip()
    if not v or v == "N/A" or (v.startswith("[") and v.endswith("]")):
        return None
    if unit and v.endswith(" " + unit):
        v = v[: -len(unit) - 1].strip()
    return v


def parse_query_csv(text: str, fields: list[str] | None = None) -> tuple[list[dict[str, str | None]], list[str]]:
    """``--query-gpu=… --format=csv[,noheader][,nounits]`` -> (one dict per GPU keyed by field name, problems).

    Units are dropped from header names (``memory.total [MiB]`` -> ``memory.total``) and from values
    (``143771 MiB`` -> ``143771``, fixture 8). ``fields`` names the columns of ``noheader`` output; when the first
    line is a header it wins. A row with the wrong number of cells is reported in problems and skipped.
    """
    lines = [l for l in (text or "").splitlines() if l.strip()]
    problems: list[str] = []
    if not lines:
        return [], ["no output"]
    head = [c.strip() for c in lines[0].split(", ")]
    names = [re.sub(r"\s*\[.*\]$", "", h) for h in head]
    if fields is None or names == list(fields):
        units = [(re.search(r"\[(.*)\]$", h) or [None, None])[1] for h in head]
        body = lines[1:]
    else:
        names, units, body = list(fields), [None] * len(fields), lines
    rows = []
    for n, line in enumerate(body, start=2 if body is not lines else 1):
        cells = line.split(", ")
        if len(cells) != len(names):
            problems.append("line %d: %d values for %d fields" % (n, len(cells), len(names)))
            continue
        rows.append({name: _value(c, u) for name, c, u in zip(names, cells, units)})
    return rows, problems


def _int(v: str | None) -> int | None:
    try:
        return int(float(v)) if v is not None else None
    except ValueError:
        return None


def _flag(v: str | None) -> bool | None:
    if v is None:
        return None
    v = v.strip().lower()
    if v in ("enabled", "on", "yes", "true"):
        return True
    if v in ("disabled", "off", "no", "false"):
        return False
    return None


def gpus_from_query(rows: list[dict[str, str | None]]) -> list[Gpu]:
    """Typed GPUs from ``parse_query_csv`` rows (whatever subset of the fields was queried)."""
    return [Gpu(index=_int(r.get("index")), name=r.get("name"), bus_id=r.get("pci.bus_id"),
                memory_total_mib=_int(r.get("memory.total")), persistence=_flag(r.get("persistence_mode")),
                ecc_enabled=_flag(r.get("ecc.mode.current")),
                ecc_uncorrected_volatile=_int(r.get("ecc.errors.uncorrected.volatile.total")),
                retired_pages_pending=_flag(r.get("retired_pages.pending")),
                remapped_rows_pending=_flag(r.get("remapped_rows.pending")),
                remapped_rows_failure=_flag(r.get("remapped_rows.failure")),
                mig_enabled=_flag(r.get("mig.mode.current")))
            for r in rows]


def parse_q_tree(text: str) -> dict:
    """``nvidia-smi -q`` text -> nested dict by indentation: ``"Key : Value"`` leaves, bare ``"Key"`` sections.

    Top-level ``GPU 00000000:53:00.0`` sections keep their heading as key. Fixture 4.
    """
    root: dict = {}
    stack: list[tuple[int, dict]] = [(-1, root)]
    for line in (text or "").splitlines():
        if not line.strip() or line.startswith("====="):
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(" : ")
        if not sep and line.rstrip().endswith(":"):
            key, sep, value = line.strip()[:-1], ":", ""
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if sep and value.strip():
            parent[key.strip()] = value.strip()
        else:
            child: dict = {}
            parent[key.strip()] = child
            stack.append((indent, child))
    return root


def _get(tree: dict, *path: str):
    for p in path:
        if not isinstance(tree, dict) or p not in tree:
            return None
        tree = tree[p]
    return tree


def parse_q_text(text: str) -> SmiReport:
    """``nvidia-smi -q`` text (fixture 4) -> SmiReport with persistence, ECC and retirement/remap state."""
    tree = parse_q_tree(text)
    out = SmiReport(driver_version=_get(tree, "Driver Version"), driver_max_cuda=_get(tree, "CUDA Version"),
                    error=classify_error(text))
    for key, sec in tree.items():
        if not key.startswith("GPU ") or not isinstance(sec, dict):
            continue
        dram = [_int(_get(sec, "ECC Errors", "Volatile", k)) for k in ("DRAM Uncorrectable", "Double Bit")]
        sram = [_int(v) for k, v in (_get(sec, "ECC Errors", "Volatile") or {}).items()
                if isinstance(v, str) and k.startswith("SRAM Uncorrectable")]
        counts = [c for c in dram + sram if c is not None]
        out.gpus.append(Gpu(
            index=_int(_get(sec, "Minor Number")), name=_get(sec, "Product Name"), bus_id=key[4:].strip(),
            memory_total_mib=_int((_get(sec, "FB Memory Usage", "Total") or "").split(" ")[0] or None),
            persistence=_flag(_get(sec, "Persistence Mode")), ecc_enabled=_flag(_get(sec, "ECC Mode", "Current")),
            ecc_uncorrected_volatile=sum(counts) if counts else None,
            retired_pages_pending=_flag(_get(sec, "Retired Pages", "Pending Page Blacklist")
                                        or _get(sec, "Retired Pages", "Pending Page Retirement")),
            remapped_rows_pending=_flag(_get(sec, "Remapped Rows", "Pending")),
            remapped_rows_failure=_flag(_get(sec, "Remapped Rows", "Remapping Failure Occurred")),
            mig_enabled=_flag(_get(sec, "MIG Mode", "Current"))))
    if out.driver_version is None and out.error is None:
        out.problems.append("no 'Driver Version' line")
    return out


def parse_q_xml(text: str) -> SmiReport:
    """``nvidia-smi -q -x`` (DTD nvsmi_device_v11/v12…, fixtures 5-6) -> SmiReport.

    Field names differ between DTD versions (``clocks_throttle_reasons`` → ``clocks_event_reasons``); the ones
    read here exist in both. Unreadable XML is a problem, not an exception.
    """
    out = SmiReport()
    try:
        root = ET.fromstring((text or "").encode())
    except ET.ParseError as e:
        out.error = classify_error(text)
        out.problems.append("not XML: %s" % e)
        return out
    dtd = re.search(r"nvsmi_device_v(\d+)\.dtd", text)
    if dtd:
        out.problems.extend([] if int(dtd.group(1)) >= 10 else ["old DTD v%s: fields may be missing" % dtd.group(1)])
    out.driver_version = root.findtext("driver_version")
    out.driver_max_cuda = root.findtext("cuda_version")
    for g in root.findall("gpu"):
        vol = g.find("ecc_errors/volatile")
        # v11+: sram_/dram_uncorrectable; older DTDs: double_bit/total
        cells = [] if vol is None else [e.text for e in vol if e.tag.endswith("_uncorrectable")]
        cells += [vol.findtext("double_bit/total")] if vol is not None else []
        counts = [c for c in map(_int, cells) if c is not None]
        remap = g.find("remapped_rows")
        out.gpus.append(Gpu(
            index=_int(g.findtext("minor_number")), name=g.findtext("product_name"), bus_id=g.get("id"),
            memory_total_mib=_int((g.findtext("fb_memory_usage/total") or "").split(" ")[0] or None),
            persistence=_flag(g.findtext("persistence_mode")), ecc_enabled=_flag(g.findtext("ecc_mode/current_ecc")),
            ecc_uncorrected_volatile=sum(counts) if counts else None,
            retired_pages_pending=_flag(g.findtext("retired_pages/pending_retirement")),
            remapped_rows_pending=_flag(remap.findtext("remapped_row_pending")) if remap is not None else None,
            remapped_rows_failure=_flag(remap.findtext("remapped_row_failure")) if remap is not None else None,
            mig_enabled=_flag(g.findtext("mig_mode/current_mig"))))
    return out


_NVLINK_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: .*\))?\s*$")
_NVLINK_LINK = re.compile(r"^\s+Link (\d+): (.*?)\s*$")


def parse_nvlink_status(text: str) -> dict[int, dict[int, float | None]]:
    """``nvidia-smi nvlink --status`` (fixture 11) -> ``{gpu: {link: GB/s or None when <inactive>}}``."""
    out: dict[int, dict[int, float | None]] = {}
    gpu = None
    for line in (text or "").splitlines():
        m = _NVLINK_GPU.match(line)
        if m:
            gpu = int(m.group(1))
            out[gpu] = {}
            continue
        m = _NVLINK_LINK.match(line)
        if m and gpu is not None:
            speed = re.match(r"([\d.]+) GB/s", m.group(2))
            out[gpu][int(m.group(1))] = float(speed.group(1)) if speed else None
    return out


#: What ``gpu.peers`` compares between the GPUs of a node, higher is better: (name, unit, ``--query-gpu`` field,
#: ``nvidia-smi -q`` path). PCIe "max" is what the GPU and its slot can reach (the current values drop at idle).
PEER_PROPERTIES = (
    ("PCIe generation", "Gen", "pcie.link.gen.max", ("PCI", "GPU Link Info", "PCIe Generation", "Max")),
    ("PCIe width", "x", "pcie.link.width.max", ("PCI", "GPU Link Info", "Link Width", "Max")),
    ("max SM clock", " MHz", "clocks.max.sm", ("Max Clocks", "SM")),
    ("max memory clock", " MHz", "clocks.max.memory", ("Max Clocks", "Memory")),
    ("ECC", "", "ecc.mode.current", ("ECC Mode", "Current")),
)
PEER_QUERY = ["index", "pci.bus_id"] + [p[2] for p in PEER_PROPERTIES]


def _peer_value(raw) -> int | None:
    """``16x`` / ``5`` / ``1980 MHz`` -> the number; ``Enabled``/``Disabled`` -> 1/0; N/A -> None."""
    if not isinstance(raw, str):
        return None
    flag = _flag(raw)
    if flag is not None and not re.search(r"\d", raw):
        return int(flag)
    m = re.match(r"\s*(\d+)", raw)
    return int(m.group(1)) if m else None


def peers_from_query(rows: list[dict]) -> dict[str, dict[str, int | None]]:
    """``--query-gpu=<PEER_QUERY> --format=csv`` rows -> ``{"GPU 0 (bus id)": {property: value}}``."""
    return {"GPU %s (%s)" % (r.get("index"), r.get("pci.bus_id")):
            {name: _peer_value(r.get(field)) for name, _, field, _ in PEER_PROPERTIES} for r in rows}


def peers_from_q_text(text: str) -> dict[str, dict[str, int | None]]:
    """``nvidia-smi -q`` text (fixture 4) -> the same ``{"GPU i (bus id)": {property: value}}``."""
    out = {}
    for key, sec in parse_q_tree(text).items():
        if key.startswith("GPU ") and isinstance(sec, dict):
            label = "GPU %s (%s)" % (_get(sec, "Minor Number"), key[4:].strip())
            out[label] = {name: _peer_value(_get(sec, *path)) for name, _, _, path in PEER_PROPERTIES}
    return out


#: ``--query-gpu`` fields read for the inventory; drivers older than the row-remapper fields (R460) reject the
#: whole query ("… is not a valid field to query"), so ``BASIC_FIELDS`` is the fallback.
QUERY_FIELDS = ["index", "name", "pci.bus_id", "memory.total", "driver_version", "persistence_mode",
                "ecc.mode.current", "ecc.errors.uncorrected.volatile.total", "retired_pages.pending",
                "remapped_rows.pending", "remapped_rows.failure"]
BASIC_FIELDS = QUERY_FIELDS[:6]


def _properties_run(argv: tuple, env: dict) -> bool:
    """What a bundle may hold instead of the inventory's ``--query-gpu``: ``--query-gpu`` with other fields (the CSV
    header names them: fixtures 7-8), ``nvidia-smi -q`` (fixture 4) or ``nvidia-smi -q -x`` (fixtures 5-6)."""
    return bool(argv) and os.path.basename(argv[0]) == "nvidia-smi" and (
        tuple(argv[1:]) in (("-q",), ("-q", "-x"), ("-x", "-q"))
        or (any(a.startswith("--query-gpu=") for a in argv) and any(a.startswith("--format=csv") for a in argv)))


def parse_properties(run) -> SmiReport:
    """The SmiReport of a ``PROPERTIES`` run (driver version, per-GPU name, memory, persistence, ECC), read as its
    command line says: ``-q -x`` XML, ``-q`` text, else ``--query-gpu`` CSV (the fields from the argv when
    ``noheader``)."""
    if "-x" in run.argv:
        return parse_q_xml(run.stdout)
    if "-q" in run.argv:
        return parse_q_text(run.stdout)
    query = next(a for a in run.argv if a.startswith("--query-gpu="))[len("--query-gpu="):].split(",")
    noheader = any("noheader" in a for a in run.argv if a.startswith("--format="))
    rows, problems = parse_query_csv(run.stdout, fields=query if noheader else None)
    return SmiReport(driver_version=rows[0].get("driver_version") if rows else None,
                     gpus=gpus_from_query(rows) if rows else [], problems=problems)


def _query(fields: list[str]) -> tuple[str, ...]:
    return ("nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv")


#: the inventory's per-GPU query, or a recorded ``--query-gpu`` with other fields, ``-q`` or ``-q -x`` -> SmiReport
PROPERTIES = Observation(_query(QUERY_FIELDS), _properties_run, parse_properties)
#: the query of the fields every driver answers (after "not a valid field"); only that very run
PROPERTIES_BASIC = Observation(_query(BASIC_FIELDS), lambda argv, env: False, parse_properties)


def is_inventory_query(run) -> bool:
    """``run`` is ``PROPERTIES``' own query of all ``QUERY_FIELDS`` (not another form a bundle answered with, nor
    the ``BASIC_FIELDS`` fallback)."""
    return tuple(run.argv[:2]) == PROPERTIES.argv[:2]


def _excerpt_run(argv: tuple, env: dict) -> bool:
    """The head of nvidia-smi's table in a bundle (``sh -c "nvidia-smi | head -4"``,
    https://github.com/devcontainers/features/issues/1295): its header gives the driver and its maximum CUDA; it
    proves nothing about the GPUs."""
    commands = simple_commands(argv, env)
    return len(commands) > 1 and commands[0].argv == ("nvidia-smi",)


#: a recorded head of nvidia-smi's table -> SmiReport (driver, maximum CUDA, no GPU rows)
EXCERPT = Observation(None, _excerpt_run, lambda run: parse_table(run.output))


@dataclass(frozen=True)
class Fabric:
    """One GPU's registration with the NVLink fabric of an NVSwitch system (``nvidia-smi -q``'s "Fabric" section,
    ``--query-gpu=fabric.state,fabric.status``): ``gpu`` as the output names it (a bus id, an index, or ``"GPU"``
    for a filtered excerpt naming none), ``state`` (``Not Supported``, ``Not Started``, ``In Progress``,
    ``Completed``, ``N/A``) and ``status`` (``Success``, ``N/A``, an error's name).

    Source: NVIDIA Fabric Manager user guide (quoted in https://github.com/siderolabs/extensions/pull/717): "In
    Progress ... FabricManager is likely not running", "Completed ... successfully registered"; the states' order
    "Not Started" -> "In Progress" -> "Completed" (https://github.com/NVIDIA/NVSentinel/issues/883); a node stuck
    there as posted in https://github.com/NVIDIA/gpu-operator/issues/2511. ``N/A`` / ``Not Supported``: a GPU that
    is not on an NVSwitch fabric (https://github.com/leptonai/gpud/pull/1140)."""

    gpu: str
    state: str
    status: str | None = None

    @property
    def registering(self) -> bool:
        """The GPU has not (yet) joined the fabric: Not Started or In Progress, or Completed with a status other
        than Success (the fabric manager reported an error)."""
        if self.state in ("Not Started", "In Progress"):
            return True
        return self.state == "Completed" and self.status not in (None, "Success", "N/A")


_Q_GPU = re.compile(r"^GPU\s+(" + _BUS_ID + r")\s*$")
_Q_KEY = re.compile(r"^(\s*)(\S[^:]*?)\s*:\s*(.*?)\s*$")


def _q_xml(text: str | None):
    """The root of ``nvidia-smi -q -x`` XML (an empty ``<nvidia_smi_log>`` where it does not parse: a cut-off
    output has no section), or None for text output."""
    text = text or ""
    if not (text.lstrip().startswith("<?xml") or "<nvidia_smi_log" in text):
        return None
    try:
        return ET.fromstring(text.encode())
    except ET.ParseError:
        return ET.Element("nvidia_smi_log")


def parse_fabric(text: str) -> list[Fabric]:
    """Every "Fabric" section of ``nvidia-smi -q`` text, whole or filtered (``nvidia-smi -q -i 0 | grep -i -A 2
    Fabric``: the GPU is then named ``"GPU"``), or of ``-q -x`` XML (``<fabric><state>``); [] when none."""
    root = _q_xml(text)
    if root is not None:
        return [Fabric(g.get("id") or "GPU", (g.findtext("fabric/state") or "").strip(),
                       (g.findtext("fabric/status") or "").strip() or None)
                for g in root.findall("gpu") if g.find("fabric") is not None]
    return [Fabric(gpu, fields["State"], fields.get("Status")) for gpu, fields in q_sections(text, "Fabric")
            if "State" in fields]


def q_sections(text: str, name: str) -> list[tuple[str, dict[str, str]]]:
    """Each section ``name`` ("Fabric", "MIG Mode") of ``nvidia-smi -q`` text, whole or filtered by ``grep -A N``:
    ``(the GPU's bus id, or "GPU" where the output names none, {key: value})``."""
    out, gpu, depth, fields = [], "GPU", None, {}
    for line in (text or "").splitlines() + [""]:
        head = _Q_GPU.match(line)
        indent = len(line) - len(line.lstrip())
        if depth is not None and (not line.strip() or indent <= depth or head):
            out.append((gpu, fields))
            depth, fields = None, {}
        if head:
            gpu = head.group(1)
        elif line.strip() == name:
            depth, fields = indent, {}
        elif depth is not None:
            kv = _Q_KEY.match(line)
            if kv:
                fields.setdefault(kv.group(2), kv.group(3))
    return out


def parse_mig_modes(text: str) -> list[tuple[str, bool | None]]:
    """Each GPU's current MIG mode in ``nvidia-smi -q`` text, whole or filtered (``nvidia-smi -q | grep -A 2 "MIG
    Mode"``), or ``-q -x`` XML: ``(GPU, True Enabled / False Disabled / None N/A)``."""
    root = _q_xml(text)
    if root is not None:
        return [(g.get("id") or "GPU", _flag(g.findtext("mig_mode/current_mig"))) for g in root.findall("gpu")]
    return [(gpu, _flag(fields.get("Current"))) for gpu, fields in q_sections(text, "MIG Mode")]


def fabric_from_query(rows: list[dict[str, str | None]]) -> list[Fabric]:
    """``--query-gpu=index,fabric.state,fabric.status`` rows -> Fabric per GPU (rows without a state: none)."""
    return [Fabric(r.get("pci.bus_id") or r.get("index") or "GPU", r["fabric.state"], r.get("fabric.status"))
            for r in rows if r.get("fabric.state")]


def _fabric_run(argv: tuple, env: dict) -> bool:
    """A recorded run that shows the fabric state: ``nvidia-smi -q`` (``-x``, ``-i N``, ``-d ...``), filtered or
    not (``nvidia-smi -q -i 0 | grep -i -A 2 Fabric``), or a ``--query-gpu`` naming ``fabric.state``."""
    command = first_command(argv, env)
    words = command.argv
    return command.name == "nvidia-smi" and ("-q" in words or "--query" in words or any(
        w.startswith("--query-gpu=") and "fabric.state" in w for w in words))


def parse_fabric_run(run) -> list[Fabric] | None:
    """The Fabric of every GPU a ``FABRIC`` run shows; None when the driver does not know the fields (older than
    the fabric query: "not a valid field") or the run failed."""
    if not run.ok:
        return None
    query = [a for a in run.argv if a.startswith("--query-gpu=")]
    if query:
        fields = query[0][len("--query-gpu="):].split(",")
        noheader = any("noheader" in a for a in run.argv if a.startswith("--format="))
        rows, _ = parse_query_csv(run.stdout, fields=fields if noheader else None)
        return fabric_from_query(rows)
    return parse_fabric(run.stdout)


#: the fabric state of every GPU (NVSwitch systems), or a recorded ``nvidia-smi -q`` in any form -> [Fabric] / None
FABRIC = Observation(("nvidia-smi", "--query-gpu=pci.bus_id,fabric.state,fabric.status", "--format=csv"),
                     _fabric_run, parse_fabric_run)
_L_GPU = re.compile(r"^GPU (\d+): ")
_L_MIG = re.compile(r"^\s+MIG \d+g\.\d+gb\s+Device\s+\d+:")


def parse_list_mig(text: str) -> list[tuple[str, bool | None]]:
    """``nvidia-smi -L``: ``(GPU index, True)`` for a GPU followed by its MIG devices ("  MIG 1g.10gb  Device  0:
    (UUID: MIG-…)"), ``None`` for one without (MIG may still be on with no instance made: not shown)."""
    out: list[tuple[str, bool | None]] = []
    for line in (text or "").splitlines():
        gpu = _L_GPU.match(line)
        if gpu:
            out.append((gpu.group(1), None))
        elif _L_MIG.match(line) and out:
            out[-1] = (out[-1][0], True)
    return out


def _mig_run(argv: tuple, env: dict) -> bool:
    """A recorded ``nvidia-smi -q`` in any form, or ``nvidia-smi -L``."""
    command = first_command(argv, env)
    return _fabric_run(argv, env) or (command.name == "nvidia-smi" and "-L" in command.argv)


def _parse_mig_run(run) -> list[tuple[str, bool | None]]:
    if not run.ok:
        return []
    return parse_list_mig(run.stdout) if "-L" in first_command(run.argv).argv else parse_mig_modes(run.stdout)


#: a bundle's ``nvidia-smi -q`` in any form (``| grep -A 2 "MIG Mode"``) or ``nvidia-smi -L`` -> [(GPU, MIG
#: enabled)] (live: the table's "MIG M." column says it)
MIG_MODES = Observation(None, _mig_run, _parse_mig_run)


#: CUDA's "system not ready" (CUDA_ERROR_SYSTEM_NOT_READY / cudaErrorSystemNotReady, 802) as CUDA programs print it:
#: the runtime's message ("system not yet initialized", https://github.com/wilicc/gpu-burn/issues/92), its name or
#: its number beside it (https://github.com/pytorch/pytorch/issues/35710: "returned 802 -> system not yet
#: initialized ... code=802(cudaErrorSystemNotReady)")
CUDA_NOT_READY = re.compile(r"system not yet initiali[sz]ed|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY"
                            r"|\b802\b.{0,40}not (?:yet )?initiali[sz]ed")
#: what the other GPUs' contexts print once the first failed so (gpu_burn on the same node, wilicc/gpu-burn#92):
#: "OS call failed or operation not supported on this OS" (CUDA_ERROR_OPERATING_SYSTEM, 304): a consequence, not a
#: fault of its own
CUDA_OS_CALL = re.compile(r"OS call failed or operation not supported on this OS")
#: programs whose only purpose is to use the GPUs through CUDA (a burn-in, the CUDA samples' device queries and
#: bandwidth tests): a bundle's recorded run of one shows whether CUDA could use the GPUs nvidia-smi lists
CUDA_PROGRAMS = re.compile(r"^(gpu[-_]?burn|deviceQuery(Drv)?|bandwidthTest|p2pBandwidthLatencyTest|vectorAdd\w*"
                           r"|simpleP2P|matrixMul\w*|nbody|cuda[-_]\w+|nvbandwidth)$")


#: a Python one-liner that asks CUDA for the GPUs (``python -c "import torch; print(torch.cuda.is_available())"``,
#: TensorFlow's ``tf.test.is_gpu_available()`` / ``list_physical_devices('GPU')``): a CUDA program as well
_PYTHON_CUDA = re.compile(r"\bcuda\b|is_gpu_available|list_physical_devices\(\s*['\"]GPU")


def _cuda_program_run(argv: tuple, env: dict) -> bool:
    command = first_command(argv, env)
    if re.match(r"^python[\d.]*$", command.name):
        return bool(_PYTHON_CUDA.search(" ".join(command.argv[1:])))
    return bool(CUDA_PROGRAMS.match(command.name))


#: a recorded run of a CUDA program (``CUDA_PROGRAMS``): its output as printed
CUDA_RUN = Observation(None, _cuda_program_run, lambda run: run.output)


#: ``systemctl is-active|status nvidia-fabricmanager`` as recorded or run (its first line: active, failed, inactive)
FABRIC_MANAGER = Observation(("systemctl", "is-active", "nvidia-fabricmanager"),
                             lambda argv, env: first_command(argv, env).name == "systemctl"
                             and any(w.startswith("nvidia-fabricmanager") for w in first_command(argv, env).argv),
                             lambda run: run.output)


def _fabric_manager_log_run(argv: tuple, env: dict) -> bool:
    """``journalctl -u nvidia-fabricmanager`` (any options) or a read of Fabric Manager's own log file
    (``/var/log/fabricmanager.log``, its default ``LOG_FILE_NAME``)."""
    command = first_command(argv, env)
    words = command.argv
    if command.name == "journalctl":
        return any("nvidia-fabricmanager" in w for w in words)
    return command.name in ("cat", "tail", "less", "grep") and any(w.endswith("fabricmanager.log") for w in words)


#: a bundle's log of the fabric manager service -> its lines that name a fault (``facts.signals``: error, failure,
#: FATAL …), e.g. the version mismatch with the driver https://github.com/nanoporetech/dorado/issues/1214 describes
FABRIC_MANAGER_LOG = Observation(None, _fabric_manager_log_run,
                                 lambda run: [h.line for h in signals.scan(run.output, "tool")])
