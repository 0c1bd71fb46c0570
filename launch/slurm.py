"""Slurm batch scripts for a ``JobSpec``, in the two ways clusters run containers with MPI:

- ``pyxis``: ``srun --mpi=pmix`` starts one task per GPU and NVIDIA's pyxis SPANK plugin runs it in the image
  (``--container-image`` takes an enroot URI ``[USER@][REGISTRY#]IMAGE[:TAG]`` or a squashfs path;
  https://github.com/NVIDIA/pyxis/wiki/Usage). The image's MPI must speak the PMIx version of Slurm's pmix plugin.
- bare metal (``render_baremetal``, a ``JobSpec`` without a stack): the host's Open MPI ``mpirun`` inside the
  allocation starts ``python -m trainer`` of a Python environment on shared storage on every node (the conda
  column's way); Open MPI launches its daemons through Slurm (``srun``), so no ssh between nodes is needed.
- ``hybrid``: the host's ``mpirun`` starts ``singularity exec [--nv]`` on every node (Apptainer's hybrid model),
  the script checks where the job runs that host and image run the same MPI release series (``launch.mpi_compat``);
  the rendering machine's own MPI is checked too, but only warned about (it may be a workstation).

Scripts are ``launch/templates/slurm-*.sbatch`` filled with ``string.Template``; every shell word is quoted with
``shlex`` and every ``#SBATCH`` value is checked, so no value can change the script's structure.
"""
from __future__ import annotations

import os
import re
import shlex
import socket
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Literal

from chexstack.console import warn
from chexstack.errors import ChexstackError
from envs.manifest import Stack
from facts import pyxis
from facts.openmpi import ALLOW_RUN_AS_ROOT_ENV, SINGLE_COPY_OFF, root_env_honoured
from launch.job import JobSpec, Mount
from launch.mpi_compat import MpiCompatibility, check_hybrid, host_mpirun_version, implementation
from launch.mpirun import EXPORTED_ENV, mpirun_argv
from trainer import preflight

TEMPLATES = Path(__file__).resolve().parent / "templates"
Model = Literal["pyxis", "hybrid"]
MODELS = ("pyxis", "hybrid")

_DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9_.:%@+/=-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Set in every job: NCCL's transport choice in the log (a silent fall-back to sockets:
#: https://github.com/NVIDIA/nccl/issues/451).
DEFAULT_ENV = {"NCCL_DEBUG": "INFO"}
#: How srun starts the ranks of a stack's image under pyxis: Slurm's PMIx plugin, which the image's Open MPI speaks
#: (without it each rank starts alone: Open MPI's "direct launched using srun" refusal, tests/data/mpi).
PMIX = "--mpi=pmix"


@dataclass(frozen=True)
class SlurmOptions:
    """Scheduler settings that are not part of the run itself. ``output``: sbatch's log file pattern;
    ``requeue``: ``#SBATCH --requeue`` (Slurm may restart the job: ``scontrol requeue``, a node failure), and the
    bare-metal script continues a restarted job from its last committed checkpoint (``requeue_lines``);
    ``nodelist``: the nodes the job must run on (``#SBATCH --nodelist``; as many as the job's nodes), so that
    runs to be compared share their hosts (``invoke study``)."""

    time: str = "01:00:00"
    partition: str | None = None
    account: str | None = None
    output: str = "%x-%j.out"
    exclusive: bool = True
    requeue: bool = False
    nodelist: tuple[str, ...] = ()


def enroot_uri(image: str) -> str:
    """Docker reference -> enroot URI for ``--container-image``: the registry host is separated by ``#``
    (``registry.example.com:5000/chexstack/cpu:1`` -> ``registry.example.com:5000#chexstack/cpu:1``). A host is a
    first path component with ``.`` or ``:`` or ``localhost`` (Docker's rule). An absolute squashfs path
    (``facts.pyxis.SQUASHFS_SUFFIXES``: ``.sqsh``, ``.squashfs``, ``.sqfs``) passes unchanged; a relative one
    (``chexstack-cpu.sqsh``, ``./x.sqfs``) raises ChexstackError: pyxis takes an image as a file only when it starts
    with ``.`` or ``/`` and pulls any other name from Docker Hub (``facts.pyxis``, NVIDIA/pyxis#127), and a path
    relative to the job's directory is not the absolute cluster path the launchers require. A SIF raises too: pyxis
    cannot run one (``--hybrid`` does)."""
    if pyxis.image_problem(image) == "PYXIS_SIF_IMAGE":
        raise ChexstackError("--image %s: a SIF is Apptainer's image format, which pyxis cannot run (it runs squashfs "
                             "files and registry images): use --hybrid to run the SIF with singularity exec, or give "
                             "pyxis a squashfs (enroot import -o /shared/images/%s.sqsh dockerd://IMAGE)"
                             % (image, image.rsplit("/", 1)[-1].rsplit(".", 1)[0]))
    if pyxis.is_squashfs_name(image) or image.startswith(("./", "../")):
        if not image.startswith("/"):
            raise ChexstackError("--image %s: a squashfs image must be an absolute path the nodes see, e.g. "
                                 "/shared/images/%s (pyxis treats a name without a leading / or ./ as a registry "
                                 "image: docker://%s)" % (image, image.rsplit("/", 1)[-1], image))
        return image
    if image.startswith("/") or "#" in image:
        return image
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return "%s#%s" % (first, rest)
    return image


def _comment(text: str) -> str:
    return " ".join(str(text).split())


def output_folder_note(output: str) -> str:
    """The comment at the top of a script whose job output (``#SBATCH --output``) is in a folder: Slurm connects
    the batch script's output to that file when the job starts, before the script (and its ``mkdir -p``) runs
    (sbatch(1), --output: "connect the batch script's standard output directly to the file name specified"), so a
    folder that does not exist yet fails the job with no log at all. chexstack's ``--submit`` creates the folder
    first (``launch.cluster.submit_job``, and ``invoke bench`` and ``invoke study`` for theirs); a user who runs
    sbatch on a rendered script must. "" for a file in the submit directory."""
    folder = os.path.dirname(output)
    if not folder:
        return ""
    return ("# Before sbatch: mkdir -p %s (Slurm opens --output=%s before this script and its mkdir run: without the "
            "folder the job fails with no log; chexstack's --submit creates it first)" % (folder, output))


def directives(spec: JobSpec, opts: SlurmOptions) -> str:
    """The ``#SBATCH`` lines: nodes, tasks (and GPUs) per node, scheduler options; each value checked. A job output
    in a folder is preceded by ``output_folder_note``."""
    pairs = [("job-name", spec.name), ("nodes", spec.nodes), ("ntasks-per-node", spec.ranks_per_node)]
    if spec.gpus:
        pairs.append(("gpus-per-node", spec.ranks_per_node))
    if opts.nodelist and len(opts.nodelist) != spec.nodes:
        raise ChexstackError("Slurm --nodelist %s: expected %d node(s), the job's --nodes"
                             % (",".join(opts.nodelist), spec.nodes))
    bad = [n for n in opts.nodelist if not _DIRECTIVE_VALUE.match(n)]
    if bad:
        raise ChexstackError("Slurm --nodelist: expected node names of letters, digits and _.:%%@+/=-, got %s"
                             % ", ".join(repr(n) for n in bad))
    pairs += [("partition", opts.partition), ("account", opts.account), ("time", opts.time),
              ("output", opts.output)]
    lines = []
    for key, value in pairs:
        if value is None:
            continue
        if not _DIRECTIVE_VALUE.match(str(value)):
            raise ChexstackError("Slurm option --%s: expected one word of letters, digits and _.:%%@+/=-, got %r"
                                 % (key, value))
        lines.append("#SBATCH --%s=%s" % (key, value))
    if opts.nodelist:
        lines.append("#SBATCH --nodelist=%s" % ",".join(opts.nodelist))
    if opts.exclusive:
        lines.append("#SBATCH --exclusive")
    if opts.requeue:
        lines.append("#SBATCH --requeue")
    note = output_folder_note(opts.output)
    return "\n".join(([note] if note else []) + lines)


def exports(spec: JobSpec, hybrid: bool = False) -> str:
    """``export NAME=value`` lines (NCCL_DEBUG=INFO plus the spec's environment), values shell-quoted; ``hybrid``:
    also Open MPI's single copy off (``facts.openmpi.SINGLE_COPY_OFF``: each rank's ``singularity exec`` is its
    own namespace, where CMA fails; Open MPI's mpirun passes every ``OMPI_*`` variable on to the ranks, mpirun(1)
    "Exported Environment Variables"). Where the script starts the host's mpirun (``hybrid``, and bare metal: a
    spec without a stack), Open MPI's run-as-root permission (``facts.openmpi.ALLOW_RUN_AS_ROOT_ENV``, harmless to
    other flavours; the option too where the image's Open MPI ignores the variables: ``hybrid_lines``), whoever
    asks for the script (a training run, a sweep's steps)."""
    host_mpirun = hybrid or spec.stack is None
    env = {**DEFAULT_ENV, **(ALLOW_RUN_AS_ROOT_ENV if host_mpirun else {}), **(SINGLE_COPY_OFF if hybrid else {}),
           **spec.env}
    for name in env:
        if not _ENV_NAME.match(name):
            raise ChexstackError("environment variable name %r: expected letters, digits and _" % name)
    return "\n".join("export %s=%s" % (k, shlex.quote(v)) for k, v in sorted(env.items()))


def _mount_list(mounts: tuple[Mount, ...], fmt: str) -> str:
    items = []
    for m in mounts:
        for path in (m.source, m.container_path):
            if "," in path or ":" in path:
                raise ChexstackError("mount path %r: ',' and ':' cannot appear in a container mount" % path)
        items.append(fmt % (m.source, m.container_path) + (":ro" if m.read_only else ""))
    return ",".join(items)


def output_dirs(mounts: tuple[Mount, ...]) -> str:
    """Shell lines that create the writable mounts' sources (``templates/output-dirs.sh``); "" when none.
    Every Slurm script (train, both models, and the bench sweep) creates its output folder this way."""
    dirs = [m.source for m in mounts if not m.read_only]
    if not dirs:
        return ""
    return Template((TEMPLATES / "output-dirs.sh").read_text()).substitute(
        dirs=" ".join(shlex.quote(d) for d in dirs)).rstrip()


def _command_lines(*segments: list[str]) -> str:
    """One shell command, a segment per line (launcher, container, trainer) joined by backslash-newlines."""
    return " \\\n    ".join(shlex.join(s) for s in segments if s)


def pyxis_srun_argv(spec: JobSpec, geometry: bool = False) -> tuple[list[str], list[str]]:
    """(srun + pyxis options, trainer command) for ``spec``; ``geometry`` adds the step's nodes and tasks (a job
    step smaller than its allocation, as in a sweep)."""
    srun = ["srun", PMIX]
    if geometry:
        srun += ["--nodes=%d" % spec.nodes, "--ntasks=%d" % spec.world_size,
                 "--ntasks-per-node=%d" % spec.ranks_per_node]
    srun.append("--container-image=" + enroot_uri(spec.image))
    if spec.mounts:
        srun.append("--container-mounts=" + _mount_list(spec.mounts, "%s:%s"))
    srun += ["--container-workdir=" + spec.workdir, "--no-container-mount-home"]
    return srun, spec.command


def singularity_exec_argv(spec: JobSpec) -> list[str]:
    """``singularity exec`` prefix for the hybrid model (``--nv`` binds the host's NVIDIA driver libraries)."""
    argv = ["singularity", "exec"]
    if spec.gpus:
        argv.append("--nv")
    if spec.mounts:
        argv += ["--bind", _mount_list(spec.mounts, "%s:%s")]
    return argv + ["--pwd", spec.workdir, spec.image]


def render_pyxis(spec: JobSpec, opts: SlurmOptions = SlurmOptions()) -> str:
    uri = enroot_uri(spec.image)
    note = ("the squashfs file %s on shared storage (pyxis runs a path starting with / as is)" % uri
            if uri.startswith("/") else
            "enroot pulls %s from its registry%s; for a local image push it to a registry the nodes reach, or "
            "`enroot import dockerd://IMAGE` into a .sqsh on shared storage and pass that path"
            % (uri, " (pinned from %s)" % spec.image_from if spec.image_from else ""))
    return Template((TEMPLATES / "slurm-pyxis.sbatch").read_text()).substitute(
        stack=spec.stack.name, title=_comment(spec.stack.title), rank_unit="GPU" if spec.gpus else "CPU rank",
        image_note=_comment(note), directives=directives(spec, opts), exports=exports(spec),
        output_dirs=output_dirs(spec.mounts), srun=pyxis_lines(spec))


def render_host_compat(stack: Stack, mpirun_version_output: str | None = None) -> MpiCompatibility:
    """The hybrid-model MPI check against this machine's ``mpirun --version`` (or the text given). This machine
    may not be the cluster (a workstation rendering for it): a mismatch, or no mpirun here, is a warning; the
    script's guard (``hybrid_guard``) decides where the job runs."""
    if mpirun_version_output is None:
        try:
            mpirun_version_output = host_mpirun_version()
        except ChexstackError as e:
            warn("hybrid model: %s. The script's MPI check decides where the job runs." % e)
            return check_hybrid(stack, "")
    compat = check_hybrid(stack, mpirun_version_output)
    if not compat.compatible:
        warn("hybrid model: on this machine %s (%s). If the cluster's nodes differ too, the job stops at its MPI "
             "check: load the host MPI module of the image's release series there, or use the pyxis model "
             "(srun --mpi=pmix)." % (compat.reason, compat.source))
    return compat


def hybrid_guard(spec: JobSpec, compat: MpiCompatibility, render_host: str | None = None) -> str:
    """Shell lines that stop the job when the mpirun where it runs is not the image's MPI release series
    (``compat``: the same check on the rendering machine, recorded in a comment)."""
    row = spec.stack.components["mpi"]
    if row.version is None:
        raise ChexstackError("hybrid model refused: %s (%s)" % (compat.reason, compat.source))
    series = ".".join(row.version.split(".")[:2])
    return Template((TEMPLATES / "hybrid-mpi-guard.sh").read_text()).substitute(
        render_host=_comment(render_host or socket.gethostname()), mpi_reason=_comment(compat.reason),
        image_mpi=shlex.quote("%s %s.x" % (row.name or "MPI", series)),
        mpi_pattern=shlex.quote("(Open MPI) %s." % series if implementation(row.name) == "Open MPI"
                                else series)).rstrip()


def sif_digest_lines(spec: JobSpec) -> str:
    """Shell lines that export ``preflight.SIF_SHA256_ENV``, the SHA-256 of ``spec.image`` (the SIF) computed by
    ``sha256sum`` where the job runs, when it runs: the run record then names the file the ranks ran in."""
    return Template((TEMPLATES / "sif-digest.sh").read_text()).substitute(
        name=preflight.SIF_SHA256_ENV, image=shlex.quote(spec.image)).rstrip()


def hybrid_lines(spec: JobSpec) -> str:
    """``mpirun … singularity exec … python -m trainer …`` for ``spec``, one segment per line; every rank gets
    ``sif_digest_lines``' variable. The host's mpirun is the image's Open MPI release series (``hybrid_guard``), so
    it gets ``--allow-run-as-root`` where that release ignores the environment form ``exports`` sets
    (``facts.openmpi.root_env_honoured``: the NGC stack's 3.1.3, the conda stack's 4.0.0)."""
    container = singularity_exec_argv(spec)
    row = spec.stack.components["mpi"]
    full = mpirun_argv(spec.world_size, container + spec.command,
                       allow_run_as_root=not root_env_honoured(implementation(row.name), row.version),
                       exported_env=EXPORTED_ENV + (preflight.SIF_SHA256_ENV,) + tuple(sorted(spec.env)))
    launcher = full[:len(full) - len(container) - len(spec.command)]
    return _command_lines(launcher, container, spec.command)


def pyxis_lines(spec: JobSpec, geometry: bool = False) -> str:
    """``srun --mpi=pmix --container-image=… python -m trainer …`` for ``spec``, one segment per line."""
    return _command_lines(*pyxis_srun_argv(spec, geometry))


def render_hybrid(spec: JobSpec, compat: MpiCompatibility, opts: SlurmOptions = SlurmOptions(),
                  render_host: str | None = None) -> str:
    """Hybrid-model script (``compat``: the MPI check on the rendering machine, ``render_host_compat``)."""
    return Template((TEMPLATES / "slurm-hybrid.sbatch").read_text()).substitute(
        stack=spec.stack.name, title=_comment(spec.stack.title), mpi_source=compat.source,
        directives=directives(spec, opts), exports=exports(spec, hybrid=True),
        mpi_guard=hybrid_guard(spec, compat, render_host) + "\n" + sif_digest_lines(spec),
        output_dirs=output_dirs(spec.mounts),
        mpirun=hybrid_lines(spec))


def baremetal_lines(spec: JobSpec, resume_word: str = "", geometry: bool = False) -> str:
    """``mpirun --tag-output … PYTHON -m trainer …`` for a bare-metal ``spec`` (``spec.image``: the Python of the
    environment): Horovod's Open MPI flags, every line prefixed with its rank (``[job,rank]<stdout>:``).
    ``resume_word``: shell text appended unquoted to the trainer's arguments (``requeue_lines``' ``$resume``).
    ``geometry``: ``-map-by ppr:K:node``, the step's ranks per node on its first nodes (a job step smaller than
    its allocation, as in a sweep; https://www.open-mpi.org/doc/v4.1/man1/mpirun.1.php)."""
    command = [spec.image, "-m", "trainer"] + list(spec.trainer_args)
    full = mpirun_argv(spec.world_size, command, exported_env=EXPORTED_ENV + tuple(sorted(spec.env)))
    if geometry:
        full[full.index("-map-by") + 1] = "ppr:%d:node" % spec.ranks_per_node
    launcher = full[:1] + ["--tag-output"] + full[1:len(full) - len(command)]
    return _command_lines(launcher, command) + (" " + resume_word if resume_word else "")


def requeue_lines(spec: JobSpec) -> str:
    """Shell lines that set ``$resume`` to ``--resume`` when Slurm restarted the job (``SLURM_RESTART_COUNT`` > 0,
    https://slurm.schedmd.com/sbatch.html#OPT_SLURM_RESTART_COUNT) and the output folder holds a committed
    checkpoint (``checkpoint/state.json``, ``trainer.checkpoint``): the restart continues after the last committed
    epoch, none lost or repeated; a restart before the first commit starts afresh. "" when the trainer's arguments
    already have ``--resume``. Raises ChexstackError when they have no ``--output``."""
    args = list(spec.trainer_args)
    if "--resume" in args:
        return ""
    if "--output" not in args[:-1]:
        raise ChexstackError("--requeue needs the trainer's --output (where the checkpoint is committed)")
    state = "%s/checkpoint/state.json" % args[args.index("--output") + 1].rstrip("/")
    return Template((TEMPLATES / "requeue-resume.sh").read_text()).substitute(state=shlex.quote(state)).rstrip()


def render_baremetal(spec: JobSpec, opts: SlurmOptions = SlurmOptions()) -> str:
    """Bare-metal script: ``spec.image`` is the Python of an environment every node sees, ``spec.workdir`` the
    checkout holding ``trainer/``. Raises ChexstackError for a spec with a stack (that runs its image)."""
    if spec.stack is not None:
        raise ChexstackError("the bare-metal Slurm script runs a Python environment, not stack %s's image"
                             % spec.stack.name)
    requeue = requeue_lines(spec) if opts.requeue else ""
    mpirun = baremetal_lines(spec, "$resume" if requeue else "")
    return Template((TEMPLATES / "slurm-baremetal.sbatch").read_text()).substitute(
        python=_comment(spec.image), rank_unit="one rank per GPU" if spec.gpus else "CPU ranks",
        workdir=_comment(spec.workdir),
        workdir_q=shlex.quote(spec.workdir), directives=directives(spec, opts), exports=exports(spec),
        output_dirs=output_dirs(spec.mounts), mpirun=requeue + "\n" + mpirun if requeue else mpirun)


def step_lines(spec: JobSpec, model: Model) -> str:
    """One job step of a multi-step script: a comment with its size, then its launch lines (``hybrid_lines``, or
    ``pyxis_lines`` with the step's own node and task counts; a spec without a stack: ``baremetal_lines`` with the
    step's ranks per node)."""
    if spec.stack is None:
        lines = baremetal_lines(spec, geometry=True)
    else:
        lines = hybrid_lines(spec) if model == "hybrid" else pyxis_lines(spec, geometry=True)
    return "# %d %s on %d node(s)\n%s" % (spec.world_size, "GPU(s)" if spec.gpus else "CPU rank(s)", spec.nodes,
                                          lines)


def render_steps(allocation: JobSpec, steps: list[JobSpec], model: Model = "pyxis",
                 opts: SlurmOptions = SlurmOptions(), *, header: str = "", prologue: str = "",
                 compat: MpiCompatibility | None = None, render_host: str | None = None) -> str:
    """One batch script running ``steps`` one after another inside one allocation sized by ``allocation`` (its
    directives, exports and output folders): ``header`` (comment lines after the shebang), the MPI guard (hybrid:
    ``compat`` from ``render_host_compat``), ``prologue`` (shell lines before the first step), then each step
    (``step_lines``). An ``allocation`` without a stack is bare metal (as in ``render``; ``model`` is not used):
    its steps run ``mpirun`` of the environment's Python from ``allocation.workdir``. Raises ChexstackError for an
    unknown model or a refused hybrid check."""
    if model not in MODELS:
        raise ChexstackError("Slurm model %r: expected one of %s" % (model, ", ".join(MODELS)))
    guard = ""
    if allocation.stack is None:  # no MPI guard: host and ranks run the same MPI; the ranks import trainer/ here
        guard = "cd %s" % shlex.quote(allocation.workdir)
    elif model == "hybrid":
        biggest = max(steps, key=lambda s: s.nodes)
        guard = (hybrid_guard(biggest, compat or render_host_compat(biggest.stack), render_host) + "\n"
                 + sif_digest_lines(allocation))
    return Template((TEMPLATES / "slurm-steps.sbatch").read_text()).substitute(
        header=header.rstrip("\n"), directives=directives(allocation, opts),
        exports=exports(allocation, hybrid=model == "hybrid" and allocation.stack is not None),
        mpi_guard=guard, output_dirs=output_dirs(allocation.mounts), prologue=prologue.rstrip("\n"),
        steps="\n".join(step_lines(s, model) for s in steps))


def render(spec: JobSpec, model: Model = "pyxis", opts: SlurmOptions = SlurmOptions(),
           mpirun_version_output: str | None = None, render_host: str | None = None) -> str:
    """The batch script for ``spec``. For ``hybrid``, ``mpirun_version_output`` is the host's ``mpirun
    --version`` (read from this host when None). A spec without a stack is the bare-metal script
    (``render_baremetal``) whatever the model. Raises ChexstackError for an unknown model or a failed check."""
    if spec.stack is None:
        return render_baremetal(spec, opts)
    if model == "pyxis":
        return render_pyxis(spec, opts)
    if model == "hybrid":
        return render_hybrid(spec, render_host_compat(spec.stack, mpirun_version_output), opts, render_host)
    raise ChexstackError("Slurm model %r: expected one of %s" % (model, ", ".join(MODELS)))
