"""What the tests share (imported by test modules; the fixtures among them registered by ``tests/conftest.py``'s
``pytest_plugins``), pip's layout:

- ``paths``: the checkout and ../shared (``REPO``, ``SHARED``, ``FIXTURES``, ``CASES``, ``SAMPLE``);
- ``cli``: the command line: ``run(...)`` in this process for parsing and refusals, ``invoke(...)`` the installed
  command as a process for the entry points themselves, ``Launcher`` a backgrounded ``invoke train``;
- ``lanes``: the marker lanes (unit, ``slow``, ``docker``, ``cluster``, ``legacy``) and the collection guard that
  keeps a test that needs dockerd or the test cluster in its lane;
- ``docker``: the Docker engine fixtures ``client``, ``debian_base``, ``cpu_build`` (lane ``docker``);
- ``testcluster``: the Slurm test cluster and its ``testcluster`` fixture (lane ``cluster``);
- ``leftovers``: the plugin that fails a run which leaves an image, container, namespace or process behind;
- ``golden``: ``assert_golden``; ``readonly``: ``run_with_read_only``; ``k8s``: ``validate_mpijob``;
  ``bundle_corpus``: recorded nodes for ``invoke validate --from``; ``runs``: the small real training runs.
"""
