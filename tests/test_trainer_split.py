"""Patient-level split: no patient in two splits, ever (seeded split and official lists)."""
from __future__ import annotations

import collections

import pytest

from tests.lib.paths import SAMPLE
from trainer import labels, split
from trainer.errors import TrainerError


@pytest.fixture(scope="module")
def nih():
    return labels.read_label_file(str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"))


def _patients_per_split(patients, codes):
    splits = collections.defaultdict(set)
    for patient, code in zip(patients, codes):
        splits[patient].add(code)
    return splits


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_seeded_split_of_the_full_nih_file_is_patient_disjoint(nih, seed):
    codes = split.patient_split(nih.patients, seed)
    assert all(len(s) == 1 for s in _patients_per_split(nih.patients, codes).values())
    split.check_patient_disjoint(nih.names, nih.patients, codes)
    n_patients = len(set(nih.patients))  # 30,805 patients (NIH README)
    assert n_patients == 30805
    val = {p for p, c in zip(nih.patients, codes) if c == split.VAL}
    test = {p for p, c in zip(nih.patients, codes) if c == split.TEST}
    assert len(val) == round(0.1 * n_patients) and len(test) == round(0.2 * n_patients)


def test_seeded_split_is_deterministic_and_seed_dependent(nih):
    a = split.patient_split(nih.patients, 7)
    assert a == split.patient_split(nih.patients, 7)
    assert a != split.patient_split(nih.patients, 8)


def test_official_lists_keep_test_and_split_train_val_by_patient():
    names = ["a1", "a2", "b1", "c1", "c2", "d1", "x1"]
    patients = ["a", "a", "b", "c", "c", "d", "x"]
    codes = split.official_split(names, patients, ["a1", "a2", "b1", "d1"], ["c1", "c2"], seed=0, val_fraction=0.3)
    assert codes[3:5] == [split.TEST, split.TEST]
    assert codes[6] == split.UNLISTED
    assert codes[0] == codes[1] and set(codes[:3] + codes[5:6]) == {split.TRAIN, split.VAL}
    split.check_patient_disjoint(names, patients, codes)


def test_patient_in_both_official_lists_is_refused():
    names, patients = ["a1", "a2", "b1"], ["a", "a", "b"]
    codes = split.official_split(names, patients, ["a1", "b1"], ["a2"], seed=0, val_fraction=0.5)
    with pytest.raises(TrainerError, match="patient a is in two splits"):
        split.check_patient_disjoint(names, patients, codes)


def test_bad_fractions():
    with pytest.raises(TrainerError, match="--val-fraction"):
        split.patient_split(["a"], 0, val_fraction=0.5, test_fraction=0.6)
