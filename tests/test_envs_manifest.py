"""Stack manifests: every manifest loads with every Table 1 row; malformed ones name file, field and expectation."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from chexstack.errors import ChexstackError
from envs.manifest import COMPONENTS, STACKS_DIR, known_stacks, load_stack
from envs.show import manifest_json
from tests.lib.golden import assert_golden


def test_known_stacks():
    assert known_stacks() == ["conda", "cpu", "hopper", "ngc"]


@pytest.mark.parametrize("name", ["conda", "cpu", "hopper", "ngc"])
def test_manifest_loads_and_renders(name):
    stack = load_stack(name)
    assert tuple(stack.components) == COMPONENTS
    assert all(c.source for c in stack.components.values())
    if stack.gpu:
        assert stack.min_driver and stack.components["cuda"].version
    assert_golden("envs/manifest-%s.json" % name, manifest_json(stack))


def test_ngc_release_note_values():
    s = load_stack("ngc")
    assert s.base.image == "nvcr.io/nvidia/tensorflow:19.06-py3"
    got = {k: s.version(k) for k in ("cuda", "horovod", "mpi", "nccl", "cudnn", "python", "os", "tensorflow", "gcc")}
    assert got == {"cuda": "10.1.168", "horovod": "0.16.2", "mpi": "3.1.3", "nccl": "2.4.7", "cudnn": "7.6.0",
                   "python": "3.5", "os": "16.04", "tensorflow": "1.13.1", "gcc": "5.4.0"}
    assert s.components["cuda"].reported == "10.2" and s.components["cuda_driver"].reported == "430.26"
    assert "rel_19.06" in s.components["tensorflow"].source
    assert s.min_driver.startswith("418.")


def test_conda_horovod_flags_of_its_era():
    env = load_stack("conda").build.horovod_env
    assert env["HOROVOD_GPU_ALLREDUCE"] == "NCCL" and "HOROVOD_GPU_OPERATIONS" not in env
    assert env["HOROVOD_WITH_TENSORFLOW"] == "1" and env["HOROVOD_WITHOUT_PYTORCH"] == "1"


def _write(tmp_path: Path, name: str, data) -> Path:
    path = tmp_path / ("%s.yaml" % name)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def _cpu_data() -> dict:
    return yaml.safe_load((STACKS_DIR / "cpu.yaml").read_text())


def _error(tmp_path, name, data) -> str:
    path = _write(tmp_path, name, data)
    with pytest.raises(ChexstackError) as e:
        load_stack(name, stacks_dir=tmp_path)
    return str(e.value).replace(str(path), "<file>")


def test_unknown_stack_lists_known_ones():
    with pytest.raises(ChexstackError, match=r"unknown stack 'rocm'; known stacks: conda, cpu, hopper, ngc"):
        load_stack("rocm")


def test_missing_row_names_field(tmp_path):
    data = _cpu_data()
    del data["components"]["nccl"]
    data["name"] = "bad1"
    msg = _error(tmp_path, "bad1", data)
    assert msg == ("<file>: field components: Value error, expected exactly the Table 1 rows tensorflow, horovod, "
                   "mpi, cuda, cuda_driver, nccl, cudnn, python, os, gcc; missing: nccl")


def test_bad_version_names_field(tmp_path):
    data = _cpu_data()
    data["components"]["python"]["version"] = "3.11-slim"
    data["name"] = "bad2"
    assert _error(tmp_path, "bad2", data) == ("<file>: field components.python.version: Value error, expected a "
                                              "dotted version like 10.1.168, got '3.11-slim'")


def test_bad_digest_and_unknown_field(tmp_path):
    data = _cpu_data()
    data["base"]["digest"] = "sha256:abc"
    data["gpus"] = 8
    data["name"] = "bad3"
    msg = _error(tmp_path, "bad3", data)
    assert "<file>: field base.digest: String should match pattern '^sha256:[0-9a-f]{64}$'" in msg
    assert "<file>: field gpus: Extra inputs are not permitted" in msg


def test_unpinned_python_package(tmp_path):
    data = _cpu_data()
    data["build"]["python_packages"].append("numpy>=1.26")
    data["name"] = "bad4"
    assert "field build.python_packages: Value error, expected an exact pin NAME==VERSION, got 'numpy>=1.26'" \
        in _error(tmp_path, "bad4", data)


def test_yaml_syntax_error_names_line(tmp_path):
    msg = _error(tmp_path, "bad5", "name: bad5\ncomponents: [\n  tensorflow: {\n")
    assert msg.startswith("<file>:") and "not valid YAML" in msg


def test_name_must_match_file(tmp_path):
    data = _cpu_data()
    assert _error(tmp_path, "other", data) == "<file>: field name: expected 'other' (the file's name), got 'cpu'"


def test_manifest_json_is_canonical():
    doc = json.loads(manifest_json(load_stack("conda")))
    assert doc["components"]["horovod"]["version"] == "0.16.1"


def test_a_component_pin_written_twice_is_refused(tmp_path):
    data = _cpu_data()
    data["build"]["python_packages"].append("tensorflow-cpu==2.15.1")
    data["name"] = "bad6"
    assert ("build.python_packages pins tensorflow-cpu==2.15.1, the package of components.tensorflow: its version "
            "is components.tensorflow.version (remove the pin)") in _error(tmp_path, "bad6", data)


def test_the_cpu_stacks_pins_are_written_once_and_checked_where_they_are_copied():
    """The host tooling runs the cpu stack: scripts/setup reads its pins (python -m envs.pins); the files that
    cannot read YAML (pyproject's extra, pip constraints, the conda environment's pip section) must agree."""
    import re
    import subprocess
    import sys

    from tests.lib.paths import REPO
    stack = load_stack("cpu")
    pins = {stack.pin("tensorflow"), stack.pin("horovod")}
    assert pins == {"tensorflow-cpu==2.15.1", "horovod==0.28.1"}
    pyproject = (REPO / "pyproject.toml").read_text()
    assert set(re.search(r"^train = \[(.*)\]$", pyproject, re.M).group(1).replace('"', "").split(", ")) == pins
    constraints = set((REPO / "requirements" / "constraints.txt").read_text().split())
    assert stack.pin("tensorflow") in constraints
    env_yml = (REPO / "envs" / "conda" / "cpu" / "environment.yml").read_text()
    assert all(re.search(r"^\s+- %s$" % re.escape(p), env_yml, re.M) for p in pins)
    setup = (REPO / "scripts" / "setup").read_text()
    assert "==2.15.1" not in setup and "==0.28.1" not in setup and "envs.pins cpu tensorflow" in setup
    out = subprocess.run([sys.executable, "-m", "envs.pins", "cpu", "tensorflow", "horovod"], cwd=REPO,
                         capture_output=True, text=True)
    assert out.stdout.split() == [stack.pin("tensorflow"), stack.pin("horovod")]
    env = subprocess.run([sys.executable, "-m", "envs.pins", "cpu", "--horovod-env"], cwd=REPO,
                         capture_output=True, text=True).stdout.split()
    assert "HOROVOD_WITH_MPI=1" in env and len(env) == len(stack.build.horovod_env)
    bad = subprocess.run([sys.executable, "-m", "envs.pins", "cpu", "cuda"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and "components.cuda names no package to pin" in bad.stderr
