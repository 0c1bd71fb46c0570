"""``invoke evaluate``'s launch (``launch.evaluate``): what the host checks before any process starts, and a rank's
refusal under horovodrun, each one ``error:`` line and exit 2 whatever ``--np``."""
from __future__ import annotations

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
