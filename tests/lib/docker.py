"""The Docker engine fixtures (a plugin ``tests/conftest.py`` registers): every test that uses one of them is in
the ``docker`` lane (``tests.lib.lanes`` refuses to collect it otherwise).

- ``client``: the docker SDK's client of the running engine (session); skips where none answers, fails in CI;
- ``debian_base``: the registry-free Debian base ``chexstack-local/debian:bookworm`` (debootstrap, made or reused:
  ``images.local_base.ensure_debian_base``);
- ``cpu_build``: ``images.build.build("cpu")`` on that base, once per session for every module (a rerun reuses
  the engine's layer cache);
- ``cpu_sif``: ``images.sif.build_sif`` of that verified image into the checkout's ``build/sif`` (where ``invoke
  train --runtime singularity`` looks), signed with the default project key, once per session; removed at the end
  of the run unless CHEXSTACK_KEEP_TEST_IMAGES=1 (``tests.lib.leftovers``). Fails in CI without apptainer
  (``scripts/setup --apptainer``, run by ``make test``), skips elsewhere.
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


@pytest.fixture(scope="session")
def cpu_sif(client, cpu_build):
    """The signed, verified SIF of ``cpu_build``: a ``SifBuild``."""
    import shutil

    from envs.manifest import load_stack
    from images.build import SIF_DIR
    from images.sif import build_sif
    from tests.lib.paths import REPO

    if not (shutil.which("apptainer") or shutil.which("singularity")):
        if os.environ.get("CI"):
            pytest.fail("no apptainer in CI (scripts/setup --apptainer installs it)")
        pytest.skip("no apptainer on PATH (scripts/setup --apptainer installs it)")
    return build_sif(client, load_stack("cpu"), cpu_build.ref, cpu_build.image_id, REPO / SIF_DIR)
