"""envs.rules: each boundary of the CUDA/driver rules, the cases 06 and 08, TensorFlow and Horovod facts."""
from __future__ import annotations

import pytest

from chexstack.errors import ChexstackError
from envs import rules


@pytest.mark.parametrize("cuda, driver", [
    ("10.0", "410.48"), ("10.1", "418.39"), ("10.1.168", "418.39"), ("10.2", "440.33"), ("9.2.88", "396.26"),
    ("9.2.148", "396.37"), ("9.2", "396.26"), ("11.0", "450.80.02"), ("11.8", "450.80.02"),
    ("12.4", "525.60.13"), ("12.8", "525.60.13"), ("13.0", "580"),
])
def test_min_driver_for_cuda(cuda, driver):
    floor = rules.min_driver_for_cuda(cuda)
    assert floor.driver == driver
    assert floor.source


def test_min_driver_cuda11_plus_is_minor_version_compat_with_native_driver():
    floor = rules.min_driver_for_cuda("12.4")
    assert floor.via == "minor-version-compatibility"
    assert floor.native_driver == "550.54.14"
    assert "minor-version-compatibility" in floor.source


def test_430_26_is_below_cuda_10_2_floor():
    v = rules.check_driver("430.26", "10.2")
    assert v.status == "FAIL"
    assert v.message.startswith("driver 430.26 too old for CUDA 10.2 (needs >= 440.33)")
    assert rules.check_driver("440.33", "10.2").status == "PASS"
    assert rules.check_driver("430.26", "10.1.168").status == "PASS"


def test_case06_driver_390_48_vs_cuda_9_2_88():
    # ../shared/cases/06: driver 390.48 -> max CUDA 9.1; the image needs 9.2.88 -> >= 396.26.
    assert rules.max_cuda_for_driver("390.48").cuda == "9.1"
    v = rules.check_driver("390.48", "9.2.88")
    assert v.status == "FAIL"
    assert v.message.startswith("driver 390.48 too old for CUDA 9.2.88 (needs >= 396.26)")
    assert "CUDA <= 9.1" in v.message
    assert rules.check_driver("396.26", "9.2.148").status == "FAIL"  # Update 1 needs 396.37


def test_case08_minor_version_compat_pass_with_warning():
    # ../shared/cases/08: driver 535.216.03 (nvidia-smi "CUDA Version: 12.2"), toolkit 12.4.
    assert rules.max_cuda_for_driver("535.216.03").cuda == "12.2"
    v = rules.check_driver("535.216.03", "12.4")
    assert v.status == "WARN"
    assert "minor-version compatibility" in v.message and "525.60.13" in v.message


def test_cuda13_toolkit_on_cuda12_driver_fails():
    v = rules.check_driver("535.216.03", "13.0")
    assert v.status == "FAIL"
    assert "needs >= 580" in v.message and "cuda-compat" in v.message


def test_newer_driver_runs_older_toolkit():
    assert rules.check_driver("580.65.06", "11.8").status == "PASS"
    assert rules.check_driver("418.40.04", "10.1").status == "PASS"


@pytest.mark.parametrize("driver, cuda", [("418.40.04", "10.1"), ("430.26", "10.1"), ("440.33", "10.2"),
                                          ("550.54.15", "12.4"), ("580.82.07", "13.0")])
def test_max_cuda_for_driver(driver, cuda):
    assert rules.max_cuda_for_driver(driver).cuda == cuda


def test_malformed_versions_name_the_argument():
    with pytest.raises(ChexstackError, match="driver version: expected a dotted version"):
        rules.check_driver("r535", "12.4")
    with pytest.raises(ChexstackError, match="no driver rule; known toolkits: 9.0, 9.1"):
        rules.min_driver_for_cuda("8.0")
    with pytest.raises(ChexstackError, match="older than every CUDA release"):
        rules.max_cuda_for_driver("340.108")


def test_horovod_features():
    assert not rules.horovod_has("0.15.1", "horovodrun")
    assert rules.horovod_has("0.16.1", "horovodrun")
    assert not rules.horovod_has("0.16.2", "check_build") and rules.horovod_has("0.17.0", "check_build")
    assert not rules.horovod_has("0.16.2", "nccl_built") and rules.horovod_has("0.17.0", "nccl_built")
    assert not rules.horovod_has("0.19.5", "gpu_operations_env") and rules.horovod_has("0.20.0", "gpu_operations_env")
    assert rules.horovod_has("0.16.1", "gpu_allreduce_env")
    with pytest.raises(ChexstackError, match="unknown Horovod feature 'elastic'; known: horovodrun"):
        rules.horovod_has("0.28.1", "elastic")


def test_tf_tested():
    t = rules.tf_tested("1.12.0")
    assert (t.cuda, t.cudnn) == ("9", "7") and "9.0" in t.note
    assert t.python_ok("3.6.8") and not t.python_ok("3.7.3")
    assert rules.tf_tested("1.13.1").cuda == "10.0"
    assert rules.tf_tested("2.15.1").python_ok("3.11.2")
    assert rules.tf_tested("0.12.0") is None


def test_glibc_for_os():
    assert rules.glibc_for_os("RHEL", "7.4") == "2.17"
    assert rules.glibc_for_os("CentOS", "7") == "2.17"
    assert rules.glibc_for_os("Debian", "12") == "2.36"
    assert rules.glibc_for_os("Plan9", "4") is None


@pytest.mark.parametrize("version, name, status", [
    ("0.28.1", "HOROVOD_WITH_TENSORFLOW", "read"),
    ("0.28.1", "HOROVOD_GPU_OPERATIONS", "read"),
    ("0.28.1", "HOROVOD_GPU_ALLREDUCE", "read"),          # still read per operation after 0.20.0
    ("0.28.1", "HOROVOD_CMAKE", "read"),
    ("0.28.1", "HOROVOD_WITH_GLOO", "documented"),        # install.rst lists it; the CMake build does not read it
    ("0.19.0", "HOROVOD_WITH_GLOO", "read"),
    ("0.28.1", "HOROVOD_CUDA_INCLUDE", "unknown"),        # setup.py-era variable, gone with the CMake build (0.20.0)
    ("0.16.1", "HOROVOD_GPU_OPERATIONS", "unknown"),      # from 0.20.0
    ("0.16.1", "HOROVOD_GPU_ALLREDUCE", "read"),
    ("0.16.1", "HOROVOD_NCCL_HOME", "read"),
    ("0.16.1", "HOROVOD_WITH_MPI", "unknown"),            # controllers became optional in 0.18.0
    ("0.16.2", "HOROVOD_WITHOUT_MXNET", "read"),
    ("0.28.1", "HOROVOD_WITH_GLUE", "unknown"),
    ("0.25.0", "HOROVOD_GPU_REDUCESCATTER", "unchecked"),  # between checked 0.24.0 (absent) and 0.26.0 (read)
    ("0.23.0", "HOROVOD_GPU_REDUCESCATTER", "unknown"),    # absent in both neighbours 0.22.0 and 0.24.0
    ("0.14.0", "HOROVOD_WITH_TENSORFLOW", "unchecked"),    # older than every checked release
])
def test_horovod_build_variables_by_release(version, name, status):
    """Read off the sdists' setup.py/CMake files of the checked releases (envs/rules.yaml horovod_build_env)."""
    known = rules.horovod_build_variable(version, name)
    assert known.status == status, known.message
    assert "pypi.org/project/horovod" in known.source and "install.rst" in known.source


def test_horovod_build_variable_table_is_consistent():
    table = rules._rules().horovod_build_env
    checked = table.checked
    assert checked == sorted(checked, key=rules.parse_version)
    for entry in table.variables:
        assert entry.name.startswith("HOROVOD_") and entry.since in checked
        assert entry.until in (None, *checked)
    assert len(set(rules.horovod_build_variables())) == len(table.variables)


def test_a_typo_in_the_rules_stops_at_load_naming_file_and_field(tmp_path):
    """envs/rules.yaml has a strict model (envs/rules_model.py): an unknown field or a version that is not one is
    refused when the rules are loaded, with the file and the field path."""
    import yaml

    from chexstack.errors import ChexstackError
    from envs.rules_model import load_rules
    data = yaml.safe_load(rules.RULES_FILE.read_text())
    data["cuda_driver"]["releases"][2]["drvier"] = "396.26"
    data["horovod_features"][0]["since"] = "0.16.x"
    bad = tmp_path / "rules.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ChexstackError) as e:
        load_rules(bad)
    msg = str(e.value)
    assert "%s: field cuda_driver.releases.2.drvier: Extra inputs are not permitted" % bad in msg
    assert "%s: field horovod_features.0.since: String should match pattern" % bad in msg
    assert load_rules(rules.RULES_FILE).cuda_driver.releases


@pytest.mark.parametrize("installed, conflict", [
    ({"h5py": "3.1.0", "tensorflow": "1.12.0"}, ("h5py3-tf-keras-hdf5", "tensorflow")),
    ({"h5py": "3.0.0", "tensorflow-gpu": "2.4.1"}, ("h5py3-tf-keras-hdf5", "tensorflow-gpu")),
    ({"h5py": "2.10.0", "tensorflow": "1.12.0"}, None),
    ({"h5py": "3.1.0", "tensorflow": "2.5.0"}, None),
    ({"h5py": "3.1.0", "keras": "2.2.4"}, ("h5py3-standalone-keras-hdf5", "keras")),
    ({"h5py": "3.1.0", "keras": "2.4.3"}, None),
    ({"numpy": "1.20.0", "tensorflow": "1.15.0"}, ("numpy120-tf-symbolic-tensor", "tensorflow")),
    ({"numpy": "1.19.5", "tensorflow": "2.4.1"}, None),
    ({"numpy": "1.21.0", "tensorflow": "2.6.0"}, None),
    ({"protobuf": "4.21.0", "tensorflow-cpu": "2.7.1"}, ("protobuf4-tf-generated-code", "tensorflow-cpu")),
    ({"protobuf": "3.20.3", "tensorflow": "1.15.0"}, None),
    ({"numpy": "2.0.0", "tensorflow-cpu": "2.15.1"}, ("numpy2-tf-built-on-numpy1", "tensorflow-cpu")),
    ({"numpy": "2.1.3", "tensorflow": "2.18.0"}, None),
    ({"numpy": "1.26.4", "tensorflow": "2.15.1"}, None),
    ({"gast": "0.3.3", "tensorflow-gpu": "1.14.0"}, ("gast03-tf-autograph", "tensorflow-gpu")),
    ({"gast": "0.2.2", "tensorflow": "2.0.0"}, None),
    ({"gast": "0.3.3", "tensorflow": "2.2.0"}, None),
])
def test_known_bad_pairs_at_their_boundaries(installed, conflict):
    report = rules.check_pairs(installed)
    assert report.conflicts == rules.check_pairs(installed, frozenset(installed)).conflicts
    assert [(c.rule.id, c.other) for c in report.conflicts] == ([conflict] if conflict else [])
    assert report.covered == frozenset(installed)


def test_a_pair_judges_nothing_without_both_sides_or_with_unreadable_versions():
    assert rules.check_pairs({"h5py": "3.1.0", "hdf5": "1.10.6"}) == rules.PairReport([], [], frozenset())
    assert not rules.check_pairs({"h5py": None, "tensorflow": "1.12.0"}).covered
    assert not rules.check_pairs({"h5py": "3.1.0", "tensorflow": "weird build"}).covered


def test_every_known_bad_pair_has_a_public_source_remedy_and_smoke_test():
    pairs = rules.known_bad_pairs()
    assert len({p.id for p in pairs}) == len(pairs) >= 4
    for p in pairs:
        assert all(s.startswith("https://") for s in p.sources), p.id
        assert p.remedy and p.smoke and p.symptom


def test_a_bad_version_range_in_a_pair_stops_at_load(tmp_path):
    import yaml

    from envs.rules_model import load_rules
    data = yaml.safe_load(rules.RULES_FILE.read_text())
    data["known_bad_pairs"][0]["versions"] = "3.x"
    bad = tmp_path / "rules.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ChexstackError, match=r"known_bad_pairs\.0\.versions.*PEP 440 specifier set"):
        load_rules(bad)


@pytest.mark.parametrize("tf, cuda, conflict", [
    ("1.12.0", "10.0.130", "pip-tf-gpu-cuda9-wheel"), ("1.5.0", "9.1.85", "pip-tf-gpu-cuda9-wheel"),
    ("1.12.0", "9.0.176", None), ("1.13.1", "10.1.168", "pip-tf-gpu-cuda10-wheel"), ("1.15.0", "10.0.130", None),
    ("2.1.0", "10.1.243", None),
])
def test_a_pip_tensorflow_gpu_wheel_needs_the_toolkit_it_was_built_for(tf, cuda, conflict):
    """TensorFlow's PyPI GPU wheels link one CUDA release by soname; conda's builds link their own toolkit, so the
    rule holds for a pip-installed tensorflow-gpu only."""
    installed = {"tensorflow-gpu": tf, "cudatoolkit": cuda}
    pip = rules.check_pairs(installed, frozenset({"tensorflow-gpu"}))
    assert [c.rule.id for c in pip.conflicts] == ([conflict] if conflict else [])
    assert rules.check_pairs(installed).conflicts == []


def test_declared_requirements_of_an_installed_tensorflow():
    """TensorFlow 1.12's setup.py requires tensorboard >= 1.12.0, < 1.13.0: an environment with tensorboard 1.13.1
    is outside it (named with the requirement and its source); a required package that is not installed is not
    judged, and a TensorFlow with none of its requirements installed is judged by nothing."""
    report = rules.check_requirements({"tensorflow-base": "1.12.0", "tensorflow-gpu": "1.12.0",
                                       "tensorboard": "1.13.1", "numpy": "1.16.4"})
    assert [(m.package, m.version, m.requirer, m.spec) for m in report.outside] == [
        ("tensorboard", "1.13.1", "tensorflow-gpu", ">=1.12.0,<1.13.0")]
    assert "v1.12.0/tensorflow/tools/pip_package/setup.py" in report.outside[0].source
    assert report.held == [("tensorflow-gpu 1.12.0", ["numpy 1.16.4"], report.outside[0].source)]
    assert report.covered == {"tensorflow-gpu", "tensorflow-base", "tensorboard", "numpy"}
    assert rules.check_requirements({"tensorflow": "1.12.0", "hdf5": "1.10.6"}) == rules.RequirementReport(
        [], [], frozenset())
    assert rules.check_requirements({"tensorflow": "2.4.1", "tensorboard": "1.13.1"}).covered == frozenset()
