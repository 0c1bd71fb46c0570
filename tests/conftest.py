"""The suite's plugins (``tests/lib``): the shared paths and ``fixture_text``, the Docker engine and test cluster
fixtures, the lane guard (``tests.lib.lanes``: a test that needs dockerd or the test cluster carries its lane's
marker) and the left-over check (``tests.lib.leftovers``: the run fails when a test leaves an image tag, container,
network, namespace or daemon)."""

pytest_plugins = ["tests.lib.paths", "tests.lib.docker", "tests.lib.testcluster", "tests.lib.lanes",
                  "tests.lib.leftovers"]
