"""The Docker engine fixtures (a plugin ``tests/conftest.py`` registers): every test that uses one of them is in
the ``docker`` lane (``tests.lib.lanes`` refuses to collect it otherwise).

- ``client``: the docker SDK's client of the running engine (session); skips where none answers, fails in CI;
- ``debian_base``: the registry-free Debian base ``chexstack-local/debian:bookworm`` (debootstrap, made or reused:
  ``images.local_base.ensure_debian_base``);
- ``cpu_build``: ``images.build.build("cpu")`` on that base, once per session for every module (a rerun reuses
  the engine's layer cache);
- ``cpu_sif``: ``images.sif.build_sif`` of that verified image into the checkout's ``build/sif`` (where ``invoke
  train --runtime singularity`` looks), signed with the default project key, once per session (started by
  ``cpu_build`` in a thread when the session will need it: it overlaps the docker tests that come before the
  SIF's); removed at the end of the run unless CHEXSTACK_KEEP_TEST_IMAGES=1 (``tests.lib.leftovers``). Fails in CI
  without apptainer (``scripts/setup --apptainer``, run by ``make test``), skips elsewhere;
- ``micromamba_standin``: a stand-in of micromamba's base image on ``debian_base`` (``tests.lib.standins``), per
  module.
"""
from __future__ import annotations

import pytest

from tests.lib import lanes


@pytest.fixture(scope="session")
def client():
    import docker
    try:
        c = docker.from_env(timeout=900)
        c.ping()
    except docker.errors.DockerException as e:
        lanes.unavailable("no Docker engine answers (scripts/setup --docker starts one): %s" % e)
    return c


@pytest.fixture(scope="session")
def debian_base(client) -> str:
    from images.local_base import LOCAL_DEBIAN, ensure_debian_base
    ensure_debian_base(LOCAL_DEBIAN, client)
    return LOCAL_DEBIAN


def _apptainer() -> bool:
    import shutil
    return bool(shutil.which("apptainer") or shutil.which("singularity"))


def _make_sif(built):
    """``images.sif.build_sif`` of the built cpu image into the checkout's ``build/sif``, with a client of its own
    (the build may run in a thread beside the session's client)."""
    import docker

    from envs.manifest import load_stack
    from images.build import SIF_DIR
    from images.sif import build_sif
    from tests.lib.paths import REPO

    return build_sif(docker.from_env(timeout=900), load_stack("cpu"), built.ref, built.image_id, REPO / SIF_DIR)


@pytest.fixture(scope="session")
def cpu_build(client, debian_base, request):
    """The cpu stack built, verified and tagged on ``debian_base``: a ``BuildResult``. When the session has tests
    that use ``cpu_sif`` (and Apptainer is here), the SIF's build starts at once in a thread, beside the docker
    tests that come first: much of it (``docker save``, the layers' unpacking, hashing, signing) keeps one core
    busy, and the tests beside it use the other. The session waits for it before it ends."""
    from concurrent.futures import ThreadPoolExecutor

    from images.build import build
    built = build("cpu", base=debian_base)
    pool = None
    if _apptainer() and any("cpu_sif" in item.fixturenames for item in request.session.items):
        pool = ThreadPoolExecutor(1, thread_name_prefix="cpu-sif")
        _SIF_BUILD[built.image_id] = pool.submit(_make_sif, built)
    yield built
    if pool is not None:
        pool.shutdown(wait=True)


#: the image ID of a cpu build -> the Future of its SIF's build (``cpu_build``)
_SIF_BUILD: dict = {}


@pytest.fixture(scope="session")
def cpu_sif(client, cpu_build):
    """The signed, verified SIF of ``cpu_build``: a ``SifBuild`` (the build ``cpu_build`` started, else made
    here); a failed build fails every test that uses it with the build's own error."""
    if not _apptainer():
        lanes.unavailable("no apptainer on PATH (scripts/setup --apptainer installs it)")
    started = _SIF_BUILD.get(cpu_build.image_id)
    return started.result() if started is not None else _make_sif(cpu_build)


@pytest.fixture(scope="module")
def micromamba_standin(client, debian_base) -> str:
    """``tests.lib.standins.make_micromamba`` on ``debian_base``: the stand-in of micromamba's base image, removed
    after the module."""
    from tests.lib.standins import make_micromamba
    tag = make_micromamba(client, debian_base)
    yield tag
    try:
        client.images.remove(tag, force=True)
    except Exception:  # already gone: nothing of ours left
        pass
