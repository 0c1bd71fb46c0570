"""What every chexstack image carries from this repository (its payload), declared once.

``PAYLOAD``: in-image path -> repository path, for the code layers every image ends with
(``images.parts.chexstack_code``): the trainer (``python -m trainer`` from ``IN_IMAGE_HOME`` on ``PYTHONPATH``)
and the in-image probe. ``BUILD_ONLY_GATE``: the files the Horovod gate runs from in a devel stage
(``images.horovod.gate``); they are in no final image. ``digest()`` is the SHA-256 of the payload as the build
context holds it: an image's label ``images.labels.CODE`` records it, so ``invoke train --stack`` can say when
the checkout's code differs from the image's.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from images.context import folder_digest
from images.naming import IN_IMAGE_HOME

REPO = Path(__file__).resolve().parents[1]

#: In-image path -> repository path (a file or a folder) of every image's code layers, in COPY order.
PAYLOAD = {
    "%s/facts/probe.py" % IN_IMAGE_HOME: "facts/probe.py",
    "%s/trainer" % IN_IMAGE_HOME: "trainer",
}
#: In-image path of the probe (run by ``images.verify.probe_image``).
PROBE = "%s/facts/probe.py" % IN_IMAGE_HOME
#: What ``python -m facts.horovod_gate`` needs in a devel stage (standard library + these).
BUILD_ONLY_GATE = ("facts/__init__.py", "facts/horovod_gate.py", "facts/parsers/__init__.py",
                   "facts/parsers/horovod.py")


def digest(repo: Path = REPO) -> str:
    """SHA-256 (hex) over every payload entry: its in-image path, then its bytes (a folder: ``folder_digest``)."""
    h = hashlib.sha256()
    for inside, rel in PAYLOAD.items():
        src = repo / rel
        part = folder_digest(src) if src.is_dir() else hashlib.sha256(src.read_bytes()).hexdigest()
        h.update(("%s\0%s\0" % (inside, part)).encode())
    return h.hexdigest()
