"""Singularity/Apptainer images (SIF) made from a built, verified Docker image, through spython's client.

``require_tool()`` fails early (before any Docker build) when neither ``apptainer`` nor ``singularity`` is on
PATH. ``build_sif(ref, image_id, out_dir)`` bootstraps from ``docker-daemon://<ref>`` and records the Docker image
ID in the SIF's labels (``org.chexstack.docker.image.id``), so a SIF always names the exact image it came from.
``probe_sif`` runs the same in-image probe as the Docker verification (a converter may reorder layers:
https://github.com/horovod/horovod/issues/2619).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from chexstack.errors import ChexstackError, ExitCode
from images.labels import DOCKER_IMAGE_ID
from images.verify import PROBE

INSTALL_HINT = ("install Apptainer (https://apptainer.org/docs/admin/main/installation.html) or SingularityCE, "
                "or use Docker (--runtime docker)")


def require_tool() -> str:
    """Path of the ``singularity`` command spython drives (Apptainer ships one as a compatibility link)."""
    singularity, apptainer = shutil.which("singularity"), shutil.which("apptainer")
    if singularity:
        return singularity
    if apptainer:
        raise ChexstackError("apptainer is at %s but has no `singularity` link, which spython's client calls; add "
                             "one (ln -s %s /usr/local/bin/singularity)" % (apptainer, apptainer))
    raise ChexstackError("--runtime singularity needs apptainer or singularity on PATH; neither was found: %s"
                         % INSTALL_HINT, exit_code=ExitCode.TOOL_MISSING)


def definition(ref: str, image_id: str) -> str:
    """The definition that turns the local Docker image ``ref`` into a SIF labelled with its image ID."""
    return "Bootstrap: docker-daemon\nFrom: %s\n\n%%labels\n    %s %s\n" % (ref, DOCKER_IMAGE_ID, image_id)


def sif_path(ref: str, out_dir: Path) -> Path:
    """Where the SIF of the Docker image ``ref`` is written: ``<out_dir>/chexstack_cpu_<tag>.sif``."""
    return out_dir / ("%s.sif" % ref.replace("/", "_").replace(":", "_"))


def build_sif(ref: str, image_id: str, out_dir: Path) -> Path:
    """Build ``<out_dir>/<name>_<tag>.sif`` from the Docker image ``ref``; returns its path."""
    require_tool()
    from spython.main import Client

    out_dir.mkdir(parents=True, exist_ok=True)
    sif = sif_path(ref, out_dir)
    with tempfile.TemporaryDirectory(prefix="chexstack-sif-") as tmp:
        recipe = Path(tmp) / "from-docker.def"
        recipe.write_text(definition(ref, image_id))
        result = Client.build(recipe=str(recipe), image=str(sif), sudo=os.geteuid() != 0, force=True,
                              return_result=True, quiet=True)
    if not isinstance(result, dict) or result.get("return_code") != 0:
        message = result.get("message") if isinstance(result, dict) else result
        raise ChexstackError("singularity build of %s from docker-daemon://%s failed: %s" % (sif, ref, message),
                             exit_code=ExitCode.FAILED)
    return sif


def probe_sif(sif: Path) -> dict:
    """The in-image probe's JSON from inside ``sif`` (``{"error": ...}`` when it could not run)."""
    require_tool()
    from spython.main import Client

    result = Client.execute(str(sif), ["python", PROBE], return_result=True, quiet=True)
    if result.get("return_code") != 0:
        return {"error": "exit %s: %s" % (result.get("return_code"), str(result.get("message"))[-500:])}
    try:
        return json.loads(result["message"] if isinstance(result["message"], str) else "".join(result["message"]))
    except ValueError:
        return {"error": "probe printed no JSON"}
