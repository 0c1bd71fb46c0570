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

import pytest

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


@pytest.mark.docker
def test_a_pushed_image_pulls_by_digest_in_dockerd_and_apptainer_trusting_the_ca_as_told(testcluster, debian_base,
                                                                                         client, tmp_path):
    repo = "%s/chexstack/registry-probe" % testcluster.registry
    copy = _run("skopeo", "copy", "-q", "--digestfile", tmp_path / "digest", "docker-daemon:" + debian_base,
                "docker://%s:t1" % repo, timeout=300)
    assert copy.returncode == 0, copy.stderr  # skopeo trusts it through /etc/docker/certs.d alone
    digest = (tmp_path / "digest").read_text().strip()
    assert digest.startswith("sha256:") and len(digest) == 71
    inspect = _run("skopeo", "inspect", "--cert-dir", testcluster.registry_cert_dir, "docker://%s:t1" % repo)
    assert json.loads(inspect.stdout)["Digest"] == digest
    pinned = "%s@%s" % (repo, digest)
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
