"""Label file parsing: ../shared/cases/18 (exact vectors, the unknown-label error) and the real NIH file."""
from __future__ import annotations

import gzip
import hashlib
import shutil

import numpy as np
import pytest

from tests.lib.paths import CASES, SAMPLE
from trainer import labels
from trainer.errors import TrainerError

CASE18 = CASES / "18-chestxray14-label-parsing.csv"
LABEL_FILE = SAMPLE / "Data_Entry_2017_v2020.csv.gz"

EXPECTED = {  # ../shared/cases/18-chestxray14-label-parsing.expected.md
    "00090001_000.png": "0 0 0 0 0 0 0 0 0 0 0 0 0 0",
    "00090001_001.png": "1 0 0 1 0 0 1 0 0 0 0 0 0 0",
    "00090002_000.png": "0 0 0 0 0 0 0 0 0 0 0 0 1 0",
    "00090003_000.png": "0 0 1 0 0 0 0 0 0 0 0 0 1 1",
}


def _write(tmp_path, lines, name="Data_Entry_2017.csv"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_case18_unknown_label_names_file_line_and_label():
    with pytest.raises(TrainerError) as err:
        labels.read_label_file(str(CASE18))
    message = str(err.value)
    assert "18-chestxray14-label-parsing.csv line 6" in message
    assert "'Pleural Thickening'" in message


def test_case18_vectors_without_the_bad_row(tmp_path):
    lines = CASE18.read_text().splitlines()
    path = _write(tmp_path, [l for l in lines if "Pleural Thickening" not in l])
    table = labels.read_label_file(path)
    assert table.names == list(EXPECTED)
    for name, vector in zip(table.names, table.labels):
        assert " ".join(map(str, vector)) == EXPECTED[name]
    assert table.patients == ["90001", "90001", "90002", "90003"]


def test_no_trailing_comma_and_gzip_give_the_same_table_and_hash(tmp_path):
    lines = [l for l in CASE18.read_text().splitlines() if "Pleural Thickening" not in l]
    with_comma = labels.read_label_file(_write(tmp_path, lines, "a.csv"))
    without = labels.read_label_file(_write(tmp_path, [l.rstrip(",") for l in lines], "b.csv"))
    assert with_comma.names == without.names
    assert (with_comma.labels == without.labels).all()
    gz = tmp_path / "c.csv.gz"
    with open(tmp_path / "a.csv", "rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    compressed = labels.read_label_file(str(gz))
    assert compressed.sha256 == with_comma.sha256 == hashlib.sha256((tmp_path / "a.csv").read_bytes()).hexdigest()


def test_columns_found_by_name_not_position(tmp_path):
    path = _write(tmp_path, ["Patient ID,Finding Labels,Image Index", "7,Hernia,x.png"])
    table = labels.read_label_file(path)
    assert table.names == ["x.png"] and table.patients == ["7"]
    assert table.labels[0].tolist() == [0] * 13 + [1]


@pytest.mark.parametrize("header,row,fragment", [
    ("Image Index,Finding Labels,Patient ID", "a.png,No Finding|Mass,1", "No Finding must stand alone"),
    ("Image Index,Finding Labels,Patient ID", "a.png,Masss,1", "unknown label 'Masss'"),
    ("Image Index,Labels,Patient ID", "a.png,Mass,1", "header has no column 'Finding Labels'"),
    ("Image Index,Finding Labels,Patient ID", "a.png,Mass", "line 2: 2 fields"),
])
def test_bad_rows_name_the_line(tmp_path, header, row, fragment):
    with pytest.raises(TrainerError, match=fragment):
        labels.read_label_file(_write(tmp_path, [header, row]))


def test_duplicate_image_row_is_an_error(tmp_path):
    path = _write(tmp_path, ["Image Index,Finding Labels,Patient ID", "a.png,Mass,1", "a.png,Mass,1"])
    with pytest.raises(TrainerError, match="line 3: image a.png listed twice"):
        labels.read_label_file(path)


def test_real_nih_label_file():
    table = labels.read_label_file(str(LABEL_FILE))
    assert len(table) == 112120
    assert table.labels.shape == (112120, 14)
    with gzip.open(LABEL_FILE, "rb") as f:
        assert table.sha256 == hashlib.sha256(f.read()).hexdigest()
    counts = dict(zip(labels.CLASSES, table.labels.sum(axis=0).tolist()))
    no_finding = int((table.labels.sum(axis=1) == 0).sum())
    # NIH's README_CHESTXRAY: 60,361 images labelled "No Finding"; Hernia is the rarest label.
    assert no_finding == 60361
    assert min(counts, key=counts.get) == "Hernia"
    assert np.asarray(table.labels).dtype == np.uint8
