"""InfiniBand port state from ``ibstat``, ``ibstatus``, ``ibv_devinfo`` and sysfs, and ``ib_write_bw`` results.

All four sources become the same ``IbPort`` list, so one judge decides. Port states, as the kernel names them
(``/sys/class/infiniband/*/ports/*/state``): 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE; physical states: 2 Polling,
3 Disabled, 5 LinkUp (https://kb.advancedclustering.com/kb/InfiniBand-Port-States.1074725608.html).

Partial or cut-off output is parsed as far as it goes: a block without ``Rate``/``Link layer`` keeps None there
(fixture 26), and ``ibpanic`` lines name the HCA that vanished (fixture 22). Fixture numbers: SOURCES.md.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from facts.parsers.observation import Observation, first_command


@dataclass
class IbPort:
    """One HCA port. ``state``: ``Active``/``Down``/``Init``/``Armed`` (capitalised as ibstat prints them);
    ``phys_state``: ``LinkUp``/``Polling``/``Disabled``…; ``rate_gbps``: signalling rate in Gb/s (meaningless
    when the port is down); ``link_layer``: ``InfiniBand`` or ``Ethernet`` (RoCE); ``base_lid``: 65535 (0xffff)
    means no subnet manager assigned one; ``ca_type``: ibstat's ``CA type`` (``MT4129``: the PCI device ID)."""

    hca: str
    port: int
    state: str | None = None
    phys_state: str | None = None
    rate_gbps: float | None = None
    link_layer: str | None = None
    base_lid: int | None = None
    sm_lid: int | None = None
    ca_type: str | None = None

    @property
    def name(self) -> str:
        return "%s:%d" % (self.hca, self.port)

    @property
    def up(self) -> bool:
        return self.state == "Active" and self.phys_state == "LinkUp"


@dataclass
class IbReport:
    """Ports found, plus ``missing_hcas`` named by an error (ibpanic) and ``problems`` (what could not be read)."""

    ports: list[IbPort] = field(default_factory=list)
    missing_hcas: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


_STATE_WORDS = {"ACTIVE": "Active", "DOWN": "Down", "INIT": "Init", "ARMED": "Armed"}


def _state(raw: str | None) -> str | None:
    """``Active``, ``4: ACTIVE``, ``PORT_ACTIVE (4)`` -> ``Active``."""
    if not raw:
        return None
    m = re.search(r"(ACTIVE|DOWN|INIT|ARMED)", raw.upper())
    return _STATE_WORDS[m.group(1)] if m else raw.strip()


def _phys(raw: str | None) -> str | None:
    """``LinkUp``, ``5: LinkUp`` -> ``LinkUp``."""
    return re.sub(r"^\d+:\s*", "", raw.strip()) if raw else None


def _rate(raw: str | None) -> float | None:
    m = re.match(r"\s*([\d.]+)", raw or "")
    return float(m.group(1)) if m else None


def _lid(raw: str | None) -> int | None:
    if not raw:
        return None
    raw = raw.strip()
    try:
        return int(raw, 16) if raw.lower().startswith("0x") else int(raw)
    except ValueError:
        return None


_READERS = {"state": _state, "phys_state": _phys, "rate_gbps": _rate, "link_layer": lambda v: v.strip() or None,
            "base_lid": _lid, "sm_lid": _lid}


def _set(port: IbPort, fields: dict[str, str], key: str, value: str) -> None:
    """Set the IbPort field that ``key`` (in a tool's own spelling, mapped by ``fields``) names."""
    name = fields.get(key)
    if name is not None:
        setattr(port, name, _READERS[name](value))


_IBSTAT = {"State": "state", "Physical state": "phys_state", "Rate": "rate_gbps", "Link layer": "link_layer",
           "Base lid": "base_lid", "SM lid": "sm_lid"}
_IBSTATUS = {"state": "state", "phys state": "phys_state", "rate": "rate_gbps", "link_layer": "link_layer",
             "base lid": "base_lid", "sm lid": "sm_lid"}
_DEVINFO = {"state": "state", "link_layer": "link_layer", "port_lid": "base_lid", "sm_lid": "sm_lid"}
_SYSFS_FIELDS = {"state": "state", "phys_state": "phys_state", "rate": "rate_gbps", "link_layer": "link_layer",
                 "lid": "base_lid", "sm_lid": "sm_lid"}


_IBPANIC = re.compile(r"ibpanic:.*?IB device '([^']+)'.*?:\s*(.*)$", re.M)


def parse_ibstat(text: str, ca: str | None = None) -> IbReport:
    """``ibstat`` (tab or space indented, fixtures 19-26): ``CA 'mlx5_0'`` blocks with ``Port N:`` sections; ``ibstat
    CA PORT`` prints ``CA: 'mlx5_0'`` and one unindented port (infiniband-diags ``ibstat.c``, ``port_dump``). ``ca``:
    the HCA the command named, for port sections its output does not head with a CA line."""
    out = IbReport()
    hca, port, ca_type = ca, None, None
    for line in (text or "").splitlines():
        m = re.match(r"^CA:? '([^']+)'", line.strip())
        if m:
            hca, port, ca_type = m.group(1), None, None
            continue
        m = re.match(r"^CA type:\s*(\S+)", line.strip())
        if m and port is None:
            ca_type = m.group(1)
            continue
        m = re.match(r"^Port (\d+):$", line.strip())
        if m and hca:
            port = IbPort(hca, int(m.group(1)), ca_type=ca_type)
            out.ports.append(port)
            continue
        key, sep, value = line.strip().partition(":")
        if sep and port is not None:
            _set(port, _IBSTAT, key, value)
    for dev, why in _IBPANIC.findall(text or ""):
        out.missing_hcas.append(dev)
        out.problems.append("ibstat stopped at %s: %s" % (dev, why.strip()))
    _note_gaps(out)
    return out


def parse_ibstatus(text: str) -> IbReport:
    """``ibstatus`` (fixture 27): ``Infiniband device 'mlx5_0' port 1 status:`` then ``state: 4: ACTIVE``…"""
    out = IbReport()
    port = None
    for line in (text or "").splitlines():
        m = re.match(r"^Infiniband device '([^']+)' port (\d+) status:", line.strip())
        if m:
            port = IbPort(m.group(1), int(m.group(2)))
            out.ports.append(port)
            continue
        key, sep, value = line.strip().partition(":")
        if sep and port is not None:
            _set(port, _IBSTATUS, key, value)
    _note_gaps(out)
    return out


def parse_ibv_devinfo(text: str, device: str | None = None) -> IbReport:
    """``ibv_devinfo`` without ``-v`` (fixtures 28-29): ``hca_id:`` blocks with ``port:`` sections. It prints no
    physical state and no rate: an ACTIVE port implies LinkUp; the rate stays None (not a failure).

    ``device``: the HCA of ``ibv_devinfo -d DEV | egrep 'state|link_layer'`` output, which has no ``hca_id``/``port``
    lines (https://github.com/NVIDIA/nccl/issues/451); its lines are then port 1 of ``device``.
    """
    out = IbReport()
    hca, port = device, None
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition(":")
        value = value.strip()
        if key == "state" and port is None and device is not None:
            port = IbPort(device, 1)
            out.ports.append(port)
        if key == "hca_id":
            hca, port = value, None
        elif key == "port" and hca:
            port = IbPort(hca, int(value))
            out.ports.append(port)
        elif port is not None:
            _set(port, _DEVINFO, key, value)
            if key == "state":
                port.phys_state = "LinkUp" if port.state == "Active" else None
    return out


_SYSFS = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/(state|rate|phys_state|link_layer|lid|sm_lid):(.*)$")


def parse_sysfs(text: str) -> IbReport:
    """``grep "" /sys/class/infiniband/*/ports/*/{state,rate,phys_state,link_layer}`` (fixture 30; what NHC's
    check_hw_ib reads). ``validate.checks.infiniband`` produces the same text by reading the files."""
    out = IbReport()
    ports: dict[tuple[str, int], IbPort] = {}
    for line in (text or "").splitlines():
        m = _SYSFS.match(line.strip())
        if not m:
            continue
        key = (m.group(1), int(m.group(2)))
        port = ports.setdefault(key, IbPort(*key))
        _set(port, _SYSFS_FIELDS, m.group(3), m.group(4))
    out.ports = [ports[k] for k in sorted(ports)]
    return out


def _note_gaps(report: IbReport) -> None:
    for p in report.ports:
        gaps = [name for name, v in (("State", p.state), ("Physical state", p.phys_state), ("Rate", p.rate_gbps),
                                     ("Link layer", p.link_layer)) if v is None]
        if gaps:
            report.problems.append("%s: no %s line (output cut off?)" % (p.name, "/".join(gaps)))


@dataclass
class WriteBw:
    """``ib_write_bw --report_gbits`` result: ``device``, ``link_type`` (``IB``/``Ethernet``), ``bw_avg_gbps`` of
    the last (largest) message size, ``msg_bytes``; ``problems`` when no result row was found."""

    device: str | None = None
    link_type: str | None = None
    msg_bytes: int | None = None
    bw_peak_gbps: float | None = None
    bw_avg_gbps: float | None = None
    problems: list[str] = field(default_factory=list)


def parse_ib_write_bw(text: str) -> WriteBw:
    """perftest ``ib_write_bw`` (fixtures 64-65): header fields and the ``#bytes … BW average[Gb/sec]`` table
    (tab-padded rows); the last row wins (run with a fixed ``-s``, or ``-a`` and take the largest size)."""
    out = WriteBw()
    dev = re.search(r"Device\s*:\s*(\S+)", text or "")
    out.device = dev.group(1) if dev else None
    lt = re.search(r"Link type\s*:\s*(\S+)", text or "")
    out.link_type = lt.group(1) if lt else None
    gbits = "Gb/sec" in (text or "")
    in_table = False
    for line in (text or "").splitlines():
        if line.strip().startswith("#bytes"):
            in_table = True
            continue
        cells = line.split()
        if in_table and len(cells) >= 4 and cells[0].isdigit():
            out.msg_bytes, out.bw_peak_gbps, out.bw_avg_gbps = int(cells[0]), float(cells[2]), float(cells[3])
    if out.bw_avg_gbps is None:
        out.problems.append("no '#bytes … BW average' result row")
    elif not gbits:
        out.problems.append("bandwidth not in Gb/sec (run with --report_gbits)")
    return out


def device_of(argv) -> str | None:
    """The device a port tool's command line names with ``-d`` (``ibv_devinfo -d mlx5_0``, also inside ``sh -c
    "… | egrep …"``), or None."""
    words = first_command(argv).argv
    return words[words.index("-d") + 1] if "-d" in words[:-1] else None


def _ibv_devinfo_run(argv: tuple, env: dict) -> bool:
    """``ibv_devinfo`` in a bundle, also for one device and filtered (``sh -c "ibv_devinfo -d mlx5_bond_0 | egrep
    'state|link_layer'"``, https://github.com/NVIDIA/nccl/issues/451)."""
    return first_command(argv, env).name == "ibv_devinfo"


def _ports(parse):
    """A port tool's run -> (IbReport, the ``-d`` device it was limited to or None); a run for one device is read
    as ``ibv_devinfo -d`` output of that device."""
    def read(run) -> tuple[IbReport, str | None]:
        device = device_of(run.argv)
        return (parse_ibv_devinfo(run.output, device=device) if device else parse(run.output)), device
    return read


#: ``ibstat``'s options that print no port state (infiniband-diags ``ibstat.c``: ``-l`` the CA names, ``-s`` the CA
#: headers only, ``-p`` the port GUIDs; ``-V``, ``-h``)
_IBSTAT_NO_PORTS = set("lspVh")


def _operands(words: tuple[str, ...]) -> list[str]:
    return [w for w in words[1:] if not w.startswith("-")]


def _ibstat_run(argv: tuple, env: dict) -> bool:
    """``ibstat`` in a bundle however recorded (``sudo ibstat``, ``sh -c "ibstat | cat"``, ``ibstat mlx5_0 [1]``,
    ``ibstat -d``), not a listing without port state (``-l``, ``-s``, ``-p``)."""
    command = first_command(argv, env)
    flags = {c for w in command.argv[1:] if w.startswith("-") and not w.startswith("--") for c in w[1:]}
    longs = {w for w in command.argv[1:] if w.startswith("--")}
    return (command.name == "ibstat" and not flags & _IBSTAT_NO_PORTS
            and not longs & {"--list_of_cas", "--short", "--port_list", "--version", "--help"})


def _ibstatus_run(argv: tuple, env: dict) -> bool:
    """``ibstatus`` in a bundle however recorded (``sudo ibstatus``, ``ibstatus mlx5_0:1``)."""
    command = first_command(argv, env)
    return command.name == "ibstatus" and not {"-h", "--help"} & set(command.argv)


def _read_ibstat(run) -> tuple[IbReport, str | None]:
    """An ``ibstat`` run -> (IbReport, the CA its command line named, when the output is that CA's alone, or None):
    ``ibstat mlx5_0 1`` prints its one port under ``CA: 'mlx5_0'``; a ``-d`` there is debug output, not a device."""
    operands = _operands(first_command(run.argv).argv)
    ca = operands[0] if operands else None
    report = parse_ibstat(run.output, ca)
    return report, ca if ca and all(p.hca == ca for p in report.ports) else None


def _read_ibstatus(run) -> tuple[IbReport, str | None]:
    """An ``ibstatus`` run -> (IbReport, the first device its command line named, ``mlx5_0:1`` -> ``mlx5_0``)."""
    operands = _operands(first_command(run.argv).argv)
    return parse_ibstatus(run.output), operands[0].split(":")[0] if operands else None


#: the port tools, in the order a check asks them -> (IbReport, the device the command line was limited to or None),
#: each also as recorded by hand (under sudo, in ``sh -c``, piped, for one device; ``ibv_devinfo`` also filtered)
IBSTAT = Observation(("ibstat",), _ibstat_run, _read_ibstat)
IBSTATUS = Observation(("ibstatus",), _ibstatus_run, _read_ibstatus)
IBV_DEVINFO = Observation(("ibv_devinfo",), _ibv_devinfo_run, _ports(parse_ibv_devinfo))

#: an ``ib_write_bw`` client run in a bundle (other options than a check's own: fixtures 64-65) -> WriteBw
IB_WRITE_BW = Observation(None, lambda argv, env: first_command(argv, env).name == "ib_write_bw",
                          lambda run: parse_ib_write_bw(run.output))

#: the HCA lines of a kernel log or an event watch: an mlx4/mlx5 device, an ``ibN`` interface, hfi1, a verbs event
_HCA_LINE = re.compile(r"\bmlx[45]_(?:core|ib)?|\bmlx[45]_\d|\bib\d+\b|infiniband|\bhfi1\b|\bIBV_EVENT_")
#: the signal classes (``facts/signals.yaml``) that are a port's own faults when the line names an HCA
_PORT_FAULTS = ("ib_async_event", "link_down", "ib_error_counter")


def port_events(text: str, kind: str, where: str = "") -> list:
    """The HCA port faults in ``text`` of evidence ``kind`` (``facts.signals.evidence_kind``: an ``ibv_asyncwatch``
    run, a kernel log): the lexicon's async events (IBV_EVENT_PORT_ERR, "port error", mlx5 health), link-down lines
    and error counters, on lines that name an HCA (``_HCA_LINE``) -> [``facts.signals.Hit``]."""
    from facts import signals

    own = kind in ("ib-events", "ib-counters", "ib-counters-sysfs")  # an HCA's own output: every line is a port's
    return [h for h in signals.scan(text, kind, where)
            if h.signal.klass in _PORT_FAULTS and (own or _HCA_LINE.search(h.line))]


def run_port_events(run, kind: str | None = None) -> list:
    """``port_events`` of a tool run (``chexstack.tools.ToolRun``): its output, of the kind its command line says
    (``kind`` overrides: ``ib-events`` for an event watch), named by its command line."""
    from facts import signals

    return port_events(run.output, kind or signals.evidence_kind(run.argv), "`%s`" % run.command)


#: a recorded ``perfquery`` (``-x``, for a LID and port) or ``ibqueryerrors``: the ports' error counters as printed
IB_COUNTERS = Observation(None, lambda argv, env: first_command(argv, env).name in ("perfquery", "ibqueryerrors"),
                          lambda run: run.output)

#: a recorded ``ibv_asyncwatch`` (rdma-core's example that prints each async event of an HCA: "event_type
#: IBV_EVENT_PORT_ERR (10), port 1") -> its output
IB_EVENTS = Observation(None, lambda argv, env: first_command(argv, env).name == "ibv_asyncwatch",
                        lambda run: run.output)
