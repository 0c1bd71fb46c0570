"""Issue 22: the signed SIF of the verified cpu image, built and verified with the real Apptainer
(scripts/setup --apptainer), and the trainer run inside it (invoke train --runtime singularity)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from chexstack.errors import ChexstackError
from envs.manifest import load_stack
from images import labels, sif
from images.naming import image_ref, manifest_digest
from images.verify import MATCH
from tests.lib.cli import INVOKE
from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import FAST_MODEL

pytestmark = [pytest.mark.docker, pytest.mark.slow]
HAVE_APPTAINER = bool(shutil.which("apptainer") or shutil.which("singularity"))
needs_apptainer = pytest.mark.skipif(not HAVE_APPTAINER and not os.environ.get("CI"),
                                     reason="no apptainer on PATH (scripts/setup --apptainer installs it)")


@needs_apptainer
def test_the_cpu_sif_is_verified_inside_signed_and_names_its_docker_image(cpu_build, cpu_sif):
    stack = load_stack("cpu")
    assert cpu_sif.path == sif.sif_path(image_ref(stack), cpu_sif.path.parent) and cpu_sif.path.is_file()
    assert not list(cpu_sif.path.parent.glob("*.partial"))
    rows = {r.row: r for r in cpu_sif.verification.rows}
    assert cpu_sif.verification.ok, [r for r in rows.values() if r.verdict != MATCH]
    # every Table 1 row of the Docker verification, judged again inside the SIF, with the same found values
    docker_rows = {r.row: r for r in cpu_build.verification.rows if not r.row.startswith(("mpi", "pmix", "verbs",
                                                                                          "python -m"))}
    for name, row in docker_rows.items():
        assert rows[name].found == row.found and rows[name].verdict == row.verdict, name
    found = sif.inspect_labels(cpu_sif.path)
    assert found[labels.DOCKER_IMAGE_ID] == cpu_build.image_id
    assert found[labels.MANIFEST_SHA256] == manifest_digest(stack)
    assert json.loads(found[labels.BOM]) == stack.model_dump(mode="json")  # the Docker image's labels carried over
    assert rows["signature"].verdict == MATCH
    verify = subprocess.run(["apptainer", "verify", "--key", str(sif.public_key(cpu_sif.key)), str(cpu_sif.path)],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stderr


@needs_apptainer
def test_a_sif_that_differs_from_its_manifest_is_removed(client, debian_base, tmp_path):
    """The Debian base has no Python: the probe cannot run, every row differs, and no SIF is left behind."""
    image_id = client.images.get(debian_base).id
    made = sif.build_sif(client, load_stack("cpu"), "chexstack-test/differs:1", image_id, tmp_path / "sif")
    assert not made.verification.ok and made.verification.probe_error
    assert not made.path.exists() and not list((tmp_path / "sif").iterdir())


def test_a_named_signing_key_that_does_not_exist_is_an_error(tmp_path):
    with pytest.raises(ChexstackError, match=r"SIF signing key: .*/nope.pem does not exist"):
        sif.signing_key(tmp_path / "nope.pem")
    (tmp_path / "half.pem").write_text("x")
    with pytest.raises(ChexstackError, match=r"half.pub.pem does not exist"):
        sif.signing_key(tmp_path / "half.pem")


@needs_apptainer
def test_training_in_the_sif_on_the_real_sample(cpu_sif, tmp_path):
    """invoke train --stack cpu --runtime singularity --gpus 0 --np 2: both ranks inside the SIF (the run record
    names the in-image TensorFlow and Python), the outputs the caller's."""
    out = tmp_path / "run"
    p = subprocess.run([INVOKE, "train", "--stack", "cpu", "--runtime",
                        "singularity", "--image", str(cpu_sif.path), "--gpus", "0", "--np", "2",
                        "--images", str(SAMPLE / "images-64"), "--labels", str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"),
                        *FAST_MODEL, "--image-size", "32", "--epochs", "1", "--bn-images", "0", "--baseline-size", "0",
                        "--val-fraction", "0.2", "--test-fraction", "0", "--output", str(out)],
                       cwd=REPO, capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "apptainer exec" in p.stdout + p.stderr
    run = json.loads((out / "metrics.json").read_text())["run"]
    assert run["world_size"] == 2
    assert run["container"]["runtime"] == "apptainer" and run["container"]["image"] == str(cpu_sif.path)
    assert run["container"]["sha256"] == sif.file_sha256(cpu_sif.path)  # the file the ranks ran in
    assert run["container"]["labels"] == {k: v for k, v in sif.inspect_labels(cpu_sif.path).items()
                                          if k in (labels.DOCKER_IMAGE_ID, labels.MANIFEST_SHA256)}
    assert run["versions"]["tensorflow"] == load_stack("cpu").components["tensorflow"].version
    for path in out.rglob("*"):
        assert path.stat().st_uid == os.getuid(), path


@needs_apptainer
def test_ctrl_c_stops_every_rank_in_the_sif(cpu_sif, tmp_path):
    """SIGINT to invoke train --runtime singularity once both ranks run: exit 130, and no process of the run (the
    apptainer exec, horovodrun, both ranks, Apptainer's squashfuse_ll, which runs in a process group of its own) is
    left once invoke has returned (a zombie, ended but not yet collected by its parent, counts as gone)."""
    import signal
    import time

    import psutil

    out = tmp_path / "interrupted"
    proc = subprocess.Popen([INVOKE, "train", "--stack", "cpu", "--runtime",
                             "singularity", "--image", str(cpu_sif.path), "--gpus", "0", "--np", "2",
                             "--data", "synthetic", "--synthetic-images", "256", *FAST_MODEL, "--image-size", "32",
                             "--epochs", "5", "--bn-images", "0", "--baseline-size", "0", "--output", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            ranks = [p for p in psutil.Process(proc.pid).children(recursive=True) if _is_rank(p)]
            if len(ranks) >= 2:
                break
            assert proc.poll() is None, proc.communicate()[0]
            time.sleep(0.5)
        else:
            pytest.fail("two ranks did not start within 5 minutes")
        time.sleep(5)  # the ranks into TensorFlow
        tree = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGINT)
        text, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, text
    assert "SIGINT" in text
    _, alive = psutil.wait_procs(tree, timeout=2)
    alive = [p for p in alive if _status(p) not in (psutil.STATUS_ZOMBIE, None)]
    assert not alive, [(p.pid, p.name()) for p in alive]


def _is_rank(p) -> bool:
    """A rank's process is ``python -m trainer ...`` (horovodrun's own command line holds "trainer" too)."""
    import psutil
    try:
        return p.cmdline()[1:3] == ["-m", "trainer"]
    except psutil.Error:
        return False


def _status(p):
    import psutil
    try:
        return p.status()
    except psutil.Error:
        return None


@needs_apptainer
@pytest.mark.parametrize("runtime", ["singularity", "all"])
def test_a_base_that_cannot_be_pulled_stops_a_sif_build_as_it_stops_a_docker_build(client, runtime, tmp_path):
    """The SIF is made from the verified Docker image, so an absent base (no registry here) stops at the same step
    with the same error as --runtime docker, and no SIF is made."""
    from images.build import build

    absent = "chexstack-test/absent-base:1"
    errors = {}
    for rt in ("docker", runtime):
        with pytest.raises(ChexstackError) as e:
            build("cpu", runtime=rt, base=absent, sif_dir=tmp_path / "sif")
        errors[rt] = (e.value.exit_code, str(e.value))
    assert errors[runtime] == errors["docker"]
    assert errors["docker"][0] == 1 and "FROM %s" % absent in errors["docker"][1]
    assert not (tmp_path / "sif").exists()
