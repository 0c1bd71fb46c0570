"""ngc family: NVIDIA's NGC TensorFlow image as it ships (TensorFlow, Horovod, CUDA, NCCL, Open MPI are NVIDIA's;
nothing is rebuilt), plus what launching needs, the manifest's extra Python packages and our code.

Added: OpenSSH client + server ready for an MPIJob (``images.mpijob``; Kubeflow MPIJob and multi-node
``horovodrun`` start ranks over ssh; the verbs userspace is NVIDIA's, checked by verification), ``python``
naming the image's Python 3 when it does not already, the manifest's ``python_packages``, the trainer and probe
last. The packages are downloaded as wheels in a ``wheels`` stage (which alone gets the proxy CA) and installed
offline in the image, so pip resolves them against NVIDIA's own numpy/scipy and the CA reaches no image layer.

On a base without Python (a stand-in for the NGC image) the Python steps are skipped with a message; the build
then fails verification, since every row that needs Python is missing.
"""
from __future__ import annotations

import shlex

from envs.manifest import Stack
from images import mpijob, parts
from images.parts import Stage

WHEELS = "/opt/chexstack-wheels"

_PYTHON_ALIAS = ('if ! python -c "import sys; sys.exit(sys.version_info[0] != 3)" 2>/dev/null && '
                 'command -v python3 >/dev/null; then ln -sf "$(command -v python3)" /usr/local/bin/python; fi')


def _if_python(command: str) -> str:
    return 'if command -v python >/dev/null; then %s; else echo "no python in the base image: skipped"; fi' % command


def stages(stack: Stack, base: str, distro: str) -> list[Stage]:
    pins = " ".join(shlex.quote(p) for p in stack.build.python_packages)
    out = []
    image = [
        parts.base(base, distro, "image"),
        mpijob.ssh_setup(),
        parts.run(_PYTHON_ALIAS, name="python-alias"),
    ]
    if pins:
        out.append(Stage("wheels", [
            parts.base(base, distro, "wheels"),
            parts.build_ca(),
            parts.run(_PYTHON_ALIAS, "mkdir -p %s" % WHEELS,
                      _if_python("python -m pip wheel --no-cache-dir --wheel-dir %s %s" % (WHEELS, pins)),
                      name="wheels"),
        ]))
        image += [
            parts.copy_from_stage("wheels", WHEELS),
            parts.run(_if_python("python -m pip install --no-cache-dir --no-index --find-links %s %s"
                                 % (WHEELS, pins)), "rm -rf %s" % WHEELS, name="python-packages"),
        ]
    image.append(parts.chexstack_code())
    return out + [Stage("image", image)]
