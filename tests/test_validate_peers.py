"""Issue 12 item 4: compare like with like — IB ports against each other and their HCA's generation, GPUs against
each other — and name the outlier with its value and its peers' value. Inputs are the real outputs of
../shared/fixtures, with one value changed where the fixture has no outlier (said at each test)."""
from __future__ import annotations

from facts.parsers.infiniband import parse_ibstat
from facts.parsers.nvidia_smi import peers_from_q_text
from tests.lib.paths import FIXTURES
from validate.checks.gpu import judge_peers
from validate.checks.infiniband import judge_ports


def ndr_node():
    return parse_ibstat((FIXTURES / "ibstat-h100-ndr400-all-active.txt").read_text())


def test_a_degraded_rail_fails_against_its_peers_not_a_fixed_floor():
    """Fixture 19 with mlx5_4 and mlx5_5 trained down to HDR 200: still above the EDR floor, but 200 < 400."""
    report = ndr_node()
    for p in report.ports:
        if p.hca in ("mlx5_4", "mlx5_5"):
            p.rate_gbps = 200.0
    result = judge_ports(report)
    assert result.status.value == "FAIL" and result.diagnosis == "IB_RATE_DEGRADED"
    assert result.measured.startswith("8/8 IB ports Active/LinkUp at 200/400 Gb/s")
    findings = [result.measured.split("; ")[-1]] + result.details
    assert "mlx5_4:1 at 200 Gb/s (HDR) while its 6 peer(s) run 400 Gb/s (NDR) (degraded link" in findings[0]
    assert any(f.startswith("mlx5_5:1 at 200 Gb/s (HDR) while its 6 peer(s) run 400 Gb/s (NDR)") for f in findings)
    assert "EDR 100, HDR 200, NDR 400 Gb/s per port" in result.expected


def test_every_rail_below_its_hca_generation_is_a_warning():
    """Fixture 19 with every ConnectX-7 (MT4129) port at 200: equal peers, but that HCA links at NDR 400."""
    report = ndr_node()
    for p in report.ports:
        if p.ca_type == "MT4129":
            p.rate_gbps = 200.0
    result = judge_ports(report)
    assert result.status.value == "WARN" and result.diagnosis == "IB_RATE_BELOW_HCA"
    assert result.measured.endswith("8 ConnectX-7 (MT4129) port(s) at 200 Gb/s (HDR); that HCA links at "
                                    "400 Gb/s (NDR)")


def test_healthy_rails_of_each_generation_pass():
    for name, rate in (("ibstat-h100-ndr400-all-active.txt", "400"), ("ibstat-a100-hdr200-all-active.txt", "200"),
                       ("ibstat-edr100-connectx4-active.txt", "100")):
        result = judge_ports(parse_ibstat((FIXTURES / name).read_text()))
        assert result.status.value == "PASS" and "at %s Gb/s" % rate in result.measured, result


def q_h100():
    return (FIXTURES / "nvidia-smi-q-h100x8-535.txt").read_text()


def test_gpus_alike_pass_and_an_x8_slot_is_named_with_its_peers_value():
    """Fixture 4 (8× H100, nvidia-smi -q) as is, then with GPU 3's link width max changed to 8x (a degraded slot)."""
    result = judge_peers(peers_from_q_text(q_h100()))
    assert result.status.value == "PASS", result
    assert result.measured == ("8 GPUs alike: PCIe generation Gen5, PCIe width x16, max SM clock 1980 MHz, "
                               "max memory clock 2619 MHz, ECC on")
    text = q_h100()
    gpu3 = text.index("GPU 00000000:86:00.0")
    at = text.index("Max                       : 16x", gpu3)
    degraded = text[:at] + "Max                       : 8x" + text[at + len("Max                       : 16x"):]
    result = judge_peers(peers_from_q_text(degraded))
    assert result.status.value == "FAIL" and result.diagnosis == "GPU_PEER_OUTLIER"
    assert result.measured == "GPU 3 (00000000:86:00.0): PCIe width x8 (its 7 peer(s): x16)"


def test_nvlink_count_and_clock_outliers():
    props = peers_from_q_text(q_h100())
    nvlinks = dict.fromkeys(props, 18)
    nvlinks["GPU 5 (00000000:A8:00.0)"] = 16
    result = judge_peers(props, nvlinks)
    assert result.status.value == "FAIL"
    assert result.measured == "GPU 5 (00000000:A8:00.0): NVLinks 16 (its 7 peer(s): 18)"
    props["GPU 1 (00000000:64:00.0)"]["max SM clock"] = 1755
    result = judge_peers(props)
    assert result.status.value == "WARN" and result.measured == \
        "GPU 1 (00000000:64:00.0): max SM clock 1755 MHz (its 7 peer(s): 1980 MHz)"


def test_every_inactive_link_and_missing_pair_is_shown_with_its_count():
    """Issue 12 item 2. Fixture 11 (8× A100, 12 NVLinks each) with 4 links of GPU2 and GPU5 made inactive: the
    count is right and every link is in the details even where the measured line is cut short; fixture 16 as an
    SXM (all-pairs) platform lists every missing pair."""
    from facts.parsers.nvidia_smi import parse_nvlink_status
    from facts.parsers.topology import parse_topo
    from validate.checks.topology import judge_nvlink, judge_nvlink_links

    links = parse_nvlink_status((FIXTURES / "nvidia-smi-nvlink-status-a100x8.txt").read_text())
    for gpu in (2, 5):
        for link in list(links[gpu])[:4]:
            links[gpu][link] = None
    result = judge_nvlink_links(links)
    assert result.status.value == "FAIL" and "; 8 inactive: GPU2 link 0" in result.measured
    assert result.details[0] == "inactive: " + ", ".join("GPU%d link %d" % (g, l) for g in (2, 5) for l in range(4))
    assert "GPU5: 12 link(s), 4 inactive" in result.details
    topo = parse_topo((FIXTURES / "nvidia-smi-topo-3gpu-partial-nv4-2nic-legend.txt").read_text())
    result = judge_nvlink(topo, "NVIDIA A100-SXM4-80GB")
    assert result.measured == "1 of 3 GPU pairs NVLinked; no NVLink on 2 pair(s): GPU0–GPU2 (NODE), GPU1–GPU2 (NODE)"
