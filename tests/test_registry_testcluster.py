"""The test cluster's OCI registry (``scripts/testcluster``: Debian's docker-registry, the CNCF distribution registry
2.8, on the bridge address only, TLS from a CA made at ``up``) and who trusts it: dockerd and skopeo through
``/etc/docker/certs.d/<host:port>/ca.crt``, the hosts chexK (the same file system), Apptainer through
``SSL_CERT_DIR``; never the system CA bundle. The session's ``testcluster`` fixture brings it up and checks at the
end that ``down`` removed the trust file (``tests.lib.testcluster.take_down``)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import pytest

from chexstack import registry
from chexstack.errors import ChexstackError, ExitCode
from envs.manifest import load_stack
from images import build as image_build
from images.verify import compare, launch_report, probe_image
from tests.lib import cli as cmd
from tests.lib.paths import REPO
from tests.lib.testcluster import REGISTRY_TRUST, SCRIPT

pytestmark = pytest.mark.cluster


def _run(*argv, timeout=120, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)


def test_registry_serves_tls_on_the_bridge_address_only_with_the_ca_made_at_up(testcluster):
    listening = _run("ss", "-Hltn", "sport", "= :5000").stdout.split()
    assert "10.213.57.1:5000" in listening
    assert not {"0.0.0.0:5000", "*:5000", "[::]:5000"} & set(listening), listening
    server = testcluster.registry_ca.replace("ca.crt", "server.crt")
    assert "IP Address:10.213.57.1" in _run("openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", server).stdout
    assert _run("openssl", "verify", "-CAfile", testcluster.registry_ca, server).returncode == 0
    url = "https://%s/v2/" % testcluster.registry
    assert _run("curl", "-sf", "--cacert", testcluster.registry_ca, url).returncode == 0
    assert _run("cmp", testcluster.registry_ca, REGISTRY_TRUST).returncode == 0
    # The system CA bundle does not trust it (curl's exit 60: peer certificate cannot be authenticated).
    assert _run("curl", "-s", "-o", "/dev/null", url).returncode == 60
    # Every host of the cluster reaches it over the bridge and trusts it through the same file.
    on_chex2 = _run(SCRIPT, "exec", "chex2", "curl", "-sf", "--cacert", REGISTRY_TRUST, url)
    assert on_chex2.returncode == 0, on_chex2.stderr
    env = _run(SCRIPT, "env").stdout
    assert "export CHEXSTACK_REGISTRY=10.213.57.1:5000" in env
    assert "export CHEXSTACK_REGISTRY_CA=%s" % testcluster.registry_ca in env
    assert "export CHEXSTACK_REGISTRY_CERT_DIR=%s" % testcluster.registry_cert_dir in env
    status = _run(SCRIPT, "status")
    assert status.returncode == 0 and "registry   running on https://10.213.57.1:5000" in status.stdout


@pytest.fixture(scope="module")
def pushed_debian(testcluster, debian_base, client):
    """The local Debian base pushed by ``chexstack.registry.push`` under the project's own name,
    ``10.213.57.1:5000/chexstack/debian:bookworm``: (that Reference, its digest)."""
    target = registry.parse("%s/chexstack/debian:bookworm" % testcluster.registry)
    return target, registry.push(client.images.get(debian_base).id, target)


@pytest.mark.docker
def test_a_pushed_image_resolves_by_tag_and_pulls_by_digest_in_dockerd_and_apptainer(testcluster, pushed_debian,
                                                                                      debian_base, client, tmp_path):
    target, digest = pushed_debian
    assert digest.startswith("sha256:") and len(digest) == 71
    assert registry.resolve(target) == digest  # the tag, resolved
    assert registry.resolve(registry.parse(target.pinned(digest))) == digest  # the digest, found there
    inspect = _run("skopeo", "inspect", "--cert-dir", testcluster.registry_cert_dir, "docker://%s" % target)
    assert inspect.returncode == 0 and json.loads(inspect.stdout)["Digest"] == digest
    pinned = target.pinned(digest)
    image = client.images.pull(pinned)
    try:
        assert pinned in image.attrs["RepoDigests"]
        assert image.id == client.images.get(debian_base).id
    finally:
        client.images.remove(pinned)
    apptainer = shutil.which("apptainer")
    if apptainer is None:
        pytest.skip("no apptainer here (scripts/setup --apptainer)")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "APPTAINER_CACHEDIR": str(tmp_path / "c")}
    untrusted = _run(apptainer, "build", tmp_path / "no.sif", "docker://" + pinned, env=env, cwd=tmp_path)
    assert untrusted.returncode != 0 and "x509: certificate signed by unknown authority" in untrusted.stderr
    built = _run(apptainer, "build", tmp_path / "deb.sif", "docker://" + pinned, timeout=600, cwd=tmp_path,
                 env=dict(env, SSL_CERT_DIR=testcluster.registry_cert_dir))
    assert built.returncode == 0, built.stderr[-2000:]
    assert _run(apptainer, "exec", tmp_path / "deb.sif", "cat", "/etc/debian_version", env=env,
                cwd=tmp_path).stdout.startswith("12.")


@pytest.mark.docker
def test_image_and_base_by_tag_are_resolved_at_render_time_and_a_base_by_digest_is_pulled(testcluster, pushed_debian,
                                                                                          client):
    target, digest = pushed_debian
    pinned = target.pinned(digest)
    rendered = cmd.run("train", "--launcher", "k8s", "--stack", "cpu", "--image", str(target), "--data", "synthetic",
                       "--output", "/shared/runs/r1", "--render", expect=0)
    assert "image %s (from %s)" % (pinned, target) in rendered.stdout.splitlines()[0]
    assert rendered.stdout.count("image: %s\n" % pinned) == 2  # the Launcher's and the Workers' containers
    assert "image %s resolved to %s at render time" % (target, pinned) in rendered.stderr
    missing = cmd.run("train", "--launcher", "k8s", "--stack", "cpu", "--image", target.name + ":nope", "--data",
                      "synthetic", "--output", "/shared/runs/r1", "--render", expect=2)
    assert missing.stderr.startswith("error: registry 10.213.57.1:5000: cannot resolve %s:nope: it has no such image ("
                                     % target.name) and missing.stdout == ""
    dry = cmd.run("build", "--stack", "cpu", "--base", str(target), "--dry-run", expect=0)
    assert "base %s resolved to %s" % (target, pinned) in dry.stdout and "FROM %s AS devel" % pinned in dry.stdout
    # The build's FROM by digest: the engine, holding no such reference, pulls it from the registry (trusting the CA).
    from images.context import context_tar
    from images.docker_build import docker_build
    assert not any(pinned in (i.attrs.get("RepoDigests") or []) for i in client.images.list())
    built = docker_build(client, context_tar("FROM %s\nLABEL org.chexstack.test=registry-base\n" % pinned, {}),
                         quiet=True)
    try:
        assert pinned in client.images.get(pinned).attrs["RepoDigests"]
    finally:
        client.images.remove(built)
        client.images.remove(pinned)


@pytest.fixture
def untrusted_registry(testcluster, tmp_path):
    """A second registry on the bridge (10.213.57.1:5001) whose self-signed certificate nothing here trusts."""
    d = tmp_path / "untrusted"
    d.mkdir()
    made = _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-days", "1", "-subj", "/CN=untrusted", "-addext", "subjectAltName=IP:10.213.57.1",
                "-keyout", d / "key.pem", "-out", d / "cert.pem")
    assert made.returncode == 0, made.stderr
    (d / "config.yml").write_text("version: 0.1\nstorage: {filesystem: {rootdirectory: %s/data}}\nhttp: {addr: "
                                  "10.213.57.1:5001, tls: {certificate: %s/cert.pem, key: %s/key.pem}}\n" % (d, d, d))
    server = subprocess.Popen(["docker-registry", "serve", str(d / "config.yml")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            if _run("curl", "-s", "-o", "/dev/null", "--cacert", d / "cert.pem",
                    "https://10.213.57.1:5001/v2/").returncode == 0:
                break
            time.sleep(0.2)
        yield "10.213.57.1:5001"
    finally:
        server.terminate()
        assert server.wait(timeout=30) is not None


@pytest.mark.docker
def test_a_registry_that_cannot_be_used_is_one_error_line_naming_it_and_the_cause(testcluster, untrusted_registry,
                                                                                  pushed_debian):
    unreachable = cmd.run("build", "--stack", "cpu", "--push", "10.213.57.1:5999/chexstack/cpu:t", expect=2)
    assert unreachable.stderr.strip().splitlines() == [
        unreachable.stderr.strip()] and "building" not in unreachable.stdout
    assert unreachable.stderr.startswith("error: registry 10.213.57.1:5999: cannot push to "
                                         "10.213.57.1:5999/chexstack/cpu:t: it cannot be reached (")
    assert "connection refused" in unreachable.stderr
    untrusted = cmd.run("build", "--stack", "cpu", "--push", untrusted_registry + "/chexstack/cpu:t", expect=2)
    assert untrusted.stderr.startswith("error: registry 10.213.57.1:5001: cannot push to 10.213.57.1:5001/chexstack/"
                                       "cpu:t: its TLS certificate is not trusted here (put its CA in /etc/docker/"
                                       "certs.d/10.213.57.1:5001/ca.crt) (")
    assert "x509: certificate signed by unknown authority" in untrusted.stderr
    target, digest = pushed_debian
    wrong = registry.parse(target.pinned("sha256:" + "0" * 64))
    with pytest.raises(registry.RegistryError) as e:
        registry.resolve(wrong)
    assert str(e.value).startswith("registry 10.213.57.1:5000: cannot resolve %s: it has no such image (" % wrong)


@pytest.mark.docker
def test_push_refuses_an_image_whose_verification_failed_before_any_push(testcluster, debian_base, client, tmp_path):
    stack = load_stack("cpu")
    image_id = client.images.get(debian_base).id
    verification = compare(stack, probe_image(client, image_id), launch_report(client, image_id))
    assert not verification.ok  # the bare Debian base is not the cpu stack: its rows, really probed, mismatch
    built = image_build.BuildResult(image_id, debian_base, True, verification)
    target = registry.parse("%s/chexstack/unverified:t" % testcluster.registry)
    with pytest.raises(ChexstackError) as e:
        image_build.push_verified(built, target, tmp_path, "cpu")
    assert e.value.exit_code == ExitCode.FAILED and "--push refused: " in str(e.value)
    assert "nothing was pushed to 10.213.57.1:5000" in str(e.value)
    assert list(tmp_path.iterdir()) == []  # no record
    with pytest.raises(registry.RegistryError, match="it has no such image"):
        registry.resolve(target)


@pytest.mark.docker
@pytest.mark.slow
def test_the_verified_cpu_image_is_pushed_once_and_its_digest_recorded(cpu_build, testcluster, tmp_path):
    target = registry.parse("%s/chexstack/cpu:session" % testcluster.registry)
    image_build.push_verified(cpu_build, target, tmp_path, "cpu")
    digest = registry.resolve(target)
    assert cpu_build.pushed == target.pinned(digest)
    record = json.loads(image_build.record_path(cpu_build.ref, tmp_path).read_text())
    assert record == {"stack": "cpu", "image": cpu_build.ref, "image_id": cpu_build.image_id, "verified": True,
                      "pushed": target.pinned(digest), "pushed_tag": str(target), "digest": digest}
    assert image_build.pushed_reference(cpu_build.ref, tmp_path) == target.pinned(digest)
    assert not image_build.record_path(cpu_build.ref, REPO / image_build.RECORDS_DIR).exists()


@pytest.mark.docker
@pytest.mark.slow
def test_a_sif_built_from_the_registry_by_digest_verifies_the_same_table_1_rows(cpu_build, cpu_sif, testcluster,
                                                                              tmp_path, monkeypatch):
    """Issue 42 item 5: ``apptainer build`` from ``docker://REGISTRY/REPO@sha256:…`` (what ``invoke build --push
    --runtime all`` does after the push) gives a SIF whose Table 1 rows verify as the one built from the engine's
    copy (the session's ``cpu_sif``), with the same labels and a valid signature."""
    from images import sif

    target = registry.parse("%s/chexstack/cpu:sif" % testcluster.registry)
    pinned = target.pinned(registry.push(cpu_build.image_id, target))
    monkeypatch.setenv("SSL_CERT_DIR", testcluster.registry_cert_dir)
    stack = load_stack("cpu")
    made = sif.build_sif(None, stack, cpu_build.ref, cpu_build.image_id, tmp_path, pulled=pinned)
    assert made.verification.ok, made.verification.mismatches()
    engine = sif.verify_sif(stack, cpu_sif.path, cpu_build.image_id, made.key)
    assert [(r.row, r.found) for r in made.verification.rows] == [(r.row, r.found) for r in engine.rows]


@pytest.mark.docker
def test_convert_reads_a_base_the_engine_does_not_hold_from_its_registry_and_pins_the_digest_read(
        testcluster, pushed_debian, micromamba_standin, client, tmp_path):
    """Issue 45's F5 kind (USER, WORKDIR, ``--chown`` naming the base's ENV) with the base only in a registry: the
    micromamba stand-in pushed to the test registry (the engine holds no image under that name) and case 52
    converted FROM it by tag, through ``invoke convert``: its config is read from the registry, so the definition
    is the engine-read one (the golden) bootstrapped from the registry by the digest that was read; ``--pull never``
    refuses it naming the real reason."""
    from tests.lib.standins import case52_context

    target = registry.parse("%s/chexstack-test/micromamba:0.21.0" % testcluster.registry)
    digest = registry.push(client.images.get(micromamba_standin).id, target)
    assert not any(str(target) in image.tags for image in client.images.list())
    df = case52_context(tmp_path, str(target))
    ran = cmd.run("convert", str(df), expect=0)
    golden = (REPO / "tests" / "golden" / "convert" / "base-52-micromamba.def").read_text()
    assert ran.stdout == golden.replace("Bootstrap: docker\nFrom: mambaorg/micromamba:0.21.0\n",
                                        "Bootstrap: docker\nFrom: %s\n" % target.pinned(digest))
    assert "was not read" not in ran.stderr
    offline = cmd.run("convert", str(df), "--pull", "never", expect=2)
    assert "the build depends on the base image %s's config" % target in offline.stderr
    assert "the local Docker engine does not hold %s; --pull never: no registry is read" % target in offline.stderr
