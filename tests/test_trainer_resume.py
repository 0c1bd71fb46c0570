"""What ``--resume`` does with a committed checkpoint (``trainer.checkpoint.resume_step``), decided from the folder
as each way a run can stop leaves it: train on, finish a run stopped after its last epoch (Ctrl-C while the test
split was scored: metrics.json without ``run.end``), or nothing for a run that ended; and the host's line after
such an interruption (``launch.local.interrupted_message``). The real Ctrl-C is test_launch_local.py's."""
from __future__ import annotations

import signal

import pytest

from launch import local
from trainer import checkpoint, outputs
from trainer.errors import TrainerError


def _entry(epoch: int, early_stop: bool = False) -> dict:
    return {"epoch": epoch, "loss": 0.1, "val_loss": 0.1, "monitor": "val_loss", "monitor_value": 0.1,
            "early_stop": early_stop}


def _folder(tmp_path, epoch: int, *, end_epoch: int | None = None, early_stop: bool = False,
            test: bool = False) -> str:
    """An --output whose checkpoint is of ``epoch`` and whose metrics.json holds epochs 1..``epoch`` (the last
    one ``early_stop``), as rank 0 writes it after that epoch; ``end_epoch``: with ``run.end`` (and ``test``: the
    test block), as the run's last write leaves it."""
    output = str(tmp_path)
    outputs.write_json(str(tmp_path / checkpoint.FOLDER / checkpoint.STATE),
                       {"epoch": epoch, "model_file": "epoch-%04d.h5" % epoch})
    run = {"model": "mobilenet", "epochs": 3, "initial_epoch": 0}
    if end_epoch is not None:
        run["end_epoch"] = end_epoch
        run["end"] = {"epoch": end_epoch, "reason": "early_stop" if early_stop else "epochs",
                      "message": "ran all --epochs %d" % end_epoch}
    extra = {"test": {"mean_auroc": 0.6, "best_epoch": 1}} if test else None
    outputs.write_metrics(output, run, [_entry(e, early_stop and e == epoch) for e in range(1, epoch + 1)], extra)
    return output


def test_a_checkpoint_before_the_last_epoch_trains_on(tmp_path):
    output = _folder(tmp_path, 2)
    assert checkpoint.resume_step(output, 2, 3, False) == checkpoint.TRAIN


def test_a_run_stopped_while_its_test_split_was_scored_is_finished_not_nothing_to_do(tmp_path):
    """The reported run: Ctrl-C after epoch 3 of 3 while the test split was scored; test-predictions.csv was
    written, metrics.json has the 3 epochs but neither ``test`` nor ``run.end``."""
    output = _folder(tmp_path, 3)
    (tmp_path / outputs.TEST_PREDICTIONS).write_text("Image Index\n")  # written before the scoring's end: no proof
    assert checkpoint.resume_step(output, 3, 3, False) == checkpoint.FINISH
    assert checkpoint.recorded_end(output, 3) is None
    # also when the run is resumed with fewer --epochs than it trained: its training has ended all the same
    assert checkpoint.resume_step(output, 3, 2, False) == checkpoint.FINISH


def test_only_a_run_whose_end_is_recorded_after_the_checkpoints_epoch_is_nothing_to_do(tmp_path):
    output = _folder(tmp_path, 3, end_epoch=3, test=True)
    assert checkpoint.resume_step(output, 3, 3, False) == checkpoint.DONE
    assert checkpoint.recorded_end(output, 3)["message"] == "ran all --epochs 3"
    assert checkpoint.resume_step(output, 3, 5, False) == checkpoint.TRAIN  # more --epochs: it trains on
    # an end recorded after another epoch (an older end, a hand-edited file) is not this checkpoint's end
    stale = _folder(tmp_path / "stale", 3, end_epoch=2)
    assert checkpoint.resume_step(stale, 3, 3, False) == checkpoint.FINISH


def test_a_run_that_stopped_early_is_finished_or_done_and_trains_on_only_when_the_options_say_so(tmp_path):
    """Stopped early after epoch 3 of 6: its training has ended, as the uninterrupted run's did (before, --resume
    trained a 4th epoch). ``stopped_early`` is the recipe's replay under the resumed run's options, so
    ``--early-stop 0`` (replayed: not stopped) trains on."""
    stopped = _folder(tmp_path / "stopped", 3, early_stop=True)
    assert checkpoint.resume_step(stopped, 3, 6, True) == checkpoint.FINISH
    assert checkpoint.resume_step(stopped, 3, 6, False) == checkpoint.TRAIN
    ended = _folder(tmp_path / "ended", 3, end_epoch=3, early_stop=True, test=True)
    assert checkpoint.resume_step(ended, 3, 6, True) == checkpoint.DONE


def test_recorded_step_reads_the_folder_alone(tmp_path):
    assert checkpoint.recorded_step(str(tmp_path), 3) == (None, None)
    assert checkpoint.recorded_step(_folder(tmp_path / "a", 2), 3)[1] == checkpoint.TRAIN
    assert checkpoint.recorded_step(_folder(tmp_path / "b", 3), 3)[1] == checkpoint.FINISH
    assert checkpoint.recorded_step(_folder(tmp_path / "c", 3, end_epoch=3), 3)[1] == checkpoint.DONE
    # the early stop as metrics.json recorded it for the checkpoint's epoch
    assert checkpoint.recorded_step(_folder(tmp_path / "d", 3, early_stop=True), 6)[1] == checkpoint.FINISH


def test_an_unreadable_metrics_file_is_named(tmp_path):
    output = _folder(tmp_path, 3)
    (tmp_path / outputs.METRICS).write_text('{"run": {"end": ')
    with pytest.raises(TrainerError, match="cannot read %s" % (tmp_path / outputs.METRICS)):
        checkpoint.resume_step(output, 3, 3, False)


def test_the_line_after_an_interruption_says_what_resume_will_do(tmp_path):
    finish = _folder(tmp_path / "finish", 3)
    assert local.interrupted_message(signal.SIGINT, finish, 3) == (
        "interrupted by SIGINT after training ended (epoch 3), before the run's end: the test split, the baseline "
        "and metrics.json's run.end were not written; the last complete checkpoint is epoch 3 (%s/checkpoint): "
        "--resume finishes the run without training" % finish)
    assert local.interrupted_message(signal.SIGTERM, _folder(tmp_path / "train", 2), 3).endswith(
        "after epoch 2; the last complete checkpoint is epoch 2 (%s/train/checkpoint): continue with --resume"
        % tmp_path)
    done = _folder(tmp_path / "done", 3, end_epoch=3)
    assert local.interrupted_message(signal.SIGINT, done, 3) == (
        "interrupted by SIGINT after the run had ended (epoch 3; metrics.json holds its end): nothing is missing")
    # without --epochs (not known): the checkpoint line, as before
    assert local.interrupted_message(signal.SIGINT, finish, None).endswith(": continue with --resume")
