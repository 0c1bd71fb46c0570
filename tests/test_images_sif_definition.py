"""The SIF's own definition (``images/sif.py``): written through the one definition model, ``convert.definition``."""
from convert.definition import Definition
from images.labels import DOCKER_IMAGE_ID, MANIFEST_SHA256
from images.sif import definition


def test_the_sif_definition_bootstraps_the_saved_archive_and_labels_it_with_the_image_id_and_manifest():
    text = definition("/tmp/build/cpu.tar", {MANIFEST_SHA256: "ab" * 32, DOCKER_IMAGE_ID: "sha256:" + "cd" * 32})
    parsed = Definition.parse(text)
    assert parsed.text() == text
    (stage,) = parsed.stages
    assert (stage.bootstrap, stage.image) == ("docker-archive", "/tmp/build/cpu.tar")
    (labels,) = stage.section("labels")
    assert labels.body == tuple("    %s %s" % kv for kv in sorted({MANIFEST_SHA256: "ab" * 32,
                                                                    DOCKER_IMAGE_ID: "sha256:" + "cd" * 32}.items()))


def test_a_sif_digest_is_read_once_per_file_version(tmp_path, monkeypatch):
    """``file_sha256`` of the same SIF for each plan of a sweep reads it once; a changed file is read again."""
    import hashlib
    import os

    from images import sif

    path = tmp_path / "x.sif"
    path.write_bytes(b"one")
    reads = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: (reads.append(str(p)), real_open(p, *a, **k))[1])
    assert sif.file_sha256(path) == sif.file_sha256(path) == hashlib.sha256(b"one").hexdigest()
    assert reads == [str(path)]
    path.write_bytes(b"two!")
    os.utime(path, ns=(1, 1))
    assert sif.file_sha256(path) == hashlib.sha256(b"two!").hexdigest()
    assert reads == [str(path)] * 2


def test_the_sif_definition_pulls_a_registry_image_by_digest_and_refuses_a_tag():
    from pathlib import Path

    import pytest

    digest = "sha256:" + "ef" * 32
    (stage,) = Definition.parse(definition("10.213.57.1:5000/chexstack/cpu@" + digest, {})).stages
    assert (stage.bootstrap, stage.image) == ("docker", "10.213.57.1:5000/chexstack/cpu@" + digest)
    (stage,) = Definition.parse(definition(Path("/tmp/build/cpu.tar"), {})).stages
    assert (stage.bootstrap, stage.image) == ("docker-archive", "/tmp/build/cpu.tar")
    with pytest.raises(ValueError, match="by digest only"):
        definition("10.213.57.1:5000/chexstack/cpu:v1", {})
