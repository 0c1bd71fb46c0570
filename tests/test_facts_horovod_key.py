"""The Horovod wheel key (facts/horovod_key.py) and the one cached wheel a build context carries
(images.horovod.host_wheel): a key changes with everything Horovod's build reads and with nothing else; a wheel is
taken only under its own key and only when its recorded facts agree with the stack's manifest."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from envs.manifest import load_stack
from facts import horovod_key
from images import horovod
from images.docker_build import _Progress
from images.render import build_context
from tests.lib.paths import REPO

SCRIPT = REPO / "facts" / "horovod_key.py"
CPU = load_stack("cpu")


def _script(*args: str, env: dict | None = None, expect: int = 0) -> subprocess.CompletedProcess:
    """The script as the image runs it: alone, by this venv's interpreter (which has the cpu stack's TensorFlow)."""
    p = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600,
                       env={**os.environ, **(env or {})}, cwd="/")
    assert p.returncode == expect, p.stdout + p.stderr
    return p


@pytest.fixture(scope="module")
def real_facts() -> dict:
    """The facts of this venv's build with the cpu stack's flags (a real TensorFlow, compiler and MPI)."""
    return json.loads(_script("--horovod", "0.28.1", "--facts", env=dict(CPU.build.horovod_env)).stdout)


def test_facts_are_what_the_build_reads(real_facts):
    assert real_facts["key"] == horovod_key.key_of({k: v for k, v in real_facts.items()
                                                    if k not in ("key", "build_tools")})
    assert real_facts["horovod"] == "0.28.1" and real_facts["key_format"] == horovod_key.KEY_FORMAT
    assert real_facts["python_abi"].startswith("cpython-%d%d-" % sys.version_info[:2])
    tf = real_facts["tensorflow"]
    assert tf["version"] == CPU.version("tensorflow")
    assert any(f.startswith("-D_GLIBCXX_USE_CXX11_ABI=") for f in tf["compile_flags"])  # the C++11 ABI
    # where TensorFlow is installed is not what it is: the venv's path and /opt/venv's give one key
    assert not [f for f in tf["compile_flags"] + tf["link_flags"] if f.startswith(("-I", "-L"))]
    assert real_facts["build_variables"] == dict(CPU.build.horovod_env)
    assert real_facts["cxx"] != "none" and real_facts["mpi"] != "none"
    assert set(real_facts["build_tools"]) == {"cmake", "setuptools", "wheel"}  # recorded, not keyed


def test_key_is_printed_alone_and_equals_the_facts_key(real_facts):
    assert _script("--horovod", "0.28.1", env=dict(CPU.build.horovod_env)).stdout == real_facts["key"] + "\n"


@pytest.mark.parametrize("change", [
    lambda f: f["tensorflow"].update(version="2.14.1"),
    lambda f: f["tensorflow"].update(compile_flags=["-D_GLIBCXX_USE_CXX11_ABI=0", "--std=c++17"]),
    lambda f: f.update(python_abi="cpython-310-x86_64-linux-gnu"),
    lambda f: f.update(mpi="mpicxx: Open MPI 4.1.5 (Language: C++)"),
    lambda f: f.update(cxx="c++ (Debian 12.2.0-14+deb12u2) 12.2.0"),
    lambda f: f["build_variables"].update(HOROVOD_WITH_MPI="0"),
    lambda f: f.update(horovod="0.28.0"),
], ids=["tf-version", "cxx11-abi", "python-abi", "mpi", "compiler", "build-flag", "horovod"])
def test_every_input_changes_the_key(real_facts, change):
    fact = json.loads(json.dumps({k: v for k, v in real_facts.items() if k not in ("key", "build_tools")}))
    before = horovod_key.key_of(fact)
    change(fact)
    assert horovod_key.key_of(fact) != before


def test_build_variables_are_what_the_build_reads():
    env = {"HOROVOD_WITH_MPI": "1", "CMAKE_POLICY_VERSION_MINIMUM": "3.5", "CXX": "g++-12", "PATH": "/bin",
           "HOME": "/root", "PIP_CERT": "/ca.crt"}
    assert horovod_key.build_variables(env) == {"CMAKE_POLICY_VERSION_MINIMUM": "3.5", "CXX": "g++-12",
                                                "HOROVOD_WITH_MPI": "1"}


def test_wheel_in_finds_a_wheel_under_its_own_key_only(tmp_path, real_facts):
    """The lookup the devel stage runs: its own key's folder, never another's."""
    key, name = real_facts["key"], "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    assert horovod_key.wheel_in(str(tmp_path), key, "0.28.1") is None
    (tmp_path / ("0" * 24)).mkdir()
    (tmp_path / ("0" * 24) / name).write_bytes(b"other key")
    assert horovod_key.wheel_in(str(tmp_path), key, "0.28.1") is None
    (tmp_path / key).mkdir()
    (tmp_path / key / name).write_bytes(b"this key")
    assert horovod_key.wheel_in(str(tmp_path), key, "0.28.0") is None
    p = _script("--horovod", "0.28.1", "--wheel-in", str(tmp_path), env=dict(CPU.build.horovod_env))
    assert p.stdout == "%s\n" % (tmp_path / key / name) and key in p.stderr


def test_a_gpu_build_is_never_keyed(tmp_path):
    p = _script("--horovod", "0.28.1", "--wheel-in", str(tmp_path),
                env={**CPU.build.horovod_env, "HOROVOD_GPU_OPERATIONS": "NCCL"})
    assert p.stdout == "" and "not keyed" in p.stderr


def test_cache_dir_follows_the_environment(tmp_path):
    assert _script("--cache-dir", env={horovod_key.CACHE_ENV: str(tmp_path)}).stdout == "%s\n" % tmp_path
    assert horovod_key.cache_root({"HOME": "/h"}) == "/h/.cache/chexstack/wheels/horovod"
    assert horovod_key.cache_root({"XDG_CACHE_HOME": "/x"}) == "/x/chexstack/wheels/horovod"


def test_bad_arguments_exit_2():
    _script(expect=2)


# -- the host side: which one wheel the build context carries ------------------------------------------------------

def _cpu_fact(**change) -> dict:
    """Facts as a Debian 12 cpu-stack build records them (the manifest's rows), with ``change`` applied."""
    fact = {"key_format": horovod_key.KEY_FORMAT, "horovod": "0.28.1", "python_abi": "cpython-311-x86_64-linux-gnu",
            "machine": "x86_64", "libc": "glibc-2.36",
            "tensorflow": {"version": "2.15.1", "compile_flags": ["-D_GLIBCXX_USE_CXX11_ABI=1"], "link_flags": []},
            "mpi": "mpicxx: Open MPI 4.1.4 (Language: C++)", "cxx": "c++ (Debian 12.2.0-14+deb12u1) 12.2.0",
            "build_variables": dict(CPU.build.horovod_env)}
    fact.update(change)
    return fact


def _cache(root, fact: dict, key: str | None = None, mtime: float = 1000.0):
    """A cache entry: ``root/<key>/key.json`` (recording ``key_of(fact)``) and its wheel; ``key`` names the folder
    when it is not the recorded key."""
    recorded = horovod_key.key_of(fact)
    key = key or recorded
    (root / key).mkdir(parents=True)
    (root / key / "key.json").write_text(json.dumps(dict(fact, key=recorded)))
    wheel = root / key / "horovod-0.28.1-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(key.encode())
    os.utime(wheel, (mtime, mtime))
    return wheel


@pytest.mark.parametrize("change", [
    {"tensorflow": {"version": "2.14.1"}}, {"horovod": "0.28.0"}, {"python_abi": "cpython-310-x86_64-linux-gnu"},
    {"mpi": "mpicxx: Open MPI 4.1.5 (Language: C++)"}, {"cxx": "c++ (GCC) 12.20.1"},
    {"build_variables": {"HOROVOD_WITH_TENSORFLOW": "1"}}, {"key_format": 0},
], ids=["tf", "horovod", "python", "mpi", "gcc", "flags", "key-format"])
def test_host_wheel_is_none_when_the_facts_disagree_with_the_manifest(tmp_path, change):
    _cache(tmp_path, _cpu_fact(**change))
    assert horovod.host_wheel(CPU, tmp_path) is None


def test_host_wheel_takes_the_newest_fitting_wheel_under_its_recorded_key(tmp_path):
    assert horovod.host_wheel(CPU, tmp_path / "absent") is None
    old = _cache(tmp_path, _cpu_fact(), mtime=1000.0)
    new = _cache(tmp_path, _cpu_fact(cxx="c++ (Debian 12.2.0-14+deb12u2) 12.2.0"), mtime=2000.0)
    _cache(tmp_path, _cpu_fact(machine="other"), key="f" * 24, mtime=3000.0)  # its key.json names another key
    assert horovod.host_wheel(CPU, tmp_path) == new
    new.unlink()
    assert horovod.host_wheel(CPU, tmp_path) == old


def test_build_context_carries_that_one_wheel_and_the_key_script(tmp_path, monkeypatch):
    monkeypatch.setenv(horovod_key.CACHE_ENV, str(tmp_path))
    ctx = {k: v for k, v in build_context(CPU).items() if k.startswith(horovod.CONTEXT_WHEELS)}
    assert ctx == {"%s/horovod_key.py" % horovod.CONTEXT_WHEELS: SCRIPT}  # no cache: the recipe alone
    _cache(tmp_path, _cpu_fact(tensorflow={"version": "2.14.1"}), mtime=3000.0)
    wheel = _cache(tmp_path, _cpu_fact())
    ctx = {k: v for k, v in build_context(CPU).items() if k.startswith(horovod.CONTEXT_WHEELS)}
    assert ctx == {"%s/horovod_key.py" % horovod.CONTEXT_WHEELS: SCRIPT,
                   "%s/%s/%s" % (horovod.CONTEXT_WHEELS, wheel.parent.name, wheel.name): wheel}


def test_the_build_output_says_whether_horovod_compiled():
    """The step's "done" line repeats the lookup's verdict (``facts/horovod_key.py --wheel-in`` on stderr)."""
    progress = _Progress(quiet=True)
    progress.feed({"stream": "Step 8/29 : RUN wheel=$(...)\n"})
    progress.feed({"stream": "horovod key 3f37dc7fc055fe7f2ebd0d5f: wheel /w/3f37/horovod.whl\n"})
    progress.feed({"stream": "Processing /w/3f37/horovod.whl\nSuccessfully installed horovod-0.28.1\n"})
    assert progress.verdict() == "horovod key 3f37dc7fc055fe7f2ebd0d5f: wheel /w/3f37/horovod.whl"
    progress.feed({"stream": "Step 9/29 : COPY build-only/gate /g\n"})
    assert progress.verdict() == ""
