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
