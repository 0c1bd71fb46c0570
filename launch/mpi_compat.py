"""Is the host's MPI usable with a stack image's MPI in Singularity's/Apptainer's *hybrid model*?

In the hybrid model the host's ``mpirun`` (and its ORTE/PRRTE daemons) start ``singularity exec`` and the ranks
load the image's MPI library, which connects back to the host daemons. Sources for the rule used here:

- Apptainer user guide, "Apptainer and MPI applications", Hybrid model
  (https://github.com/apptainer/apptainer-userdocs/blob/main/mpi.rst): "The MPI in the container must be
  compatible with the version of MPI available on the host" and should use the same process-management
  interface (PMI2/PMIx); the usual approach is to build the host's MPI version into the image.
- Open MPI README (since open-mpi/ompi#3063): Open MPI is only guaranteed to work when the versions are exactly
  the same everywhere in a job, and launching a container that bundles Open MPI vX with ``mpirun`` from vY is not
  guaranteed to work. Open MPI's container-versioning notes (open-mpi/ompi wiki "Container Versioning") state
  that releases with the same major.minor carry bug fixes only.

Rule: same implementation and the same **major.minor** release series -> compatible (patch levels may differ;
this is stated in the result); another implementation or another series -> incompatible.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from chexstack.tools import run_checked
from envs.manifest import Stack
from facts.parsers import versions as parse_versions

SOURCE = ("Apptainer user guide, MPI hybrid model (apptainer/apptainer-userdocs mpi.rst); "
          "Open MPI README on mixing versions (open-mpi/ompi#3063)")


def implementation(name: str | None) -> str | None:
    """Canonical implementation name: 'Open MPI' for 'OpenMPI'/'Open MPI'/'OpenRTE', else the name."""
    if name is None:
        return None
    return "Open MPI" if re.sub(r"[\s_-]", "", name).lower() in ("openmpi", "openrte") else name


def _series(version: str) -> tuple[str, ...]:
    return tuple(version.split(".")[:2])


@dataclass(frozen=True)
class MpiCompatibility:
    """Outcome of the hybrid-model check; ``reason`` is one sentence naming both versions."""

    compatible: bool
    host: str
    image: str
    reason: str
    source: str = SOURCE


def check_hybrid(stack: Stack, mpirun_version_output: str) -> MpiCompatibility:
    """Compare the stack's ``mpi`` row (the image's MPI) with the host's ``mpirun --version`` text."""
    row = stack.components["mpi"]
    image_impl, image_version = implementation(row.name), row.version
    host_impl, host_version = parse_versions.mpirun(mpirun_version_output)
    host_impl = implementation(host_impl)
    host = "%s %s" % (host_impl, host_version) if host_impl else "unrecognised mpirun"
    image = "%s %s" % (image_impl or "MPI", image_version or "(none)")
    if image_version is None:
        return MpiCompatibility(False, host, image, "stack %s has no MPI (mpi row is empty)" % stack.name)
    if host_impl is None:
        return MpiCompatibility(False, host, image,
                                "could not read an MPI implementation and version from the host's mpirun --version")
    if host_impl != image_impl:
        return MpiCompatibility(False, host, image, "host runs %s but the image of stack %s has %s"
                                % (host, stack.name, image))
    if _series(host_version) != _series(image_version):
        return MpiCompatibility(False, host, image, "host %s and image %s (stack %s) are different release series; "
                                "the hybrid model needs the same major.minor" % (host, image, stack.name))
    same = host_version == image_version or host_version.startswith(image_version + ".")
    return MpiCompatibility(True, host, image, "host %s and image %s are the same release series %s%s" % (
        host, image, ".".join(_series(image_version)), "" if same else " (patch levels differ)"))


def host_mpirun_version(mpirun: str = "mpirun") -> str:
    """Output of ``mpirun --version`` on this host. Raises ChexstackError when mpirun is missing or fails."""
    return run_checked([mpirun, "--version"], "the host's MPI version", timeout=60,
                       missing="%s not found on PATH: the hybrid model (host mpirun + singularity exec) needs the "
                               "host's MPI; load its module or install it" % mpirun).output
