"""The left-over check itself (tests/lib/leftovers.py): a run whose test leaves a process behind fails, names it and
stops it; a clean run passes. Each case is a real pytest run in a subprocess with the plugin registered."""
from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from tests.lib.paths import REPO

CONFTEST = '''
pytest_plugins = ["tests.lib.leftovers"]
'''


def _run(tmp_path, body: str, keep: str = "1") -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_case.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CHEXSTACK_KEEP_TEST_IMAGES": keep}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_a_daemon_left_by_a_test_fails_the_run_and_is_stopped(tmp_path):
    marker = "chexstack-leftover-%d" % os.getpid()
    p = _run(tmp_path, "import subprocess, sys\n\ndef test_daemon():\n"
                       "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', %r],\n"
                       "                     start_new_session=True)\n" % marker)
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    assert "1 passed" in out and "leftovers: the tests left these behind" in out and marker in out, out
    alive = [q for q in psutil.process_iter(["cmdline"]) if marker in " ".join(q.info["cmdline"] or [])]
    assert not alive, alive


def test_a_clean_run_passes(tmp_path):
    p = _run(tmp_path, "def test_nothing():\n    assert True\n")
    assert p.returncode == 0 and "leftovers" not in p.stdout, p.stdout + p.stderr


def test_the_debian_base_is_the_one_image_kept_between_runs():
    from images.local_base import LOCAL_DEBIAN
    from tests.lib.leftovers import CACHED, _own
    assert CACHED == (LOCAL_DEBIAN,) and not _own(LOCAL_DEBIAN) and _own("chexstack/cpu:0.1.0-x")


@pytest.mark.docker
def test_a_run_removes_only_its_own_left_overs_never_another_runs(tmp_path, client):
    """Two runs against one engine (a lane beside a full run): the inner run leaves a network of its own and sees
    one made meanwhile by another run (a foreign token). It reports and removes its own, and neither reports nor
    touches the other's."""
    from tests.lib.leftovers import TEST_LABEL
    foreign = "chexstack-test-foreign-%d" % os.getpid()
    own = "chexstack-test-own-%d" % os.getpid()
    body = ("import docker\nimport pytest\nfrom tests.lib.leftovers import TEST_LABELS\n\n"
            "@pytest.mark.docker\ndef test_networks():\n"
            "    client = docker.from_env()\n"
            "    client.networks.create(%r, labels={%r: 'another-run'})\n"
            "    client.networks.create(%r, labels=TEST_LABELS)\n" % (foreign, TEST_LABEL, own))
    try:
        p = _run(tmp_path, body)
        out = p.stdout + p.stderr
        assert p.returncode == 1 and "1 passed" in out, out
        assert ("network %s" % own) in out and foreign not in out, out
        names = {n.name for n in client.networks.list()}
        assert own not in names and foreign in names, names
    finally:
        for n in client.networks.list(names=[foreign, own]):
            n.remove()


@pytest.mark.docker
def test_a_run_without_docker_tests_leaves_the_engine_to_the_lane_beside_it(tmp_path, client):
    """``make test``'s host lane (no ``docker`` test) runs beside the engine lane: what appears on the engine
    meanwhile is the other lane's, so it neither reports nor removes it, even under its own token."""
    name = "chexstack-test-beside-%d" % os.getpid()
    body = ("import docker\nfrom tests.lib.leftovers import TEST_LABELS\n\ndef test_network():\n"
            "    docker.from_env().networks.create(%r, labels=TEST_LABELS)\n" % name)
    try:
        p = _run(tmp_path, body)
        out = p.stdout + p.stderr
        assert p.returncode == 0 and "1 passed" in out and name not in out, out
        assert name in {n.name for n in client.networks.list()}
    finally:
        for n in client.networks.list(names=[name]):
            n.remove()


def _tag_body(marks: str, tags: list[tuple[str, str | None]], base: str) -> str:
    """An inner test (``marks``: its decorators) that builds, for each (reference, token or None), an image FROM
    ``base`` labelled with that token (none: no label, as ``invoke build`` makes the cpu image) and tags it."""
    from tests.lib.leftovers import TEST_LABEL
    body = "import io\nimport docker\nimport pytest\nfrom tests.lib.leftovers import RUN_ID\n\n%s\ndef test_tags():\n" \
           "    client = docker.from_env()\n" % marks
    for ref, token in tags:
        label = "" if token is None else "LABEL %s=%s\n" % (TEST_LABEL, token)
        body += ("    image, _ = client.images.build(fileobj=io.BytesIO(%r.replace(b'@RUN@', RUN_ID.encode())), "
                 "rm=True)\n    image.tag(%r)\n" % (("FROM %s\n%s" % (base, label)).encode(), ref))
    return body


def _remove_refs(client, refs) -> None:
    """What an inner run left of ``refs`` (the ones it removed are gone already)."""
    for ref in refs:
        try:
            client.images.remove(ref, force=True)
        except Exception:  # removed by the run
            pass


@pytest.mark.docker
def test_a_beside_run_judges_and_removes_only_what_carries_its_token(tmp_path, client, debian_base):
    """A run whose docker tests are all ``beside`` shares the engine with the engine lane: a reference the engine
    lane puts meanwhile on an image of its own (no token, as the cpu image) is neither reported nor removed; the
    beside run's own (its token) is removed."""
    foreign, own = "chexstack-test/lane-%d:engine" % os.getpid(), "chexstack-test/lane-%d:beside" % os.getpid()
    body = _tag_body("@pytest.mark.docker\n@pytest.mark.beside", [(foreign, None), (own, "@RUN@")], debian_base)
    try:
        p = _run(tmp_path, body, keep="")
        out = p.stdout + p.stderr
        assert p.returncode == 0 and "1 passed" in out, out
        assert "removed the images and SIFs this run made: %s" % own in out and foreign not in out, out
        refs = {ref for image in client.images.list() for ref in image.tags}
        assert foreign in refs and own not in refs
    finally:
        _remove_refs(client, (foreign, own))


@pytest.mark.docker
def test_the_engine_lane_leaves_the_references_of_another_runs_images_alone(tmp_path, client, debian_base):
    """The engine lane beside a beside run: a reference on an image carrying another run's token is that run's."""
    other, mine = "chexstack-test/lane-%d:other" % os.getpid(), "chexstack-test/lane-%d:mine" % os.getpid()
    body = _tag_body("@pytest.mark.docker", [(other, "another-run"), (mine, None)], debian_base)
    try:
        p = _run(tmp_path, body, keep="")
        out = p.stdout + p.stderr
        assert p.returncode == 0 and "1 passed" in out, out
        assert "removed the images and SIFs this run made: %s" % mine in out and other not in out, out
        assert other in {ref for image in client.images.list() for ref in image.tags}
    finally:
        _remove_refs(client, (other, mine))


@pytest.mark.docker
def test_an_untagged_stack_image_the_run_made_is_removed(tmp_path, client, debian_base):
    """``invoke build`` leaves an image that fails verification untagged: the run removes such a new untagged image
    carrying the stack label (``images.labels.STACK``), as it removes its own tags, and leaves older ones alone."""
    from images.labels import STACK
    from tests.lib.leftovers import STACK_LABEL
    assert STACK_LABEL == STACK
    value = "leftover-test-%d" % os.getpid()
    body = ("import io\nimport docker\nimport pytest\n\n@pytest.mark.docker\ndef test_build():\n"
            "    image, _ = docker.from_env().images.build(fileobj=io.BytesIO(%r), rm=True)\n"
            "    print('built', image.id)\n" % ("FROM %s\nLABEL %s=%s\n" % (debian_base, STACK, value)).encode())
    try:
        p = _run(tmp_path, body + "    assert not image.tags\n", keep="")
        out = p.stdout + p.stderr
        assert p.returncode == 0 and "1 passed" in out and "untagged %s" % value in out, out
        assert not client.images.list(filters={"label": "%s=%s" % (STACK, value)})
    finally:
        for image in client.images.list(filters={"label": "%s=%s" % (STACK, value)}):
            client.images.remove(image.id, force=True)


def test_what_a_run_judges_of_the_engine_by_token_and_by_who_else_is_at_work():
    """``Snapshot.judged_by``: alone, its own token's and the unlabelled; beside another run at work (a build
    step's container carries no label), its own containers and networks only; a beside run, its own only, no
    volumes; never another run's image references."""
    from tests.lib.leftovers import Snapshot

    snap = Snapshot(images={"i-own": {"a:1"}, "i-none": {"b:1"}, "i-other": {"c:1"}},
                    containers={"c-own": ("x", "me"), "c-none": ("y", None), "c-other": ("z", "them")},
                    networks={"n-none": ("n", None)}, volumes={"v"}, netns=set(),
                    image_tokens={"i-own": "me", "i-none": None, "i-other": "them"})
    alone = snap.judged_by("me", shared=False)
    assert set(alone.images) == {"i-own", "i-none"} and set(alone.containers) == {"c-own", "c-none"}
    assert set(alone.networks) == {"n-none"} and alone.volumes == {"v"}
    beside_another = snap.judged_by("me", shared=False, others=True)
    assert set(beside_another.images) == {"i-own", "i-none"} and set(beside_another.containers) == {"c-own"}
    assert not beside_another.networks and beside_another.volumes == {"v"}
    shared = snap.judged_by("me", shared=True)
    assert set(shared.images) == {"i-own"} and set(shared.containers) == {"c-own"} and not shared.volumes
