"""``trainer.runtime.container()``: where a rank runs, as its run record says (issue 22: inside a SIF, the SIF's
path, its chexstack labels and the file's SHA-256 the launcher computed)."""
from __future__ import annotations

import json

from trainer import runtime


def test_inside_a_sif_the_record_names_the_file_its_labels_and_its_digest(tmp_path, monkeypatch):
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"org.chexstack.docker.image.id": "sha256:ab", "org.label-schema.x": "y"}))
    monkeypatch.setattr(runtime, "SIF_LABELS", str(labels))
    monkeypatch.setenv("APPTAINER_CONTAINER", "/shared/chexstack-cpu.sif")
    monkeypatch.setenv("CHEXSTACK_SIF_SHA256", "0" * 64)
    assert runtime.container() == {"runtime": "apptainer", "image": "/shared/chexstack-cpu.sif",
                                   "labels": {"org.chexstack.docker.image.id": "sha256:ab"}, "sha256": "0" * 64}
    monkeypatch.delenv("CHEXSTACK_SIF_SHA256")
    assert "sha256" not in runtime.container()


def test_outside_a_container_there_is_no_record(monkeypatch):
    for name in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("os.path.exists", lambda p: False)
    assert runtime.container() is None
