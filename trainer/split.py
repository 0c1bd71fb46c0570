"""Train / validation / test assignment at PATIENT level: no patient's images in two splits, ever.

- Official lists (NIH's ``train_val_list.txt`` and ``test_list.txt``, patient-disjoint by construction): test is
  the test list; the train_val list is split into train and val by patient with the seed. Images in neither list
  are left out (counted).
- No lists: a seeded patient-level split, by default 70 % / 10 % / 20 % of patients as in CheXNet
  (Rajpurkar et al. 2017, §3.1: "randomly split the dataset into training (70%), validation (10%), and test
  (20%) ... no patient overlap between the sets").

Patients are shuffled with ``numpy.random.RandomState(seed)`` (its stream is frozen across numpy versions, NEP 19),
so the same seed gives the same split in a 2019 image and on today's host.
"""
from trainer.errors import TrainerError

TRAIN, VAL, TEST, UNLISTED = "train", "val", "test", "unlisted"
SPLITS = (TRAIN, VAL, TEST)


def check_fractions(val_fraction, test_fraction=None):
    """Raise a TrainerError unless 0 < val < 1 and (when the test split is drawn too, i.e. without official
    lists) 0 <= test < 1 with val + test < 1."""
    if not 0 < val_fraction < 1:
        raise TrainerError("--val-fraction %g must be in (0, 1)" % val_fraction)
    if test_fraction is not None and not (0 <= test_fraction < 1 and val_fraction + test_fraction < 1):
        raise TrainerError("--val-fraction %g and --test-fraction %g must be in [0, 1) with a sum below 1 "
                           "(val > 0)" % (val_fraction, test_fraction))


def _assign_patients(patient_ids, seed, fractions):
    """{patient: split} for ``fractions`` = [(split, fraction), ...]; the last split takes the rest."""
    import numpy as np  # here, not at the top: the host's option checks (trainer.cli) import this module

    unique = sorted(set(patient_ids))
    order = np.random.RandomState(seed).permutation(len(unique))
    assignment, start = {}, 0
    for k, (name, fraction) in enumerate(fractions):
        stop = len(unique) if k == len(fractions) - 1 else start + int(round(fraction * len(unique)))
        for i in order[start:stop]:
            assignment[unique[i]] = name
        start = stop
    return assignment


def patient_split(patients, seed, val_fraction=0.1, test_fraction=0.2):
    """Split code (train/val/test) per example, from its patient ID; ``patients``: list of N IDs."""
    check_fractions(val_fraction, test_fraction)
    by_patient = _assign_patients(patients, seed, [(VAL, val_fraction), (TEST, test_fraction),
                                                   (TRAIN, 1.0 - val_fraction - test_fraction)])
    return [by_patient[p] for p in patients]


def official_split(names, patients, train_val_names, test_names, seed, val_fraction=0.1):
    """Split code per example from NIH's lists; train_val is split into train/val by patient (``val_fraction``
    of its patients go to val). A patient in both lists shows up in ``check_patient_disjoint``."""
    check_fractions(val_fraction)
    train_val, test = set(train_val_names), set(test_names)
    codes = [TEST if n in test else (TRAIN if n in train_val else UNLISTED) for n in names]
    pool = [p for p, c in zip(patients, codes) if c == TRAIN]
    by_patient = _assign_patients(pool, seed, [(VAL, val_fraction), (TRAIN, 1.0 - val_fraction)])
    return [by_patient[p] if c == TRAIN else c for p, c in zip(patients, codes)]


def check_patient_disjoint(names, patients, codes):
    """Raise a TrainerError naming the first patient whose images fall in two splits."""
    first = {}
    for name, patient, code in zip(names, patients, codes):
        if code == UNLISTED:
            continue
        seen = first.setdefault(patient, (code, name))
        if seen[0] != code:
            raise TrainerError("patient %s is in two splits: %s (%s) and %s (%s); the split lists must be "
                               "patient-disjoint" % (patient, seen[1], seen[0], name, code))
