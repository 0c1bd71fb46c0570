"""``invoke evaluate``'s launch (``launch.evaluate``): what the host checks before any process starts, and a rank's
refusal under horovodrun, each one ``error:`` line and exit 2 whatever ``--np``."""
from __future__ import annotations

import json

import pytest

from tests.lib import cli as cmd
from tests.lib.paths import SAMPLE

LABELS = SAMPLE / "Data_Entry_2017_v2020.csv.gz"


def _inputs(tmp_path):
    """A model file, an images folder and the sample's label file: what the host can check is all there."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "model-best.h5").write_text("not a model")
    return {"--model": str(tmp_path / "run" / "model-best.h5"), "--images": str(SAMPLE / "images-1024"),
            "--labels": str(LABELS), "--output": str(tmp_path / "ev")}


def _refusals(tmp_path):
    """(option, value, the error line) of each input the host can check."""
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("x")
    missing = str(tmp_path / "nonexist.txt")
    return [
        ("--list", missing, "error: --list %s: no such file" % missing),
        ("--list", str(tmp_path / "a-folder"),
         "error: --list %s: is a folder; expected a file" % (tmp_path / "a-folder")),
        ("--model", missing, "error: --model %s: no such file" % missing),
        ("--labels", str(tmp_path / "a-folder"),
         "error: --labels %s: is a folder; expected a file" % (tmp_path / "a-folder")),
        ("--images", missing, "error: --images %s: no such directory" % missing),
        ("--images", str(tmp_path / "a-file"),
         "error: --images %s: is a file; expected a folder" % (tmp_path / "a-file")),
        ("--output", str(tmp_path / "a-file"),
         "error: --output %s is a file, not a folder" % (tmp_path / "a-file")),
    ]


@pytest.mark.parametrize("np", ["1", "2"])
def test_the_host_checks_every_input_before_any_process_starts(tmp_path, np):
    """The reported fault: ``--np 2 --list /tmp/nonexist.txt`` exited 1 with horovodrun's RuntimeError traceback,
    ``--np 1`` 2 with one line. Now the list, the model file, the images folder, the label file and the output are
    checked here first: the same line and exit 2 for every ``--np``, no process started, nothing written."""
    inputs = _inputs(tmp_path)
    for option, value, line in _refusals(tmp_path):
        args = {**inputs, option: value}
        p = cmd.run("evaluate", *[w for kv in args.items() for w in kv], "--np", np)
        assert p.returncode == 2, (option, value, p.stdout + p.stderr)
        assert p.stderr.strip().splitlines() == [line], (option, p.stderr)
        assert "Traceback" not in p.stdout + p.stderr and "-m trainer" not in p.stdout  # nothing started
        assert not (tmp_path / "ev").exists()


@pytest.mark.slow
def test_a_ranks_refusal_under_horovodrun_is_one_error_line(tmp_path):
    """What only a rank can find (here a model file Keras cannot read) is the rank's ``trainer: error:`` and exit
    2; under horovodrun, which then exits 1 with its RuntimeError traceback, it is the same one ``error:`` line
    and exit 2 as with one process, and the refused run leaves nothing: no log, no lock file, no folder."""
    inputs = _inputs(tmp_path)
    lines = []
    for np in ("2", "1"):
        p = cmd.run("evaluate", *[w for kv in inputs.items() for w in kv], "--np", np)
        assert p.returncode == 2, p.stdout + p.stderr
        assert "Traceback" not in p.stdout + p.stderr and "RuntimeError" not in p.stdout + p.stderr
        lines.append(p.stderr.strip().splitlines())
        assert not (tmp_path / "ev").exists()
    assert lines[0] == lines[1] and len(lines[0]) == 1, lines
    assert lines[0][0].startswith("error: --model %s: not a readable Keras model (" % inputs["--model"]), lines


def _run_folder(tmp_path, test=("00000013_003.png",), metrics=None):
    """A training run's folder as the trainer leaves it: model-best.h5 (not a real model: the checks here do not
    load it), splits.csv written by the trainer's own writer (CRLF line ends, the csv module's) with two training
    images and ``test``, and ``metrics`` as metrics.json."""
    from trainer import outputs
    from trainer.data import Subset

    run = tmp_path / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "model-best.h5").write_text("not a model")

    def subset(names):
        return Subset(names, names, [[0] * 14] * len(names), [n[:8].lstrip("0") for n in names])
    outputs.write_splits(str(run), [("train", subset(["00000001_000.png", "00000002_000.png"])),
                                    ("test", subset(list(test)))])
    if metrics is not None:
        (run / "metrics.json").write_text(json.dumps(metrics))
    return run


def test_split_scores_one_split_of_the_models_run(tmp_path):
    """``--list RUN/splits.csv`` failed ("no labelled image to score ... among the names in --list"): its lines are
    CSV rows, not names. ``--split S`` reads the split from the splits.csv beside the model (or ``--list
    RUN/splits.csv --split S``), with the run's own bootstrap seed and resamples, so ``--split test`` repeats the
    run's test block; without a splits.csv beside the model it is refused, naming what to give."""
    from trainer import evaluate, preflight

    run = _run_folder(tmp_path, metrics={"test": {"bootstrap": {"resamples": 200, "seed": 7}}})
    assert (run / "splits.csv").read_bytes().count(b"\r\n") == 4  # the header and 3 images
    base = ["--model", str(run / "model-best.h5"), "--images", str(SAMPLE / "images-1024"), "--labels", str(LABELS),
            "--output", str(tmp_path / "ev")]
    for extra in (["--split", "test"], ["--list", str(run / "splits.csv"), "--split", "test"]):
        options = preflight.check_evaluate(base + extra)
        names, what, path = evaluate.names_to_score(options)
        assert names == ["00000013_003.png"] and path == str(run / "splits.csv")
        assert what == "the test split of %s" % (run / "splits.csv")
        assert (options.seed, options.bootstrap) == (7, 200)  # the run's own
        assert evaluate.rows(options)[0].names == ["00000013_003.png"]
        given = preflight.check_evaluate(base + extra + ["--seed", "3", "--bootstrap", "0"])
        assert (given.seed, given.bootstrap) == (3, 0)  # given: kept
    train = evaluate.names_to_score(preflight.check_evaluate(base + ["--split", "train"]))[0]
    assert train == ["00000001_000.png", "00000002_000.png"]
    plain = preflight.check_evaluate(base)
    assert evaluate.names_to_score(plain)[0] is None and (plain.seed, plain.bootstrap) == (0, 1000)

    # refusals, each before any process starts, one line, exit 2
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "model.h5").write_text("x")
    (tmp_path / "names.txt").write_text("00000013_003.png\n")
    empty = _run_folder(tmp_path / "empty", test=())
    cases = [
        (["--list", str(run / "splits.csv")],
         "error: --list %s is a run's splits.csv (Image Index,Patient ID,split), not a list of image names: add "
         "--split test (or train, val) to score one of its splits" % (run / "splits.csv")),
        (["--model", str(tmp_path / "elsewhere" / "model.h5"), "--split", "test"],
         "error: --split test: no splits.csv beside --model %s (nor in its parent folder): --split scores a split of "
         "the run that trained the model, as its splits.csv records it; give a model of that run's folder, or --list "
         "RUN/splits.csv --split test" % (tmp_path / "elsewhere" / "model.h5")),
        (["--list", str(tmp_path / "names.txt"), "--split", "test"],
         "error: %s: not a run's splits.csv (expected its first line Image Index,Patient ID,split)"
         % (tmp_path / "names.txt")),
        (["--model", str(empty / "model-best.h5"), "--split", "test"],
         "error: --split test: %s has no test image (the run's --test-fraction was 0?)" % (empty / "splits.csv")),
        (["--split", "tset"], "error: argument --split: invalid choice: 'tset' (choose from 'train', 'val', 'test')"),
    ]
    for extra, line in cases:
        args = dict(zip(base[::2], base[1::2]))
        args.update(dict(zip(extra[::2], extra[1::2])))
        p = cmd.run("evaluate", *[w for kv in args.items() for w in kv])
        assert p.returncode == 2 and p.stderr.strip().splitlines() == [line], (extra, p.stdout + p.stderr)
        assert "-m trainer" not in p.stdout and not (tmp_path / "ev").exists()
