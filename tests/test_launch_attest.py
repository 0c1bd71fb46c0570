"""The signed statement of a result (launch.attest) and ``invoke verify-run``: a fresh run's statement verifies,
an edited metrics.json, a swapped SIF and a drifted environment fail by name, a missing statement or another key
cannot be verified; an implementation other than chexstack's (OpenSSL's ECDSA over DSSE's pre-authentication
encoding) accepts the same envelope. Drift itself (launch.drift) from as-run facts as the trainer records them."""
from __future__ import annotations

import base64
import json
import shutil
import subprocess

import pytest

from envs.manifest import load_stack
from launch import attest
from launch.drift import drift
from tests.lib.cli import run
from tests.lib.paths import REPO

#: One rank's as-run facts as trainer.asrun records them in the cpu image (Debian 12's Open MPI, CPU TensorFlow).
RANK = {"python": "3.11.2", "tensorflow": "2.15.1", "horovod": "0.28.1",
        "horovod_build": {"mpi": True, "gloo": True, "nccl": 0}, "nccl": None, "openmpi": "4.1.4",
        "packages": 52, "packages_sha256": "a" * 64}


@pytest.fixture
def key(tmp_path, monkeypatch):
    """A signing key of this test's own (the project's key is made in build/keys on first use)."""
    from images.sif import KEY_ENV, signing_key

    path = tmp_path / "keys" / "site.pem"
    monkeypatch.setattr("images.sif.DEFAULT_KEY", path)
    made = signing_key()
    monkeypatch.setenv(KEY_ENV, str(made))
    return made


def _result(folder, as_run=None, stack=None, image=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.json").write_text(json.dumps({"run": {"world_size": 2, "as_run": as_run or [RANK, RANK]},
                                                     "epochs": []}))
    (folder / "predictions.csv").write_text("image,Atelectasis\na.png,0.5\n")
    return attest.finish_run(folder, throughput=False, stack=stack, image=image, plan_line="horovodrun -np 2 x",
                             started=attest.now())


def test_drift_between_ranks_and_against_the_manifest():
    other = {**RANK, "tensorflow": "2.14.0", "packages_sha256": "b" * 64}
    assert drift([RANK, RANK], None) == []
    assert drift([RANK, other], None) == [
        "ranks disagree on tensorflow: rank 0 2.15.1, rank 1 2.14.0",
        "ranks disagree on packages_sha256: rank 0 %s, rank 1 %s" % ("a" * 64, "b" * 64)]
    assert drift([RANK], load_stack("cpu")) == []
    assert drift([{**RANK, "horovod": "0.28.0", "openmpi": None}], load_stack("cpu")) == [
        "horovod: stack cpu pins 0.28.1, the ranks run 0.28.0", "mpi: stack cpu pins 4.1.4, the ranks report none"]
    # a coarser fact than the pin is compared on the parts it gives (TensorFlow's build info: cuDNN "9")
    hopper = {**RANK, "python": "3.12.3", "tensorflow": "2.17.0", "openmpi": "4.1.7", "cuda": "12.8", "cudnn": "9",
              "nccl": "2.25.1"}
    assert drift([hopper], load_stack("hopper")) == []
    assert drift([{**hopper, "cudnn": "8"}], load_stack("hopper")) == ["cudnn: stack hopper pins 9.7.1, the ranks "
                                                                      "run 8"]
    assert drift(None, None) == ["the run record has no as-run facts (as_run): what the ranks imported was not "
                                 "observed"]


def test_a_fresh_statement_verifies_and_says_what_produced_the_result(tmp_path, key):
    found, path = _result(tmp_path / "out", stack="cpu")
    assert found == [] and path == tmp_path / "out" / attest.STATEMENT
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["run"]["drift"] == []
    stmt = attest.payload(json.loads(path.read_text()))
    assert stmt["_type"] == "https://in-toto.io/Statement/v1" and stmt["predicateType"] == attest.PREDICATE_TYPE
    assert [s["name"] for s in stmt["subject"]] == ["metrics.json", "predictions.csv"]
    assert stmt["predicate"]["stack"]["manifest_sha256"] == attest.sha256_file(REPO / "envs/stacks/cpu.yaml")
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "stack: cpu (manifest sha256 " in result.stdout and "launch: horovodrun -np 2 x" in result.stdout
    assert "as run (2 ranks): python 3.11.2, tensorflow 2.15.1, horovod 0.28.1, openmpi 4.1.4" in result.stdout


def test_an_edited_metrics_json_fails_naming_it(tmp_path, key):
    _result(tmp_path / "out")
    metrics = tmp_path / "out" / "metrics.json"
    metrics.write_text(metrics.read_text().replace('"world_size": 2', '"world_size": 4'))
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 1
    assert "%s: SHA-256 " % metrics in result.stderr and "the statement says" in result.stderr


def test_a_swapped_sif_fails_naming_the_field(tmp_path, key):
    sif = tmp_path / "cpu.sif"
    sif.write_bytes(b"SIF one")
    _result(tmp_path / "out", image=attest.sif_block(sif))
    assert run("verify-run", str(tmp_path / "out")).returncode == 0
    sif.write_bytes(b"SIF two")
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 1 and "image.sif_sha256: %s has SHA-256 " % sif in result.stderr


def test_a_drifted_environment_is_shown_and_fails_unless_allowed(tmp_path, key):
    found, _ = _result(tmp_path / "out", as_run=[RANK, {**RANK, "horovod": "0.28.0"}], stack="cpu")
    assert found == ["ranks disagree on horovod: rank 0 0.28.1, rank 1 0.28.0"]
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 1 and "drift: the run's environment drifted (1 difference)" in result.stderr
    assert "drift: ranks disagree on horovod: rank 0 0.28.1, rank 1 0.28.0" in result.stdout
    assert run("verify-run", str(tmp_path / "out"), "--allow-drift").returncode == 0


def test_what_cannot_be_verified_exits_2(tmp_path, key):
    assert run("verify-run", str(tmp_path)).returncode == 2  # no statement
    _result(tmp_path / "out")
    other = tmp_path / "other.pem"
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    other.write_bytes(ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    result = run("verify-run", str(tmp_path / "out"), "--key", str(other))
    assert result.returncode == 2 and "signed by key " in result.stderr


def test_a_forged_payload_fails_the_signature(tmp_path, key):
    _, path = _result(tmp_path / "out")
    envelope = json.loads(path.read_text())
    stmt = attest.payload(envelope)
    stmt["predicate"]["git"]["commit"] = "0" * 40  # another commit claimed
    envelope["payload"] = base64.b64encode(json.dumps(stmt).encode()).decode()
    path.write_text(json.dumps(envelope))
    result = run("verify-run", str(tmp_path / "out"))
    assert result.returncode == 1 and "the signature does not match its payload" in result.stderr


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command (the second verifier)")
def test_openssl_verifies_the_same_envelope(tmp_path, key):
    """A second implementation: DSSE's PAE built from the spec (https://github.com/secure-systems-lab/dsse/blob/
    master/protocol.md) and OpenSSL's ECDSA P-256/SHA-256 check against the public key."""
    from images.sif import public_key

    _, path = _result(tmp_path / "out")
    envelope = json.loads(path.read_text())
    body = base64.b64decode(envelope["payload"])
    kind = envelope["payloadType"].encode()
    (tmp_path / "pae").write_bytes(b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body))
    (tmp_path / "sig").write_bytes(base64.b64decode(envelope["signatures"][0]["sig"]))
    argv = ["openssl", "dgst", "-sha256", "-verify", str(public_key(key)), "-signature", str(tmp_path / "sig"),
            str(tmp_path / "pae")]
    assert subprocess.run(argv, capture_output=True, text=True).stdout.strip() == "Verified OK"
    (tmp_path / "pae").write_bytes(b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body + b" "))
    assert subprocess.run(argv, capture_output=True, text=True).returncode == 1
