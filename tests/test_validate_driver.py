"""Issue 12 item 6: driver compatibility as NVIDIA documents it — the release notes' data-center exceptions (NGC
19.06 on Tesla GPUs with R384/R410) and the loaded kernel module against the user-space library."""
from __future__ import annotations

from envs import rules
from facts.parsers import nvidia_smi as smi
from facts.parsers import versions
from tests.lib.paths import FIXTURES
from validate.checks.gpu import datacenter_gpus, judge_driver, judge_driver_module, ngc_release

NGC_1906 = "https://docs.nvidia.com/deeplearning/dgx/tensorflow-release-notes/rel_19.06.html"


def test_ngc_19_06_runs_on_r384_and_r410_only_on_tesla_gpus():
    dgx1 = smi.parse_table((FIXTURES / "nvidia-smi-dgx1-v100x8-384.txt").read_text())  # fixture 3: Tesla V100
    tesla = datacenter_gpus([g.name for g in dgx1.gpus])
    assert tesla is True and ngc_release("nvcr.io/nvidia/tensorflow:19.06-py3") == "19.06"
    ok = judge_driver(dgx1.driver_version, dgx1.driver_max_cuda, "10.1.168", "stack ngc", "19.06", tesla)
    assert ok.status.value == "PASS" and NGC_1906 in ok.expected and "R384 (>= 384.111) or R410" in ok.measured
    assert judge_driver("410.48", "10.0", "10.1.168", "stack ngc", "19.06", True).status.value == "PASS"
    below = judge_driver("384.81", "9.0", "10.1.168", "stack ngc", "19.06", True)
    assert below.status.value == "FAIL" and below.diagnosis == "CUDA_DRIVER_TOO_OLD"
    geforce = judge_driver("410.48", "10.0", "10.1.168", "stack ngc", "19.06",
                           datacenter_gpus(["NVIDIA GeForce RTX 2080 Ti"]))
    assert geforce.status.value == "FAIL"
    assert geforce.measured == "driver 410.48 too old for CUDA 10.1.168 (needs >= 418.39)"
    assert "NGC 19.06 allows R384 (>= 384.111) or R410 only on Tesla" in geforce.remedy
    # outside an NGC image (a conda env, a wheel) there is no compatibility package: Table 3 alone
    assert judge_driver("410.48", "10.0", "10.1.168", "conda", None, True).status.value == "FAIL"


def test_every_exception_names_its_release_notes():
    for release in ("19.01", "19.06", "21.06"):
        exc = rules.datacenter_exception(release)
        assert exc.source.startswith("NGC ") and "https://docs.nvidia.com/" in exc.source
    assert rules.datacenter_exception("20.01") is None


def test_kernel_module_against_the_user_space_library():
    """/proc/driver/nvidia/version in the kernel's format (constructed value) against fixture 57's "NVML library
    version: 570.124" and fixture 9's short NVML version."""
    module = versions.nvidia_kernel_module("NVRM version: NVIDIA UNIX x86_64 Kernel Module  565.57.01  Thu Oct 10 "
                                           "12:29:05 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    assert module == "565.57.01"
    assert versions.nvidia_kernel_module("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  "
                                         "Release Build  (dvs-builder@U16)") == "575.57.08"
    error = smi.parse_table((FIXTURES / "nvidia-smi-nvml-driver-library-mismatch-570-with-libversion.txt")
                            .read_text()).error
    library = error.detail[0].rsplit(" ", 1)[1]
    result = judge_driver_module(module, library, "nvidia-smi: NVML library version", 8)
    assert result.status.value == "FAIL" and result.diagnosis == "NVML_DRIVER_LIBRARY_MISMATCH"
    assert result.measured == "kernel module 565.57.01, user-space library 570.124 (nvidia-smi: NVML library version)"
    assert "reboot" in result.remedy
    nvml = smi.parse_version((FIXTURES / "nvidia-smi-version-590.txt").read_text())
    assert judge_driver_module("590.48.01", "590.48", "NVML", 1).status.value == "PASS" and nvml
    unloaded = judge_driver_module(None, None, "", 4)
    assert unloaded.status.value == "FAIL" and unloaded.diagnosis == "NVIDIA_DRIVER_NOT_LOADED"
