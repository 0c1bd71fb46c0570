"""facts.pyxis: how pyxis reads ``--container-image`` (../shared/cases/29), the one rule of the Slurm launcher,
``invoke validate --job`` and ``invoke train --explain``; facts.parsers.pyxis on case 29's pyxis lines."""
from __future__ import annotations

import pytest

from facts.parsers.pyxis import PyxisFailure, classify_pyxis
from facts.pyxis import image_problem
from tests.lib.paths import CASES


@pytest.mark.parametrize("image,problem", [
    ("chexstack-cpu.sqsh", "PYXIS_SQUASHFS_AS_REGISTRY"),
    ("chexstack-cpu.squashfs", "PYXIS_SQUASHFS_AS_REGISTRY"),
    ("chexstack-cpu.sqfs", "PYXIS_SQUASHFS_AS_REGISTRY"),
    ("images/chexstack-cpu.SQSH", "PYXIS_SQUASHFS_AS_REGISTRY"),
    ("images/chexstack.sif", "PYXIS_SIF_IMAGE"),
    ("chexstack-cpu.sif", "PYXIS_SIF_IMAGE"),
    ("/shared/images/chexstack-cpu.sif", "PYXIS_SIF_IMAGE"),
    ("/shared/images/chexstack-cpu.sqsh", None),
    ("./chexstack-cpu.sqsh", None),
    ("../images/chexstack-cpu.squashfs", None),
    ("nvcr.io#nvidia/tensorflow:19.06-py3", None),
    ("chexstack/cpu:0.1.0-0123456789ab", None),
])
def test_what_pyxis_makes_of_an_image(image, problem):
    assert image_problem(image) == problem


def test_case29s_pyxis_lines_are_the_import_of_a_file_name():
    text = (CASES / "29-pyxis-relative-sqsh-image.txt").read_text()
    assert classify_pyxis(text) == PyxisFailure(
        "PYXIS_SQUASHFS_AS_REGISTRY", "chexstack-cpu.sqsh", "pyxis: importing docker image: chexstack-cpu.sqsh",
        "URL https://registry-1.docker.io/v2/library/chexstack-cpu.sqsh/manifests/latest returned error code: 401 "
        "Unauthorized")
    assert classify_pyxis(text.replace("chexstack-cpu.sqsh", "/shared/chexstack-cpu.sqsh")) is None
    assert classify_pyxis("") is None
