"""An OCI runtime bundle of a verified image, for Slurm's own containers (``srun --container=BUNDLE``).

``make_bundle(image, bundle)`` copies ``image`` from this machine's Docker engine into an OCI image layout with
skopeo (``skopeo copy docker-daemon:IMAGE oci:LAYOUT:TAG``), unpacks it with umoci into a runtime bundle
(``umoci unpack --image LAYOUT:TAG BUNDLE``: ``BUNDLE/rootfs`` and ``BUNDLE/config.json``,
https://github.com/opencontainers/umoci, "umoci unpack") and records where it came from in
``BUNDLE/chexstack-oci.json`` (``RECORD``): the image reference, its Docker image ID, the OCI manifest digest of
the layout skopeo wrote (``sha256:…``), and the stack's manifest SHA-256 label. The bundle must be on storage
every node sees: Slurm does not copy it (https://slurm.schedmd.com/containers.html, "Known limitations").

The bundle's ``config.json`` is adjusted for Slurm (``slurm_config``): no network namespace (Slurm's containers
use the host's network, same page: "Custom container networks are not supported"), the node's host name, no
terminal (srun connects the task's standard streams). Mounts a run needs (data, output) are added per job by the
batch script, not here.

``read_bundle(bundle)`` is what a launcher reads back: the record, with a ChexstackError naming what is missing.
Tools: skopeo and umoci (Debian 12 packages; ``scripts/setup --testcluster`` installs them with crun). A missing
tool is exit 3 (``ExitCode.TOOL_MISSING``) naming that setup flag.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass

from chexstack.errors import ChexstackError, ExitCode
from chexstack.tools import run_checked

#: The file in a bundle that says which image it was made from (``BundleRecord``).
RECORD = "chexstack-oci.json"
#: The tools a bundle is made with, each a Debian 12 package of the same name.
TOOLS = ("skopeo", "umoci")
INSTALL_HINT = "scripts/setup --testcluster installs it (Debian packages skopeo, umoci, crun)"
#: The namespaces a Slurm container shares with its node: the network (Slurm's containers use the host's) and the
#: host name (UTS), so that a rank reports the node it runs on (``run.hosts``), not umoci's default host name.
HOST_NAMESPACES = ("network", "uts")
#: Labels of a chexstack image the record keeps (``images.labels``): the stack manifest's SHA-256.
MANIFEST_LABEL = "org.chexstack.manifest.sha256"


@dataclass(frozen=True)
class BundleRecord:
    """Where a bundle came from. ``image``: the reference it was made from; ``image_id``: its Docker image ID
    (``sha256:…``); ``digest``: the OCI manifest digest in the layout skopeo wrote (``sha256:…``); ``manifest_sha256``:
    the stack manifest's SHA-256 label ("" for an image without it); ``bundle``: the bundle's absolute path."""

    image: str
    image_id: str
    digest: str
    manifest_sha256: str
    bundle: str


def require_tools() -> None:
    """ChexstackError (exit 3) naming each of ``TOOLS`` missing from PATH and the setup flag that installs it."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise ChexstackError("an OCI bundle needs %s on PATH, missing: %s; %s"
                             % (" and ".join(TOOLS), ", ".join(missing), INSTALL_HINT),
                             exit_code=ExitCode.TOOL_MISSING)


def slurm_config(config: dict) -> dict:
    """``config`` (an OCI runtime ``config.json``) as Slurm's containers run it: the host's network and host name
    (``HOST_NAMESPACES`` removed, umoci's ``hostname`` with the UTS one), no terminal; the rest as umoci wrote it."""
    out = json.loads(json.dumps(config))
    linux = out.setdefault("linux", {})
    linux["namespaces"] = [n for n in linux.get("namespaces", []) if n.get("type") not in HOST_NAMESPACES]
    out.pop("hostname", None)
    out.setdefault("process", {})["terminal"] = False
    return out


def _image_identity(image: str) -> tuple[str, str]:
    """(Docker image ID, stack manifest SHA-256 label) of ``image`` in this machine's engine; ChexstackError when the
    engine does not hold it."""
    from chexstack import engine

    try:
        import docker.errors

        found = engine.client().images.get(image)
    except docker.errors.ImageNotFound:
        raise ChexstackError("image %s is not in this machine's Docker engine: build and verify it first (invoke "
                             "build --stack STACK), or name an image it holds" % image) from None
    return found.id, (found.labels or {}).get(MANIFEST_LABEL, "")


def make_bundle(image: str, bundle: str) -> BundleRecord:
    """Make the OCI runtime bundle of ``image`` (a reference this machine's Docker engine holds, e.g. the stack's
    verified tag) at ``bundle`` (a folder that must not exist yet, on storage the nodes see) and return its record,
    also written to ``bundle/RECORD``. The layout skopeo writes is a temporary folder beside ``bundle``, removed
    after. ChexstackError: a missing tool (exit 3), an image the engine does not hold, ``bundle`` already there, a
    tool that fails (its command and output)."""
    require_tools()
    bundle = os.path.abspath(bundle)
    if os.path.lexists(bundle):
        raise ChexstackError("OCI bundle %s: already exists; remove it or name a new folder" % bundle)
    parent = os.path.dirname(bundle)
    os.makedirs(parent, exist_ok=True)
    image_id, manifest_sha256 = _image_identity(image)
    layout = tempfile.mkdtemp(prefix=".oci-layout-", dir=parent)
    try:
        run_checked(["skopeo", "copy", "--quiet", "docker-daemon:%s" % image, "oci:%s:image" % layout],
                    "copying %s from the Docker engine into an OCI layout" % image, timeout=1800)
        digest = _layout_digest(layout)
        run_checked(["umoci", "unpack", "--image", "%s:image" % layout, bundle],
                    "unpacking %s into the OCI bundle %s" % (image, bundle), timeout=1800)
    finally:
        shutil.rmtree(layout, ignore_errors=True)
    config_path = os.path.join(bundle, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    with open(config_path, "w") as f:
        json.dump(slurm_config(config), f, indent=2)
    record = BundleRecord(image, image_id, digest, manifest_sha256, bundle)
    with open(os.path.join(bundle, RECORD), "w") as f:
        json.dump(asdict(record), f, indent=2)
        f.write("\n")
    return record


def _layout_digest(layout: str) -> str:
    """The manifest digest (``sha256:…``) of the one image in the OCI layout ``layout`` (its ``index.json``)."""
    with open(os.path.join(layout, "index.json")) as f:
        manifests = json.load(f).get("manifests", [])
    if len(manifests) != 1 or not str(manifests[0].get("digest", "")).startswith("sha256:"):
        raise ChexstackError("OCI layout %s: expected one manifest with a sha256 digest in index.json, found %d"
                             % (layout, len(manifests)))
    return manifests[0]["digest"]


def read_bundle(bundle: str) -> BundleRecord:
    """The record of the OCI bundle at ``bundle`` (an absolute path). ChexstackError naming what is missing: the
    folder, its ``config.json`` or ``rootfs`` (not a bundle), or ``RECORD`` (not made by ``make_bundle``: its image
    and digest are unknown), and a record that is not the JSON expected."""
    if not os.path.isdir(bundle):
        raise ChexstackError("OCI bundle %s: no such folder; make it from the verified image (invoke build --stack "
                             "STACK --bundle %s) on storage every node sees" % (bundle, bundle))
    for part in ("config.json", "rootfs"):
        if not os.path.exists(os.path.join(bundle, part)):
            raise ChexstackError("OCI bundle %s: no %s, so not an OCI runtime bundle (umoci unpack makes "
                                 "config.json and rootfs/)" % (bundle, part))
    path = os.path.join(bundle, RECORD)
    try:
        with open(path) as f:
            data = json.load(f)
        return BundleRecord(**{k: str(data[k]) for k in ("image", "image_id", "digest", "manifest_sha256")},
                            bundle=os.path.abspath(bundle))
    except FileNotFoundError:
        raise ChexstackError("OCI bundle %s: no %s, so the image and digest it came from are unknown; make the "
                             "bundle with invoke build --stack STACK --bundle DIR" % (bundle, RECORD)) from None
    except (ValueError, KeyError, TypeError) as e:
        raise ChexstackError("%s: expected JSON with image, image_id, digest and manifest_sha256 (%s: %s)"
                             % (path, type(e).__name__, e)) from None
