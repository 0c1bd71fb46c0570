"""The suite's lanes, by marker (registered in pyproject ``[tool.pytest.ini_options] markers``; a test's markers
come from its decorators or its module's ``pytestmark``):

- unit (no lane marker): needs only what ``scripts/setup`` installs (the venv, Open MPI) — ``make test-fast``;
- ``slow``: trains or builds for real (minutes);
- ``docker``: needs a running Docker engine (``scripts/setup --docker``) — ``make test-docker``;
- ``cluster``: needs the Slurm test cluster (the ``testcluster`` fixture, as root) — ``make test-cluster``;
- ``legacy``: needs the TF 1.12 venv ``.venv-tf112`` (``scripts/setup-legacy``) — ``make test-legacy``;
- ``beside`` (with ``docker``): needs the engine (and Apptainer) but neither the cpu image (``cpu_build``) nor the
  test cluster: ``make test`` runs these after the host lane's tests, in that lane's process, beside the engine
  lane, so that the 2 cores stay busy while the engine lane's cluster jobs wait on each other. Such a run shares
  the engine with the engine lane: it judges and removes only what carries its own token
  (``tests/lib/leftovers.py``).

A lane's marker is what keeps a test out of the unit lane, so it must not be forgotten: a test that uses a lane's
fixture (directly, or through another fixture: pytest's closure of the test's fixtures) without the lane's marker
stops the collection with a usage error naming the test, the fixture and the marker. It fails rather than adding
the marker itself: the lane a test runs in is then the one its module shows, and the fix is one line.
"""
from __future__ import annotations

import os

import pytest

#: The unit lane's marker expression (``make test-fast``).
UNIT = "not slow and not docker and not cluster and not legacy"
#: ``make test``'s runs (``scripts/test-lanes``): the engine lane, and beside it the host lane then the beside
#: tests; together every test, each once.
ENGINE = "(docker or cluster) and not beside"
HOST = "not docker and not cluster"
BESIDE = "beside"
#: Fixtures a ``beside`` test must not use: what the engine lane makes and owns (the cpu image, its SIF, the cluster).
NOT_BESIDE = ("cpu_build", "testcluster")
#: fixture -> the marker of the lane a test that uses it belongs to (``tests.lib.docker``, ``tests.lib.testcluster``).
FIXTURE_LANES = {"client": "docker", "testcluster": "cluster"}


def unmarked(items, fixture_lanes=FIXTURE_LANES) -> list[str]:
    """``"NODEID uses the FIXTURE fixture without the MARKER marker"`` for every such item."""
    return ["%s uses the %s fixture without the %s marker" % (item.nodeid, fixture, lane)
            for item in items for fixture, lane in fixture_lanes.items()
            if fixture in item.fixturenames and item.get_closest_marker(lane) is None]


def misplaced_beside(items, not_beside=NOT_BESIDE) -> list[str]:
    """``"NODEID ..."`` for every ``beside`` test without the ``docker`` marker, with ``cluster``, or using what the
    engine lane owns (``NOT_BESIDE``, through the test's fixture closure)."""
    out = []
    for item in items:
        if item.get_closest_marker("beside") is None:
            continue
        if item.get_closest_marker("docker") is None or item.get_closest_marker("cluster") is not None:
            out.append("%s is marked beside but is not a docker test outside the cluster" % item.nodeid)
        out += ["%s is marked beside but uses the %s fixture, which the engine lane owns" % (item.nodeid, f)
                for f in not_beside if f in item.fixturenames]
    return out


def pytest_collection_modifyitems(config, items):
    misplaced = misplaced_beside(items)
    if misplaced:
        raise pytest.UsageError("beside tests that belong to the engine lane (tests/lib/lanes.py): remove the beside "
                                "marker:\n  " + "\n  ".join(misplaced))
    missing = unmarked(items)
    if missing:
        raise pytest.UsageError("tests outside their lane (tests/lib/lanes.py): add the marker to the test or to its "
                                "module's pytestmark:\n  " + "\n  ".join(missing))


def unavailable(reason: str) -> None:
    """What a test does when a component its lane's setup provides is missing: skip with ``reason`` where tests run by
    hand, fail under CI (``CI`` set: ``.ci/run``), where the setup ran and the absence is a fault, never a pass."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)
