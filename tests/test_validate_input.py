"""``input.capacity``: the cores' PNG decode rate (``facts.decoderate``, on the sample's real 1024 x 1024 PNGs) against
what the GPUs train on (``facts.gpu_rates``, NVIDIA's published ResNet-50 rates): PASS, WARN with the numbers, and
SKIP, never PASS, without either observation."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from chexstack.tools import ToolRun
from facts import decoderate, gpu_rates
from tests.lib.paths import SAMPLE
from validate.checks import input_capacity
from validate.result import Status

PATHS = sorted(str(p) for p in (SAMPLE / "images-1024").glob("*.png"))


def _result(per_core, cores):
    return {"decoder": "tf.io.decode_png channels=1", "tensorflow": "2.15.0", "files": 3, "pixels": 1024 * 1024,
            "images": 300, "seconds": 2.0, "cpu_seconds": 2.0, "per_core": per_core, "cores": cores}


def test_enough_cores_pass_with_the_numbers():
    r = input_capacity.judge_capacity(_result(125, 40), None, 8, "Tesla V100-SXM2-16GB")
    assert r.status == Status.PASS
    assert r.measured.startswith("8 × V100 need ~3,296 img/s at 224² (412 img/s each, FP32; 10,160 with mixed "
                                 "precision); 40 cores decode ~5,000 PNG/s (125 per core): OK")
    assert any("DeepLearningExamples" in d for d in r.details)


def test_too_few_cores_warn_beyond_how_many_gpus_they_feed():
    r = input_capacity.judge_capacity(_result(130, 16), None, 8, "NVIDIA A100-SXM4-40GB")
    assert r.status == Status.WARN and r.diagnosis == "INPUT_BOUND"
    assert "8 × A100 need ~7,272 img/s" in r.measured and "16 cores decode ~2,080 PNG/s" in r.measured
    assert r.measured.endswith("input-bound beyond 2 GPUs; `invoke prepare`") and "invoke prepare" in r.remedy


@pytest.mark.parametrize("result, gpu, code", [(None, "Tesla V100-SXM2-16GB", "TOOL_FAILED"),
                                               ({"error": "no TensorFlow"}, "Tesla V100-SXM2-16GB", "TOOL_FAILED"),
                                               (_result(125, 40), "NVIDIA H200", "NOT_REPORTED")])
def test_without_a_measured_rate_or_a_published_figure_it_skips(result, gpu, code):
    r = input_capacity.judge_capacity(result, ToolRun(("python",), 1, "", "boom"), 8, gpu)
    assert r.status == Status.SKIP and r.diagnosis == code


def test_a_node_without_gpus_measures_its_cores_but_never_passes():
    """``--gpus N`` on a node without GPUs: no kind to judge against, so a SKIP however many cores, with what the
    cores would feed of each published kind and how to get the verdict (the GPU node, or its bundle)."""
    from validate.checks.gpu import NOT_GPU_NODE
    for cores in (2, 400):
        r = input_capacity.judge_without_gpus(_result(125, cores), None, 1, NOT_GPU_NODE)
        assert r.status == Status.SKIP and r.diagnosis == "NOT_APPLICABLE"
        assert r.measured.startswith("not a GPU node (no nvidia-smi, no NVIDIA GPU in /sys/bus/pci), so no GPU kind "
                                     "to judge --gpus 1 against: %d cores decode" % cores)
        assert "--collect BUNDLE" in r.remedy and "--from BUNDLE" in r.remedy and "on the GPU node" in r.remedy
    assert "would feed 0 V100 (412 img/s each) or 0 A100 (909 img/s each) at 224², FP32" in input_capacity.\
        judge_without_gpus(_result(125, 2), None, 1, NOT_GPU_NODE).measured
    failed = input_capacity.judge_without_gpus(None, ToolRun(("python",), 1, "", "boom"), 1, NOT_GPU_NODE)
    assert failed.status == Status.SKIP and "decode rate not measured" in failed.measured


def test_gpus_on_a_bundle_without_gpus_times_the_cores_and_skips(tmp_path):
    """End to end: a bundle collected here with ``--gpus 1`` (the real decode measurement), its GPU evidence made
    that of a node without GPUs (no nvidia-smi, no NVIDIA PCI device) whatever this node has, judged with
    ``--from``: SKIP with the measured rate, exit 0; without ``--gpus`` the SKIP says what ``--gpus N`` does."""
    from tests.lib import cli as cmd
    from validate.evidence import Bundle
    out = cmd.run("validate", "--only", "input.capacity", "--gpus", "1", "--collect", str(tmp_path / "b"))
    assert out.returncode == 0, out.stderr
    bundle = Bundle.load(tmp_path / "b")
    for e in bundle.entries:
        if e["kind"] == "tool" and e["argv"][0] == "nvidia-smi":
            e.update(rc=None, missing=True, stdout="", stderr="")
        elif e["kind"] == "glob" and e["pattern"].startswith("/sys/bus/pci"):
            e["paths"] = []
    if not any(e["kind"] == "glob" and e["pattern"] == "/sys/bus/pci/devices/*" for e in bundle.entries):
        bundle.entries.append({"kind": "glob", "pattern": "/sys/bus/pci/devices/*", "paths": []})
    bundle.save(tmp_path / "gpuless")
    judged = cmd.run("validate", "--from", str(tmp_path / "gpuless"), "--only", "input.capacity", "--json",
                     str(tmp_path / "r.json"))
    assert judged.returncode == 0, judged.stderr
    r = json.loads((tmp_path / "r.json").read_text())["results"][0]
    assert (r["status"], r["diagnosis"]) == ("SKIP", "NOT_APPLICABLE"), r
    assert "no GPU kind to judge --gpus 1 against" in r["measured"] and "cores decode ~" in r["measured"]
    assert [d.split(" need")[0] for d in r["details"][:2]] == ["1 × V100", "1 × A100"]
    bundle.meta["gpus"] = 0
    bundle.save(tmp_path / "gpuless-0")
    plain = cmd.run("validate", "--from", str(tmp_path / "gpuless-0"), "--only", "input.capacity", "--json",
                    str(tmp_path / "r0.json"))
    r0 = json.loads((tmp_path / "r0.json").read_text())["results"][0]
    assert plain.returncode == 0 and r0["status"] == "SKIP" and "--gpus N measures the cores" in r0["measured"]


def test_the_published_rates_scale_with_the_pixels():
    v100 = gpu_rates.published("Tesla V100-PCIE-32GB")
    assert (v100.fp32, v100.amp) == (412, 1270) and v100.at(448, amp=False) == pytest.approx(103)
    assert gpu_rates.published("NVIDIA H100 80GB HBM3") is None


def test_the_decode_program_times_the_real_sample():
    """The measurement the check runs (as a tool: a bundle records its output), on the sample's three PNGs."""
    argv = decoderate.command(decoderate.sample_paths(), 0.5)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    result = decoderate.parse(out.stdout)
    assert out.returncode == 0 and result and result["pixels"] == 1024 * 1024 and result["files"] == 3, \
        out.stderr[-2000:]
    assert result["images"] >= 3 and result["per_core"] > 0 and result["cores"] >= 1
    assert argv[0] == sys.executable and decoderate.sample_paths() == PATHS


def test_a_bundle_answers_with_its_recorded_measurement_from_another_checkout():
    assert decoderate.is_run(("/opt/py/bin/python", "/elsewhere/facts/decoderate.py", "--seconds", "3"), {})
    assert not decoderate.is_run(("nvidia-smi",), {})


def test_gpus_is_the_runs_count_and_a_bundle_keeps_it(tmp_path):
    """``--gpus N`` reaches the checks (``Context.gpus``), a bundle records it, and ``--from`` refuses another."""
    from tests.lib import cli as cmd
    out = cmd.run("validate", "--only", "input.capacity", "--gpus", "8", "--collect", str(tmp_path / "b"))
    assert out.returncode == 0 and "input.capacity" in out.stdout, out.stderr
    assert json.loads((tmp_path / "b" / "bundle.json").read_text())["gpus"] == 8
    again = cmd.run("validate", "--from", str(tmp_path / "b"), "--gpus", "4")
    assert again.returncode == 2 and "--gpus (8)" in again.stderr
    assert cmd.run("validate", "--gpus", "-1").returncode == 2


def test_the_users_own_images_are_timed_and_a_bundle_keeps_the_folder(tmp_path):
    """``--images DIR``: up to 8 of the user's PNGs (searched recursively, the first by path) are what the decode
    measurement times; the bundle records the folder and ``--from`` refuses another; a folder that does not exist
    is refused before any check runs."""
    from tests.lib import cli as cmd
    images = SAMPLE / "images-64"
    paths = decoderate.sample_paths(images)
    assert len(paths) == decoderate.USER_FILES and paths == sorted(str(p) for p in images.rglob("*.png"))[:8]
    assert decoderate.sample_paths(tmp_path / "absent") == [] and decoderate.sample_paths(tmp_path) == []
    # a folder of two sizes (the shared sample's images-1024 and images-64): the first file's size only
    mixed = decoderate.sample_paths(SAMPLE)
    assert mixed == PATHS and {decoderate.png_size(p) for p in mixed} == {(1024, 1024)}
    out = cmd.run("validate", "--only", "input.capacity", "--images", str(images), "--collect", str(tmp_path / "b"))
    assert out.returncode == 0 and "input.capacity" in out.stdout, out.stderr
    assert json.loads((tmp_path / "b" / "bundle.json").read_text())["images"] == str(images)
    again = cmd.run("validate", "--from", str(tmp_path / "b"), "--images", str(images))
    assert again.returncode == 2 and "--images (%s)" % images in again.stderr
    missing = cmd.run("validate", "--images", str(tmp_path / "absent"))
    assert missing.returncode == 2 and "--images %s: no such folder" % (tmp_path / "absent") in missing.stderr


def test_a_sweep_times_its_own_png_folder():
    from bench.sweep import input_capacity

    seen = []

    def measure(argv, timeout):
        seen.append(argv)
        return ToolRun(tuple(argv), 0, decoderate.PREFIX + json.dumps(_result(125, 40)), "")

    class Record:
        device, gpu_model, image_size, amp = "gpu", "Tesla V100-SXM2-16GB", 224, False

    class Point:
        count, images_per_sec = 8, 3000.0

    capacity = input_capacity(Record(), [Point()], measure, data=str(SAMPLE / "images-64"))
    assert capacity["gpus"] == 8 and seen[0][-8:] == decoderate.sample_paths(SAMPLE / "images-64")
