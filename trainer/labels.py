"""NIH ChestX-ray14 label file (``Data_Entry_2017*.csv`` or ``.csv.gz``) → one 14-label vector per image.

Facts (NIH release, https://nihcc.app.box.com/v/ChestXray-NIHCC; Wang et al., CVPR 2017;
https://github.com/jrzech/reproduce-chexnet/issues/2):

- Header ``Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,View Position,
  OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y]`` — the bracketed names hold unquoted commas and
  older copies end every line with a trailing comma, so columns are found by NAME, never by position.
- ``Finding Labels`` joins labels with ``|``; ``No Finding`` means none of the 14 (all zeros) and never appears
  together with another label. The 2020 revision spells ``Pleural_Thickening``; any other spelling (e.g. with a
  space) is an unknown label and an error naming the file, line and label.
- Label order is CheXNet's (Rajpurkar et al. 2017, https://arxiv.org/abs/1711.05225, Table 1).

``label_sha256`` is the SHA-256 of the file's CONTENT (after gunzip for ``.csv.gz``), so the same labels compressed
or not give one hash; runs record it and ``--resume`` refuses a different one.
"""
import csv
import gzip
import hashlib
import io
import os

import numpy as np

from trainer.errors import TrainerError

CLASSES = ("Atelectasis", "Cardiomegaly", "Effusion", "Infiltration", "Mass", "Nodule", "Pneumonia",
           "Pneumothorax", "Consolidation", "Edema", "Emphysema", "Fibrosis", "Pleural_Thickening", "Hernia")
NO_FINDING = "No Finding"
IMAGE_COLUMN = "Image Index"
LABELS_COLUMN = "Finding Labels"
PATIENT_COLUMN = "Patient ID"
_INDEX = dict((name, i) for i, name in enumerate(CLASSES))


class LabelTable(object):
    """Parsed label file.

    ``names``: list of N image names (``00000001_000.png``); ``patients``: list of N patient IDs (str);
    ``labels``: uint8 array [N, 14] in ``CLASSES`` order; ``sha256``: content hash; ``path``: the file.
    """

    def __init__(self, path, names, patients, labels, sha256):
        self.path = path
        self.names = names
        self.patients = patients
        self.labels = labels
        self.sha256 = sha256

    def __len__(self):
        return len(self.names)


def read_text(path):
    """The label file's text and the SHA-256 of its content (gunzipped if the name ends in .gz)."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            with open(path, "rb") as f:
                raw = f.read()
    except (IOError, OSError, EOFError) as e:
        raise TrainerError("cannot read label file %s: %s" % (path, e))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TrainerError("label file %s is not UTF-8 text: %s" % (path, e))
    return text, hashlib.sha256(raw).hexdigest()


def parse_findings(text, where):
    """``"Effusion|Hernia"`` → uint8 vector [14]; ``where`` (file:line) names the row in errors."""
    vector = np.zeros(len(CLASSES), dtype=np.uint8)
    parts = [p.strip() for p in text.split("|")]
    if parts == [NO_FINDING]:
        return vector
    for part in parts:
        if part == NO_FINDING:
            raise TrainerError("%s: '%s' together with other labels in '%s' (No Finding must stand alone)"
                               % (where, NO_FINDING, text))
        if part not in _INDEX:
            raise TrainerError("%s: unknown label '%s' in '%s'; expected '%s' or labels among: %s"
                               % (where, part, text, NO_FINDING, ", ".join(CLASSES)))
        vector[_INDEX[part]] = 1
    return vector


def _column_index(header, path):
    names = [h.strip() for h in header]
    index = {}
    for column in (IMAGE_COLUMN, LABELS_COLUMN, PATIENT_COLUMN):
        if column not in names:
            raise TrainerError("%s line 1: header has no column '%s' (found: %s)"
                               % (path, column, ", ".join(n for n in names if n)))
        index[column] = names.index(column)
    return index


def read_label_file(path):
    """Parse ``path`` into a LabelTable; a TrainerError names the file and line of any bad row."""
    text, sha256 = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise TrainerError("label file %s is empty" % path)
    col = _column_index(header, path)
    needed = max(col.values()) + 1
    shown = os.path.basename(path)
    names, patients, vectors, seen = [], [], [], {}
    for row in reader:
        if not row or not any(field.strip() for field in row):
            continue
        where = "%s line %d" % (shown, reader.line_num)
        if len(row) < needed:
            raise TrainerError("%s: %d fields, expected at least %d (up to the last of the columns Image Index, "
                               "Finding Labels, Patient ID)" % (where, len(row), needed))
        name = row[col[IMAGE_COLUMN]].strip()
        if name in seen:
            raise TrainerError("%s: image %s listed twice (first on line %d)" % (where, name, seen[name]))
        seen[name] = reader.line_num
        names.append(name)
        patients.append(row[col[PATIENT_COLUMN]].strip())
        vectors.append(parse_findings(row[col[LABELS_COLUMN]], where))
    if not names:
        raise TrainerError("label file %s has a header but no rows" % path)
    return LabelTable(path, names, patients, np.stack(vectors), sha256)
