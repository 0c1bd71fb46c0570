"""Facts for a sweep's run record that only the sweep needs: the identity of a stack image and the host name. The
host facts every area shares (git state, GPUs, CPU cores, RDMA ports) are ``facts.host``. Every probe answers
"unknown" (None / empty) instead of failing.
"""
from __future__ import annotations

import socket

from chexstack import engine


def image_identity(ref: str, client=None) -> tuple[str | None, list[str]]:
    """(image ID ``sha256:…``, registry digests ``repo@sha256:…``) of a Docker image of the local engine (or of
    ``client``'s: the pods' engine that pulled it); (None, []) when the image or the engine is not there."""
    client = client or engine.optional_client()
    try:
        image = client.images.get(ref)
    except Exception:  # engine down (None), or no such image: unknown, not an error
        return None, []
    return image.id, list(image.attrs.get("RepoDigests") or [])


def hostname() -> str:
    return socket.gethostname()
