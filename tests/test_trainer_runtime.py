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


def test_a_rank_beyond_the_hosts_gpus_is_refused_never_trained_on_the_cpu():
    """Every TensorFlow path (TF 2.x's list of devices, TF 1.12/1.13's driver count) asks ``check_gpu_for_rank``: a
    third local rank on a host with two GPUs stops with its reason instead of training on the CPU beside them."""
    import pytest

    from trainer import compat
    from trainer.errors import TrainerError

    assert compat.check_gpu_for_rank(0, 1, 0) is False
    assert compat.check_gpu_for_rank(1, 2, 2) is True
    with pytest.raises(TrainerError, match="local rank 2 has no GPU: this host has 2 GPUs for 3 local ranks"):
        compat.check_gpu_for_rank(2, 3, 2)


def test_tf1_device_path_counts_the_driver_gpus_through_the_same_rule(monkeypatch):
    """TF 1.12/1.13 (no ``tf.config``): with CUDA built in and the driver showing one GPU, local rank 1 is refused."""
    import types

    import pytest

    from trainer import compat
    from trainer.errors import TrainerError

    fake_tf = types.SimpleNamespace(test=types.SimpleNamespace(is_built_with_cuda=lambda: True),
                                    ConfigProto=lambda: types.SimpleNamespace(gpu_options=types.SimpleNamespace()))
    monkeypatch.setattr(compat, "tf", fake_tf)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(TrainerError, match="local rank 1 has no GPU"):
        compat.configure_devices(1, 2)
