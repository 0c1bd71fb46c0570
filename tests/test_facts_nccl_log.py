"""facts.parsers.nccl.parse_nccl_log on every ``nccl-debug-info-*`` fixture of ../shared/fixtures (SOURCES.md rows
35-40): the transport NCCL chose and the interfaces it chose it on, in each NCCL era's wording. NCCL 2.4 (the
study's, Table 1) has no ``Bootstrap`` or ``Using network`` line: its ``NET/Socket : Using`` line is printed by every
run (the bootstrap's socket network), so it names the transport's interface only when IB was ruled out.
"""
from __future__ import annotations

import pytest

from facts.parsers.nccl import classify_nccl_failure, parse_nccl_log
from launch.failure import NCCL_REMEDY
from tests.lib.paths import FIXTURES
from validate.checks.nccl import INIT_REMEDY, judge_init, judge_transport

#: fixture -> (transport, RDMA devices "name:port/link", socket interfaces of the transport, bootstrap interfaces,
#: OOB interfaces, the first line of the transport selection, NCCL <= 2.4 wording)
PARSED = {
    # 35: NCCL 2.4.2, IB not found: Socket, on the interface of the (bootstrap's) NET/Socket line
    "nccl-debug-info-socket-no-ib-horovodrun.txt":
        ("Socket", [], ["enp129s0f0"], ["enp129s0f0"], [], 1, True),
    # 36: NCCL 2.8.3, libibverbs missing: Socket on em1 and the Calico tunnel tunl0
    "nccl-debug-info-socket-libibverbs-missing-t4-2.8.3.txt":
        ("Socket", [], ["em1", "tunl0"], ["em1"], [], 3, False),
    # 37: NCCL 2.4.7: IB on mlx5_0; ib0 is the bootstrap's and the OOB interface, not a Socket transport
    "nccl-debug-info-net-ib-mlx5-ib-2.4.7.txt":
        ("RDMA", ["mlx5_0:1/IB"], [], ["ib0"], ["ib0"], 3, True),
    # 38: NCCL 2.19.3 (interfaces without "[0]"): IB network on RoCE ports
    "nccl-debug-info-net-ib-roce-h100-2.19.3.txt":
        ("RDMA", ["mlx5_10:1/RoCE", "mlx5_11:1/RoCE"], [], ["enp220s0np0"], ["enp220s0np0"], 4, False),
    # 39: HPC-X plugin, IBext with SHARP devices
    "nccl-debug-info-ibext-sharp-plugin-h100.txt":
        ("RDMA", ["mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_4:1/IB", "mlx5_5:1/IB"], [], [], ["ibp25s0"], 0, False),
    # 40: NCCL 2.5.6 (no version line in the excerpt), IB and one RoCE port, OOB eth0
    "nccl-debug-info-mixed-ib-roce-rank-prefix-2.5.6.txt":
        ("RDMA", ["mlx5_1:1/IB", "mlx5_3:1/IB", "mlx5_0:1/IB", "mlx5_2:1/RoCE", "mlx5_4:1/IB"], [], ["eth0"],
         ["eth0"], 2, False),
}


def test_every_nccl_debug_fixture_is_here():
    assert {p.name for p in FIXTURES.glob("nccl-debug-info-*")} == set(PARSED)


@pytest.mark.parametrize("fixture", sorted(PARSED))
def test_nccl_log_transport_and_interfaces(fixture):
    transport, devices, sockets, bootstrap, oob, selected_at, old_wording = PARSED[fixture]
    log = parse_nccl_log((FIXTURES / fixture).read_text())
    assert log.transport == transport
    assert ["%s:%d/%s" % (d.name, d.port, d.link) for d in log.ib_devices] == devices
    assert log.socket_ifaces == sockets
    assert log.bootstrap_ifaces == bootstrap
    assert log.oob_ifaces == oob
    assert log.selected_at == selected_at
    assert log.bootstrap_on_socket_net is old_wording


def test_nccl_24_ib_log_names_no_socket_interface():
    """Fixture 37 through nccl.transport: the RDMA selection, its bootstrap/OOB interface, no "socket interfaces"."""
    result = judge_transport(parse_nccl_log((FIXTURES / "nccl-debug-info-net-ib-mlx5-ib-2.4.7.txt").read_text()),
                             None, True)
    assert result.status.value == "PASS"
    assert "bootstrap interface: ib0" in result.details and "IB out-of-band interface: ib0" in result.details
    assert not any(d.startswith("socket interfaces") for d in result.details)


#: constructed in NCCL 2.4.7's wording (fixture 37's lines): the socket network's init, then IB's fate
NCCL_24_SOCKET = "master_node:20:289 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.3.1<0>\n"
NCCL_24_VERSION = "NCCL version 2.4.7+cuda10.0\n"


def test_nccl_24_ib_disabled_by_the_environment_is_socket():
    log = parse_nccl_log(NCCL_24_SOCKET + "master_node:20:289 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n"
                         + NCCL_24_VERSION)
    assert (log.transport, log.socket_ifaces, log.bootstrap_ifaces, log.ib_disabled) == ("Socket", ["eth0"],
                                                                                         ["eth0"], True)


def test_nccl_24_bootstrap_line_alone_chooses_nothing():
    """A NCCL 2.4 excerpt that ends before the IB network's init: only the bootstrap is known."""
    log = parse_nccl_log(NCCL_24_SOCKET + NCCL_24_VERSION)
    assert (log.transport, log.socket_ifaces, log.bootstrap_ifaces, log.selected_at) == (None, [], ["eth0"], None)


def test_socket_line_of_nccl_25_or_later_is_the_transport():
    """From NCCL 2.5 the socket network is initialised only when chosen: its line is the transport's even in an
    excerpt without the ``Bootstrap`` line."""
    log = parse_nccl_log(NCCL_24_SOCKET + "NCCL version 2.8.3+cuda10.0\n")
    assert (log.socket_ifaces, log.bootstrap_ifaces, log.selected_at) == (["eth0"], [], 0)


# --- one cause per failure family: each its own code and remedy, never the generic RoCE-GID advice -------------
ROCE = (FIXTURES / "nccl-debug-info-net-ib-roce-h100-2.19.3.txt").read_text()
#: the lines as public reports quote them (source beside each); the host prefix is fixture 38's
FAILURES = [
    # Horovod's troubleshooting guide ("NCCL WARN Call to ibv_reg_mr failed"), with errno as ibvwrap.cc prints it
    ("dgxh100-4:460770:460842 [0] misc/ibvwrap.cc:153 NCCL WARN Call to ibv_reg_mr failed with error Cannot "
     "allocate memory\n", "NCCL_IB_MEMREG_FAILED", "memlock unlimited"),
    # NCCL <= 2.18's wording (a public report of an IB/RoCE pair whose connection timed out)
    ("dgxh100-4:460770:460842 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
     "10.2.0.5<33092> with error 12, opcode 0, len 0, vendor err 129 (Recv)\n", "NCCL_IB_COMPLETION_ERROR",
     "retries exceeded"),
    # later NCCL's wording
    ("dgxh100-4:460770:460842 [0] transport/net_ib/p2p.cc:648 NCCL WARN NET/IB: Got completion from peer "
     "10.153.235.13<40554> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RECV_RDMA_WITH_IMM(129) vendor_err=129 "
     "hca mlx5_1\n", "NCCL_IB_COMPLETION_ERROR", "NCCL_IB_GID_INDEX"),
    # https://github.com/NVIDIA/nccl/issues/929: the peer's address is its container's on docker0
    ("dgxh100-4:460770:460842 [0] misc/socket.cc:480 NCCL WARN socketStartConnect: Connect to 172.17.0.2<38847> "
     "failed : Software caused connection abort\n", "NCCL_UNROUTABLE_ADDRESS", "--network host"),
    # https://github.com/NVIDIA/nccl/issues/1105: a routed address that does not answer is not a bridge
    ("dgxh100-4:460770:460842 [0] include/socket.h:409 NCCL WARN Net : Connect to 192.168.1.9<54263> failed : No "
     "route to host\n", "NCCL_INIT_FAILED", "NCCL_IB_GID_INDEX"),
]


@pytest.mark.parametrize("line,code,remedy", FAILURES, ids=[f[1] + str(i) for i, f in enumerate(FAILURES)])
def test_each_failure_family_after_the_selection_has_its_own_cause_and_remedy(line, code, remedy):
    log = parse_nccl_log(ROCE + line)
    for result in (judge_init(log), judge_transport(log, None, True)):
        assert (result.status.value, result.diagnosis) == ("FAIL", code), result
        assert remedy in result.remedy and line.strip()[-30:] in result.measured
    if code != "NCCL_INIT_FAILED":
        assert classify_nccl_failure(log) == code and NCCL_REMEDY[code] != INIT_REMEDY


def test_completion_errors_keep_their_status():
    assert parse_nccl_log(ROCE + FAILURES[1][0] + FAILURES[2][0]).completion_errors == [12]
