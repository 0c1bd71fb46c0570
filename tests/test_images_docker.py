"""Images with the real Docker engine: the cpu stack built end to end from a local Debian base (debootstrap +
docker import), verified and tagged; the proxy CA in no layer and no history entry; training inside the image on
the real ChestX-ray14 sample; the loopback-only container of ../shared/cases/23; an NGC stand-in that must fail
verification and stay untagged.

One cpu build per session (``cpu_build``, ``tests.lib.docker``), shared by every test that uses it
(``test_images_mpijob``, ``test_bench_docker``); a rerun reuses the engine's layer cache.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

from envs.manifest import load_stack
from images import labels
from images.naming import image_ref
from images.parts import HOST_CA_BUNDLE
from tests.lib import cli as cmd
from tests.lib.leftovers import TEST_LABELS
from tests.lib.paths import REPO, SAMPLE
from tests.lib.runs import FAST_MODEL

pytestmark = [pytest.mark.docker, pytest.mark.slow]
LABELS_FILE = SAMPLE / "Data_Entry_2017_v2020.csv.gz"
IMAGES = SAMPLE / "images-64"


def _invoke(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    return cmd.invoke(*args, env={"COLUMNS": "200"}, timeout=timeout)


@pytest.fixture
def ngc_stand_in(client, debian_base):
    """The Debian base under a project-scoped name, given to ``invoke build --stack ngc --base``: never under the
    real ``nvcr.io/nvidia/tensorflow:19.06-py3`` (a later real build would use the stand-in, and a real image of
    that name would lose its tag). Untagged afterwards."""
    ref = "chexstack-test/ngc-stand-in:19.06-py3"
    client.images.get(debian_base).tag(*ref.rsplit(":", 1))
    yield ref
    client.images.remove(ref, noprune=True)


def test_cpu_image_built_verified_and_tagged(client, cpu_build, debian_base):
    stack = load_stack("cpu")
    assert cpu_build.tagged and cpu_build.verification.ok
    assert cpu_build.ref == image_ref(stack)
    image = client.images.get(image_ref(stack))
    assert image.id == cpu_build.image_id
    lab = image.labels
    assert json.loads(lab[labels.BOM]) == stack.model_dump(mode="json")
    assert lab["org.opencontainers.image.base.name"] == debian_base
    assert lab[labels.CODE] == labels.code_digest()
    assert lab["org.opencontainers.image.base.digest"] == client.images.get(debian_base).id
    assert lab["org.opencontainers.image.version"] == image_ref(stack).rsplit(":", 1)[1]
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert lab["org.opencontainers.image.revision"].startswith(head)
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", lab["org.opencontainers.image.created"])
    # python is the venv's, code under /opt/chexstack
    out = client.containers.run(image.id, ["sh", "-c", "command -v python; ls /opt/chexstack/trainer/__main__.py"],
                                remove=True, network_mode="host", labels=TEST_LABELS).decode()
    assert out.split() == ["/opt/venv/bin/python", "/opt/chexstack/trainer/__main__.py"]


def _pem_blocks(text: str) -> set[str]:
    return set(re.findall(r"-----BEGIN CERTIFICATE-----\n(.*?)-----END CERTIFICATE-----", text, re.S))


def _proxy_cas() -> set[str]:
    """PEM bodies in the host bundle that Debian's ca-certificates does not ship: the proxy's CA (if any)."""
    mozilla = set()
    for crt in Path("/usr/share/ca-certificates").rglob("*.crt"):
        mozilla |= _pem_blocks(crt.read_text(errors="replace"))
    return _pem_blocks(HOST_CA_BUNDLE.read_text(errors="replace")) - mozilla


def _ca_in_layers(client, image_id: str) -> tuple[list[str], int, int]:
    """(hits, layers, files): every regular file of every layer of ``image_id`` (``docker save``) whose path is
    under chexstack-build, whose bytes are the host CA bundle, or which holds one of the proxy's CA certificates."""
    bundle_sha = hashlib.sha256(HOST_CA_BUNDLE.read_bytes()).hexdigest()
    proxy = [b.replace("\n", "")[:200].encode() for b in _proxy_cas()]
    found, layers, files = [], 0, 0
    image_tar = io.BytesIO(b"".join(client.images.get(image_id).save(named=False)))
    with tarfile.open(fileobj=image_tar) as outer:
        for member in outer.getmembers():
            if not member.name.endswith("layer.tar"):
                continue
            layers += 1
            with tarfile.open(fileobj=outer.extractfile(member)) as layer:
                for f in layer:
                    if not f.isfile():
                        continue
                    files += 1
                    if "chexstack-build" in f.name:
                        found.append("%s: %s" % (member.name, f.name))
                    elif f.size <= 4 << 20:
                        data = layer.extractfile(f).read()
                        if hashlib.sha256(data).hexdigest() == bundle_sha or any(
                                p in data.replace(b"\n", b"") for p in proxy):
                            found.append("%s: %s" % (member.name, f.name))
    return found, layers, files


def test_proxy_ca_in_no_layer_and_no_history(client, cpu_build):
    """Every file of every layer of the final image (docker save), and the image's history."""
    if not HOST_CA_BUNDLE.is_file():
        pytest.skip("no host CA bundle")
    found, layers, files = _ca_in_layers(client, cpu_build.image_id)
    assert layers >= 5 and files > 1000
    assert not found, found
    history = [h.get("CreatedBy") or "" for h in client.api.history(cpu_build.image_id)]
    assert not [h for h in history if "chexstack-build" in h or "PIP_CERT" in h or "ca-certificates.crt" in h]
    assert any("COPY" in h for h in history)  # the history is real: the venv and code COPYs are in it


def test_ca_scan_finds_a_baked_in_ca(client, debian_base):
    """Control: the scan above does find the CA in an image that has it in a layer."""
    if not HOST_CA_BUNDLE.is_file():
        pytest.skip("no host CA bundle")
    from images.context import context_tar
    from images.docker_build import docker_build
    tar = context_tar("FROM %s\nCOPY bundle.crt /etc/ssl/certs/host-bundle.crt\n" % debian_base,
                      {"bundle.crt": HOST_CA_BUNDLE})
    image_id = docker_build(client, tar, quiet=True)
    try:
        found, _, _ = _ca_in_layers(client, image_id)
        assert [h for h in found if h.endswith("etc/ssl/certs/host-bundle.crt")]
    finally:
        client.images.remove(image_id, noprune=True)


def _metrics(output: Path) -> dict:
    return json.loads((output / "metrics.json").read_text())


def test_train_inside_the_cpu_image(cpu_build, tmp_path):
    out = tmp_path / "run"
    p = _invoke("train", "--stack", "cpu", "--gpus", "0", "--np", "2", "--images", str(IMAGES), "--labels",
                str(LABELS_FILE), "--image-size", "32", "--epochs", "1", "--batch-size", "16", "--output", str(out))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    first = p.stdout.split("launch: ", 1)[1].splitlines()[0]
    assert first.startswith("docker run --rm --network host --ipc=host --ulimit memlock=")
    assert "%s:/data/images:ro" % IMAGES in first and "%s:/output" % out in first
    assert cpu_build.ref in first and "horovodrun -np 2" in first
    assert "holds another trainer" not in p.stdout and "does not record which trainer" not in p.stdout
    metrics = _metrics(out)
    epoch = metrics["epochs"][-1]
    assert epoch["world_size"] == 2 and len(epoch["images_per_sec"]["per_rank"]) == 2
    assert len(epoch["auroc"]) == 14 and isinstance(epoch["mean_auroc"], float)


def test_loopback_only_container_picks_mpi_or_stops(cpu_build, tmp_path):
    """../shared/cases/23: no bare exit 139 in a container whose only interface is lo."""
    out = tmp_path / "none"
    # what is proven is the controller's choice and a 2-rank run to its end: synthetic images, no precise BN
    args = ["train", "--stack", "cpu", "--gpus", "0", "--np", "2", "--data", "synthetic", "--synthetic-images", "64",
            "--bn-images", "0", *FAST_MODEL, "--image-size", "32", "--epochs", "1", "--batch-size", "16",
            "--network", "none"]
    refused = _invoke(*args, "--controller", "gloo", "--output", str(out / "gloo"))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr + refused.stdout
    assert "loopback" in refused.stderr and "--controller mpi" in refused.stderr
    assert not (out / "gloo" / "metrics.json").exists()
    p = _invoke(*args, "--output", str(out / "auto"))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "controller: mpi (only loopback (lo)" in p.stdout
    assert _metrics(out / "auto")["epochs"][-1]["world_size"] == 2


def test_ngc_stand_in_fails_verification_and_stays_untagged(client, ngc_stand_in):
    stack = load_stack("ngc")
    ref = image_ref(stack)
    p = _invoke("build", "--stack", "ngc", "--base", ngc_stand_in)
    text = p.stdout + p.stderr
    assert p.returncode == 1, text[-3000:]
    assert "Traceback" not in text
    assert re.search(r"tensorflow\s+│ 1\.13\.1\s+│ not found .*MISMATCH", text), text[-4000:]
    assert re.search(r"os\s+│ Ubuntu 16\.04\S*\s+│ Debian GNU/Linux 12\S*.*MISMATCH", text), text[-4000:]
    assert "verification failed" in text and "left untagged" in text
    import docker
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(ref)


def test_allow_mismatch_keeps_the_image_with_the_mismatches_in_a_label(client, ngc_stand_in):
    tag = "chexstack-test/ngc-mismatch:1"
    p = _invoke("build", "--stack", "ngc", "--allow-mismatch", "--tag", tag, "--base", ngc_stand_in)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    try:
        mismatches = json.loads(client.images.get(tag).labels[labels.MISMATCHES])
        assert {"row": "tensorflow", "expected": "1.13.1", "found": "not found"} in mismatches
        assert labels.BOM in client.images.get(tag).labels
    finally:
        client.images.remove(tag, noprune=True)


def test_failed_build_names_the_step_shows_its_log_and_leaves_no_tag(client, debian_base):
    from chexstack.errors import ChexstackError
    from images.build import build
    from images.context import context_tar
    from images.docker_build import BuildFailed, docker_build

    tar = context_tar("FROM %s\nRUN echo hello-from-the-step && exit 3\n" % debian_base, {})
    with pytest.raises(BuildFailed) as e:
        docker_build(client, tar, quiet=True)
    assert e.value.step.startswith("Step 2/2 : RUN echo hello-from-the-step")
    assert "hello-from-the-step" in e.value.tail and "returned a non-zero code: 3" in e.value.error
    # the whole command: a base without apt-get fails the cpu build at its first RUN, and nothing is tagged
    broken = "chexstack-test/no-apt:1"
    image_id = docker_build(client, context_tar("FROM %s\nRUN rm /usr/bin/apt-get\n" % debian_base, {}), quiet=True)
    client.api.tag(image_id, *broken.split(":"))
    try:
        with pytest.raises(ChexstackError, match=r"docker build failed at Step 2/\d+ : RUN apt-get update"):
            build("cpu", base=broken, tag="chexstack-test/never:1")
        import docker
        with pytest.raises(docker.errors.ImageNotFound):
            client.images.get("chexstack-test/never:1")
    finally:
        client.images.remove(broken, noprune=True)
