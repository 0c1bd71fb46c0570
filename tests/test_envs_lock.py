"""Conda locks with conda-lock's own API: the lock specification from our files (virtual packages, platforms, pip
section), the content hash and drift detection, GPU lock content (case 14), explicit refusal and the post-install
check (case 15), and the CLI's clear errors where no solver or channel is reachable."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conda_lock.lockfile import write_conda_lock_file
from conda_lock.lockfile.v1.models import HashModel, InputMeta, LockMeta
from conda_lock.lockfile.v2prelim.models import LockedDependency, Lockfile

from chexstack.errors import ChexstackError
from envs import lock as L
from envs.installed import Installed, Pin, check_installed, lock_pins, parse_installed_json, spec_pins
from envs.lockcontent import expected_cudatoolkit, gpu_lock_problems
from envs.lockflow import check_installed_file
from tests.lib import cli as cmd
from tests.lib.golden import assert_golden

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "envs"
CASES = ROOT.parent / "shared" / "cases"


def case_files(name: str, tmp_path: Path) -> L.CondaFiles:
    """CondaFiles for an environment file of ../shared/cases (read in place, never copied into the repo)."""
    return L.CondaFiles("case", CASES / name, tmp_path / "virtual-packages.yml", tmp_path / "conda-lock.yml")


@pytest.mark.parametrize("stack", ["conda", "cpu"])
def test_lock_spec_golden(stack):
    assert_golden("envs/lock-spec-%s.txt" % stack, L.spec_summary(L.conda_files(stack)))


def test_conda_spec_targets_the_cluster():
    files = L.conda_files("conda")
    spec = L.lock_spec(files)
    assert spec.platforms == ["linux-64"]
    assert [c.url for c in spec.channels] == ["defaults", "conda-forge"]
    deps = {(d.manager, d.name): d for d in spec.dependencies["linux-64"]}
    assert deps[("pip", "horovod")].version == "==0.16.1"
    assert deps[("conda", "python")].version == "3.6.8.*"
    assert deps[("conda", "tensorflow-base")].build == "gpu_*"
    assert {"cudnn", "nccl", "gcc_linux-64", "gxx_linux-64", "scikit-learn", "pillow"} <= {n for _, n in deps}
    vp = L.read_virtual_packages(files.virtual_packages)["linux-64"]
    assert (vp["__cuda"], vp["__glibc"]) == ("10.1", "2.17")  # driver 418.40.04's CUDA; RHEL 7.4's glibc
    assert "__cuda" not in L.read_virtual_packages(L.conda_files("cpu").virtual_packages)["linux-64"]


def test_platform_without_virtual_packages_is_refused():
    with pytest.raises(ChexstackError, match=r"virtual-packages.yml: field subdirs: expected virtual packages for "
                                             r"platform\(s\) osx-64"):
        L.content_hashes(L.conda_files("conda"), ["osx-64"])


def test_virtual_package_spec_is_what_changes_the_hash(tmp_path):
    d = tmp_path / "conda"
    shutil.copytree(L.CONDA_DIR / "conda", d)
    files = L.conda_files("conda", tmp_path)
    before = L.content_hashes(files)
    vp = files.virtual_packages.read_text()
    files.virtual_packages.write_text(vp.replace('__cuda: "10.1"', '__cuda: "10.0"'))
    assert L.content_hashes(files) != before
    files.virtual_packages.write_text(vp)
    files.environment.write_text(files.environment.read_text() + "# a comment changes nothing\n")
    assert L.content_hashes(files) == before


def write_lock_for(files: L.CondaFiles, packages: list[LockedDependency] | None = None) -> None:
    """A lock whose metadata conda-lock's API computes from our real input files, as `invoke lock` records it;
    ``packages`` (default: python 3.6.8 alone) are its locked packages."""
    spec = L.lock_spec(files)
    meta = LockMeta(content_hash=L.content_hashes(files), channels=spec.channels, platforms=spec.platforms,
                    sources=[files.environment.name],
                    inputs_metadata={files.environment.name: InputMeta(
                        md5=InputMeta.get_input_md5(src_file=files.environment),
                        sha256=L.file_sha256(files.environment))},
                    custom_metadata={L.VP_SHA_KEY: L.file_sha256(files.virtual_packages)})
    pkg = LockedDependency(name="python", version="3.6.8", manager="conda", platform="linux-64", dependencies={},
                           url="https://repo.anaconda.com/pkgs/main/linux-64/python-3.6.8-h0371630_0.tar.bz2",
                           hash=HashModel(md5="0" * 32), build="h0371630_0", categories={"main"})
    write_conda_lock_file(Lockfile(package=packages or [pkg], metadata=meta), files.lockfile, metadata_choices=set())


@pytest.fixture
def locked(tmp_path) -> L.CondaFiles:
    shutil.copytree(L.CONDA_DIR / "conda", tmp_path / "conda")
    files = L.conda_files("conda", tmp_path)
    write_lock_for(files)
    return files


def test_fresh_lock_passes_check(locked):
    r = L.check_lock(locked)
    assert r.ok and r.messages == []


def test_drift_names_the_environment_file(locked):
    locked.environment.write_text(locked.environment.read_text().replace("pillow=6.0.0", "pillow=6.1.0"))
    r = L.check_lock(locked)
    assert r.status == "drift" and r.changed == [str(locked.environment)]
    assert r.messages[0].startswith("platform linux-64: the lock's content hash")
    assert "re-lock with `invoke lock --stack conda`" in r.messages[-1]


def test_drift_names_the_virtual_packages_file(locked):
    locked.virtual_packages.write_text(locked.virtual_packages.read_text().replace("2.17", "2.28"))
    r = L.check_lock(locked)
    assert r.status == "drift" and r.changed == [str(locked.virtual_packages)]


def test_comment_only_edit_is_not_drift(locked):
    locked.environment.write_text(locked.environment.read_text() + "# reviewed\n")
    assert L.check_lock(locked).ok


def test_missing_lock_is_a_clear_not_ok():
    r = L.check_lock(L.conda_files("conda"))
    assert r.status == "missing"
    assert r.messages == ["no lock yet for stack conda (envs/conda/conda/conda-lock.yml): run `invoke lock --stack "
                          "conda` where the conda channels are reachable (docs/stacks.md, 'Conda locks')"]


def test_not_a_lock_file(locked):
    locked.lockfile.write_text("version: 2\nmetadata: {}\n")
    with pytest.raises(ChexstackError, match="not a conda-lock unified lock file"):
        L.check_lock(locked)


def _gpu_lock() -> Lockfile:
    return L.read_lock(DATA / "lock-case14-gpu.yml")


def test_case14_gpu_lock_is_fit(tmp_path):
    spec = L.lock_spec(case_files("14-conda-lock-cuda-virtual-packages.yml", tmp_path), ["linux-64"])
    assert expected_cudatoolkit(spec, "linux-64") == "11.8"
    assert gpu_lock_problems(_gpu_lock(), "linux-64", cuda_max="11.8", cudatoolkit="11.8") == []


def test_case14_cpu_build_lock_fails():
    problems = gpu_lock_problems(L.read_lock(DATA / "lock-case14-cpu-build.yml"), "linux-64", "11.8", "11.8")
    assert problems == [
        "linux-64: no CUDA runtime package (cudatoolkit or cuda-version)",
        "linux-64: no cudnn",
        "linux-64: no nccl",
        "linux-64: tensorflow resolved to a CPU build (tensorflow cpu_py310hd1aba9c_1, "
        "tensorflow-base cpu_py310h3da9b3d_1)",
    ]


def test_cudatoolkit_newer_than_the_drivers_cuda():
    problems = gpu_lock_problems(_gpu_lock(), "linux-64", cuda_max="11.2", cudatoolkit="11.8")
    assert problems == ["linux-64: cudatoolkit 11.8.0 is newer than the target driver's CUDA 11.2 (__cuda): the "
                        "lock is valid but the environment will not start there"]
    assert gpu_lock_problems(_gpu_lock(), "linux-64", None, "12.0") == ["linux-64: cudatoolkit 11.8.0, expected 12.0.*"]


def test_conda_stack_has_no_exact_cudatoolkit_pin():
    files = L.conda_files("conda")
    assert expected_cudatoolkit(L.lock_spec(files), "linux-64") is None  # bounded by __cuda 10.1 instead


def test_explicit_refused_with_pip_section(tmp_path):
    with pytest.raises(ChexstackError, match=r"has pip requirements \(horovod==0.28.1, scikit-learn==1.3.2\): an "
                                             r"explicit lock file only lists them as `# pip ...` comments"):
        L.refuse_explicit(case_files("15-conda-lock-pip-explicit.yml", tmp_path))
    with pytest.raises(ChexstackError, match=r"has pip requirements \(horovod==0.16.1\)"):
        L.refuse_explicit(L.conda_files("conda"))


def test_explicit_render_without_pip_section(tmp_path):
    d = tmp_path / "nopip"
    d.mkdir()
    (d / "environment.yml").write_text("name: nopip\nchannels: [conda-forge]\nplatforms: [linux-64]\n"
                                       "dependencies:\n  - python=3.6.8\n")
    shutil.copy(L.CONDA_DIR / "conda" / "virtual-packages.yml", d)
    files = L.conda_files("nopip", tmp_path)
    write_lock_for(files)
    from envs.lockflow import render_explicit
    assert render_explicit(files, ["linux-64"]) == 0
    text = (d / "conda-linux-64.lock").read_text()
    assert "@EXPLICIT" in text and "python-3.6.8-h0371630_0.tar.bz2#" in text


def test_case15_post_install_check_lists_missing_pip_packages(tmp_path):
    spec = L.lock_spec(case_files("15-conda-lock-pip-explicit.yml", tmp_path), ["linux-64"])
    installed, kind = parse_installed_json((DATA / "conda-list-case15.json").read_text())
    assert kind == "conda" and installed["tensorflow"] == Installed("2.12.1", "cpu_py310hd1aba9c_1")
    report = check_installed(spec_pins(spec, "linux-64"), installed)
    assert report.lines()[0] == "FAIL missing: horovod, scikit-learn" and len(report.lines()) == 4
    assert report.lines()[1].startswith("PASS %d of %d pinned packages at the pinned version: " % (
        len(report.checked) - 2, len(report.checked)))
    # numpy, pinned by nothing, is judged by the compatibility rules: every installed package is accounted for
    assert report.lines()[2] == ("PASS compatibility rules held for: numpy 1.23.5 with tensorflow 2.12.1 "
                                 "(numpy120-tf-symbolic-tensor, numpy2-tf-built-on-numpy1)") and not report.not_covered
    assert report.lines()[3] == ("NOT PINNED 1 of 4 installed packages (no pin names them; only the compatibility "
                                 "rules above judged them, where one applies): numpy 1.23.5")


def test_post_install_check_against_lock_and_pip_list():
    pins = lock_pins(_gpu_lock(), "linux-64")
    installed = {p.name: Installed(p.spec, p.build) for p in pins}
    assert check_installed(pins, installed).ok
    assert check_installed(pins, installed).lines() == [
        "PASS all 10 pinned packages at their pinned version and build",
        "PASS compatibility rules held for: numpy 1.23.5 with tensorflow 2.12.1 "
        "(numpy120-tf-symbolic-tensor, numpy2-tf-built-on-numpy1)",
        "PASS the whole environment: each of its 10 installed packages pinned or judged by a compatibility rule"]
    pip_installed, kind = parse_installed_json((DATA / "pip-list-horovod.json").read_text())
    assert kind == "pip"
    report = check_installed([p for p in pins if p.manager == "pip"], pip_installed)
    assert report.lines() == ["FAIL wrong version: scikit-learn installed 1.3.1, pinned 1.3.2",
                              "PASS 1 of 2 pinned packages at the pinned version: horovod",
                              "NOT CHECKED 1 of 3 installed packages (neither pinned nor judged by a compatibility "
                              "rule of envs/rules.yaml; a right pin elsewhere does not vouch for them): pip 23.3.2"]


def test_a_pip_list_checks_what_it_shows_and_names_what_it_cannot():
    """Review finding N5: a pip list against the cpu environment said PASS after checking 2 pip pins, while the
    wrong scikit-learn and Pillow in the same listing went unmentioned."""
    spec = L.lock_spec(L.conda_files("cpu"))
    listing = json.dumps([{"name": "tensorflow-cpu", "version": "2.15.1"}, {"name": "horovod", "version": "0.28.1"},
                          {"name": "numpy", "version": "1.26.4"}, {"name": "scikit-learn", "version": "1.9.1"},
                          {"name": "Pillow", "version": "13.0.0"}, {"name": "pip", "version": "24.0"}])
    installed, kind = parse_installed_json(listing)
    report = check_installed(spec_pins(spec, "linux-64"), installed, kind)
    assert kind == "pip" and not report.ok
    assert report.lines() == [
        "FAIL wrong version: pillow installed 13.0.0, pinned 10.4.*",
        "FAIL wrong version: scikit-learn installed 1.9.1, pinned 1.5.2.*",
        "PASS 4 of 10 pinned packages at the pinned version: horovod, numpy, pip, tensorflow-cpu",
        "PASS compatibility rules held for: numpy 1.26.4 with tensorflow-cpu 2.15.1 "
        "(numpy120-tf-symbolic-tensor, numpy2-tf-built-on-numpy1)",
        "NOT CHECKED (conda packages a pip list does not show; use `conda list --json`): cmake, gxx_linux-64, "
        "openmpi, python"]
    right = check_installed(spec_pins(spec, "linux-64"),
                            {**installed, "scikit-learn": Installed("1.5.2"), "pillow": Installed("10.4.0")}, kind)
    assert right.ok and right.lines()[0].startswith("PASS 6 of 10 pinned packages at the pinned version")
    missing_pip = check_installed(spec_pins(spec, "linux-64"), {"numpy": Installed("1.26.4")}, "pip")
    assert missing_pip.lines()[0] == "FAIL missing: horovod, tensorflow-cpu"


def test_installed_listing_must_be_json():
    with pytest.raises(ChexstackError, match=r"x.json: not JSON \(line 1"):
        parse_installed_json("{oops", "x.json")
    with pytest.raises(ChexstackError, match="expected a JSON list of objects with name and version"):
        parse_installed_json('{"name": "python"}', "x.json")


CASE41 = CASES / "41-conda-installed-cpu-tensorflow-build.json"


def test_a_conda_listing_without_build_strings_is_refused():
    listing = json.dumps([{"name": "python", "version": "3.6.8", "channel": "pkgs/main"}])
    with pytest.raises(ChexstackError, match=r"^x.json: package python has no build_string \(expected `conda list "
                                             r"--json` output"):
        parse_installed_json(listing, "x.json")


def _locked_conda(name: str, version: str, build: str) -> LockedDependency:
    return LockedDependency(name=name, version=version, manager="conda", platform="linux-64", dependencies={},
                            url="https://repo.anaconda.com/pkgs/main/linux-64/%s-%s-%s.tar.bz2"
                            % (name, version, build),
                            hash=HashModel(md5="0" * 32), build=build, categories={"main"})


@pytest.fixture
def locked_tf(tmp_path) -> L.CondaFiles:
    """The conda stack with a small unified lock: python, the GPU TensorFlow selector and base, scikit-learn, and
    Horovod from pip (no build string)."""
    shutil.copytree(L.CONDA_DIR / "conda", tmp_path / "conda")
    files = L.conda_files("conda", tmp_path)
    horovod = LockedDependency(name="horovod", version="0.16.1", manager="pip", platform="linux-64", dependencies={},
                               url="https://files.pythonhosted.org/packages/source/h/horovod/horovod-0.16.1.tar.gz",
                               hash=HashModel(sha256="0" * 64), categories={"main"})
    write_lock_for(files, [_locked_conda("python", "3.6.8", "h0371630_0"),
                           _locked_conda("_tflow_select", "2.1.0", "gpu"),
                           _locked_conda("tensorflow-base", "1.12.0", "gpu_py36he68c306_0"),
                           _locked_conda("scikit-learn", "0.20.3", "py36h0000000_0"), horovod])
    return files


def test_case41_a_cpu_tensorflow_build_fails_the_environments_build_pin():
    """Case 41: every version of environment.yml right, but tensorflow-base is the mkl build where the file pins
    `tensorflow-base=1.12.0=gpu_*` (no lock committed: the pins are the environment file's)."""
    p = cmd.run("lock", "--stack", "conda", "--installed", str(CASE41), env=WIDE)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL wrong build: tensorflow-base 1.12.0 installed as mkl_py36h0000000_0, pinned build gpu_*" in p.stdout
    assert "PASS all" not in p.stdout and "Traceback" not in p.stdout + p.stderr


def test_case41_against_a_lock_every_locked_build_is_compared(locked_tf, capsys):
    assert check_installed_file(locked_tf, CASE41, None) == 1
    assert capsys.readouterr().out.splitlines()[1:] == [
        "FAIL wrong version: _tflow_select installed 2.3.0, pinned 2.1.0",
        "FAIL wrong build: _tflow_select 2.3.0 installed as 2.3.0-mkl, pinned build gpu",
        "FAIL wrong build: tensorflow-base 1.12.0 installed as mkl_py36h0000000_0, pinned build gpu_py36he68c306_0",
        "PASS 3 of 5 pinned packages at the pinned version: horovod, python, scikit-learn",
        "NOT CHECKED 9 of 14 installed packages (neither pinned nor judged by a compatibility rule of envs/rules.yaml; "
        "a right pin elsewhere does not vouch for them): cudatoolkit 10.0.130, cudnn 7.6.0, gcc_linux-64 7.2.0, "
        "gxx_linux-64 7.2.0, nccl 2.4.7.1, pillow 6.0.0, pip 19.1.1, tensorflow 1.12.0, tensorflow-gpu 1.12.0"]
    right = [dict(d, build_string="gpu_py36he68c306_0") if d["name"] == "tensorflow-base" else
             dict(d, version="2.1.0", build_string="gpu") if d["name"] == "_tflow_select" else d
             for d in json.loads(CASE41.read_text())]
    (locked_tf.lockfile.parent / "right.json").write_text(json.dumps(right))
    assert check_installed_file(locked_tf, locked_tf.lockfile.parent / "right.json", None) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "PASS all 5 pinned packages at their pinned version and build",
        "NOT CHECKED 9 of 14 installed packages (neither pinned nor judged by a compatibility rule of envs/rules.yaml; "
        "a right pin elsewhere does not vouch for them): cudatoolkit 10.0.130, cudnn 7.6.0, gcc_linux-64 7.2.0, "
        "gxx_linux-64 7.2.0, nccl 2.4.7.1, pillow 6.0.0, pip 19.1.1, tensorflow 1.12.0, tensorflow-gpu 1.12.0"]


def test_a_pip_list_shows_no_build_strings_so_pinned_builds_are_not_checked(locked_tf, capsys):
    """pip has no build strings: a lock's conda build of a package a pip list shows is named NOT CHECKED, never
    passed and never invented."""
    listing = locked_tf.lockfile.parent / "pip-list.json"
    listing.write_text(json.dumps([{"name": "scikit-learn", "version": "0.20.3"},
                                   {"name": "horovod", "version": "0.16.1"}, {"name": "pip", "version": "19.1.1"}]))
    assert check_installed_file(locked_tf, listing, None) == 0
    assert capsys.readouterr().out.splitlines()[1:] == [
        "PASS 2 of 5 pinned packages at the pinned version: horovod, scikit-learn",
        "NOT CHECKED (conda packages a pip list does not show; use `conda list --json`): _tflow_select, python, "
        "tensorflow-base",
        "NOT CHECKED build (a pip list has no build strings; use `conda list --json`): scikit-learn (pinned build "
        "py36h0000000_0)",
        "NOT CHECKED 1 of 3 installed packages (neither pinned nor judged by a compatibility rule of envs/rules.yaml; "
        "a right pin elsewhere does not vouch for them): pip 19.1.1"]
    spec_pin = spec_pins(L.lock_spec(L.conda_files("conda")), "linux-64")
    report = check_installed(spec_pin, {"tensorflow-base": Installed("1.12.0")}, "pip")
    assert report.build_unchecked == [p for p in spec_pin if p.name == "tensorflow-base"]
    assert "PASS all" not in "\n".join(report.lines())


def test_build_globs_are_condas_match_spec():
    pin = next(p for p in spec_pins(L.lock_spec(L.conda_files("conda")), "linux-64") if p.name == "tensorflow-base")
    assert (pin.spec, pin.build) == ("1.12.0", "gpu_*")
    assert pin.accepts_build("gpu_py36h0000000_0") and not pin.accepts_build("mkl_py36h0000000_0")
    assert not pin.accepts_build("eigen_py36h0000000_0") and not pin.accepts_build("xgpu_py36")
    regex = Pin("tensorflow-base", "1.12.0", "conda", "^(gpu|cuda).*$")
    assert regex.accepts_build("gpu_py36h0000000_0") and not regex.accepts_build("mkl_py36h0000000_0")


#: ``invoke lock``'s lines unwrapped.
WIDE = {"COLUMNS": "200"}


def test_invoke_lock_check_without_lock_is_nonzero_and_clear():
    p = cmd.run("lock", "--stack", "conda", "--check", env=WIDE)
    assert p.returncode == 1
    assert "no lock yet for stack conda" in p.stdout and "Traceback" not in p.stdout + p.stderr


def test_invoke_lock_without_solver_is_a_clear_error():
    env = {**WIDE, "PATH": "%s:/usr/bin:/bin" % (ROOT / ".venv/bin"), "CONDA_EXE": ""}
    p = cmd.run("lock", "--stack", "conda", env=env)
    assert p.returncode == 2
    assert "no conda solver" in p.stderr and "Traceback" not in p.stdout + p.stderr


def test_invoke_lock_when_the_solver_fails_is_a_clear_error():
    # conda-lock runs for real; its solver exits non-zero at once, as an unusable conda would.
    p = cmd.run("lock", "--stack", "cpu", "--conda", "/bin/false", env=WIDE)
    assert p.returncode == 2
    assert "conda-lock failed for stack cpu" in p.stderr and "conda-forge" in p.stderr
    assert "Traceback" not in p.stdout


def test_invoke_lock_explicit_is_refused():
    p = cmd.run("lock", "--stack", "conda", "--kind", "explicit", env=WIDE)
    assert p.returncode == 2 and "installs none of them" in p.stderr


def test_invoke_lock_installed_case15_style(tmp_path):
    p = cmd.run("lock", "--stack", "cpu", "--installed", str(DATA / "conda-list-case15.json"), env=WIDE)
    assert p.returncode == 1
    assert "FAIL missing:" in p.stdout and "horovod" in p.stdout and "tensorflow-cpu" in p.stdout


CASE54 = CASES / "54-conda-installed-h5py3-tf112.json"


def test_case54_h5py3_with_tensorflow_1_12_fails_as_a_known_bad_pair():
    """Case 54: every pin of the conda column matches, but h5py 3.1.0 (pinned by nothing) cannot serve TensorFlow
    1.12's Keras HDF5 code: FAIL naming the pair, its rule, source, remedy and smoke test, and the installed packages
    nothing checked named, never a PASS over the whole environment."""
    p = cmd.run("lock", "--stack", "conda", "--installed", str(CASE54), env=WIDE)
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    fail = next(i for i, line in enumerate(lines) if line.startswith("FAIL"))
    assert lines[fail].startswith("FAIL known-bad pair: h5py 3.1.0 with tensorflow 1.12.0: ")
    assert "AttributeError: 'str' object has no attribute 'decode'" in lines[fail]
    assert "(rule h5py3-tf-keras-hdf5)" in lines[fail]
    assert lines[fail + 1].startswith("  remedy: pin h5py<3 (2.10.0") and "environment.yml and the lock" in \
        lines[fail + 1] and "reinstall" in lines[fail + 1]
    assert "DenseNet121(weights='imagenet')" in lines[fail + 2]
    assert "https://github.com/tensorflow/tensorflow/issues/44467" in lines[fail + 3]
    assert "PASS all 12 pinned packages at their pinned version and build" in lines
    # beside the known-bad pair's FAIL, the PASS names the pairs that held, never "no known-bad pair"
    held = next(line for line in lines if line.startswith("PASS compatibility rules"))
    assert held.startswith("PASS compatibility rules held for: numpy 1.16.4 with tensorflow 1.12.0 (")
    assert "no known-bad" not in p.stdout and "h5py" not in held
    assert "PASS declared requirements of tensorflow 1.12.0: keras-applications 1.0.8, keras-preprocessing 1.1.0, " \
           "numpy 1.16.4 (TensorFlow 1.12.0's tensorflow/tools/pip_package/setup.py" in p.stdout
    # what the pins leave open, and what nothing checked: never folded into a PASS
    assert lines[-2] == ("NOT PINNED 7 of 19 installed packages (no pin names them; only the compatibility rules above "
                         "judged them, where one applies): _tflow_select 2.1.0, h5py 3.1.0, hdf5 1.10.6, "
                         "keras-applications 1.0.8, keras-preprocessing 1.1.0, numpy 1.16.4, tensorflow 1.12.0")
    assert lines[-1] == ("NOT CHECKED 2 of 19 installed packages (neither pinned nor judged by a compatibility rule of "
                         "envs/rules.yaml; a right pin elsewhere does not vouch for them): _tflow_select 2.1.0, hdf5 "
                         "1.10.6")
    assert "PASS the whole environment" not in p.stdout and "Traceback" not in p.stdout + p.stderr


def test_case54_with_h5py_2_10_every_pair_holds_and_the_rest_is_still_named(tmp_path):
    listing = [dict(d, version="2.10.0") if d["name"] == "h5py" else d for d in json.loads(CASE54.read_text())]
    (tmp_path / "fixed.json").write_text(json.dumps(listing))
    p = cmd.run("lock", "--stack", "conda", "--installed", str(tmp_path / "fixed.json"), env=WIDE)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "PASS compatibility rules held for: h5py 2.10.0 with tensorflow 1.12.0 (h5py3-tf-keras-hdf5)" \
        in p.stdout
    assert p.stdout.splitlines()[-1].startswith("NOT CHECKED 2 of 19 installed packages")


def test_a_known_bad_pair_fails_in_a_pip_freeze_too(tmp_path):
    """``pip freeze`` output is read too (``name==version``; ``name @ URL``, as pip freeze shows what conda
    installed, is present with no version: a pin on it is named NOT CHECKED, never compared)."""
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("# pip freeze\ntensorflow-gpu==1.15.0\nprotobuf==4.21.12\nhorovod==0.16.1\n"
                      "scikit-learn @ file:///tmp/build/80754af9/scikit-learn_1/work\nPillow==6.0.0\n")
    assert parse_installed_json(freeze.read_text()) == ({
        "tensorflow-gpu": Installed("1.15.0"), "protobuf": Installed("4.21.12"), "horovod": Installed("0.16.1"),
        "scikit-learn": Installed(None), "pillow": Installed("6.0.0")}, "pip freeze")
    p = cmd.run("lock", "--stack", "conda", "--installed", str(freeze), env=WIDE)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL wrong version: tensorflow-gpu installed 1.15.0, pinned 1.12.0" in p.stdout
    assert "FAIL known-bad pair: protobuf 4.21.12 with tensorflow-gpu 1.15.0: " in p.stdout
    assert "(rule protobuf4-tf-generated-code)" in p.stdout
    assert "NOT CHECKED version (the listing names no version: pip freeze's `name @ URL`; use `conda list --json` " \
           "or `pip list --format=json`): scikit-learn" in p.stdout


@pytest.mark.parametrize("content, expected", [
    (b'[{"name": "h\xff5py"}]', "not a text file (byte 0xff at offset 12 is not UTF-8)"),
    (b"numpy==1.16.4\n\0\0", "not a text file (a NUL byte at offset 14)"),
    (b"", "the file is empty; expected `conda list --json`"),
    (b" \n\n", "the file is empty; expected `conda list --json`"),
    (b"[]\n", "lists no packages (an empty JSON list)"),
])
def test_an_unreadable_listing_is_refused_naming_the_option(tmp_path, content, expected):
    """A binary, empty or empty-list listing: one ``error: --installed FILE: …`` line saying what is wrong and what
    was expected, exit 2: never a traceback, and never a report over an environment of no packages."""
    listing = tmp_path / "listing.json"
    listing.write_bytes(content)
    p = cmd.run("lock", "--stack", "conda", "--installed", str(listing), env=WIDE, expect=2)
    assert p.stderr.startswith("error: --installed %s: %s" % (listing, expected)), p.stderr
    assert len(p.stderr.splitlines()) == 1 and "Traceback" not in p.stderr and "FAIL" not in p.stdout


def test_a_pip_freeze_listing_is_labelled_pip_freeze(tmp_path):
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("tensorflow-gpu==1.12.0\n")
    p = cmd.run("lock", "--stack", "conda", "--installed", str(freeze), env=WIDE, expect=1)
    assert p.stdout.startswith("%s (pip freeze) against " % freeze), p.stdout


def test_a_listing_that_is_neither_json_nor_pip_freeze_names_its_line(tmp_path):
    bad = tmp_path / "list.txt"
    bad.write_text("h5py==3.1.0\nh5py                      3.1.0   nompi_py36_100  conda-forge\n")
    p = cmd.run("lock", "--stack", "conda", "--installed", str(bad), env=WIDE)
    assert p.returncode == 2 and "list.txt:2: " in p.stderr and "pip freeze" in p.stderr


def test_a_pip_tensorflow_gpu_wheel_beside_condas_cuda_10_toolkit_fails(tmp_path):
    """The conda column's listing with tensorflow-gpu 1.12.0 from pip (channel pypi) instead of conda's build: the pin's
    version matches, but the wheel links CUDA 9.0 and the environment holds cudatoolkit 10.0."""
    listing = [dict(d, channel="pypi", build_string="pypi_0", platform="pypi") if d["name"] == "tensorflow-gpu"
               else dict(d, version="2.10.0") if d["name"] == "h5py" else d for d in json.loads(CASE54.read_text())]
    (tmp_path / "pip-tf.json").write_text(json.dumps(listing))
    p = cmd.run("lock", "--stack", "conda", "--installed", str(tmp_path / "pip-tf.json"), env=WIDE)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL known-bad pair: tensorflow-gpu 1.12.0 with cudatoolkit 10.0.130: " in p.stdout
    assert "ImportError: libcublas.so.9.0" in p.stdout and "(rule pip-tf-gpu-cuda9-wheel)" in p.stdout


def test_a_package_outside_tensorflows_declared_requirements_is_a_warning(tmp_path):
    listing = [dict(d, version="2.10.0") if d["name"] == "h5py" else d for d in json.loads(CASE54.read_text())]
    listing.append({"base_url": "https://repo.anaconda.com/pkgs/main", "build_number": 0, "build_string": "py36_0",
                    "channel": "pkgs/main", "dist_name": "tensorboard-1.13.1-py36_0", "name": "tensorboard",
                    "platform": "linux-64", "version": "1.13.1"})
    (tmp_path / "tb.json").write_text(json.dumps(listing))
    p = cmd.run("lock", "--stack", "conda", "--installed", str(tmp_path / "tb.json"), env=WIDE)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "WARN outside a declared requirement: tensorboard 1.13.1 with tensorflow 1.12.0, which requires " \
           "tensorboard >=1.12.0,<1.13.0" in p.stdout


def test_case54_against_a_unified_lock_h5py_is_a_plain_version_mismatch_and_the_pair_still_fails(tmp_path, capsys):
    """With a unified lock every package is pinned at its version and build: h5py 3.1.0 against the lock's 2.10.0 is
    a wrong version, and the known-bad pair is named with it."""
    shutil.copytree(L.CONDA_DIR / "conda", tmp_path / "conda")
    files = L.conda_files("conda", tmp_path)
    listed = json.loads(CASE54.read_text())
    locked = [_locked_conda(d["name"], "2.10.0" if d["name"] == "h5py" else d["version"], d["build_string"])
              for d in listed if d["channel"] != "pypi"]
    write_lock_for(files, locked)
    assert check_installed_file(files, CASE54, None) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "FAIL wrong version: h5py installed 3.1.0, pinned 2.10.0"
    assert out[2].startswith("FAIL known-bad pair: h5py 3.1.0 with tensorflow 1.12.0: ")
    assert out[-1] == ("NOT CHECKED 1 of 19 installed packages (neither pinned nor judged by a compatibility rule of "
                       "envs/rules.yaml; a right pin elsewhere does not vouch for them): horovod 0.16.1")
