"""What pyxis prints when a Slurm step's container does not start: text in, values out (never run tools).

pyxis logs each step of its set-up through Slurm (``pyxis: importing docker image: IMAGE``, ``pyxis: creating
container filesystem: ...``) and, when enroot fails, ``pyxis: failed to import docker image`` followed by enroot's
log, one line each (``slurmstepd: error: pyxis:     [ERROR] URL https://registry-1.docker.io/v2/library/cont.sqsh/
manifests/latest returned error code: 401 Unauthorized``): https://github.com/NVIDIA/pyxis/issues/67, #127. The line
that tells the cause apart is the import of a name that is a file (``facts.pyxis.image_problem``: a squashfs file
named without a leading ``/`` or ``.``, a SIF), not the last lines (``couldn't start container``, ``spank: required
plugin spank_pyxis.so: task_init() failed``), which every pyxis failure prints.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from facts.pyxis import image_problem

#: ``pyxis: importing docker image: IMAGE`` (pyxis_slurmstepd.c): group 1 the image as pyxis read it
_IMPORT = re.compile(r"pyxis: importing docker image: (\S+)")
#: enroot's error line, as pyxis relays its log: group 1 the error
_ENROOT_ERROR = re.compile(r"pyxis:\s+\[ERROR\]\s+(.*\S)")


@dataclass(frozen=True)
class PyxisFailure:
    """A step's container that did not start: ``cause`` (``PYXIS_SQUASHFS_AS_REGISTRY``, ``PYXIS_SIF_IMAGE``),
    ``image`` as pyxis read it, ``line`` the distinguishing line (pyxis' import of that image), ``error`` enroot's
    own error line after it (the registry's answer), or None."""

    cause: str
    image: str
    line: str
    error: str | None = None


def classify_pyxis(text: str) -> PyxisFailure | None:
    """The cause of a failed pyxis step in ``text`` (a job's output), or None when no import names an image pyxis
    mis-reads (``facts.pyxis.image_problem``)."""
    lines = (text or "").splitlines()
    for n, line in enumerate(lines):
        m = _IMPORT.search(line)
        if m and (cause := image_problem(m.group(1))):
            error = next((e.group(1) for later in lines[n + 1:] if (e := _ENROOT_ERROR.search(later))), None)
            return PyxisFailure(cause, m.group(1), line[m.start():].strip(), error)
    return None
