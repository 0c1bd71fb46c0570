"""Issue 42 item 4: the MPIJob's pods pull their image from the test cluster's registry by digest, as a kubelet does,
into the pods' engine (``scripts/testcluster``: a second dockerd whose store holds no image at ``up``), never from
the build engine's store (``launch.pods.pull_image``); a pull that fails fails the job (``invoke study``'s mpijob
system) with the kubelet's events, and ``invoke train --explain`` names each cause on the engine's and skopeo's
real text: a wrong digest, a registry that does not answer, one whose CA the engine does not trust, one that wants
credentials. Cheap: the registry-free Debian base pushed under the project's own name; a failed pull starts no
container, so no stack image is needed (the study test pulls the cpu image through the same path)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from tests.lib import cli as cmd

pytestmark = [pytest.mark.docker, pytest.mark.cluster]

#: A repository of the project's own on the cluster's registry (never an upstream image's name).
PROBE_REPO = "chexstack/podpull-probe"
#: A second registry on the bridge for the trust and credential cases: the cluster's certificate (its SAN is the
#: bridge address, any port), basic auth (htpasswd, bcrypt), and no trust file until a case places one.
AUTH_REGISTRY = "10.213.57.1:5001"
#: A port of the bridge address where nothing listens.
NOTHING_LISTENS = "10.213.57.1:5009"
NO_SUCH_DIGEST = "sha256:" + "0" * 64


def _run(*argv, timeout=120, **kw):
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def pods_engine(testcluster):
    from bench.study import pod_engine
    return pod_engine()


@pytest.fixture(scope="module")
def probe(testcluster, debian_base, tmp_path_factory) -> str:
    """The Debian base pushed to the cluster's registry (skopeo, trusting it through /etc/docker/certs.d): its
    reference by digest."""
    digest = tmp_path_factory.mktemp("probe") / "digest"
    copy = _run("skopeo", "copy", "-q", "--digestfile", digest, "docker-daemon:" + debian_base,
                "docker://%s/%s:t1" % (testcluster.registry, PROBE_REPO), timeout=300)
    assert copy.returncode == 0, copy.stderr
    return "%s/%s@%s" % (testcluster.registry, PROBE_REPO, digest.read_text().strip())


@pytest.fixture(scope="module")
def auth_registry(testcluster, tmp_path_factory):
    """A registry with basic auth on ``AUTH_REGISTRY`` (the distribution registry's htpasswd: bcrypt only); stopped
    at the end with any trust file a case left."""
    folder = tmp_path_factory.mktemp("auth-registry")
    hashed = _run(sys.executable, "-W", "ignore", "-c",
                  "import crypt; print(crypt.crypt('secret', crypt.mksalt(crypt.METHOD_BLOWFISH)))").stdout.strip()
    (folder / "htpasswd").write_text("chex:%s\n" % hashed)
    state = os.path.dirname(testcluster.registry_ca)
    (folder / "config.yml").write_text(
        "version: 0.1\nlog: {level: info}\nstorage:\n  filesystem: {rootdirectory: %s/data}\nhttp:\n  addr: %s\n"
        "  secret: %s\n  tls: {certificate: %s/server.crt, key: %s/server.key}\nauth:\n"
        "  htpasswd: {realm: chexstack, path: %s/htpasswd}\n" % (folder, AUTH_REGISTRY, os.urandom(8).hex(), state,
                                                                 state, folder))
    with open(folder / "registry.log", "w") as log:
        server = subprocess.Popen(["docker-registry", "serve", str(folder / "config.yml")], stdout=log, stderr=log,
                                  stdin=subprocess.DEVNULL)
    trust = "/etc/docker/certs.d/%s" % AUTH_REGISTRY
    try:
        for _ in range(100):
            if _run("curl", "-s", "-o", "/dev/null", "--cacert", testcluster.registry_ca,
                    "https://%s/v2/" % AUTH_REGISTRY).returncode == 0:
                break
            time.sleep(0.2)
        yield trust
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(trust, ignore_errors=True)


def _absent(client, ref: str) -> bool:
    import docker.errors
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        return True
    return False


def test_the_pods_engine_holds_no_copy_and_pulls_the_image_by_digest_from_the_registry(pods_engine, probe, client,
                                                                                     debian_base):
    from launch.pods import pull_image, registry_pull

    assert registry_pull(probe) and not registry_pull(debian_base)  # the explicit condition: the reference's form
    assert _absent(pods_engine, probe) and _absent(pods_engine, debian_base)  # the build engine lends it nothing
    try:
        events = pull_image(pods_engine, probe)
        assert events[0] == 'Pulling image "%s"' % probe
        assert re.match(r'^Successfully pulled image "%s" in [0-9.]+s$' % re.escape(probe), events[1]), events
        pulled = pods_engine.images.get(probe)
        assert probe in pulled.attrs["RepoDigests"]
        assert pulled.id == client.images.get(debian_base).id  # the same image, through the registry
        assert pull_image(pods_engine, probe) == ['Container image "%s" already present on machine' % probe]
        assert pull_image(pods_engine, probe, "Always")[0].startswith("Pulling image")  # the kubelet's Always
    finally:
        pods_engine.images.remove(probe, force=True)


#: (what is wrong, the reference's registry, the digest: None the probe's, the code explain gives, the trust file)
FAILURES = [
    ("a wrong digest", None, NO_SUCH_DIGEST, "IMAGE_MANIFEST_UNKNOWN", False),
    ("nothing listens", NOTHING_LISTENS, None, "REGISTRY_UNREACHABLE", False),
    ("a CA the engine does not trust", AUTH_REGISTRY, None, "REGISTRY_CERT_UNTRUSTED", False),
    ("credentials wanted", AUTH_REGISTRY, None, "REGISTRY_UNAUTHORIZED", True),
]


def _failing(testcluster, probe, registry, digest) -> str:
    repo, _, own = probe.partition("@")
    return "%s/%s@%s" % (registry or testcluster.registry, PROBE_REPO, digest or own)


def test_a_pull_that_fails_fails_the_mpijob_with_the_kubelets_events_and_explain_names_the_cause(
        testcluster, pods_engine, probe, tmp_path):
    """The whole path once, through ``invoke study`` (a wrong digest): the job fails (exit 1) naming the series and
    the pull, its events saved, nothing run after it; each cause's own text is checked below, engine-side."""
    ref = _failing(testcluster, probe, None, NO_SUCH_DIGEST)
    ran = cmd.run("study", "--systems", "mpijob,baremetal", "--np", "1", "--hosts", "chex1", "--stack", "cpu",
                  "--image", ref, "--data", "synthetic", "--steps", "1", "--repeats", "1", "--seed", "1",
                  "--results", str(tmp_path / "runs"), "--output", str(tmp_path / "out"),
                  env={"SLURM_CONF": testcluster.slurm_conf})
    text = ran.stdout + ran.stderr
    assert ran.returncode == 1, text[-3000:]
    assert "mpijob:overlay, round 1, 1 ranks: the pods' image %s could not be pulled" % ref in text, text[-3000:]
    assert re.findall(r"\[([A-Z][A-Z0-9_]+)\]", text)[0] == "IMAGE_MANIFEST_UNKNOWN", text[-3000:]
    events, = (tmp_path / "runs").glob("study-*/mpijob-overlay/repeat-1/np-1-events.log")
    lines = events.read_text().splitlines()
    assert lines[0] == 'Pulling image "%s"' % ref and lines[-1] == "Error: ErrImagePull", lines
    # seed 1 orders round 1 mpijob:overlay, baremetal:host (bench.study.round_order): nothing ran after the pull
    assert not list((tmp_path / "runs").glob("study-*/baremetal-host")), "nothing ran after the failed pull"
    assert _absent(pods_engine, ref) and not pods_engine.containers.list(all=True)


@pytest.mark.parametrize("what,registry,digest,code,trusted", FAILURES, ids=[f[3] for f in FAILURES])
def test_each_failed_pull_gives_the_kubelets_events_and_explain_names_its_cause(
        testcluster, pods_engine, probe, auth_registry, tmp_path, what, registry, digest, code, trusted):
    """The pods' engine's pull (``launch.pods.pull_image``, what a job's pods do first) of each wrong reference:
    the kubelet's events with dockerd's own text, and ``invoke train --explain`` of those events names the cause."""
    from launch.pods import ImagePullError, pull_image

    ref = _failing(testcluster, probe, registry, digest)
    if trusted:
        os.makedirs(auth_registry, exist_ok=True)
        shutil.copy(testcluster.registry_ca, os.path.join(auth_registry, "ca.crt"))
    try:
        with pytest.raises(ImagePullError) as failed:
            pull_image(pods_engine, ref)
    finally:
        shutil.rmtree(auth_registry, ignore_errors=True)
    lines = failed.value.events
    assert lines[0] == 'Pulling image "%s"' % ref and lines[-1] == "Error: ErrImagePull", lines
    assert lines[1].startswith('Failed to pull image "%s": ' % ref), lines
    events = tmp_path / "np-1-events.log"
    events.write_text("\n".join(lines) + "\n")
    again = cmd.run("train", "--explain", str(events))  # the saved events alone name the cause
    assert again.returncode == 1 and "[%s]" % code in again.stdout, again.stdout
    assert _absent(pods_engine, ref)


def test_skopeos_refusal_of_a_registry_that_wants_credentials_is_named(testcluster, probe, auth_registry, tmp_path):
    os.makedirs(auth_registry, exist_ok=True)
    shutil.copy(testcluster.registry_ca, os.path.join(auth_registry, "ca.crt"))
    try:
        inspect = _run("skopeo", "inspect", "docker://%s/%s@%s" % (AUTH_REGISTRY, PROBE_REPO,
                                                                    probe.partition("@")[2]))
    finally:
        shutil.rmtree(auth_registry, ignore_errors=True)
    assert inspect.returncode != 0 and "unauthorized: authentication required" in inspect.stderr, inspect.stderr
    log = tmp_path / "skopeo.log"
    log.write_text(inspect.stderr)
    explained = cmd.run("train", "--explain", str(log))
    assert explained.returncode == 1 and "[REGISTRY_UNAUTHORIZED]" in explained.stdout, explained.stdout
