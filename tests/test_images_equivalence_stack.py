"""The cpu stack's own definition on the real tool (``tests/harness/equivalence.py``, as the corpus pairs of
``tests/test_images_equivalence.py``): ``invoke render --stack cpu --format singularity`` built by Apptainer against
the verified Docker image. Apart from the pairs because it needs the session's cpu image (``cpu_build``), which the
engine lane owns; the pairs run beside it (``tests/lib/lanes.py``)."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.harness.equivalence import explain

pytestmark = [pytest.mark.docker]
if not (shutil.which("apptainer") or shutil.which("singularity")) and not os.environ.get("CI"):
    pytestmark.append(pytest.mark.skip(reason="no apptainer on PATH (scripts/setup --apptainer installs it)"))


@pytest.mark.slow
def test_cpu_stack_definition_builds_the_same_image(client, debian_base, cpu_build, tmp_path):
    """``invoke render --stack cpu --format singularity`` built by ``apptainer build`` gives the verified Docker
    image: same files (the venv's symbolic links kept by ``%files from devel``), environment, Table 1 rows (every
    one a match) and run behaviour. Both stages are built by Apptainer (its devel stage installs the wheel of the host's
    Horovod wheel cache when the key computed inside matches, else compiles Horovod, as Docker's does); the
    sandbox is kept for the next run with the same inputs (``build_key``), as Docker keeps the image's layers."""
    from tests.harness.equivalence import check_stack

    report = check_stack(client, "cpu", debian_base, cpu_build.image_id, tmp_path / "context",
                         runs=[["python", "-m", "trainer", "--help"]],
                         execs=[["/bin/sh", "-c", "command -v python mpirun sshd; python -c 'import sys; "
                                 "print(sys.prefix)'; readlink /opt/venv/bin/python3"]],
                         docker_verification=cpu_build.verification)
    assert report.apptainer_ok, [r for r in report.apptainer_rows if r.verdict == "MISMATCH"]
    assert len(report.apptainer_rows) == len(report.docker_rows) >= 8
    assert not report.differences, explain(report.differences)
