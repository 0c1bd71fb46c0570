"""Kinds of fault a reviewer found by feeding the ../shared/cases through ``invoke validate --from`` (each case's
``NN-*.expected.md`` states the verdict, cause and remedy): every test judges a recorded node (a corpus bundle of
``tests/data/bundles``, or a variant of one made here by string replacement on the case's text) and asserts the
verdict, the diagnosis code and the key words of the remedy."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.lib.bundle_corpus import CORPUS, build
from tests.lib.paths import CASES
from validate.report import validate


def case(prefix: str) -> str:
    return next(CASES.glob(prefix + "-*.txt")).read_text()


def judged(tmp_path, spec: dict | str, only: str) -> dict:
    """``validate --from`` the bundle of ``spec`` (a corpus name, or a spec as ``tests.lib.bundle_corpus`` reads
    it; a literal string is a variant of a case's text): the one result of ``only``."""
    if isinstance(spec, str):
        path = CORPUS / ("%s.yaml" % spec)
    else:
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(dict({"about": "a variant made by the test"}, **spec)))
    build(path, tmp_path / "bundle")
    validate(json_path=str(tmp_path / "r.json"), from_bundle=str(tmp_path / "bundle"), only=[only])
    [result] = json.loads((tmp_path / "r.json").read_text())["results"]
    return result


# -- 01: the stack's Horovod requirement adds to the baseline (TensorFlow + MPI), and a GPU stack needs NCCL --------

def _check_build(**marks: str) -> str:
    """Case 01's ``horovodrun --check-build`` with some marks changed: ``TensorFlow="X"`` (first occurrence)."""
    text = case("01").split("#   horovodrun --check-build\n")[1]
    for name, mark in marks.items():
        text = text.replace("[ ] %s\n" % name, "[%s] %s\n" % (mark, name), 1)
    return text


@pytest.mark.parametrize("stack", ["ngc", "hopper", "conda"])
def test_01_case_output_names_every_missing_requirement_for_any_gpu_stack(tmp_path, stack):
    spec = {"stack": stack, "evidence": [{"tool": ["horovodrun", "--check-build"], "stdout": _check_build()}]}
    result = judged(tmp_path, spec, "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_BUILD_INCOMPLETE")
    assert result["measured"].endswith("missing: framework=TensorFlow, controller=MPI, tensor_op=NCCL"), result
    assert "HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_GPU_OPERATIONS=NCCL pip install --no-cache-dir" \
        in result["remedy"] and "--check-build as a RUN step" in result["remedy"]


@pytest.mark.parametrize("stack", ["ngc", "hopper", "conda", "cpu", None])
def test_01_a_build_without_mpi_never_passes(tmp_path, stack):
    """Horovod 0.28.1 with TensorFlow, Gloo and NCCL but ``[ ] MPI``: every launcher starts ranks under MPI."""
    text = _check_build(TensorFlow="X", NCCL="X").replace("v0.27.0", "v0.28.1")
    spec = {"stack": stack, "evidence": [{"tool": ["horovodrun", "--check-build"], "stdout": text}]}
    result = judged(tmp_path, spec, "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_BUILD_INCOMPLETE"), result
    assert result["measured"].endswith("missing: controller=MPI") and "HOROVOD_WITH_MPI=1" in result["remedy"]


@pytest.mark.parametrize("stack, passes", [("ngc", True), ("hopper", True), ("conda", True), ("cpu", False)])
def test_01_a_complete_build_passes_and_a_cpu_stack_still_needs_its_gloo(tmp_path, stack, passes):
    text = _check_build(TensorFlow="X", MPI="X", NCCL="X").replace("[X] Gloo", "[ ] Gloo")
    spec = {"stack": stack, "evidence": [{"tool": ["horovodrun", "--check-build"], "stdout": text}]}
    result = judged(tmp_path, spec, "horovod.env")
    if passes:
        assert result["status"] == "PASS" and "framework=TensorFlow, controller=MPI" in result["expected"], result
    else:  # the cpu stack builds with HOROVOD_WITH_GLOO=1: its gate requires Gloo
        assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_BUILD_INCOMPLETE")
        assert result["measured"].endswith("missing: controller=Gloo") and "HOROVOD_WITH_GLOO=1" in result["remedy"]


# -- 02: Horovod built for another TensorFlow, as its import says so ------------------------------------------------

def _mismatch_line() -> str:
    """The error every rank of case 02 printed (its expected.md, "Observed")."""
    text = next(CASES.glob("02-*.expected.md")).read_text()
    return next(l for l in text.splitlines() if "HorovodVersionMismatchError" in l).strip().strip("`")


def _mismatch_stderr() -> str:
    """A failed ``import horovod.tensorflow`` as Python prints it: the traceback, then HorovodVersionMismatchError's
    message on three lines (horovod/common/exceptions.py)."""
    return ("Traceback (most recent call last):\n  File \"<string>\", line 4, in <module>\n"
            "  File \"/usr/local/lib/python3.8/dist-packages/horovod/tensorflow/__init__.py\", line 27, in <module>\n"
            "    _check_extension_lambda()\n" + _mismatch_line() + "\n"
            "             This can result in unexpected behavior including runtime errors.\n"
            "             Reinstall Horovod using `pip install --no-cache-dir` to build with the new version.\n")


def _probe_spec(error: str) -> dict:
    return {"evidence": [{"fact": "horovod import probe", "value": {"error": error}}]}


def test_02_the_import_probe_keeps_the_versions_of_a_message_over_several_lines(monkeypatch):
    import subprocess

    from facts import horovod_gate

    def run(argv, **kw):
        return subprocess.CompletedProcess(argv, 1, "", _mismatch_stderr())

    monkeypatch.setattr(horovod_gate.subprocess, "run", run)
    error = horovod_gate.import_probe()["error"]
    assert error.startswith("horovod.common.exceptions.HorovodVersionMismatchError: Framework tensorflow installed "
                            "with version 2.3.0 but found version 2.4.1.") and "Reinstall Horovod" in error
    assert "Traceback" not in error


@pytest.mark.parametrize("error", [_mismatch_line(), "\n".join(_mismatch_stderr().splitlines()[4:])])
def test_02_version_mismatch_names_both_versions_and_reinstalling_horovod_last(tmp_path, error):
    result = judged(tmp_path, _probe_spec(error), "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_TF_MISMATCH"), result
    assert result["measured"] == "horovod built for tensorflow 2.3.0, runtime tensorflow 2.4.1"
    assert "reinstall horovod" in result["remedy"] and "after the final TF install" in result["remedy"]
    assert "--no-cache-dir" in result["remedy"] and "scripts/setup" not in result["remedy"]


@pytest.mark.parametrize("error", [
    _mismatch_stderr().strip().splitlines()[-1],  # an older probe kept only the last line: no versions
    "ImportError: /usr/local/lib/python3.6/dist-packages/horovod/tensorflow/mpi_lib.cpython-36m-x86_64-linux-gnu.so:"
    " undefined symbol: _ZN10tensorflow8OpKernel11TraceStringEPNS_15OpKernelContextEb",  # before Horovod 0.21
])
def test_02_the_same_mismatch_without_versions(tmp_path, error):
    result = judged(tmp_path, _probe_spec(error), "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_TF_MISMATCH"), result
    assert result["measured"].startswith("horovod built for another tensorflow than the one it imports")
    assert "reinstall horovod" in result["remedy"] and "after the final TF install" in result["remedy"]


def test_02_another_import_error_is_still_horovod_import(tmp_path):
    result = judged(tmp_path, _probe_spec("ModuleNotFoundError: No module named 'horovod'"), "horovod.env")
    assert (result["status"], result["diagnosis"]) == ("FAIL", "HOROVOD_IMPORT") and "scripts/setup" in result["remedy"]
