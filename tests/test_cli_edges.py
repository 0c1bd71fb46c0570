"""The edges a new user hits first on the command line (issue 15): an empty check selection, an unknown launcher
with other options, a folder where a file is expected, and the ``chexstack`` command from any folder."""
from __future__ import annotations

import pytest

from chexstack.errors import ChexstackError
from chexstack.inputs import input_file
from launch.options import check_applicable
from validate.report import select


def test_an_empty_check_selection_is_an_error():
    with pytest.raises(ChexstackError, match=r"^--only gpu --skip gpu: selects no check") as err:
        select(["gpu"], ["gpu"])
    assert err.value.exit_code == 2
    with pytest.raises(ChexstackError, match=r"^--only gpu.dcgm --skip gpu: selects no check"):
        select(["gpu.dcgm"], ["gpu"])


def test_an_unknown_launcher_is_named_before_any_other_rule():
    with pytest.raises(ChexstackError) as err:
        check_applicable("pbs", None, {"render": True}, ("local", "slurm", "k8s"))
    assert str(err.value) == "unknown launcher 'pbs': expected local, slurm or k8s"
    with pytest.raises(ChexstackError, match="--render applies to --launcher slurm or k8s only"):
        check_applicable("local", None, {"render": True}, ("local", "slurm", "k8s"))


def test_a_folder_where_a_file_is_expected_is_called_a_folder(tmp_path):
    from bench.main import expand_results
    from envs.lock import conda_files
    from envs.lockflow import check_installed_file
    from images.convert import convert

    with pytest.raises(ChexstackError, match=r": is a folder; expected a Dockerfile$"):
        convert(tmp_path)
    with pytest.raises(ChexstackError, match=r": no such file \(expected a Dockerfile\)$"):
        convert(tmp_path / "Dockerfile")
    with pytest.raises(ChexstackError, match=r"^result %s: is a folder; expected a sweep JSON file$" % tmp_path):
        expand_results([str(tmp_path)])
    with pytest.raises(ChexstackError, match=r"^--installed %s: is a folder; expected `conda list" % tmp_path):
        check_installed_file(conda_files("cpu"), tmp_path, None)
    (tmp_path / "f").write_text("x")
    assert input_file(tmp_path / "f", "x") == tmp_path / "f"


def test_a_file_where_the_trainer_expects_a_folder_is_called_a_file(tmp_path):
    from trainer import sources
    from trainer.errors import TrainerError

    (tmp_path / "labels.csv").write_text("x")
    with pytest.raises(TrainerError, match=r"--data .*labels.csv: is a file; expected a folder$"):
        sources.find_label_file(str(tmp_path / "labels.csv"))
    with pytest.raises(TrainerError, match=r"--images .*labels.csv: is a file; expected a folder$"):
        sources.index_images(str(tmp_path / "labels.csv"))
