"""A local Debian 12 base image made without a registry: ``debootstrap --variant=minbase bookworm`` + ``docker
import``. Tests and benchmarks build the cpu stack FROM it (this machine has no registry); it is made once and
reused while an image with its tag exists.

Needs root, ``debootstrap`` (``scripts/setup --docker`` installs it) and a reachable Debian mirror: this machine's
own (``facts.apt_sources.debian_mirror``: its apt sources, else debootstrap's default); takes about a minute.
Errors: ``ChexstackError`` naming the missing tool or the failing step (with the end of its output).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import docker
import docker.errors

from chexstack import engine
from chexstack.errors import ChexstackError
from chexstack.tools import run_checked
from facts.apt_sources import debian_mirror

LOCAL_DEBIAN = "chexstack-local/debian:bookworm"


def _run(argv: list[str], what: str) -> None:
    run_checked(argv, what, timeout=None)


def ensure_debian_base(tag: str = LOCAL_DEBIAN, client: docker.DockerClient | None = None) -> str:
    """Return the image ID of ``tag``, making it first when absent (debootstrap + docker import)."""
    client = client or engine.client()
    try:
        return client.images.get(tag).id
    except docker.errors.ImageNotFound:
        pass
    for tool in ("debootstrap", "tar"):
        if not shutil.which(tool):
            raise ChexstackError("making the local Debian base %s needs %s (scripts/setup --docker installs it)"
                                 % (tag, tool))
    if os.geteuid() != 0:
        raise ChexstackError("making the local Debian base %s needs root (debootstrap)" % tag)
    with tempfile.TemporaryDirectory(prefix="chexstack-debootstrap-") as tmp:
        root = os.path.join(tmp, "rootfs")
        mirror = debian_mirror()
        _run(["debootstrap", "--variant=minbase", "bookworm", root] + ([mirror] if mirror else []), "debootstrap")
        shutil.rmtree(os.path.join(root, "var", "cache", "apt", "archives"), ignore_errors=True)
        tarball = os.path.join(tmp, "rootfs.tar")
        # /dev left empty, as in Docker's official Debian images: the engine mounts its own /dev, and device
        # nodes in a layer cannot be unpacked where mknod is refused (an unprivileged apptainer build of the SIF).
        _run(["tar", "-C", root, "--numeric-owner", "--exclude=./dev/*", "-cf", tarball, "."],
             "tar of the debootstrap tree")
        repo, _, tagname = tag.rpartition(":")
        client.api.import_image(src=tarball, repository=repo, tag=tagname,
                                changes=['CMD ["bash"]', "ENV LANG=C.UTF-8"])
    return client.images.get(tag).id
