"""Shared test helpers: where ../shared is, the one build of a stack per run, and the left-over check
(``tests/leftovers.py``: the run fails when a test leaves an image tag, container, network, namespace or daemon)."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared").resolve()
FIXTURES = SHARED / "fixtures"
CASES = SHARED / "cases"
SAMPLE = SHARED / "data" / "chestxray14"


def pytest_configure(config):
    from tests.leftovers import Leftovers
    config.pluginmanager.register(Leftovers(), "chexstack-leftovers")


@pytest.fixture
def fixture_text():
    """``fixture_text("nvcc-version-10.0.txt")`` -> the text of ../shared/fixtures/<name>."""
    return lambda name: (FIXTURES / name).read_text()


@functools.lru_cache(maxsize=None)
def built_once(stack: str, base: str):
    """``images.build.build(stack, base=base)`` once per test run. Session fixtures that other modules import are
    separate fixtures to pytest; this cache (in ``tests.conftest``, one module object for every importer) keeps
    them from building and verifying twice."""
    from images.build import build
    return build(stack, base=base)


@functools.lru_cache(maxsize=None)
def sif_once(image_id: str, ref: str):
    """``images.sif.build_sif`` of the verified cpu image once per test run, into ``build/sif`` (the path
    ``invoke train --runtime singularity`` looks in), signed with the default project key; removed at the end of the
    run unless CHEXSTACK_KEEP_TEST_IMAGES=1 (tests.leftovers)."""
    from chexstack import engine
    from envs.manifest import load_stack
    from images.build import SIF_DIR
    from images.sif import build_sif
    return build_sif(engine.client(), load_stack("cpu"), ref, image_id, REPO / SIF_DIR)


@pytest.fixture(scope="session")
def testcluster():
    """The 2-host Slurm test cluster (``tests.testcluster``), up for the session, down at its end if it started it."""
    from tests import testcluster as tc

    started = tc.bring_up()
    try:
        yield tc.Cluster()
    finally:
        if started:
            tc.take_down()
