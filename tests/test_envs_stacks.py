"""Table 1, the consistency findings and `invoke stacks` (golden text, JSON, exit codes)."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from chexstack.errors import ChexstackError
from envs import lock
from envs.check import all_findings, stack_findings, virtual_package_findings
from envs.manifest import STACKS_DIR, parse_stack
from envs.table1 import TABLE1_FILE, load_table1
from tests.lib import cli as cmd
from tests.lib.golden import assert_golden

ROOT = Path(__file__).resolve().parents[1]

# The seed's Table 1 as published (brief.md): the test is the spec of envs/table1.yaml.
SEED_TABLE1 = [
    ("TensorFlow", "1.13.1", "1.12.0"), ("Horovod", "0.15.1", "0.16.1"), ("MPI", "OpenMPI 3.1.3", "OpenMPI 4.0.0"),
    ("CUDA", "10.2", "10.1"), ("CUDA driver", "430.26", "418.40.04"), ("NCCL", "2.4.7", "2.4.7"),
    ("cuDNN", "7.6.0", "7.6.0"), ("Python", "3.5.2", "3.6.8"), ("OS", "Ubuntu 16.04.6", "RHEL 7.4"),
    ("GCC", "5.4.0", "7.2.0"),
]


def test_table1_is_the_seed_table():
    t = load_table1()
    assert [c.title for c in t.columns] == ["NGC container 19.06-py3", "conda environment"]
    assert [(r.label, r.cell("ngc"), r.cell("conda")) for r in t.rows] == SEED_TABLE1


def test_table1_rows_out_of_order_is_an_error(tmp_path):
    data = yaml.safe_load(TABLE1_FILE.read_text())
    data["rows"][0], data["rows"][1] = data["rows"][1], data["rows"][0]
    bad = tmp_path / "table1.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ChexstackError, match=r"table1.yaml: field \(top level\): Value error, expected the rows "
                                             r"tensorflow, horovod, .* in this order, got horovod, tensorflow"):
        load_table1(bad)


def _messages(stack: str) -> list[tuple[str, str, str]]:
    return [(f.severity, f.field, f.message) for f in all_findings([stack])]


def test_check_finds_the_three_seed_inconsistencies():
    ngc, conda = _messages("ngc"), _messages("conda")
    assert ("error", "cuda_driver", "Table 1's CUDA 10.2 with its driver 430.26: driver 430.26 too old for CUDA 10.2 "
            "(needs >= 440.33); upgrade the driver to >= 440.33, or pick an image with CUDA <= 10.1") in ngc
    assert ("warning", "horovod", "Table 1 reports Horovod 0.15.1; the artifact ships 0.16.2") in ngc
    assert any(sev == "warning" and field == "tensorflow" and "TensorFlow 1.12.0" in msg and "CUDA 9.0" in msg
               and "CUDA 10.1" in msg for sev, field, msg in conda)


def test_check_finds_the_other_facts():
    ngc = _messages("ngc")
    assert ("warning", "cuda", "Table 1 reports CUDA 10.2; the artifact ships 10.1.168") in ngc
    assert ("info", "python", "Table 1's Python 3.5.2 is more precise than its source's 3.5") in ngc
    assert any(f == "horovod" and "predates horovodrun" in m for _, f, m in ngc)
    assert all(f.source for f in all_findings())


def test_seed_facts_never_block():
    assert not [f for f in all_findings() if f.blocking]


def _stack_from(name: str, edit) -> object:
    data = yaml.safe_load((STACKS_DIR / ("%s.yaml" % name)).read_text())
    edit(data)
    return parse_stack(yaml.safe_dump(data), Path("%s.yaml" % name))


def test_horovod_flag_of_the_wrong_era_blocks():
    stack = _stack_from("conda", lambda d: d["build"]["horovod_env"].update(HOROVOD_GPU_OPERATIONS="NCCL"))
    f = [f for f in stack_findings(stack) if f.field == "build.horovod_env.HOROVOD_GPU_OPERATIONS"]
    assert len(f) == 1 and f[0].blocking and f[0].severity == "error"
    assert f[0].message == ("Horovod 0.16.1's build does not read HOROVOD_GPU_OPERATIONS (read from 0.20.0 on): the "
                            "build ignores it")
    assert "pypi.org/project/horovod" in f[0].source


def test_horovod_build_variable_typo_blocks_and_names_the_field():
    """Review finding 9: a typo in build.horovod_env passed `stacks --check` with exit 0."""
    stack = _stack_from("cpu", lambda d: d["build"]["horovod_env"].update(HOROVOD_WITH_GLUE="1"))
    [f] = [f for f in stack_findings(stack) if f.field == "build.horovod_env.HOROVOD_WITH_GLUE"]
    assert f.blocking and f.severity == "error" and f.subject == "manifest"
    assert f.message.endswith("the build ignores it; did you mean HOROVOD_WITH_GLOO?")
    # The build tools' own variables are not Horovod's to judge.
    assert not [f for f in stack_findings(stack) if "CMAKE_POLICY_VERSION_MINIMUM" in f.field]


def test_invoke_stacks_check_fails_on_a_horovod_build_variable_typo(tmp_path):
    """The whole command, as the reviewer ran it: HOROVOD_WITH_GLUE in a copy of this checkout's cpu.yaml makes
    `invoke stacks --check` exit 1, naming the field."""
    files = subprocess.run(["git", "ls-files", "tasks.py", "chexstack", "envs", "images"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    cpu = tmp_path / "envs" / "stacks" / "cpu.yaml"
    cpu.write_text(cpu.read_text().replace('HOROVOD_WITH_GLOO: "1"', 'HOROVOD_WITH_GLUE: "1"'))
    p = cmd.invoke("stacks", "--check", cwd=tmp_path, env=PLAIN)  # a process: the copy's own modules
    assert p.returncode == 1, p.stdout + p.stderr
    assert "build.horovod_env.HOROVOD_WITH_GLUE" in p.stdout and "did you mean HOROVOD_WITH_GLOO?" in p.stdout


def test_min_driver_below_cuda_floor_blocks():
    stack = _stack_from("hopper", lambda d: d.update(min_driver="520.61.05"))
    f = [f for f in stack_findings(stack) if f.field == "min_driver"]
    assert f and f[0].blocking and "below CUDA 12.8's floor 525.60.13" in f[0].message


def test_reported_must_equal_table1_cell():
    stack = _stack_from("ngc", lambda d: d["components"]["cuda"].update(reported="10.1"))
    f = [f for f in stack_findings(stack) if f.field == "components.cuda.reported"]
    assert f and f[0].blocking and f[0].message == "expected Table 1's cell '10.2', the manifest has '10.1'"


#: ``invoke stacks``' tables as a log shows them (120 columns: ``tests.lib.cli.DEFAULTS``).
PLAIN = {"NO_COLOR": "1", "TERM": "dumb"}


def test_invoke_stacks_golden():
    p = cmd.run("stacks", env=PLAIN)
    assert p.returncode == 0, p.stderr
    assert_golden("envs/stacks.txt", p.stdout)


def test_invoke_stacks_check_golden():
    p = cmd.run("stacks", "--check", env=PLAIN)
    assert p.returncode == 0, p.stderr
    assert_golden("envs/stacks-check.txt", p.stdout)


def test_invoke_stacks_json():
    p = cmd.run("stacks", "--check", "--json", env=PLAIN)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    rows = doc["table1"]["rows"]
    assert [(r["label"], r["ngc"], r["conda"]) for r in rows] == SEED_TABLE1
    assert doc["shipped"]["ngc"]["cuda"] == "10.1.168" and doc["shipped"]["ngc"]["tensorflow"] is None
    assert doc["blocking"] == 0 and {f["severity"] for f in doc["findings"]} == {"error", "warning", "info"}
    assert_golden("envs/stacks.json", p.stdout)


def test_virtual_packages_must_target_the_stack(tmp_path):
    shutil.copytree(lock.CONDA_DIR / "conda", tmp_path / "conda")
    vp = tmp_path / "conda" / "virtual-packages.yml"
    vp.write_text(vp.read_text().replace('__cuda: "10.1"', '__cuda: "10.2"').replace("2.17", "2.28"))
    from envs.manifest import load_stack
    got = sorted((f.field.rsplit(".", 1)[-1], f.message) for f in virtual_package_findings(load_stack("conda"),
                                                                                             tmp_path))
    assert got == [
        ("__cuda", "__cuda 10.2 exceeds driver 418.40.04's CUDA 10.1: the lock would be valid but the image would "
                   "not start"),
        ("__cuda", "expected __cuda 10.1 (the stack's CUDA), got 10.2"),
        ("__glibc", "expected __glibc 2.17 (CentOS 7), got 2.28"),
    ]
    assert virtual_package_findings(load_stack("conda")) == []
