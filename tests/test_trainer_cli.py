"""``python -m trainer``'s options: --help without TensorFlow, one ``trainer: error:`` line and exit 2 for bad input,
the value checks the host launcher reuses."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.lib.paths import REPO
from trainer import cli
from trainer.errors import TrainerError


def _trainer(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainer", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"})


def test_help_does_not_load_tensorflow():
    result = _trainer("--help")
    assert result.returncode == 0 and "--model {densenet121,mobilenet,resnet50}" in result.stdout
    assert result.stderr == ""  # no TensorFlow log lines
    probe = subprocess.run([sys.executable, "-c", "import sys; from trainer import cli; cli.check(cli.parse("
                            "['--data', 'synthetic'])); print('tensorflow' in sys.modules)"],
                           cwd=REPO, capture_output=True, text=True, timeout=120)
    assert probe.stdout.strip() == "False", probe.stderr


@pytest.mark.parametrize("args,message", [
    (["--model", "vgg"],
     "argument --model: invalid choice: 'vgg' (choose from 'densenet121', 'mobilenet', 'resnet50')"),
    (["--epochs", "abc"], "argument --epochs: invalid int value: 'abc'"),
    (["--no-such-option"], "unrecognized arguments: --no-such-option"),
    (["--epochs", "0"], "--epochs 0: expected at least 1"),
])
def test_bad_options_give_one_error_line_and_exit_2(args, message):
    result = _trainer("--data", "synthetic", *args)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [l for l in result.stderr.splitlines() if l.startswith("trainer: error: ")]
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr
    assert "usage:" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("args,fragment", [
    (["--image-size", "31"], "--image-size 31: densenet121 needs at least 32 pixels"),
    (["--image-size", "31", "--model", "resnet50"], "resnet50 needs at least 32"),
    (["--batch-size", "0"], "--batch-size 0: expected at least 1"),
    (["--lr", "0"], "--lr 0 must be positive"),
    (["--val-fraction", "0"], "--val-fraction 0 must be in (0, 1)"),
    (["--val-fraction", "0.5", "--test-fraction", "0.5"], "with a sum below 1"),
    (["--test-fraction", "1.2"], "--test-fraction 1.2"),
])
def test_value_checks(tmp_path, args, fragment):
    options = cli.parse(["--images", str(tmp_path), "--labels", "x.csv", *args])
    with pytest.raises(TrainerError) as err:
        cli.check(options)
    assert fragment in str(err.value)


def test_test_fraction_does_not_apply_with_official_lists(tmp_path):
    (tmp_path / "train_val_list.txt").write_text("a.png\n")
    (tmp_path / "test_list.txt").write_text("b.png\n")
    cli.check(cli.parse(["--data", str(tmp_path), "--val-fraction", "0.5", "--test-fraction", "0.9"]))
    cli.check(cli.parse(["--data", "synthetic", "--image-size", "32", "--model", "resnet50"]))


@pytest.mark.parametrize("args,fragment", [
    (["--val-fraction", "1.5"], "--val-fraction 1.5 must be in (0, 1)"),
    (["--val-fraction", "0.6", "--test-fraction", "0.5"], "with a sum below 1"),
])
def test_fractions_are_checked_with_synthetic_data_too(args, fragment):
    """--data synthetic does not split, but a wrong fraction is refused there as anywhere (review finding 6)."""
    with pytest.raises(TrainerError) as err:
        cli.check(cli.parse(["--data", "synthetic", *args]))
    assert fragment in str(err.value)


def test_the_hosts_door_is_functions_of_the_trainers_command_line(tmp_path):
    """``trainer.preflight.check_here(argv)`` and ``check_resume(argv, output)``: what a launcher checks before
    ranks start, by the trainer's own rules on its own command line."""
    from trainer import preflight

    preflight.check_here(["--data", "synthetic", "--output", str(tmp_path / "new")])
    with pytest.raises(TrainerError, match="--images %s: no such directory" % (tmp_path / "x")):
        preflight.check_here(["--images", str(tmp_path / "x"), "--labels", "l.csv", "--output", str(tmp_path)])
    with pytest.raises(TrainerError, match="--resume: no checkpoint in"):
        preflight.check_here(["--data", "synthetic", "--output", str(tmp_path / "none"), "--resume"])
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "state.json").write_text(
        '{"epoch": 1, "model_file": "epoch-0001.h5", "model": "densenet121", "image_size": 224, "label_sha256": null}')
    preflight.check_resume(["--data", "synthetic", "--resume", "--output", "/elsewhere"], str(tmp_path))
    with pytest.raises(TrainerError, match="its image_size is 224, this run's is 64"):
        preflight.check_resume(["--data", "synthetic", "--resume", "--image-size", "64"], str(tmp_path))
    with pytest.raises(TrainerError, match="pass --resume"):
        preflight.check_resume(["--data", "synthetic", "--output", str(tmp_path)])


def test_no_trainer_option_abbreviates_one_of_horovodrun():
    """horovodrun's argparse classifies every word of its command line, the trainer's too, before its REMAINDER
    positional takes the command; a word that abbreviates two or more of its options stops it there (a trainer
    ``--timeline`` did: "ambiguous option: --timeline could match --timeline-filename, --timeline-mark-cycles"),
    one that abbreviates a single option (``--output`` of ``--output-filename``) is passed on. So no trainer
    option may be a prefix of two horovodrun options (its --help here)."""
    import re
    import shutil

    shown = subprocess.run([shutil.which("horovodrun") or os.path.join(os.path.dirname(sys.executable),
                                                                        "horovodrun"), "--help"],
                           capture_output=True, text=True, timeout=120, check=True).stdout
    theirs = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", shown))
    assert "--timeline-filename" in theirs
    mine = {s for action in cli.parser()._actions for s in action.option_strings if s.startswith("--")}
    ambiguous = {m: sorted(t for t in theirs if t.startswith(m)) for m in mine}
    assert not {m: found for m, found in ambiguous.items() if len(found) > 1 and m not in theirs}
    assert ambiguous["--output"] == ["--output-filename"]  # one match: horovodrun passes it on


def test_the_output_is_never_the_datas_own_folder_or_a_prepared_copy(tmp_path):
    """A fresh user trained with --output the prepared copy of --data: model.h5, checkpoint/ and splits.csv went in
    among the shards (and a copy's skipped-images.csv would have been replaced). Refused before anything runs, as
    is --output the --data or --images folder itself (also through a link); a folder inside a copy is a folder."""
    from trainer import prepared

    copy = tmp_path / "prep"
    copy.mkdir()
    (copy / prepared.MANIFEST).write_text("{}")
    (tmp_path / "link").symlink_to(copy)
    for args, message in (
            (["--data", str(copy), "--output", str(copy)], "--output %s is the --data folder" % copy),
            (["--data", str(copy), "--output", str(tmp_path / "link")], "is the --data folder"),
            (["--images", str(tmp_path), "--labels", "x.csv", "--output", str(tmp_path)], "is the --images folder"),
            (["--data", "synthetic", "--output", str(copy)],
             "--output %s is a prepared copy (%s)" % (copy, prepared.MANIFEST))):
        with pytest.raises(TrainerError, match="choose another folder") as err:
            cli.check(cli.parse(args))
        assert message in str(err.value)
    cli.check(cli.parse(["--data", str(copy), "--output", str(copy / "run")]))
    result = _trainer("--data", str(copy), "--output", str(copy))
    assert result.returncode == 2 and "trainer: error: --output %s is the --data folder" % copy in result.stderr
    assert sorted(os.listdir(copy)) == [prepared.MANIFEST]
