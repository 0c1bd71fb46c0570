"""The test cluster of ``scripts/testcluster`` for the tests that need separate hosts and a real Slurm, and its
session fixture ``testcluster`` (a plugin ``tests/conftest.py`` registers; a test that uses it is in the
``cluster`` lane, ``tests.lib.lanes``).

``bring_up()`` starts it (2 hosts, chex1 and chex2) unless it is up already and says whether it did, so the session
fixture ``testcluster`` takes down only a cluster it brought up, at the end of the session, whatever the tests
did. It skips, saying why, only when the cluster cannot be brought up here: not root, the
Debian packages missing (``scripts/setup --testcluster``), no network namespaces (``scripts/testcluster`` exit 3).
"""
from __future__ import annotations

import dataclasses
import os
import subprocess

import pytest

from tests.lib.paths import REPO

SCRIPT = REPO / "scripts" / "testcluster"
STATE = "/run/chexstack-testcluster"
REGISTRY = "10.213.57.1:5000"
#: dockerd's (and skopeo's) trust file for the cluster's registry, which ``scripts/testcluster down`` removes.
REGISTRY_TRUST = "/etc/docker/certs.d/%s/ca.crt" % REGISTRY


@dataclasses.dataclass(frozen=True)
class Cluster:
    hosts: tuple[str, ...] = ("chex1", "chex2")
    slurm_conf: str = STATE + "/slurm/slurm.conf"
    ssh_config: str = STATE + "/ssh/config"
    jobcomp: str = STATE + "/slurm/jobcomp.txt"
    #: the registry on the bridge (TLS): its ``host:port``, its CA, and a folder holding the CA alone (skopeo's
    #: ``--cert-dir``, Apptainer's ``SSL_CERT_DIR``)
    registry: str = REGISTRY
    registry_ca: str = STATE + "/registry/ca.crt"
    registry_cert_dir: str = STATE + "/registry/certs"

    def env(self, **extra: str) -> dict[str, str]:
        """This environment with Slurm's commands pointed at the cluster."""
        return dict(os.environ, SLURM_CONF=self.slurm_conf, **extra)

    def run(self, *argv: str, timeout: int = 60) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=timeout)


def script(*args: str, timeout: int = 180) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def bring_up() -> bool:
    """Bring the cluster up; True when this call started it (False: it was up). pytest.skip when it cannot be
    brought up here for a stated reason, pytest.fail when it should have come up and did not."""
    if os.geteuid() != 0:
        pytest.skip("the test cluster needs root (network namespaces, a bridge, Slurm's daemons): run make test as "
                    "root")
    if script("status").returncode == 0:
        return False
    up = script("up", "2")
    if up.returncode == 3:
        pytest.skip("the test cluster cannot be brought up here: %s" % up.stderr.strip())
    if up.returncode != 0:
        script("down")
        pytest.fail("scripts/testcluster up failed (exit %d): %s" % (up.returncode, (up.stderr or up.stdout)[-2000:]))
    return True


def take_down() -> None:
    down = script("down")
    assert down.returncode == 0, down.stderr
    assert not os.path.exists(os.path.dirname(REGISTRY_TRUST)), "scripts/testcluster down left %s" % REGISTRY_TRUST


@pytest.fixture(scope="session")
def testcluster():
    """The 2-host Slurm test cluster, up for the session, down at its end if it started it: a ``Cluster``."""
    started = bring_up()
    try:
        yield Cluster()
    finally:
        if started:
            take_down()
