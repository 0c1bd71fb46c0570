"""How pyxis reads ``srun --container-image=IMAGE`` (NVIDIA's SPANK plugin that runs Slurm tasks in enroot
containers), stated once for the Slurm launcher (``launch.slurm.enroot_uri``), the check of a user's batch script
(``invoke validate --job``) and the reading of a failed job's log (``facts.parsers.pyxis``).

pyxis takes IMAGE as a squashfs file only when it starts with ``/`` or ``.``: pyxis_slurmstepd.c (release 0.24.0),
``if (strspn(context.args->image, "./") > 0) /* Assume image is a path to a squashfs file */``; any other name is an
enroot URI ``[USER@][REGISTRY#]IMAGE[:TAG]`` that enroot pulls, from Docker Hub when no registry is named
(https://github.com/NVIDIA/pyxis/wiki/Usage). So ``--container-image=cont.sqsh`` fetches
``https://registry-1.docker.io/v2/library/cont.sqsh/manifests/latest`` and fails with 401 Unauthorized or not found
(https://github.com/NVIDIA/pyxis/issues/67, #127: the maintainer, "You have to start the path with / or ./ to use a
squashfs image, otherwise it's considered as a docker image from a registry"; #78).

A squashfs image is named ``.sqsh`` (``enroot import -o IMAGE.sqsh``, enroot's usage), ``.squashfs`` or ``.sqfs``
(mksquashfs' images as commonly named). A SIF (``.sif``, Apptainer/Singularity's image format) is not an enroot
image: pyxis runs squashfs files and registry images only (its ``--container-image`` help: "[USER@][REGISTRY#]
IMAGE[:TAG]|PATH", PATH a squashfs file); a SIF runs with ``singularity exec`` (the hybrid model).
"""
from __future__ import annotations

#: The file names of squashfs images.
SQUASHFS_SUFFIXES = (".sqsh", ".squashfs", ".sqfs")
#: The file name of Apptainer/Singularity's image format, which pyxis cannot run.
SIF_SUFFIXES = (".sif",)


def is_squashfs_name(image: str) -> bool:
    """``image`` is named as a squashfs file (``SQUASHFS_SUFFIXES``, any case)."""
    return image.lower().endswith(SQUASHFS_SUFFIXES)


def is_sif_name(image: str) -> bool:
    """``image`` is named as a SIF (``SIF_SUFFIXES``, any case)."""
    return image.lower().endswith(SIF_SUFFIXES)


def read_as_file(image: str) -> bool:
    """Whether pyxis takes ``image`` as a file: its first character is ``/`` or ``.``."""
    return image.startswith(("/", "."))


def image_problem(image: str) -> str | None:
    """The fault pyxis makes of ``image``: ``PYXIS_SIF_IMAGE`` for a SIF (pyxis cannot run one, as a file or as a
    name it pulls), ``PYXIS_SQUASHFS_AS_REGISTRY`` for a squashfs file named without a leading ``/`` or ``.`` (pyxis
    pulls the name from a registry); None for a registry image or a squashfs path pyxis reads as a file."""
    if is_sif_name(image):
        return "PYXIS_SIF_IMAGE"
    if is_squashfs_name(image) and not read_as_file(image):
        return "PYXIS_SQUASHFS_AS_REGISTRY"
    return None
