"""Image labels: the OCI annotations (https://github.com/opencontainers/image-spec/blob/main/annotations.md) and
chexstack's bill of materials (BOM: the stack manifest as JSON).

``image_labels(stack, base_ref, base_digest, when)`` -> ``{label: value}``. Verification adds
``org.chexstack.verification.mismatches`` (JSON list) to an image kept with ``--allow-mismatch``.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import urllib.parse

from envs.manifest import Stack
from facts import host
from images import payload
from images.naming import chexstack_version, image_ref, manifest_digest
from images.parts import REPO

BOM = "org.chexstack.bom"
STACK = "org.chexstack.stack"
MISMATCHES = "org.chexstack.verification.mismatches"
DOCKER_IMAGE_ID = "org.chexstack.docker.image.id"
#: In a SIF: SHA-256 of the stack manifest it was built for (``images.naming.manifest_digest``).
MANIFEST_SHA256 = "org.chexstack.manifest.sha256"
#: SHA-256 of the code the image carries from this repository (``images.payload.digest``: trainer/ and the probe):
#: ``invoke train --stack`` warns when the checkout's code differs from the image's.
CODE = "org.chexstack.code.sha256"


def revision() -> str:
    """The git commit of this checkout, ``-dirty`` appended when tracked files differ from it ("" outside git)."""
    commit, dirty = host.git_state(REPO)
    return (commit or "") + ("-dirty" if commit and dirty else "")


def source_url(remote: str) -> str:
    """The OCI ``org.opencontainers.image.source`` for a git remote: a URL anyone may fetch the source from, or
    "" (the label is then left out). ``https://host/path`` stays (credentials removed), ``git@host:path`` and
    ``ssh://user@host/path`` become ``https://host/path``; a local path or ``file://`` URL names only the
    building machine, so it gives "" (OCI image-spec, annotations.md: "URL to get source code")."""
    remote = remote.strip()
    scp = re.fullmatch(r"(?:[\w.-]+@)?([\w.-]+\.[\w.-]+):(?!//)([^\s]+)", remote)
    if scp:
        return "https://%s/%s" % scp.groups()
    parsed = urllib.parse.urlsplit(remote)
    if parsed.scheme not in ("http", "https", "ssh", "git", "git+ssh") or not parsed.hostname:
        return ""
    netloc = parsed.hostname + (":%d" % parsed.port if parsed.port and parsed.scheme in ("http", "https") else "")
    scheme = parsed.scheme if parsed.scheme in ("http", "https") else "https"
    return urllib.parse.urlunsplit((scheme, netloc, parsed.path, "", ""))


def source() -> str:
    """The ``origin`` remote of this checkout as a public URL (``source_url``), "" when there is none."""
    return source_url(host.git(REPO, "remote", "get-url", "origin") or "")


def code_digest() -> str:
    """The digest of this checkout's payload (what label ``CODE`` of an image built from it holds)."""
    return payload.digest(REPO)


def image_labels(stack: Stack, base_ref: str, base_digest: str | None, when: dt.datetime | None = None) -> dict:
    """OCI labels + BOM for an image of ``stack`` built FROM ``base_ref`` (its digest when known)."""
    when = when or dt.datetime.now(dt.timezone.utc)
    labels = {
        "org.opencontainers.image.created": when.replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "org.opencontainers.image.revision": revision(),
        "org.opencontainers.image.version": image_ref(stack).rsplit(":", 1)[1],
        "org.opencontainers.image.source": source(),
        "org.opencontainers.image.title": "chexstack/%s: %s" % (stack.name, stack.title),
        "org.opencontainers.image.base.name": base_ref,
        "org.opencontainers.image.base.digest": base_digest or "",
        STACK: stack.name,
        "org.chexstack.version": chexstack_version(),
        "org.chexstack.manifest.sha256": manifest_digest(stack),
        CODE: code_digest(),
        BOM: json.dumps(stack.model_dump(mode="json"), sort_keys=True, separators=(",", ":")),
    }
    return {k: v for k, v in labels.items() if v}
