"""Issue 42 item 5: a signed SIF through the test cluster's registry as an ORAS artifact (``apptainer push
oras://``), pulled on another host (chex2) and kept only when ``apptainer verify`` passes there with the project's
key (``images.sif.pull_verified``); a SIF signed by another key, or unsigned, is refused before a job uses it
(``invoke study --sif oras://…``). Cheap: a SIF of one file (``Bootstrap: scratch``, built in under a second), signed
the way ``invoke build --runtime singularity`` signs the stack's (``apptainer sign --key``, the project's key)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.lib import cli as cmd
from tests.lib.paths import REPO
from tests.lib.testcluster import SCRIPT

pytestmark = [pytest.mark.cluster]

REPO_NAME = "chexstack/podpull-sif"


def _run(*argv, timeout=300, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def apptainer():
    path = shutil.which("apptainer")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("no apptainer in CI (scripts/setup --apptainer installs it)")
        pytest.skip("no apptainer on PATH (scripts/setup --apptainer installs it)")
    return path


def _other_key(folder) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private = ec.generate_private_key(ec.SECP256R1())
    key = folder / "other.pem"
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return str(key)


@pytest.fixture(scope="module")
def pushed(testcluster, apptainer, tmp_path_factory) -> dict[str, str]:
    """Three SIFs of one file pushed to the registry: signed with the project's key, with another key, unsigned;
    name -> ``oras://`` reference (the SIFs stay in ``folder``, the reference ``"folder"``)."""
    from images.sif import push_oras, signing_key

    folder = tmp_path_factory.mktemp("oras")
    (folder / "one.def").write_text("Bootstrap: scratch\n%files\n    /etc/debian_version /hello\n")
    env = dict(os.environ, SSL_CERT_DIR=testcluster.registry_cert_dir)
    built = _run(apptainer, "build", folder / "unsigned.sif", folder / "one.def", cwd=folder, env=env)
    assert built.returncode == 0, built.stderr
    keys = {"signed": str(REPO / signing_key()), "other-key": _other_key(folder)}
    for name, key in keys.items():
        shutil.copy(folder / "unsigned.sif", folder / ("%s.sif" % name))
        signed = _run(apptainer, "sign", "--key", key, folder / ("%s.sif" % name), cwd=folder)
        assert signed.returncode == 0, signed.stderr
    refs = {"folder": str(folder)}
    os.environ["SSL_CERT_DIR"] = testcluster.registry_cert_dir  # push_oras runs apptainer in this process's env
    try:
        for name in ("signed", "other-key", "unsigned"):
            refs[name] = "oras://%s/%s:%s" % (testcluster.registry, REPO_NAME, name)
            push_oras(folder / ("%s.sif" % name), refs[name])
    finally:
        del os.environ["SSL_CERT_DIR"]
    return refs


def test_a_signed_sif_round_trips_through_oras_and_verifies_on_another_host(testcluster, pushed, tmp_path):
    dest = tmp_path / "on-chex2.sif"
    pulled = _run(SCRIPT, "exec", "chex2", "env", "SSL_CERT_DIR=%s" % testcluster.registry_cert_dir,
                  sys.executable, "-c", "from images.sif import pull_verified; import sys; "
                  "print(pull_verified(sys.argv[1], sys.argv[2]))", pushed["signed"], dest, cwd=REPO)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    assert pulled.stdout.strip() == str(dest) and dest.is_file()
    with open(os.path.join(pushed["folder"], "signed.sif"), "rb") as f:
        assert dest.read_bytes() == f.read()  # the very SIF that was signed and pushed
    assert not dest.with_name(dest.name + ".partial").exists()


@pytest.mark.parametrize("name", ["other-key", "unsigned"])
def test_a_pulled_sif_that_fails_verify_refuses_the_job(testcluster, pushed, tmp_path, name):
    ran = cmd.run("study", "--systems", "apptainer,baremetal", "--np", "1", "--hosts", "chex1", "--stack", "cpu",
                  "--sif", pushed[name], "--data", "synthetic", "--steps", "1", "--repeats", "1",
                  "--results", str(tmp_path / "runs"), "--output", str(tmp_path / "out"),
                  env={"SLURM_CONF": testcluster.slurm_conf, "SSL_CERT_DIR": testcluster.registry_cert_dir})
    text = ran.stdout + ran.stderr
    assert ran.returncode == 1, text[-3000:]
    assert "%s: refused, apptainer verify --key" % pushed[name] in text, text[-3000:]
    assert "Failed to verify container" in text or "signature" in text, text[-3000:]
    assert not (tmp_path / "runs").exists(), "no job ran"
    assert not list((REPO / "build" / "sif" / "pulled").glob("*%s*" % name)), "the refused SIF was removed"
