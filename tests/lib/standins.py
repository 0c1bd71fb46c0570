"""Stand-ins of upstream base images, built in the local engine from the registry-free Debian base under
``chexstack-test/`` names (never an upstream name: ``tests.lib.leftovers.OWN_PREFIXES``), each with the config
pattern of the image it stands in for. ``make_micromamba(client, base) -> tag``.

The micromamba stand-in has the config pattern of mamba-org/micromamba-docker's ``Dockerfile``
(https://github.com/mamba-org/micromamba-docker/blob/main/Dockerfile: ``ENV MAMBA_USER``, a user of uid 57439,
``USER $MAMBA_USER``, ``WORKDIR /tmp``, ``SHELL ["/usr/local/bin/_dockerfile_shell.sh"]`` from
mamba-org/micromamba-docker#60, ``ENTRYPOINT ["/usr/local/bin/_entrypoint.sh"]``, ``CMD ["/bin/bash"]``).
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.lib.leftovers import RUN_ID
from tests.lib.paths import CASES

#: Tagged per run (its token): two runs against one engine (the engine lane and the beside tests) never share it,
#: and each removes its own.
MICROMAMBA = "chexstack-test/micromamba-standin:0.21.0-" + RUN_ID[:12]
#: The micromamba stand-in's programs (never the upstream ones): the shell activates ``$MAMBA_ROOT_PREFIX/bin`` when
#: ``MAMBA_DOCKERFILE_ACTIVATE=1`` (as ``_dockerfile_shell.sh`` does), the entrypoint always (as
#: ``_entrypoint.sh``); ``micromamba install`` writes a ``python`` that records how it was run, and a history
#: line of who installed, where and with what, so the file trees of the two builds tell the build's user, folder
#: and environment apart.
MICROMAMBA_FILES = {
    "_dockerfile_shell.sh": b'#!/bin/sh\nif [ "${MAMBA_DOCKERFILE_ACTIVATE:-0}" = 1 ]; then\n'
                            b'  PATH=$MAMBA_ROOT_PREFIX/bin:$PATH; export PATH\nfi\nexec /bin/sh -c "$@"\n',
    "_entrypoint.sh": b'#!/bin/sh\nPATH=$MAMBA_ROOT_PREFIX/bin:$PATH; export PATH\nexec "$@"\n',
    "micromamba": b'#!/bin/sh\nset -e\ncase "$1" in\n  install)\n'
                  b'    mkdir -p "$MAMBA_ROOT_PREFIX/bin" "$MAMBA_ROOT_PREFIX/conda-meta"\n'
                  b'    echo "installed by $(id -u):$(id -g) in $(pwd) HOME=$HOME from $4" '
                  b'> "$MAMBA_ROOT_PREFIX/conda-meta/history"\n'
                  b'    printf \'#!/bin/sh\\necho "python stand-in, uid $(id -u), in $(pwd): $*"\\n\' '
                  b'> "$MAMBA_ROOT_PREFIX/bin/python"\n'
                  b'    chmod 755 "$MAMBA_ROOT_PREFIX/bin/python" ;;\n  clean) ;;\n'
                  b'  *) echo "micromamba stand-in: $1 is not stood in for" >&2; exit 1 ;;\nesac\n',
}
MICROMAMBA_DOCKERFILE = """FROM {base}
ENV MAMBA_USER=mambauser MAMBA_ROOT_PREFIX=/opt/conda ENV_NAME=base
COPY _dockerfile_shell.sh _entrypoint.sh micromamba /usr/local/bin/
RUN chmod 755 /usr/local/bin/_dockerfile_shell.sh /usr/local/bin/_entrypoint.sh /usr/local/bin/micromamba && \\
    groupadd -g 57439 mambauser && useradd -u 57439 -g 57439 -m -s /bin/bash mambauser && \\
    mkdir -p /opt/conda && chown mambauser:mambauser /opt/conda
USER $MAMBA_USER
SHELL ["/usr/local/bin/_dockerfile_shell.sh"]
WORKDIR /tmp
ENTRYPOINT ["/usr/local/bin/_entrypoint.sh"]
CMD ["/bin/bash"]
"""


def make_micromamba(client, base: str) -> str:
    """Build the micromamba stand-in on ``base`` (an image of the local engine), tag it ``MICROMAMBA`` with
    ``TEST_LABELS``; the tag."""
    from images.context import context_tar
    from images.docker_build import docker_build
    from tests.lib.leftovers import TEST_LABELS

    tar = context_tar(MICROMAMBA_DOCKERFILE.format(base=base), dict(MICROMAMBA_FILES))
    image_id = docker_build(client, tar, labels=TEST_LABELS, quiet=True)
    client.images.get(image_id).tag(MICROMAMBA)
    return MICROMAMBA


def case52_context(tmp_path: Path, base: str) -> Path:
    """Case 52's build context (``../shared/cases/52-micromamba-context``) copied to ``tmp_path``, its FROM pointed
    at ``base`` (the file has no ARG for its base); returns the copy's Dockerfile."""
    ctx = tmp_path / "ctx"
    shutil.copytree(CASES / "52-micromamba-context", ctx)
    df = ctx / "Dockerfile"
    df.write_text(re.sub(r"^FROM \S+", "FROM %s" % base, df.read_text(), count=1, flags=re.M))
    return df
