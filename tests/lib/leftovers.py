"""Tests leave the machine as they found it: a pytest plugin (``tests/conftest.py``'s ``pytest_plugins``; its
``pytest_configure`` registers the ``Leftovers`` object that holds the run's record).

At the start of the run it records what exists: Docker images (ID -> references), containers, networks and volumes
(when an engine answers), network namespaces (``ip netns list``) and processes. At the end it

1. removes what the run made that is the project's own: images and tags under ``chexstack*/`` references that were
   not there before (the cpu image ``invoke build`` makes for the tests, the debootstrap base, test tags), and new
   untagged stack images (``STACK_LABEL``: one that failed verification, one a rebuild replaced), unless
   ``CHEXSTACK_KEEP_TEST_IMAGES=1`` keeps them for a faster rerun (the engine's layer cache);
2. fails the run (exit 1, with a report) when anything else new is left: a container or network (other than one
   carrying another run's token), a volume, a tag put on an existing image (a stand-in under a real upstream name,
   as ``nvcr.io/nvidia/tensorflow:19.06-py3`` once was), a network namespace, or a process a test started that is
   still alive (a daemon: found by the run's token ``CHEXSTACK_TEST_RUN`` in its environment), then removes those
   containers and networks whose test label is this run's token and stops those processes (the rest may belong to
   another run: only reported).

A run judges the engine (images, containers, networks, volumes, build/sif) only when it runs a ``docker`` test, and
the network namespaces only when it runs a ``cluster`` test: ``make test``'s host lane, beside the engine and
cluster lane, leaves those to it. A run whose docker tests are all ``beside`` (``tests/lib/lanes.py``: after the host
lane, while the engine lane runs) shares the engine with the engine lane: it judges and removes only the image
references, containers and networks that carry its own token, and leaves volumes and build/sif to the engine lane,
which in turn leaves alone the image references on images that carry another run's token.

Everything a test creates carries ``TEST_LABELS`` where the engine takes labels, so a left-over is recognisable on
a machine where the run was killed (``docker ps -a --filter label=org.chexstack.test``); the label's value is the
run's token, so a run cleans up only its own and never another's running beside it on the same engine. While
another run is at work on the engine (``ACTIVE``), a container or network without a token is not judged: a build
step's container carries no label and may be the other run's.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import uuid

import psutil
import pytest

#: This pytest process's run: a random token, the value of ``TEST_LABEL`` and of ``RUN_ENV``. Two runs against one
#: engine (a lane beside a full run) each remove only what carries their own token.
RUN_ID = uuid.uuid4().hex
#: Label of every container, network and image a test creates itself; its value is the run's token.
TEST_LABEL = "org.chexstack.test"
TEST_LABELS = {TEST_LABEL: RUN_ID}
#: References the run may make and removes again: the project's own namespaces.
OWN_PREFIXES = ("chexstack/", "chexstack-local/", "chexstack-test/")
KEEP_ENV = "CHEXSTACK_KEEP_TEST_IMAGES"
#: The label every stack image ``invoke build`` makes carries (``images.labels.STACK``): a new untagged image with it
#: is the run's own (``invoke build`` leaves an image that fails verification untagged, for inspection).
STACK_LABEL = "org.chexstack.stack"
#: Kept between runs, never reported: the registry-free Debian base (``images.local_base.LOCAL_DEBIAN``), which the
#: cpu image's layers descend from. While it keeps its ID the engine's layer cache holds the cpu build's devel stage
#: (Horovod compiled against TensorFlow, minutes on 2 cores), so a rerun compiles again only when its inputs change;
#: made anew by debootstrap it has a new ID and every layer is built again.
CACHED = ("chexstack-local/debian:bookworm",)
#: Set for the run (a random token): inherited by every process the tests start, so a left-over one is found.
RUN_ENV = "CHEXSTACK_TEST_RUN"
#: Where each run says it is running (a file named by its token, holding its pid), so that a run judging the engine
#: knows another is at work on it: a container or network without a token (a build step's container, which carries
#: no label) may then be the other run's, and is not judged.
ACTIVE = "/tmp/chexstack-test-runs"


def _others_active(run_id: str) -> bool:
    """Whether another run that said so (``ACTIVE``) is still alive."""
    try:
        names = os.listdir(ACTIVE)
    except OSError:
        return False
    for name in names:
        if name == run_id:
            continue
        try:
            with open(os.path.join(ACTIVE, name)) as f:
                if psutil.pid_exists(int(f.read().strip() or 0)):
                    return True
        except (OSError, ValueError):
            continue
    return False


def _docker():
    try:
        import docker
        client = docker.from_env(timeout=60)
        client.ping()
        return client
    except Exception:  # no SDK, no engine: nothing of Docker's to compare
        return None


def _token(labels: dict | None) -> str | None:
    """The run token a container or network carries under ``TEST_LABEL`` (None: not a test's)."""
    return (labels or {}).get(TEST_LABEL)


def _netns() -> set[str]:
    try:
        p = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return set()
    return {line.split()[0] for line in p.stdout.splitlines() if line.strip()}


@dataclasses.dataclass
class Snapshot:
    images: dict[str, set[str]]  # image ID -> its references (repo:tag)
    containers: dict[str, tuple[str, str | None]]  # ID -> (name, its TEST_LABEL token or None)
    networks: dict[str, tuple[str, str | None]]
    volumes: set[str]
    netns: set[str]
    image_tokens: dict[str, str | None] = dataclasses.field(default_factory=dict)  # image ID -> its token or None

    @classmethod
    def take(cls, client) -> "Snapshot":
        images, containers, networks, volumes, tokens = {}, {}, {}, set(), {}
        if client is not None:  # one listing call each (the SDK's images.list() and containers.list() inspect
            # every item after listing: an item another run removes meanwhile was a 404, seen in CI beside a run)
            listed = client.api.images()
            images = {i["Id"]: {t for t in i.get("RepoTags") or () if t != "<none>:<none>"} for i in listed}
            tokens = {i["Id"]: _token(i.get("Labels")) for i in listed}
            containers = {c["Id"]: ((c.get("Names") or ["?"])[0].lstrip("/"), _token(c.get("Labels")))
                          for c in client.api.containers(all=True)}
            networks = {n["Id"]: (n["Name"], _token(n.get("Labels"))) for n in client.api.networks()}
            volumes = {v["Name"] for v in client.api.volumes().get("Volumes") or ()}
        return cls(images, containers, networks, volumes, _netns(), tokens)

    def judged_by(self, run_id: str, shared: bool, others: bool = False) -> "Snapshot":
        """What a run with token ``run_id`` judges of this snapshot: everything but another run's images (by their
        token); ``shared`` (a beside run), only what carries its own token, no volumes; ``others`` (another run is
        at work on the engine), only its own token's containers and networks."""
        def mine(token, strict=shared):
            return token == run_id if strict else token in (None, run_id)
        return dataclasses.replace(
            self, images={i: refs for i, refs in self.images.items() if mine(self.image_tokens.get(i))},
            containers={i: c for i, c in self.containers.items() if mine(c[1], shared or others)},
            networks={i: n for i, n in self.networks.items() if mine(n[1], shared or others)},
            volumes=set() if shared else self.volumes)


def _own(ref: str) -> bool:
    return ref.startswith(OWN_PREFIXES) and ref not in CACHED


def _new_refs(before: Snapshot, after: Snapshot) -> list[str]:
    """References present now that were not there before (on new images, or newly put on old ones)."""
    old = {ref for refs in before.images.values() for ref in refs}
    return sorted({ref for refs in after.images.values() for ref in refs} - old)


def _sif_files() -> list[str]:
    """Everything in the checkout's build/sif: SIFs, ``*.partial`` files and ``chexstack-sif-*`` build folders."""
    from tests.lib.paths import REPO
    folder = str(REPO / "build" / "sif")
    return [os.path.join(folder, n) for n in os.listdir(folder)] if os.path.isdir(folder) else []


def _marked_processes(run_id: str) -> list[psutil.Process]:
    """Live processes other than this pytest whose environment carries this run's ``RUN_ENV`` (every process a
    test starts inherits it: a daemon that outlives its test, also one reparented to init)."""
    me = os.getpid()
    left = []
    for p in psutil.process_iter():
        try:
            if p.pid != me and p.environ().get(RUN_ENV) == run_id:
                left.append(p)
        except psutil.Error:
            continue
    return left


class Leftovers:
    """The plugin object: ``pytest_sessionstart`` records, ``pytest_sessionfinish`` cleans and judges."""

    def __init__(self):
        self.client = None
        self.before: Snapshot | None = None
        self.run_id = RUN_ID
        #: What this run judges (``pytest_collection_finish``): the engine and build/sif only when it runs a
        #: ``docker`` test, the network namespaces only when it runs a ``cluster`` test. A lane beside another
        #: (``make test``: the host lane beside the engine and cluster lane) never judges, nor removes, what the
        #: other one makes.
        self.engine = self.namespaces = True
        #: Whether the engine is shared with the engine lane (every docker test of the run is ``beside``).
        self.shared = False

    def pytest_collection_finish(self, session):
        marked = {m.name for item in session.items for m in item.iter_markers()}
        self.engine, self.namespaces = "docker" in marked, "cluster" in marked
        docker = [item for item in session.items if item.get_closest_marker("docker")]
        self.shared = bool(docker) and all(item.get_closest_marker("beside") for item in docker)

    def _judged(self, snap: Snapshot) -> Snapshot:
        """``snap`` without the parts this run does not judge (``engine``, ``namespaces``, ``shared``)."""
        if not self.engine:
            snap = dataclasses.replace(snap, images={}, containers={}, networks={}, volumes=set())
        snap = snap.judged_by(self.run_id, self.shared, self.engine and _others_active(self.run_id))
        return snap if self.namespaces else dataclasses.replace(snap, netns=set())

    def pytest_sessionstart(self, session):
        os.environ[RUN_ENV] = self.run_id
        try:
            os.makedirs(ACTIVE, exist_ok=True)
            with open(os.path.join(ACTIVE, self.run_id), "w") as f:
                f.write("%d\n" % os.getpid())
        except OSError:  # no shared folder: the run judges as if alone
            pass
        self.client = _docker()
        self.before = Snapshot.take(self.client)
        self.sifs_before = set(_sif_files())

    def _remove_own_sifs(self) -> list[str]:
        """The SIFs the run made in the checkout's build/sif (``tests.lib.docker.cpu_sif``), unless KEEP_ENV."""
        if os.environ.get(KEEP_ENV) == "1" or not self.engine or self.shared:
            return []
        removed = []
        for path in sorted(set(_sif_files()) - self.sifs_before):
            if path.endswith(".sif"):
                os.unlink(path)
                removed.append(os.path.basename(path))
        return removed

    def _remove_own_images(self) -> list[str]:
        """Untag (and so remove, when it was the last reference) every new project reference."""
        if self.client is None or os.environ.get(KEEP_ENV) == "1" or not self.engine:
            return []
        removed = []
        for ref in _new_refs(self._judged(self.before), self._judged(Snapshot.take(self.client))):
            if _own(ref):
                try:
                    self.client.images.remove(ref)
                    removed.append(ref)
                except Exception:  # still used by a container: reported below as that container
                    pass
        for image in ([] if self.shared else self.client.api.images(filters={"dangling": True,
                                                                            "label": STACK_LABEL})):
            if image["Id"] not in self.before.images:  # a stack image left untagged (a failed verification) or
                try:                                   # replaced under its tag by a rebuild
                    self.client.images.remove(image["Id"])
                    removed.append("untagged %s %s" % ((image.get("Labels") or {}).get(STACK_LABEL),
                                                       image["Id"][7:19]))
                except Exception:
                    pass
        return removed

    def problems(self) -> list[str]:
        before, after = self._judged(self.before), self._judged(Snapshot.take(self.client))
        found = []
        keep = os.environ.get(KEEP_ENV) == "1"
        for ref in _new_refs(before, after):
            if ref not in CACHED and not (_own(ref) and keep):
                found.append("image reference %s" % ref)
        for what, old, new in (("container", before.containers, after.containers),
                               ("network", before.networks, after.networks)):
            found += ["%s %s (%s)" % (what, new[i][0], i[:12]) for i in new.keys() - old.keys()]
        found += ["volume %s" % v for v in sorted(after.volumes - before.volumes)]
        found += ["network namespace %s" % n for n in sorted(after.netns - before.netns)]
        for p in _marked_processes(self.run_id):
            try:
                found.append("process %d (%s)" % (p.pid, " ".join(p.cmdline())[:160] or p.name()))
            except psutil.Error:
                pass
        return found

    def _clean(self) -> None:
        """Remove what the run left that is provably this run's: containers and networks whose ``TEST_LABEL`` is
        this run's token, and the processes carrying it. Anything else is only reported (another run may own it)."""
        before, after = self._judged(self.before), self._judged(Snapshot.take(self.client))
        if self.client is not None:
            for what, old, new in (("containers", before.containers, after.containers),
                                   ("networks", before.networks, after.networks)):
                collection = getattr(self.client, what)
                for oid in new.keys() - old.keys():
                    if new[oid][1] != self.run_id:
                        continue
                    try:
                        collection.get(oid).remove(**({"force": True} if what == "containers" else {}))
                    except Exception:  # gone meanwhile
                        pass
        procs = _marked_processes(self.run_id)
        for p in procs:
            try:
                p.terminate()
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=10)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        if self.before is None:
            return
        try:
            self._finish(session)
        finally:
            try:
                os.unlink(os.path.join(ACTIVE, self.run_id))
            except OSError:
                pass

    def _finish(self, session):
        removed = self._remove_own_images() + self._remove_own_sifs()
        found = self.problems()
        found += ["unfinished SIF build %s" % p for p in sorted(set(_sif_files()) - self.sifs_before)
                  if self.engine and not self.shared and not p.endswith(".sif")]
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        say = reporter.write_line if reporter else print
        if removed:
            say("leftovers: removed the images and SIFs this run made: %s (%s=1 keeps them)"
                % (", ".join(removed), KEEP_ENV))
        if found:
            say("leftovers: the tests left these behind (each test must remove what it creates):")
            for item in found:
                say("  - %s" % item)
            self._clean()
            if session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config):
    config.pluginmanager.register(Leftovers(), "chexstack-leftovers")
