"""Image names: ``chexstack/<stack>:<version>``.

``<version>`` = ``<chexstack version>-<first 12 hex digits of the manifest's SHA-256>``, so a changed manifest
never reuses a tag, and the tag points back to the exact manifest (also stored in the image's BOM label).
"""
from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version

from envs.manifest import Stack, known_stacks, load_stack

IN_IMAGE_HOME = "/opt/chexstack"


def chexstack_version() -> str:
    try:
        return version("chexstack")
    except PackageNotFoundError:
        return "0.1.0"


def manifest_digest(stack: Stack) -> str:
    """SHA-256 (hex) of the manifest's canonical JSON (sorted keys, no whitespace)."""
    canonical = json.dumps(stack.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def image_repo(stack: Stack) -> str:
    return "chexstack/%s" % stack.name


def image_ref(stack: Stack) -> str:
    """The tag a verified build gets, e.g. ``chexstack/cpu:0.1.0-3f2a9c1d0b7e``."""
    return "%s:%s-%s" % (image_repo(stack), chexstack_version(), manifest_digest(stack)[:12])


def stack_of_image(image: str) -> Stack | None:
    """The stack whose software ``image`` (a reference as a job file names it) is, else None: one of chexstack's
    own tags (``image_repo``, any registry prefix, any tag), or an NGC stack's base image itself (the NGC container
    is that stack's software; other families' bases are not, their recipes install it)."""
    name = image.split("@")[0]
    repo, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "")
    for stack in (load_stack(n) for n in known_stacks()):
        if repo == image_repo(stack) or repo.endswith("/" + image_repo(stack)):
            return stack
        if stack.family == "ngc" and name == stack.base.image.split("@")[0]:
            return stack
    return None
