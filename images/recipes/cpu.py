"""cpu family: Debian + Open MPI + a venv with the pinned TensorFlow, Horovod compiled last, in two stages.

devel:   base + compilers + Open MPI dev + venv (TensorFlow + python_packages: ``Stack.pip_pins``, Horovod's pin
         excepted) -> Horovod (manifest's horovod_env, --no-cache-dir; the wheel of chexstack's Horovod wheel cache
         when the key computed in the stage matches, else compiled: ``images.horovod.pip_install``) -> Horovod gate
         (the build fails when Horovod lacks a required part or was built for another TensorFlow:
         https://github.com/horovod/horovod/issues/3858, https://github.com/horovod/horovod/issues/2619).
         The proxy CA is given to this stage only.
runtime: base + Python + Open MPI runtime + the verbs userspace + OpenSSH ready for an MPIJob (``images.mpijob``)
         + the venv copied from devel + our code (last).
"""
from __future__ import annotations

from envs.manifest import Stack
from images import horovod, mpijob, parts
from images.parts import Stage

VENV = "/opt/venv"

# Debian 12 package names; their versions are the distribution's (manifest rows mpi, python, gcc say which).
DEVEL_PACKAGES = ["python3", "python3-venv", "python3-dev", "g++", "make", "libopenmpi-dev", "openmpi-bin"]
# gcc: the manifest's GCC row is checked inside the final image. The verbs userspace is named, not left to Open
# MPI's dependencies; OpenSSH comes with ``mpijob.ssh_setup``.
RUNTIME_PACKAGES = ["python3", "openmpi-bin", "libopenmpi3", "gcc"] + mpijob.VERBS_APT_PACKAGES


def stages(stack: Stack, base: str, distro: str) -> list[Stage]:
    python, pip = "%s/bin/python" % VENV, "%s/bin/pip" % VENV
    venv_first = parts.env({"PATH": "%s/bin:$PATH" % VENV})
    devel = [
        parts.base(base, distro, "devel"),
        parts.os_packages(DEVEL_PACKAGES),
        parts.build_ca(),
        # --no-deps: only the manifest's pins go in (none resolved afresh), and pip check fails the build if the
        # manifest misses one of their dependencies
        parts.run("python3 -m venv %s" % VENV,
                  "%s install --no-cache-dir --no-deps %s" % (pip, " ".join(p for p in stack.pip_pins()
                                                                            if p != stack.pin("horovod"))),
                  "%s check" % pip, name="venv"),
        venv_first,
        horovod.pip_install(stack, python, pip),
        horovod.gate(stack, python),
    ]
    runtime = [
        parts.base(base, distro, "runtime"),
        mpijob.ssh_setup(also=RUNTIME_PACKAGES),
        parts.copy_from_stage("devel", VENV),
        venv_first,
        parts.chexstack_code(),
    ]
    return [Stage("devel", devel), Stage("runtime", runtime)]
