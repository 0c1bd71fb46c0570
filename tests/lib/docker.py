"""The Docker engine fixtures (a plugin ``tests/conftest.py`` registers): every test that uses one of them is in
the ``docker`` lane (``tests.lib.lanes`` refuses to collect it otherwise).

- ``client``: the docker SDK's client of the running engine (session); skips where none answers, fails in CI;
- ``debian_base``: the registry-free Debian base ``chexstack-local/debian:bookworm`` (debootstrap, made or reused:
  ``images.local_base.ensure_debian_base``);
- ``cpu_build``: ``images.build.build("cpu")`` on that base, once per session for every module (a rerun reuses
  the engine's layer cache).
"""
from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def client():
    import docker
    try:
        c = docker.from_env(timeout=900)
        c.ping()
    except docker.errors.DockerException as e:
        if os.environ.get("CI"):
            pytest.fail("no Docker engine in CI (scripts/setup --docker starts one): %s" % e)
        pytest.skip("no Docker engine answers: %s" % e)
    return c


@pytest.fixture(scope="session")
def debian_base(client) -> str:
    from images.local_base import LOCAL_DEBIAN, ensure_debian_base
    ensure_debian_base(LOCAL_DEBIAN, client)
    return LOCAL_DEBIAN


@pytest.fixture(scope="session")
def cpu_build(client, debian_base):
    """The cpu stack built, verified and tagged on ``debian_base``: a ``BuildResult``."""
    from images.build import build
    return build("cpu", base=debian_base)
