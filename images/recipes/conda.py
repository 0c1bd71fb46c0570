"""conda family: a RHEL 7-compatible CUDA image, Open MPI built with CUDA + verbs, the conda environment installed
from its lock, Horovod built last with its era's flags, in two stages.

devel:   base (CUDA devel) + OFED verbs + Open MPI <manifest mpi version> (hpccm's ``openmpi`` block, --with-cuda
         --with-verbs) + micromamba -> ``micromamba create -f conda-lock.yml`` (installs exactly the lock's conda
         packages: no solve at build time; micromamba skips the lock's pip section) -> the environment file's
         other pip pins, then Horovod (the pip section must pin exactly the manifest's version), compiled by
         pip in the activated environment (the lock's GCC toolchain, its NCCL as
         HOROVOD_NCCL_HOME) with the manifest's ``horovod_env`` (0.16.x: ``HOROVOD_GPU_ALLREDUCE=NCCL``;
         ``HOROVOD_GPU_OPERATIONS`` only exists from 0.20.0) against CUDA stubs (no GPU at build time), then the
         era's gate (import + ``hvd.init()``: 0.16 has no ``--check-build``). The proxy CA is given to it only.
runtime: base + OpenSSH ready for an MPIJob (``images.mpijob``) + OFED/Open MPI runtime + the environment copied
         from devel + our code (last).

The lock (``envs/conda/<stack>/conda-lock.yml``) is made by ``invoke lock --stack <stack>`` where conda channels are
reachable; here the recipe only renders.
"""
from __future__ import annotations

from hpccm.building_blocks import ofed, openmpi

from chexstack.errors import ChexstackError
from envs.lock import conda_files, pip_requirements, shown
from envs.manifest import Stack
from images import horovod, mpijob, parts
from images.parts import Part, Stage

ENV_PREFIX = "/opt/conda-env"
MPI_PREFIX = "/usr/local/openmpi"
LOCK_IN_IMAGE = "/usr/local/share/chexstack-build/conda-lock.yml"
#: The installer of the lock (a static binary; a build tool, not part of the stack). Source:
#: https://github.com/mamba-org/micromamba-releases/releases (1.5.x reads conda-lock's unified lock, ``-f *-lock.yml``).
MICROMAMBA = "1.5.10-0"
MICROMAMBA_URL = "https://github.com/mamba-org/micromamba-releases/releases/download/%s/micromamba-linux-64"
STUBS = "/usr/local/cuda/lib64/stubs"
DEVEL_PACKAGES = ["bzip2", "ca-certificates", "curl", "which"]
RUNTIME_PACKAGES = ["which"]


def _in_env(command: str) -> str:
    """``command`` inside the activated environment (its activation scripts set the conda compilers)."""
    return "micromamba run -p %s %s" % (ENV_PREFIX, command)


def _mpi(stack: Stack) -> openmpi:
    return openmpi(version=stack.version("mpi"), cuda=True, infiniband=True, prefix=MPI_PREFIX)


def pip_section(stack: Stack) -> list[str]:
    """The environment file's pip requirements other than Horovod (installed before it). Raises ChexstackError
    unless the pip section pins Horovod to exactly the manifest's version."""
    env_file = conda_files(stack.name).environment
    reqs = pip_requirements(env_file)
    hvd = [r for r in reqs if r.lower().replace("_", "-").startswith("horovod")]
    want = "horovod==%s" % stack.version("horovod")
    if hvd != [want]:
        raise ChexstackError("%s: pip section: expected %s (envs/stacks/%s.yaml components.horovod), got %s"
                             % (shown(env_file), want, stack.name, ", ".join(hvd) or "no horovod"))
    return [r for r in reqs if r not in hvd]


def _environment(stack: Stack) -> Part:
    lock = conda_files(stack.name).lockfile
    return parts.combine(
        "conda-environment",
        parts.run("curl -fsSL --retry 3 -o /usr/local/bin/micromamba %s" % (MICROMAMBA_URL % MICROMAMBA),
                  "chmod +x /usr/local/bin/micromamba", name="micromamba"),
        parts.copy_file("build-only/conda-lock.yml", lock, LOCK_IN_IMAGE),
        parts.run("micromamba create -y -p %s -f %s" % (ENV_PREFIX, LOCK_IN_IMAGE),
                  "micromamba clean -y --all",
                  # The lock's GCC toolchain as the environment's `gcc` (Table 1's GCC row is checked in the image).
                  'ln -sf "$(ls %s/bin/*-linux-gnu-gcc | head -n 1)" %s/bin/gcc' % (ENV_PREFIX, ENV_PREFIX),
                  name="conda-environment"),
    )


def _horovod(stack: Stack) -> Part:
    flags = dict(stack.build.horovod_env, HOROVOD_NCCL_HOME=ENV_PREFIX, HOROVOD_CUDA_HOME="/usr/local/cuda",
                 LD_LIBRARY_PATH="%s:%s/lib" % (STUBS, MPI_PREFIX))
    others = pip_section(stack)
    return parts.combine(
        "horovod",
        parts.run("ln -sf %s/libcuda.so %s/libcuda.so.1" % (STUBS, STUBS),
                  *([_in_env("pip install --no-cache-dir --no-deps %s" % " ".join(others))] if others else []),
                  "%s %s" % (parts.horovod_env_prefix(flags), _in_env(
                      "pip install --no-cache-dir --no-build-isolation --no-deps horovod==%s"
                      % stack.version("horovod"))), name="horovod"),
        horovod.gate(stack, _in_env("python"), {"LD_LIBRARY_PATH": STUBS}),
    )


def stages(stack: Stack, base: str, distro: str) -> list[Stage]:
    devel_base = parts.base(base, distro, "devel")  # first: hpccm's blocks read the distro it sets
    mpi, verbs = _mpi(stack), ofed()
    devel = [
        devel_base,
        parts.os_packages(DEVEL_PACKAGES),
        parts.build_ca(),
        Part("ofed", [verbs]),
        Part("openmpi", [mpi]),
        _environment(stack),
        _horovod(stack),
    ]
    runtime = [
        parts.base(base, distro, "runtime"),
        mpijob.ssh_setup(also=RUNTIME_PACKAGES),
        Part("ofed", [verbs.runtime(_from="devel")]),
        Part("openmpi", [mpi.runtime(_from="devel")]),
        parts.copy_from_stage("devel", ENV_PREFIX),
        parts.env({"PATH": "%s/bin:$PATH" % ENV_PREFIX, "CONDA_PREFIX": ENV_PREFIX}),
        parts.chexstack_code(),
    ]
    return [Stage("devel", devel), Stage("runtime", runtime)]
