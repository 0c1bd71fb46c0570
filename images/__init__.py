"""How a stack becomes an artifact: hpccm recipes (one per stack family), rendering to Dockerfile or Singularity
definition, Docker builds through the docker SDK, verification inside the built image, SIF conversion.

What other areas may rely on (signatures and fields are the code's; each module's docstring has the detail):

- **Inside every image**: the trainer at ``/opt/chexstack/trainer`` and the probe at ``/opt/chexstack/facts/probe.py``
  (``images.naming.IN_IMAGE_HOME``, on ``PYTHONPATH``, also as ``CHEXSTACK_HOME``), the stack's Python first on
  ``PATH`` as ``python``, these code layers last. What an image carries from this repository is declared once,
  ``images.payload.PAYLOAD``, and its digest (``images.payload.digest``) is the label ``org.chexstack.code.sha256``;
  the other labels are ``org.opencontainers.image.*``, ``org.chexstack.bom`` (the manifest's JSON) and
  ``org.chexstack.verification.mismatches``, and in SIFs ``org.chexstack.docker.image.id`` and
  ``org.chexstack.manifest.sha256``.
- **Build**: ``images.render.render`` (hpccm's global format is set only inside ``images.render.hpccm_format``),
  ``images.build.build`` -> ``BuildResult``; the image is tagged ``images.naming.image_ref`` only after verification.
- **Verification**: ``images.verify.compare`` judges a ``ProbeResult`` (the probe's JSON, or why it could not run;
  ``images.verify.probe_image`` and ``images.sif.probe_sif`` make one, and a node's evidence records one) against
  the manifest, row by row, plus the launch rows (``images.verify.launch_report``, judged by
  ``images.verify.launch_rows``; any MISMATCH fails the build).
- **What a cluster launcher needs of an image** (``launch``'s jobs): ``python -m trainer`` from ``/opt/chexstack``;
  for MPIJobs ``/usr/sbin/sshd`` (+ ``/var/run/sshd``), an ssh client with ``StrictHostKeyChecking no`` and
  ``UserKnownHostsFile /dev/null``, sshd ``StrictModes no``, ``mpirun`` on ``PATH``, the image running as root with
  the operator's key at ``/root/.ssh``; for pyxis an MPI with PMIx; for RDMA the verbs userspace (rdma-core). Every
  family's final stage gets them from ``images.mpijob.ssh_setup``, and ``invoke build`` checks them (rows
  ``images.verify.LAUNCH_ROWS``).
- **SIF**: ``images.sif.build_sif`` -> ``SifBuild`` (docker save -> ``apptainer build`` -> sign -> verify: the SIF
  reaches its final path only when its verification is ok); ``images.sif.require_tool`` is ``apptainer``, else
  ``singularity`` (exit 3 without).
- **Registries** (``chexstack.registry``): ``images.build.push_verified`` pushes only a verified build and writes
  its ``BuildRecord``; ``images.build.pushed_reference`` reads the ``repo@sha256:…`` a push fixed for a local tag.
- **Bases**: ``facts.apt_sources.debian_mirror`` is the one choice of debootstrap's mirror;
  ``images.local_base.ensure_debian_base`` makes or reuses the registry-free test base
  ``chexstack-local/debian:bookworm``. Every image part (``images.parts``, ``images.mpijob``, ``images.horovod``)
  has a golden per format in ``tests/golden/images/parts/``.

The tests' Apptainer harness, ``tests/harness/equivalence.py`` (tests only), builds a definition as a sandbox and
compares it with the Docker image: files, environment, Table 1 rows and run behaviour.
"""
