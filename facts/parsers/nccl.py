"""NCCL output: the nccl-tests ``all_reduce_perf`` table and the ``NCCL_DEBUG=INFO`` log.

Launcher prefixes are stripped first: Open MPI's ``[1,0]<stdout>:`` (``--tag-output``, horovodrun), Gloo
horovodrun's ``[0]<stdout>:`` and a bare rank prefix ``[155] `` (fixtures 35, 40; aws/aws-k8s-tester#503).

nccl-tests columns (new layout): size count type redop root | time algbw busbw #wrong (out-of-place) | the same
in-place; the old layout (fixture 34) has no redop/root and an ``error`` column like ``0e+00``. Rows are read
from the right so both layouts work. busbw = algbw × 2(n−1)/n for all-reduce (nccl-tests doc/PERFORMANCE.md).
"""
from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field

from facts.parsers.observation import Observation, Stop, simple_commands, stopped

_PREFIX = re.compile(r"^\[\d+(?:,\d+)?\](?:<std(?:out|err)>:|\s)")


def strip_prefixes(text: str) -> list[str]:
    """Lines of ``text`` without launcher prefixes."""
    return [_PREFIX.sub("", line, count=1) for line in (text or "").splitlines()]


@dataclass
class PerfRow:
    """One nccl-tests row: ``size`` (bytes), ``count`` (elements), out-of-place / in-place time (µs), algbw and
    busbw (GB/s)."""

    size: int
    count: int
    time_us: float
    algbw: float
    busbw: float
    ip_time_us: float
    ip_algbw: float
    ip_busbw: float


@dataclass
class PerfResult:
    """An ``all_reduce_perf`` run: ``rows``; ``avg_busbw`` from ``# Avg bus bandwidth`` (GB/s); ``ranks``: the
    ``#  Rank N`` lines; ``nccl_version``; ``out_of_bounds`` (``# Out of bounds values : N``);
    ``interleaved``: the size column goes back or repeats (several runs writing into one stream, fixture 33);
    ``problems``: what could not be read."""

    rows: list[PerfRow] = field(default_factory=list)
    avg_busbw: float | None = None
    ranks: int = 0
    nccl_version: str | None = None
    out_of_bounds: int | None = None
    interleaved: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def peak_busbw(self) -> float | None:
        return max((max(r.busbw, r.ip_busbw) for r in self.rows), default=None)

    def world_size(self) -> int | None:
        """``ranks`` when the ``# Rank`` lines were printed, else n solved from busbw/algbw = 2(n−1)/n on the
        largest row (None when algbw is 0 or the ratio is not of that form)."""
        if self.ranks:
            return self.ranks
        big = max(self.rows, key=lambda r: r.size, default=None)
        if big is None or big.algbw <= 0:
            return None
        factor = big.busbw / big.algbw
        if not 0.0 <= factor < 2.0:
            return None
        return round(2.0 / (2.0 - factor))


def _float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def parse_all_reduce_perf(text: str) -> PerfResult:
    """Parse nccl-tests output (any layout, prefixed or not, with surrounding noise such as ssh warnings)."""
    out = PerfResult()
    for line in strip_prefixes(text):
        s = line.strip()
        if re.match(r"^#\s+Rank\s+\d+", s):
            out.ranks += 1
            continue
        m = re.match(r"^#\s*Avg bus bandwidth\s*:\s*([\d.]+)", s)
        if m:
            out.avg_busbw = float(m.group(1))
            continue
        m = re.match(r"^#\s*Out of bounds values\s*:\s*(\d+)", s)
        if m:
            out.out_of_bounds = int(m.group(1))
            continue
        m = re.search(r"NCCL version (\d+\.\d+\.\d+)", s)
        if m:
            out.nccl_version = m.group(1)
            continue
        cells = s.split()
        if len(cells) < 10 or not cells[0].isdigit() or not cells[1].isdigit():
            continue
        nums = [_float(c) for c in cells[-8:]]
        t, a, b, t2, a2, b2 = nums[0], nums[1], nums[2], nums[4], nums[5], nums[6]
        if None in (t, a, b, t2, a2, b2):
            out.problems.append("row %r: unreadable time/algbw/busbw" % s[:40])
            continue
        out.rows.append(PerfRow(int(cells[0]), int(cells[1]), t, a, b, t2, a2, b2))
    sizes = [r.size for r in out.rows]
    out.interleaved = any(b <= a for a, b in zip(sizes, sizes[1:]))
    if not out.rows:
        out.problems.append("no result rows (size count type … busbw)")
    if out.avg_busbw is None:
        out.problems.append("no '# Avg bus bandwidth' line (run cut off?)")
    return out


@dataclass
class NetDevice:
    """A device of ``NET/IB : Using [0]mlx5_0:1/IB/SHARP``: ``name`` mlx5_0, ``port`` 1, ``link`` IB or RoCE,
    ``flags`` (SHARP…)."""

    name: str
    port: int
    link: str
    flags: list[str] = field(default_factory=list)


@dataclass
class DuplicateGpu:
    """NCCL's refusal of a communicator in which several ranks of one host use the same GPU: ``init.cc: NCCL WARN
    Duplicate GPU detected : rank A and rank B both on CUDA device X`` (``ncclInvalidUsage``; NVIDIA/nccl
    src/init.cc, https://github.com/horovod/horovod/issues/3949). ``device``: NCCL's bus id as it prints it (hex,
    ``3b000``); ``ranks``: every rank named on that device, sorted."""

    device: str
    ranks: list[int] = field(default_factory=list)

    @property
    def pci(self) -> str:
        """The device's PCI address: NCCL prints ``busIdToInt64("0000:3b:00.0")``, the address's hex digits as one
        number (NVIDIA/nccl src/misc/utils.cc), so ``3b000`` is ``0000:3b:00.0``."""
        digits = self.device.lower().rjust(9, "0")
        return "%s:%s:%s.%s" % (digits[:-5], digits[-5:-3], digits[-3:-1], digits[-1])


@dataclass
class NcclLog:
    """What an ``NCCL_DEBUG=INFO`` log says about transport.

    ``networks``: names of ``Using network X`` (``IB``, ``IBext``, ``Socket``, plugin names); ``ib_devices``:
    ``NET/IB : Using`` devices; ``ib_no_device``: ``NET/IB : No device found``; ``ib_disabled``:
    ``NCCL_IB_DISABLE set by environment to 1``; ``ibverbs_missing``: libibverbs could not be opened;
    ``ib_open_failed``: HCAs NCCL could not open; ``socket_ifaces``: interfaces of the Socket network NCCL uses
    (``NET/Socket : Using``; not the bootstrap's, see ``bootstrap_ifaces``); ``bootstrap_ifaces``: interfaces of
    NCCL's bootstrap (``Bootstrap : Using`` since NCCL 2.5; in NCCL <= 2.4 the ``NET/Socket : Using`` line, which
    that NCCL always prints because its bootstrap runs on the socket network); ``bootstrap_on_socket_net``: the log
    is in that NCCL <= 2.4 wording (``_bootstrap_on_socket_net``); ``oob_ifaces``: the IB network's out-of-band
    interfaces (``; OOB ib0:10.0.3.1<0>``); ``channels``: transports of ``via …`` channel lines
    (``NET/IB/0/GDRDMA``, ``NET/Socket/0``, ``P2P/IPC``, ``direct shared memory``); ``shm_segment``: (name, size)
    of a shared-memory segment NCCL failed to create after ``posix_fallocate … No space left on device``;
    ``init_complete``: a communicator finished initialising (``… Init COMPLETE``); ``selected_at``: the line number
    of the first transport selection (``NET/IB : Using``, ``Using network X``, ``NET/Socket : Using`` unless it is
    NCCL 2.4's bootstrap line), None when none;
    ``errors``: ``(line number, line)`` of each ``NCCL WARN``, NCCL error, abort or timeout line; ``hosts``: the
    host names of NCCL's ``host:pid:tid [dev]`` line prefixes, in order of appearance; ``duplicate_gpus``: the
    ``Duplicate GPU detected`` refusals, one per CUDA device; ``memreg_failed``: the verbs calls that could not
    register (pin) memory or make a queue pair for it (``Call to ibv_reg_mr failed``, ``ibv_create_qp``);
    ``completion_errors``: the ``ibv_wc`` status of each ``NET/IB : Got completion ... with error N`` /
    ``status=…(N)`` (12: transport retries exceeded); ``connect_failed``: the peer addresses NCCL's sockets could
    not connect to (``Connect to 172.17.0.2<38847> failed``)."""

    version: str | None = None
    networks: list[str] = field(default_factory=list)
    ib_devices: list[NetDevice] = field(default_factory=list)
    ib_no_device: bool = False
    ib_disabled: bool = False
    ibverbs_missing: bool = False
    ib_open_failed: list[str] = field(default_factory=list)
    socket_ifaces: list[str] = field(default_factory=list)
    bootstrap_ifaces: list[str] = field(default_factory=list)
    bootstrap_on_socket_net: bool = False
    oob_ifaces: list[str] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    plugins: list[str] = field(default_factory=list)
    shm_fallocate_failed: bool = False
    shm_segment: tuple[str, int] | None = None
    init_complete: bool = False
    selected_at: int | None = None
    errors: list[tuple[int, str]] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    duplicate_gpus: list[DuplicateGpu] = field(default_factory=list)
    memreg_failed: list[str] = field(default_factory=list)
    completion_errors: list[int] = field(default_factory=list)
    connect_failed: list[str] = field(default_factory=list)

    @property
    def failure_after_selection(self) -> str | None:
        """The first error/abort/timeout line after the transport was selected: the communicator never
        initialised (fixture 38's issue: a later ``ibv_modify_qp`` failure), or None."""
        after = [line for n, line in self.errors if self.selected_at is not None and n > self.selected_at]
        return after[0] if after else None

    @property
    def transport(self) -> str | None:
        """``RDMA`` (IB, IBext and other net plugins), ``Socket`` (TCP fallback), or None (no network chosen:
        a single-node run never needs one)."""
        if any(n == "Socket" for n in self.networks) or any("NET/Socket" in c for c in self.channels):
            return "Socket"
        if self.networks or self.ib_devices or any("NET/IB" in c for c in self.channels):
            return "RDMA"
        if self.ib_no_device or self.ibverbs_missing or self.ib_disabled:
            return "Socket" if self.socket_ifaces else None
        return None

    @property
    def rdma_links(self) -> list[str]:
        """Sorted link layers of the RDMA devices in use: ``["IB"]``, ``["RoCE"]``, ``["IB", "RoCE"]``."""
        return sorted({d.link for d in self.ib_devices})


#: Lines that say a NCCL run went wrong: NCCL's WARN level, its error returns, aborts and timeouts.
_ERROR = re.compile(r"NCCL WARN|NCCL error|unhandled (?:system|cuda|internal) error|ncclCommInitRank failed|"
                    r"\bAbort(?:ed|ing)?\b|timed out|\btimeout\b", re.I)
_SELECTION = re.compile(r"NET/IB\s*:\s*Using|NET/Socket\s*:\s*Using|NCCL INFO Using network ")
#: NCCL's ``Bootstrap : Using [0]eth0:10.0.2.64<0>`` (2.5 … 2.18) or ``Bootstrap : Using eth0:10.0.4.136<0>`` (2.19+)
_BOOTSTRAP = re.compile(r"NCCL INFO Bootstrap\s*:\s*Using (.*)")
#: an interface of a ``Using`` list: ``[0]em1:10.193.84.3<0>`` or, since NCCL 2.19, ``em1:10.193.84.3<0>``
_IFACE = re.compile(r"(?:\[\d+\])?([\w.-]+):[0-9a-fA-F.:%]+<\d+>")

_DEV = re.compile(r"\[\d+\]([\w.-]+):(\d+)/(IB|RoCE)((?:/[\w-]+)*)")
#: NCCL's line prefix ``host:pid:tid [cuda device]`` (every NCCL_DEBUG line, NCCL 2.x).
_LINE_HOST = re.compile(r"^\s*([\w.-]+):\d+:\d+ \[\d+\] ")
#: ``Call to ibv_reg_mr failed`` (NCCL's verbs wrapper, misc/ibvwrap.cc) and ``Call to ibv_create_qp failed``: the
#: pinned-memory limit (Horovod's troubleshooting guide, "NCCL WARN Call to ibv_reg_mr failed": memlock unlimited)
_MEMREG = re.compile(r"Call to (ibv_reg_mr|ibv_reg_dmabuf_mr|ibv_create_qp) failed")
#: ``NET/IB : Got completion from peer 10.2.0.5<33092> with error 12, opcode 0, …`` (NCCL <= 2.18) and
#: ``NET/IB: Got completion from peer … with status=IBV_WC_RETRY_EXC_ERR(12) opcode=…`` / ``status=12`` (later)
_COMPLETION = re.compile(r"NET/IB\s*:\s*Got completion (?:from peer \S+ )?with (?:error (\d+)|status=(?:\w*\()?(\d+))")
#: ``Net : Connect to 192.168.1.9<54263> failed : No route to host`` (include/socket.h), ``socketStartConnect: Connect
#: to 172.17.0.2<38847> failed``, ``socketPollConnect: Connect to 10.0.0.4<56849> returned 113(No route to host)``
_CONNECT = re.compile(r"Connect to \[?([0-9a-fA-F.:]+?)\]?<\d+> (?:failed|returned)")
#: ``WARN("Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx", ...)`` (NVIDIA/nccl src/init.cc).
_DUPLICATE = re.compile(r"Duplicate GPU detected\s*:\s*rank (\d+) and rank (\d+) both on CUDA device ([0-9a-fA-F]+)")


def parse_nccl_log(text: str) -> NcclLog:
    """Parse an ``NCCL_DEBUG=INFO`` log (any NCCL 2.x; fixtures 35-40, cases 04-05)."""
    log = NcclLog()
    selections = []
    for n, line in enumerate(strip_prefixes(text)):
        if _SELECTION.search(line):
            selections.append((n, "NET/Socket" in line))
        if _ERROR.search(line):
            log.errors.append((n, line.strip()))
        _read_transport_line(log, line)
        _read_failure_line(log, line)
        m = _LINE_HOST.match(line)
        if m:
            _add_new(log.hosts, m.group(1))
    _settle_bootstrap(log, selections)
    return log


def _bootstrap_on_socket_net(log: NcclLog) -> bool:
    """Whether ``log``'s ``NET/Socket : Using`` lines are (also) NCCL's bootstrap: NCCL <= 2.4 initialises the
    socket network first in every run, "as we use it for bootstrap", then the IB network, keeping Socket only when IB
    fails (NVIDIA/nccl v2.4.7-1 src/init.cc ``initNet``; fixtures 35 and 37, NCCL 2.4.2 and 2.4.7); NCCL 2.5 gave
    the bootstrap its own network, which prints ``Bootstrap : Using`` (v2.5.6-1 src/bootstrap.cc
    ``bootstrapNetInit``), and inits the socket network only when it is the one chosen. So: no ``Bootstrap`` line,
    a ``NET/Socket`` line, and a version that is not known to be 2.5 or later."""
    if log.bootstrap_ifaces or not log.socket_ifaces:
        return False
    if log.version is None:
        return True
    major, minor = (int(x) for x in log.version.split(".")[:2])
    return (major, minor) < (2, 5)


def _settle_bootstrap(log: NcclLog, selections: list[tuple[int, bool]]) -> None:
    """After the whole log is read: in NCCL <= 2.4's wording (``_bootstrap_on_socket_net``) the ``NET/Socket`` lines
    are the bootstrap's, and the Socket network's only when the log shows IB ruled out (``NET/IB : No device
    found``, libibverbs missing, ``NCCL_IB_DISABLE`` set, or ``Using network Socket``) and no IB device in use;
    ``selected_at`` is the first line of the transport selection, never the bootstrap's."""
    old_wording = log.bootstrap_on_socket_net = _bootstrap_on_socket_net(log)
    if old_wording:
        log.bootstrap_ifaces = list(log.socket_ifaces)
        ruled_out = log.ib_no_device or log.ibverbs_missing or log.ib_disabled or "Socket" in log.networks
        if log.ib_devices or not ruled_out:
            log.socket_ifaces = []
    chosen = [n for n, socket in selections if not (old_wording and socket and not log.socket_ifaces)]
    log.selected_at = chosen[0] if chosen else None


def _add_new(items: list, item) -> None:
    """Append ``item`` to ``items`` unless it is there already (first-seen order kept)."""
    if item not in items:
        items.append(item)


def _read_transport_line(log: NcclLog, line: str) -> None:
    """One log line's facts about what NCCL found and chose: version, networks, IB devices and their OOB interface,
    socket and bootstrap interfaces, IB disabled by the environment, channels, plugins, ``Init COMPLETE``."""
    m = re.search(r"NCCL version (\d+\.\d+\.\d+)", line)
    if m and log.version is None:
        log.version = m.group(1)
    m = re.search(r"NCCL INFO Using network (\S+)", line)
    if m:
        _add_new(log.networks, m.group(1))
    m = re.search(r"NET/IB\s*:\s*Using (.*)", line)
    if m:
        for name, port, link, flags in _DEV.findall(m.group(1)):
            if not any(d.name == name and d.port == int(port) for d in log.ib_devices):
                log.ib_devices.append(NetDevice(name, int(port), link, [f for f in flags.split("/") if f]))
    m = re.search(r"NET/Socket\s*:\s*Using (.*)", line)
    if m:
        for iface in _IFACE.findall(m.group(1)):
            _add_new(log.socket_ifaces, iface)
    m = _BOOTSTRAP.search(line)
    if m:
        for iface in _IFACE.findall(m.group(1)):
            _add_new(log.bootstrap_ifaces, iface)
    m = re.search(r"NET/IB\s*:\s*Using .*;\s*OOB (.*)", line)
    if m:
        for iface in _IFACE.findall(m.group(1)):
            _add_new(log.oob_ifaces, iface)
    if re.search(r"NCCL_IB_DISABLE set by environment to [1-9]", line):
        log.ib_disabled = True
    m = re.search(r"\bvia (NET/\S+|P2P/\S+|SHM\S*|direct shared memory|direct pointer)", line)
    if m:
        _add_new(log.channels, m.group(1))
    m = re.search(r"Loaded (?:net|collnet) plugin (.*?) \(", line)
    if m:
        _add_new(log.plugins, m.group(1))
    if "Init COMPLETE" in line:
        log.init_complete = True


def _read_failure_line(log: NcclLog, line: str) -> None:
    """One log line's evidence for ``classify_nccl_failure``: no IB device, libibverbs missing, an HCA that would not
    open, shared memory exhausted, duplicate GPUs, memory registration, IB completion errors, failed connects."""
    if re.search(r"NET/IB\s*:\s*No device found", line):
        log.ib_no_device = True
    if re.search(r"Failed to open libibverbs", line):
        log.ibverbs_missing = True
    m = re.search(r"NET/IB\s*:\s*Unable to open device (\S+)", line)
    if m:
        _add_new(log.ib_open_failed, m.group(1))
    if re.search(r"posix_fallocate failed\s*:\s*No space left on device", line):
        log.shm_fallocate_failed = True
    m = _DUPLICATE.search(line)
    if m:
        dup = next((d for d in log.duplicate_gpus if d.device == m.group(3).lower()), None)
        if dup is None:
            dup = DuplicateGpu(m.group(3).lower())
            log.duplicate_gpus.append(dup)
        dup.ranks = sorted(set(dup.ranks) | {int(m.group(1)), int(m.group(2))})
    m = re.search(r"Error while creating shared memory segment (\S+) \(size (\d+)\)", line)
    if m:
        log.shm_segment = (m.group(1), int(m.group(2)))
    m = _MEMREG.search(line)
    if m:
        _add_new(log.memreg_failed, m.group(1))
    m = _COMPLETION.search(line)
    if m:
        _add_new(log.completion_errors, int(m.group(1) or m.group(2)))
    m = _CONNECT.search(line)
    if m:
        _add_new(log.connect_failed, m.group(1))


def classify_nccl_failure(log: NcclLog) -> str | None:
    """The root cause code behind a generic ``ncclCommInitRank failed: unhandled system error`` (or ``invalid
    usage``): ``NCCL_DUPLICATE_GPU`` (two ranks of one host on the same GPU, ``Duplicate GPU detected``:
    https://github.com/horovod/horovod/issues/3949), ``NCCL_SHM_EXHAUSTED`` (posix_fallocate ENOSPC + a failed shm
    segment: /dev/shm too small, https://github.com/NVIDIA/nccl/issues/290),
    ``NCCL_NO_LIBIBVERBS`` (rdma-core user space missing, fixture 36), ``NCCL_IB_DEVICE_NOT_VISIBLE`` (an HCA
    NCCL could not open, https://github.com/NVIDIA/nccl/issues/451), ``NCCL_IB_MEMREG_FAILED`` (the HCA could not
    register pinned memory: the memlock limit, Horovod's troubleshooting guide), ``NCCL_IB_COMPLETION_ERROR`` (an RDMA
    transfer failed on the wire, the ``ibv_wc`` status in ``completion_errors``:
    https://github.com/NVIDIA/nccl/issues/1357's and #185's kind), ``NCCL_UNROUTABLE_ADDRESS`` (a socket connect
    failed to an address on Docker's default bridge, ``DOCKER_BRIDGE``, or the bootstrap ran on a container bridge:
    the peers advertised addresses the other hosts cannot reach, https://github.com/NVIDIA/nccl/issues/331,
    https://github.com/NVIDIA/nccl/issues/929), or None."""
    if log.duplicate_gpus:
        return "NCCL_DUPLICATE_GPU"
    if log.shm_fallocate_failed or log.shm_segment:
        return "NCCL_SHM_EXHAUSTED"
    if log.ibverbs_missing:
        return "NCCL_NO_LIBIBVERBS"
    if log.ib_open_failed:
        return "NCCL_IB_DEVICE_NOT_VISIBLE"
    if log.memreg_failed:
        return "NCCL_IB_MEMREG_FAILED"
    if log.completion_errors:
        return "NCCL_IB_COMPLETION_ERROR"
    if log.connect_failed and (any(_on_bridge(a) for a in log.connect_failed)
                               or any(i.startswith(BRIDGE_IFACES) for i in log.bootstrap_ifaces + log.socket_ifaces)):
        return "NCCL_UNROUTABLE_ADDRESS"
    return None


#: Docker's default bridge network (Docker docs, "Bridge network driver": docker0, 172.17.0.0/16) and the interface
#: names of container bridges (Docker's docker0/br-*, CNI's cni0): addresses there are private to one host.
DOCKER_BRIDGE = ipaddress.ip_network("172.17.0.0/16")
BRIDGE_IFACES = ("docker", "br-", "cni")


def _on_bridge(address: str) -> bool:
    try:
        return ipaddress.ip_address(address) in DOCKER_BRIDGE
    except ValueError:
        return False


#: ``NCCL_DEBUG=INFO`` as a launcher passes it on: mpirun's ``-x``, docker's ``-e``/``--env``, srun's
#: ``--export=ALL,…`` (NCCL reads the value case-insensitively)
_DEBUG_INFO_WORD = re.compile(r"(?:^|[,=])NCCL_DEBUG=info(?:$|,)", re.I)


def _debug_info(command) -> bool:
    """A simple command that runs with NCCL's INFO log: in its environment (recorded, inline, exported), passed
    on by its launcher (``_DEBUG_INFO_WORD``), or as ``-genv``/``-env NCCL_DEBUG INFO`` (MPICH, Intel MPI)."""
    words = command.argv
    return (command.env.get("NCCL_DEBUG", "").upper() == "INFO" or any(_DEBUG_INFO_WORD.search(w) for w in words)
            or any(a == "NCCL_DEBUG" and b.upper() == "INFO" for a, b in zip(words, words[1:])))


def _is_all_reduce_perf(argv: tuple, env: dict | None = None) -> bool:
    return any(os.path.basename(a) == "all_reduce_perf" for c in simple_commands(argv, env) for a in c.argv)


def _nccl_run(argv: tuple, env: dict) -> bool:
    """What a bundle may hold instead of a check's own all_reduce_perf run: any all_reduce_perf run (other sizes,
    under mpirun: fixtures 31-34), or any run with NCCL's INFO log (a training job's log: fixtures 35-40), however
    the command line was recorded (``sh -c "NCCL_DEBUG=INFO mpirun …"``, ``mpirun -x NCCL_DEBUG=INFO …``)."""
    return _is_all_reduce_perf(argv, env) or any(_debug_info(c) for c in simple_commands(argv, env))


@dataclass(frozen=True)
class NcclRun:
    """What a NCCL run's record says of the run itself: ``all_reduce_perf`` (nccl-tests; else only another program's
    ``NCCL_DEBUG=INFO`` log) and ``stopped``, how it was stopped before it finished
    (``facts.parsers.observation.stopped``: timed out, killed by ``timeout``'s 124 or a stop signal, with the
    duration the record gives) or None. An all_reduce_perf run stopped before its first result row hung: its
    ``Init COMPLETE`` is a milestone, not a working transport (https://github.com/NVIDIA/nccl/issues/2079)."""

    all_reduce_perf: bool
    stopped: Stop | None = None


def _nccl_run_of(run) -> NcclRun:
    return NcclRun(_is_all_reduce_perf(run.argv, None), stopped(run))


#: a NCCL run: nccl-tests' ``all_reduce_perf`` (the command line is the check's: sizes, GPUs, the mpirun prefix) or
#: another program's ``NCCL_DEBUG=INFO`` log -> ``NcclRun`` (an all_reduce_perf run or only a log; how it stopped)
ALL_REDUCE_PERF = Observation(("all_reduce_perf",), _nccl_run, _nccl_run_of)
