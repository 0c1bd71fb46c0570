"""The lanes (``tests/lib/lanes.py``): the guard names a test that uses a lane's fixture without its marker, the
fixtures it keys on exist, and ``make test-fast`` selects the unit lane."""
from __future__ import annotations

import re

import pytest

from tests.lib import lanes
from tests.lib.paths import REPO


class _Item:
    """What the guard reads of a collected test: its id, fixture closure and markers."""

    def __init__(self, nodeid, fixturenames, markers=()):
        self.nodeid, self.fixturenames, self._markers = nodeid, fixturenames, set(markers)

    def get_closest_marker(self, name):
        return name if name in self._markers else None


def test_a_test_using_a_lane_fixture_without_its_marker_is_named():
    items = [_Item("t.py::uses_cpu_build", ["cpu_build", "debian_base", "client", "tmp_path"]),
             _Item("t.py::marked", ["client"], ["docker", "slow"]),
             _Item("t.py::on_the_cluster", ["testcluster", "client"], ["docker"]),
             _Item("t.py::unit", ["tmp_path"])]
    assert lanes.unmarked(items) == ["t.py::uses_cpu_build uses the client fixture without the docker marker",
                                     "t.py::on_the_cluster uses the testcluster fixture without the cluster marker"]
    with pytest.raises(pytest.UsageError, match="add the marker to the test or to its module's pytestmark"):
        lanes.pytest_collection_modifyitems(None, items)


def test_the_guarded_fixtures_exist_and_every_lane_is_a_registered_marker(request):
    from tests.lib import docker, testcluster
    assert {"client": docker.client, "testcluster": testcluster.testcluster}.keys() == lanes.FIXTURE_LANES.keys()
    registered = {line.split(":")[0] for line in request.config.getini("markers")}
    assert set(lanes.FIXTURE_LANES.values()) | set(re.findall(r"not (\w+)", lanes.UNIT)) <= registered


def test_make_test_fast_runs_the_unit_lane():
    recipe = (REPO / "Makefile").read_text().split("\ntest-fast:", 1)[1].split("\n\n", 1)[0]
    assert '-m "%s"' % lanes.UNIT in recipe


def test_make_test_runs_the_engine_the_host_and_the_beside_lane_which_together_select_every_test_once():
    """``scripts/test-lanes`` runs the three expressions of ``tests/lib/lanes.py``, and for every combination of lane
    markers a test can carry (``beside`` only with ``docker`` and without ``cluster``: the guard) exactly one of them
    selects it (pytest's own ``-m`` evaluator)."""
    import itertools

    from _pytest.mark.expression import Expression

    script = (REPO / "scripts" / "test-lanes").read_text()
    assert 'ENGINE="%s"' % lanes.ENGINE in script and 'HOST="%s"' % lanes.HOST in script
    assert 'BESIDE="%s"' % lanes.BESIDE in script and '-m "$BESIDE"' in script
    assert "scripts/test-lanes" in (REPO / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    runs = [Expression.compile(e) for e in (lanes.ENGINE, lanes.HOST, lanes.BESIDE)]
    names = ("slow", "docker", "cluster", "legacy", "beside")
    for carried in itertools.product((False, True), repeat=len(names)):
        marks = {n for n, on in zip(names, carried) if on}
        if "beside" in marks and ("docker" not in marks or "cluster" in marks):
            continue  # refused at collection (the next test)

        def has(name, **_):
            return name in marks

        assert sum(run.evaluate(has) for run in runs) == 1, marks


def test_a_beside_test_that_needs_what_the_engine_lane_owns_is_named():
    items = [_Item("t.py::pair", ["client", "debian_base", "tmp_path"], ["docker", "beside"]),
             _Item("t.py::stack", ["cpu_build", "client"], ["docker", "beside"]),
             _Item("t.py::pods", ["testcluster", "client"], ["docker", "cluster", "beside"]),
             _Item("t.py::host", ["tmp_path"], ["beside"]),
             _Item("t.py::engine", ["cpu_build", "client"], ["docker"])]
    assert lanes.misplaced_beside(items) == [
        "t.py::stack is marked beside but uses the cpu_build fixture, which the engine lane owns",
        "t.py::pods is marked beside but is not a docker test outside the cluster",
        "t.py::pods is marked beside but uses the testcluster fixture, which the engine lane owns",
        "t.py::host is marked beside but is not a docker test outside the cluster"]
    with pytest.raises(pytest.UsageError, match="remove the beside marker"):
        lanes.pytest_collection_modifyitems(None, items)
