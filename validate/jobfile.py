"""A user's own job file judged by the rules chexstack's renders obey (``invoke validate --job FILE``): a Kubeflow
MPIJob manifest (YAML, ``kind: MPIJob``) or a Slurm batch script. Each finding names the file and line.

Every rule is stated once, where the renderers take it from, and only read here: the PMIx plugin of srun under
pyxis (``launch.slurm.PMIX``), the image pyxis reads as a file or pulls (``facts.pyxis.image_problem``, the rule of
``launch.slurm.enroot_uri`` too, with ``launch.failure.PYXIS_REMEDY``), NCCL's transport log
(``launch.slurm.DEFAULT_ENV``, ``launch.mpirun.EXPORTED_ENV``),
Open MPI's single copy off for ranks in their own container namespaces (``facts.openmpi.SINGLE_COPY_OFF``), its
run-as-root permission in a form the launcher image's Open MPI honours (``facts.openmpi.root_env_honoured``: the
environment form from Open MPI 4.0.2; the image's MPI known when it is a stack's, ``images.naming.stack_of_image``),
one rank per GPU (``launch.slurm.directives``, ``launch.k8s``; a batch script's layout read in every form Slurm takes by
``validate.slurmlayout``), every rank seeing the GPUs of its node, as ranks that pin GPU ``hvd.local_rank()`` need
(Slurm's GPU binding, ``validate.slurmlayout.gpu_binding``, and the script's ``CUDA_VISIBLE_DEVICES``), the workers'
``/dev/shm`` (``launch.k8s.SHM_VOLUME``,
at least ``validate.checks.container.SHM_FLOOR_BYTES``), the RDMA resource's ``IPC_LOCK`` (``launch.k8s``: the
device plugins' resources, ``RDMA_RESOURCES``, and who holds the capability, ``holds_ipc_lock``) and the launcher's
``launcherCreationPolicy`` (``launch.k8s``). A finding's code is the fault it leads to, in the codes validate's
checks and the launch classifier (``facts.parsers.mpi``) give.
"""
from __future__ import annotations

import re
import shlex
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from chexstack.console import console
from chexstack.errors import ChexstackError, ExitCode
from chexstack.inputs import read_text
from chexstack.outputs import output_file
from facts import pyxis
from facts.openmpi import (
    ALLOW_RUN_AS_ROOT_ENV,
    ALLOW_RUN_AS_ROOT_FLAG,
    ROOT_ENV_SINCE,
    SINGLE_COPY_OFF,
    refuses_root,
    root_env_honoured,
)
from facts.parsers.horovodrun import world_size_options
from images.naming import stack_of_image
from launch.failure import LAUNCH_REMEDY, MPIJOB_EARLY_LAUNCHER_REMEDY, LaunchFailure, launch_remedy, pyxis_remedy
from launch.k8s import (
    GPU_RESOURCE,
    IPC_LOCK,
    LAUNCHER_CREATION_POLICY,
    K8sOptions,
    container_resource_problem,
    holds_ipc_lock,
    is_rdma_resource,
)
from launch.mpi_compat import implementation
from launch.mpirun import EXPORTED_ENV
from launch.slurm import DEFAULT_ENV, PMIX
from validate.checks.container import SHM_FLOOR_BYTES
from validate.jobrules import MPIJOB, RULES, SBATCH, rules_for
from validate.report import Report, write_json
from validate.result import CheckResult, Reason, failed, passed, skipped, warned
from validate.slurmlayout import (
    GPU_BIND_SOURCE,
    Layout,
    Option,
    gpu_binding,
    most_tasks_per_node,
    rank_per_gpu,
    read_options,
    value_problem,
)


@dataclass(frozen=True)
class Finding:
    """One violated rule (``rule``: its id in ``validate.jobrules.RULES``): ``line`` (1-based) in ``path``,
    ``status`` FAIL (the job fails) or WARN (it runs, slower or blind), the fault's ``code``, what is wrong and the
    remedy."""

    rule: str
    path: str
    line: int
    status: str
    code: str
    message: str
    remedy: str

    def text(self) -> str:
        return "%s:%d: %s %s: %s\n    remedy: %s" % (self.path, self.line, self.status, self.code, self.message,
                                                      self.remedy)


@dataclass
class Judgement:
    """A judged job file: its ``kind``, the violated rules' ``findings``, what each rule judged and found right
    (``checked``: rule -> what it saw, a PASS's ``measured``) and why a rule judged nothing (``skipped``: rule -> a
    ``validate.result.Reason`` with its SKIP code). A rule with neither and no finding had nothing in the file to
    judge: it is not checked, never passed ("a check never PASSes on evidence it did not observe")."""

    path: str
    kind: str
    findings: list[Finding] = field(default_factory=list)
    checked: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, Reason] = field(default_factory=dict)

    def add(self, rule: str, line: int, status: str, code: str, message: str, remedy: str = "") -> None:
        self.findings.append(Finding(rule, self.path, line, status, code, message, remedy or _remedy(code)))

    def saw(self, rule: str, what: str) -> None:
        """``rule`` judged ``what`` (``FILE:LINE: ...``) and found no fault in it."""
        self.checked.setdefault(rule, []).append(what)

    def skip(self, rule: str, why: str, code: str = "NOT_APPLICABLE") -> None:
        """``rule`` could not judge the file: ``why``, with its SKIP code (the first reason given stays)."""
        self.skipped.setdefault(rule, Reason(why, code))

    def at(self, line: int, what: str) -> str:
        return "%s:%d: %s" % (self.path, line, what)


#: Each form of Open MPI's single-copy switch (facts.openmpi): an environment variable and mpirun's --mca form.
_SINGLE_COPY_FORMS = [(name, name[len("OMPI_MCA_"):], value) for name, value in SINGLE_COPY_OFF.items()]
_SINGLE_COPY_TEXT = " and ".join("%s=%s" % kv for kv in SINGLE_COPY_OFF.items())


def _np(argv: list[str], where: str = "") -> tuple[int, int] | None:
    """(index of the word holding the value, ranks) of mpirun's first world size given as a whole number (``-np N``,
    ``-np=N``, ``-n N``, ``-c N``: the options ``facts.parsers.horovodrun.world_size_options`` reads), else None.
    ChexstackError starting with ``where`` (``--job FILE:LINE``) where ``-np``/``--np`` comes first with no whole
    number (mpirun refuses it; never read as "no -np")."""
    for index, name, value in world_size_options(argv):
        if value.isdigit() and int(value) > 0:
            return index, int(value)
        if name in ("-np", "--np"):
            raise ChexstackError("%s: mpirun %s %r: expected a whole number of ranks" % (where, name, value))
    return None


def _exported(argv: list[str]) -> set[str]:
    """The names mpirun's ``-x NAME[=value]`` exports."""
    return {argv[i + 1].split("=")[0] for i, w in enumerate(argv[:-1]) if w == "-x"}


def _single_copy_off(argv: list[str], env: dict[str, str]) -> bool:
    """Whether the script turns CMA single copy off in either release's form (the image's Open MPI, which reads one
    of them, is not in the script)."""
    def set_(name: str, mca_name: str, value: str) -> bool:
        return env.get(name) == value or any(argv[i:i + 3] in (["--mca", mca_name, value], ["-mca", mca_name, value])
                                             for i in range(len(argv)))
    return any(set_(*form) for form in _SINGLE_COPY_FORMS)


def _remedy(code: str, gpus: bool = False) -> str:
    """The launch classifier's fix for ``code`` (``launch.failure.launch_remedy``; for GPU ranks where ``gpus``)."""
    return launch_remedy(LaunchFailure(code), gpus=gpus) if code in LAUNCH_REMEDY else ""


# --- Slurm batch scripts -----------------------------------------------------------------------------------------
_SBATCH = "#SBATCH"
#: The fix of a batch script whose ranks do not have one GPU each (``launch.slurm.directives``' layout).
_GPU_REMEDY = ("one rank per GPU: as many tasks per node as GPUs per node (--ntasks-per-node equal to "
               "--gpus-per-node or --gres=gpu:N)")
_EXPORT = re.compile(r"^\s*export\s+([A-Za-z_]\w*)=(\S*)")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, the line with its backslash continuations joined)."""
    out, start, parts = [], None, []
    for number, line in enumerate(text.splitlines(), 1):
        start = start or number
        if line.endswith("\\"):
            parts.append(line[:-1])
            continue
        out.append((start, " ".join(parts + [line])))
        start, parts = None, []
    return out


def _option_values(words: list[str], name: str) -> list[str]:
    """The values of ``name`` in ``words``, as ``NAME=VALUE`` or ``NAME VALUE``."""
    return [w.split("=", 1)[1] if "=" in w else words[i + 1] for i, w in enumerate(words)
            if w.split("=", 1)[0] == name and ("=" in w or i + 1 < len(words))]


def _judge_pyxis_image(image: str, line: int, j: Judgement) -> None:
    """The pyxis rule (``facts.pyxis.image_problem``) on one ``--container-image`` value: a squashfs file named
    without a leading / or . (pulled from a registry) or a SIF (not an enroot image) FAILs."""
    cause = pyxis.image_problem(image)
    if cause == "PYXIS_SQUASHFS_AS_REGISTRY":
        j.add("job.pyxis_image", line, "FAIL", cause, "--container-image=%s names a squashfs file without a leading "
              "/ or ./: pyxis pulls it from a registry as docker://%s and the step's container does not start (401 "
              "Unauthorized or not found)" % (image, image), pyxis_remedy(cause, image))
    elif cause == "PYXIS_SIF_IMAGE":
        j.add("job.pyxis_image", line, "FAIL", cause, "--container-image=%s is a SIF, which pyxis cannot run (it "
              "runs squashfs files and registry images)" % image, pyxis_remedy(cause, image))
    else:
        j.saw("job.pyxis_image", j.at(line, "--container-image=%s" % image))


def _judge_pyxis_step(words: list[str], line: int, j: Judgement) -> None:
    """An ``srun --container-image`` step: its image (``_judge_pyxis_image``) and Slurm's PMIx plugin (``PMIX``)."""
    for image in _option_values(words, "--container-image"):
        _judge_pyxis_image(image, line, j)
    mpi = [w for w in words if w.startswith("--mpi")]
    if PMIX not in words:
        j.add("job.pmix", line, "FAIL", "MPI_PMI_MISMATCH", "srun starts the image's ranks without %s (%s): each rank "
              "starts alone, outside one MPI world" % (PMIX, mpi[0] if mpi else "no --mpi"))
    else:
        j.saw("job.pmix", j.at(line, "srun %s" % PMIX))


@dataclass
class _Script:
    """A batch script as sbatch reads it: its ``#SBATCH`` options (``validate.slurmlayout.Layout``: sbatch reads
    them up to the first command, sbatch(1)), its exported variables and its launch commands (line, words:
    ``srun``, ``mpirun``, ``mpiexec``)."""

    allocation: Layout = field(default_factory=lambda: Layout({}))
    env: dict[str, str] = field(default_factory=dict)
    commands: list[tuple[int, list[str]]] = field(default_factory=list)


def _readable_options(path: str, words: list[str], number: int) -> dict[str, Option]:
    """``read_options`` of an ``#SBATCH`` line's or ``srun`` step's words, each value the rules read checked as
    sbatch and srun check it (``validate.slurmlayout.value_problem``): ChexstackError naming the file, line, option
    and what sbatch(1) expects, since sbatch refuses the script (srun the step) rather than read a bad value as
    no GPU or no task count."""
    options = read_options(words, number)[0]
    for option in options.values():
        problem = value_problem(option)
        if problem:
            raise ChexstackError("--job %s:%d: %s: %s (sbatch(1), srun(1): https://slurm.schedmd.com/sbatch.html; "
                                 "sbatch refuses it)" % (path, number, option.written, problem))
    return options


def _read_script(text: str, path: str) -> _Script:
    script, options, commands_began = _Script(), {}, False
    for number, line in _logical_lines(text):
        if line.startswith(_SBATCH) and line[len(_SBATCH):len(_SBATCH) + 1].isspace() and not commands_began:
            try:
                words = shlex.split(line[len(_SBATCH):], comments=True)
            except ValueError as e:
                raise ChexstackError("--job %s:%d: %s: %s (expected sbatch options, quoted as a shell quotes them)"
                                     % (path, number, line.strip(), e)) from None
            options.update(_readable_options(path, words, number))
        elif m := _EXPORT.match(line):
            script.env[m.group(1)] = m.group(2).strip("'\"")
        if line.strip() and not line.lstrip().startswith("#"):
            commands_began = True
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                continue
            if words and words[0] in ("srun", "mpirun", "mpiexec"):
                script.commands.append((number, words))
    script.allocation = Layout(options)
    return script


def _judge_sbatch_gpus(j: Judgement, script: _Script) -> None:
    """One rank per GPU (``validate.slurmlayout.rank_per_gpu``) of every launch: each ``srun`` step (its own options
    over the allocation's), and the allocation itself for an ``mpirun`` or a step that has no layout of its own, or a
    script without a launch."""
    judged: list[tuple[Layout, bool, int | None]] = []
    for number, words in script.commands:
        if words[0] == "srun":
            own = Layout(_readable_options(j.path, words[1:], number))
            if own.own_layout():
                judged.append((own.over(script.allocation), True, number))
                continue
        judged.append((script.allocation, False, None))
    if not script.commands:
        judged.append((script.allocation, False, None))
    seen: set[tuple[int, str]] = set()
    for layout, step, srun_line in judged:
        verdict = rank_per_gpu(layout, step)
        line = srun_line or verdict.line
        where = " (the srun step at line %d)" % srun_line if srun_line else ""
        if (line, verdict.message) in seen:
            continue
        seen.add((line, verdict.message))
        if verdict.status == "SKIP":
            j.skip("job.rank_per_gpu", verdict.message + where, verdict.code)
        elif verdict.status == "PASS":
            j.saw("job.rank_per_gpu", j.at(line, verdict.message))
        else:
            j.add("job.rank_per_gpu", line, verdict.status, verdict.code, verdict.message + where, _GPU_REMEDY)


def _slots(slots: tuple[int, int, str]) -> str:
    """``N`` or ``MIN to MAX`` of a (fewest, most, how) slot range."""
    return "%d" % slots[0] if slots[0] == slots[1] else "%d to %d" % slots[:2]


def _judge_mpirun(j: Judgement, number: int, words: list[str], script: _Script) -> None:
    """An ``mpirun`` line: its -np within the allocation's slots, and Open MPI's single copy off for ranks in
    ``singularity exec``."""
    np, slots = _np(words, "--job %s:%d" % (j.path, number)), script.allocation.task_range()
    if np and slots is not None and np[1] > slots[1]:
        j.add("job.slots", number, "FAIL", "MPI_NOT_ENOUGH_SLOTS", "mpirun -np %d in an allocation of %s task slots "
              "(%s)" % (np[1], _slots(slots), slots[2]), _remedy("MPI_NOT_ENOUGH_SLOTS",
                                                               gpus=script.allocation.asks_for_gpus()))
    elif np and slots is not None and np[1] <= slots[0]:
        j.saw("job.slots", j.at(number, "mpirun -np %d in an allocation of %s task slots (%s)" % (
            np[1], _slots(slots), slots[2])))
    elif np and slots is not None:
        j.skip("job.slots", "mpirun -np %d (line %d) in an allocation of %s task slots (%s): enough only where Slurm "
               "gives more than the fewest nodes; state one node count (-N N) to have it judged" % (
                   np[1], number, _slots(slots), slots[2]), "JOB_LAYOUT_UNKNOWN")
    elif np:
        j.skip("job.slots", "mpirun -np %d (line %d), but the script states no task count (--ntasks, or "
               "--ntasks-per-node with -N): the allocation's slots are Slurm's choice" % (np[1], number),
               "JOB_LAYOUT_UNKNOWN")
    else:
        j.skip("job.slots", "mpirun (line %d) takes its ranks from the allocation: no -np to compare" % number)
    contained = any(w in ("singularity", "apptainer") and words[i + 1:i + 2] == ["exec"] for i, w in enumerate(words))
    if contained and not _single_copy_off(words, script.env):
        j.add("job.single_copy",
              number, "WARN", "MPI_SINGLE_COPY_CMA", "mpirun starts ranks in `singularity exec`, each its own "
              "namespace, without %s (Open MPI 5.0 and later read the second): Open MPI's shared-memory copies fail "
              "and fall back slowly" % _SINGLE_COPY_TEXT,
              "export %s before mpirun" % _SINGLE_COPY_TEXT.replace(" and ", " "))
    elif contained:
        j.saw("job.single_copy", j.at(number, "mpirun of `singularity exec` with single copy off"))


#: How the ranks pick their GPU: Horovod's documented pattern, which chexstack's trainer follows
#: (``trainer.compat.configure_devices``), pins visible GPU number ``hvd.local_rank()`` of the GPUs the rank sees
#: (https://horovod.readthedocs.io/en/stable/tensorflow.html: "Pin each GPU to a single process").
LOCAL_RANK_PINNING = ("the trainer pins visible GPU number hvd.local_rank() (trainer/compat.py configure_devices, "
                      "Horovod's pattern: https://horovod.readthedocs.io/en/stable/tensorflow.html)")
#: What chexstack's trainer does where a rank sees fewer GPUs than its local rank needs.
_TRAINER_ONE_GPU = ("chexstack's trainer does not fall back to device 0: with TensorFlow >= 1.14 it stops with \"local "
                    "rank N has no GPU\", with TF 1.12/1.13 (the conda column) that rank runs on the CPU")
_BINDING_REMEDY = ("let every rank see all GPUs of its node: drop --gpus-per-task (or keep it and add "
                   "--gpu-bind=none), drop --gpu-bind=single|map_gpu|mask_gpu|per_task|closest and any per-task "
                   "CUDA_VISIBLE_DEVICES, and ask for the node's GPUs with --gpus-per-node=N (or --gres=gpu:N) and "
                   "--ntasks-per-node=N; each rank then pins GPU hvd.local_rank() of the N it sees. Binding one GPU "
                   "per task suits only a program that pins device 0 when it sees one GPU, which chexstack's trainer "
                   "does not. Sources: " + GPU_BIND_SOURCE)
#: Variables that differ per task (Slurm's, Open MPI's, MVAPICH2's, PMI's): a CUDA_VISIBLE_DEVICES made of one is
#: one GPU per task.
_PER_TASK_VARS = ("SLURM_LOCALID", "SLURM_PROCID", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
                  "MV2_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMIX_RANK", "LOCAL_RANK")
_CVD = re.compile(r"\bCUDA_VISIBLE_DEVICES=(\"[^\"]*\"|'[^']*'|[^\s;'\"]*)")


def _launches(script: _Script) -> list[tuple[Layout, int | None, str]]:
    """(layout, line, launcher) of each launch: an ``srun`` step over its allocation, an ``mpirun``/``mpiexec`` (its
    ranks laid out by the allocation), or the allocation alone (line None) in a script without a launch."""
    out = []
    for number, words in script.commands:
        own = Layout(read_options(words[1:], number)[0]) if words[0] == "srun" else Layout({})
        out.append((own.over(script.allocation), number, words[0]))
    return out or [(script.allocation, None, "")]


def _too_few(j: Judgement, line: int, seen: str, gpus: int, layout: Layout, where: str) -> bool:
    """A FAIL where ``gpus`` GPUs per rank is fewer than the ranks per node of ``layout`` need; True if so."""
    per_node = most_tasks_per_node(layout)
    if per_node is None:
        j.skip("job.gpu_binding", "%s, but the options do not say how many tasks share a node (--ntasks-per-node)"
               % seen, "JOB_LAYOUT_UNKNOWN")
        return False
    if gpus >= per_node[0]:
        j.saw("job.gpu_binding", j.at(line, "%s; %d task(s) per node (%s): local ranks 0..%d find their GPU"
                                      % (seen, per_node[0], per_node[1], per_node[0] - 1)))
        return False
    j.add("job.gpu_binding", line, "FAIL", "JOB_GPU_BINDING",
          "%s%s, while %s: with %d task(s) per node (%s), local ranks %d..%d ask for a GPU index that does not exist "
          "in their view; %s" % (seen, where, LOCAL_RANK_PINNING, per_node[0], per_node[1], gpus, per_node[0] - 1,
                                  _TRAINER_ONE_GPU), _BINDING_REMEDY)
    return True


def _judge_slurm_binding(j: Judgement, layout: Layout, line: int | None, launcher: str) -> None:
    """Slurm's GPU binding (``validate.slurmlayout.gpu_binding``) of one srun step or allocation, against the local
    rank pinning of its ranks."""
    if not layout.asks_for_gpus():
        j.skip("job.gpu_binding", "asks for no GPU: no binding to judge", "NOT_APPLICABLE")
        return
    binding = gpu_binding(layout)
    where = "" if line is None or line == binding.line else " (the srun step at line %d)" % line
    at = binding.line or line or layout.line()
    if binding.kind == "none":
        j.saw("job.gpu_binding", j.at(at, "%s: each rank sees the GPUs of its node and pins its local rank's"
                                      % binding.how))
    elif binding.kind == "unknown":
        j.skip("job.gpu_binding", "%s: a --gpu-bind type Slurm does not document (none, closest, single, per_task, "
               "map_gpu, mask_gpu)" % binding.how, "JOB_LAYOUT_UNKNOWN")
    elif binding.kind == "near":
        per_node = most_tasks_per_node(layout)
        if per_node and per_node[0] == 1:
            j.saw("job.gpu_binding", j.at(at, "%s with one task per node: local rank 0 pins the first GPU it sees"
                                          % binding.how))
        else:
            j.add("job.gpu_binding", at, "WARN", "JOB_GPU_BINDING", "%s%s: each rank sees only the GPUs near its "
                  "CPUs (a socket's or NUMA node's), while %s: local ranks at or above that count ask for a GPU "
                  "index they do not see; %s" % (binding.how, where, LOCAL_RANK_PINNING, _TRAINER_ONE_GPU),
                  _BINDING_REMEDY)
    elif launcher in ("mpirun", "mpiexec"):
        j.skip("job.gpu_binding", "%s, but mpirun (line %d) starts the ranks, not srun: Slurm binds the GPUs of "
               "srun's tasks" % (binding.how, line), "JOB_LAYOUT_UNKNOWN")
    else:
        _too_few(j, at, "%s: each rank sees %d GPU(s) of its own" % (binding.how, binding.per_task),
                 binding.per_task, layout, where)


def _judge_visible_devices(j: Judgement, text: str, script: _Script) -> None:
    """Every ``CUDA_VISIBLE_DEVICES=`` the script sets for its ranks, against the local rank pinning. On a launch line
    (``srun ... env CUDA_VISIBLE_DEVICES=$SLURM_LOCALID python``, ``srun bash -c '...'``) it is set per task: one
    made of a per-task variable (``$SLURM_LOCALID``, ...) gives each rank one GPU, a fixed list gives every rank that
    list. Elsewhere (``export`` in the batch script) the batch shell sets it once, for the ranks of an ``mpirun`` or
    of an ``srun`` step without GPUs of its own; a per-task variable there is the batch step's (task 0's) value. Not
    judged before ``srun`` GPU steps: "the environment variable CUDA_VISIBLE_DEVICES is set for each job step" by
    Slurm's GPU plugin (https://slurm.schedmd.com/gres.html#GPU_Management)."""
    launches = _launches(script)
    layouts = {line: layout for layout, line, _ in launches}
    mpirun = next((line for _, line, launcher in launches if launcher in ("mpirun", "mpiexec")), None)
    gpu_steps = [line for layout, line, launcher in launches if launcher == "srun" and layout.asks_for_gpus()]
    for number, line in _logical_lines(text):
        if line.lstrip().startswith("#"):
            continue
        for m in _CVD.finditer(line):
            value = m.group(1).strip("'\"")
            seen = "CUDA_VISIBLE_DEVICES=%s" % value
            per_task = any(v in value for v in _PER_TASK_VARS)
            if number in layouts:
                layout = layouts[number]
                what = "each rank sees the one GPU its task number names" if per_task else \
                    "every rank sees these %d GPU(s)"
            elif mpirun is None and gpu_steps:
                j.skip("job.gpu_binding", "%s (line %d) before srun GPU steps (line %s): Slurm sets each step's own "
                       "CUDA_VISIBLE_DEVICES" % (seen, number, ", ".join(map(str, gpu_steps))), "NOT_APPLICABLE")
                continue
            else:
                layout = layouts.get(mpirun, launches[0][0])
                what = "the batch script sets it once, with task 0's value, so every rank sees that one GPU" \
                    if per_task else "every rank sees these %d GPU(s)"
            if per_task:
                _too_few(j, number, "%s: %s" % (seen, what), 1, layout, "")
            elif "$" in value:
                j.add("job.gpu_binding", number, "WARN", "JOB_LAYOUT_UNKNOWN", "%s: a value only the running job "
                      "knows, so whether each rank sees the GPU its local rank pins is not checked (%s)"
                      % (seen, LOCAL_RANK_PINNING), "let every rank see all GPUs of its node (leave "
                      "CUDA_VISIBLE_DEVICES unset, or list all the node's GPUs)")
            else:
                gpus = len([v for v in value.split(",") if v.strip()])
                if gpus == 0 and not layout.asks_for_gpus():
                    j.saw("job.gpu_binding", j.at(number, "%s: a CPU run (no GPU asked for)" % seen))
                elif gpus == 0:
                    j.add("job.gpu_binding", number, "WARN", "JOB_GPUS_IDLE", "%s: the ranks see no GPU and train "
                          "on the CPU" % seen, "remove CUDA_VISIBLE_DEVICES= from the launch")
                else:
                    _too_few(j, number, "%s: %s" % (seen, what % gpus), gpus, layout, "")


#: sbatch refuses a script with DOS line breaks: "Batch script contains DOS line breaks (\\r\\n) instead of expected
#: UNIX line breaks (\\n)" (Slurm's sbatch, src/sbatch/sbatch.c), before the job is queued.
DOS_LINE_BREAK = "\r\n"


def _judge_line_endings(j: Judgement, text: str) -> None:
    """A script with DOS line breaks (``DOS_LINE_BREAK``) FAILs at the first such line: sbatch refuses it."""
    at = text.find(DOS_LINE_BREAK)
    if at < 0:
        j.saw("job.line_endings", "%s: UNIX line breaks (\\n) throughout" % j.path)
        return
    j.add("job.line_endings", text.count("\n", 0, at) + 1, "FAIL", "JOB_DOS_LINE_BREAKS",
          "the line ends with \\r\\n (DOS/Windows line breaks; %d of the script's lines): sbatch refuses the script "
          "(\"Batch script contains DOS line breaks (\\r\\n) instead of expected UNIX line breaks (\\n)\")"
          % text.count(DOS_LINE_BREAK), "dos2unix %s (or sed -i 's/\\r$//' %s), or save it with Unix (LF) line "
          "endings in the editor" % (shlex.quote(j.path), shlex.quote(j.path)))


def judge_sbatch(j: Judgement, text: str) -> None:
    """The rules of ``launch.slurm``'s scripts, on a batch script's text (as read, its line breaks kept: a DOS one
    fails ``job.line_endings``; the other rules judge the script's lines whatever their breaks)."""
    _judge_line_endings(j, text)
    script = _read_script(text.replace(DOS_LINE_BREAK, "\n"), j.path)
    _judge_sbatch_gpus(j, script)
    for layout, line, launcher in _launches(script):
        _judge_slurm_binding(j, layout, line, launcher)
    _judge_visible_devices(j, text.replace(DOS_LINE_BREAK, "\n"), script)
    image = script.allocation.options.get("--container-image")
    if image is not None:
        _judge_pyxis_image(image.value, image.line, j)
    for number, words in script.commands:
        if words[0] == "srun" and any(w.startswith("--container-image") for w in words):
            _judge_pyxis_step(words, number, j)
        if words[0] in ("mpirun", "mpiexec"):
            _judge_mpirun(j, number, words, script)
    j.skip("job.slots", "no mpirun in the script")
    j.skip("job.single_copy", "no mpirun of `singularity exec` in the script")
    j.skip("job.pmix", "no srun --container-image step in the script")
    j.skip("job.pyxis_image", "no --container-image in the script")
    for name, value in DEFAULT_ENV.items():
        if not script.commands:
            j.skip("job.nccl_debug", "no srun or mpirun launch in the script")
        elif script.env.get(name) != value:
            j.add("job.nccl_debug",
                  script.commands[0][0], "WARN", "JOB_ENV_NOT_EXPORTED", "%s=%s is not exported: NCCL's choice of "
                  "transport (a silent fall-back to sockets) is not in the job's log" % (name, value),
                  "export %s=%s before the launch" % (name, value))
        else:
            j.saw("job.nccl_debug", "%s=%s exported before the launch" % (name, value))


# --- MPIJob manifests --------------------------------------------------------------------------------------------
def _child(node, key, key_node: bool = False):
    """The child of a composed YAML node by mapping key (``key_node``: the key's own node, whose line is the
    key's) or sequence index, else None."""
    if isinstance(node, yaml.MappingNode):
        return next((k if key_node else v for k, v in node.value if k.value == key), None)
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]
    return None


def _at(node, *keys, key_node: bool = False):
    for i, key in enumerate(keys):
        node = _child(node, key, key_node and i == len(keys) - 1) if node is not None else None
    return node


def _line(node, fallback) -> int:
    return (node or fallback).start_mark.line + 1


_UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9,
          "T": 10 ** 12, "": 1}


def _quantity(text: str) -> int | None:
    """Bytes of a Kubernetes quantity (``1Gi``, ``512Mi``), else None."""
    m = re.match(r"^([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$", str(text))
    return int(float(m.group(1)) * _UNITS[m.group(2) or ""]) if m else None


def _judge_ipc_lock(container: dict, node, j: Judgement) -> None:
    """A worker container that requests an RDMA resource (``launch.k8s.is_rdma_resource``, in its limits or
    requests) must hold ``IPC_LOCK`` (``launch.k8s.holds_ipc_lock``: added, or a privileged container)."""
    resources = container.get("resources") or {}
    for kind in ("limits", "requests"):
        rdma = [name for name in resources.get(kind) or {} if is_rdma_resource(name)]
        at = _child(_at(node, "resources", kind), rdma[0], key_node=True) if rdma else None
        if rdma and not holds_ipc_lock(container.get("securityContext")):
            j.add("job.ipc_lock", _line(at, node), "FAIL",
                  "NCCL_SOCKET_FALLBACK", "the worker requests %s, an RDMA device, without the %s capability: NCCL "
                  "cannot register memory and falls back to TCP sockets" % (rdma[0], IPC_LOCK),
                  "securityContext: {capabilities: {add: [%s]}}" % IPC_LOCK)
            return
        if rdma:
            j.saw("job.ipc_lock", j.at(_line(at, node), "%s with %s" % (rdma[0], IPC_LOCK)))


@dataclass
class _MpiJob:
    """One MPIJob document: its composed ``node`` and loaded ``spec``, the worker's and launcher's pod specs and first
    containers (with their nodes), the launcher's mpirun ``argv`` and where it is in the file."""

    node: object
    spec: dict
    slots: int
    workers: int
    w_pod: dict
    w_node: object
    worker: dict
    launcher: dict
    argv: list[str]
    argv_node: object
    argv_key: object

    def line(self, at) -> int:
        return _line(at, self.node)


#: What ``_Fields.get`` accepts for each kind of field, and how an error names it.
_KINDS = {"a mapping": (dict,), "a list": (list,), "a whole number": (int,), "a string": (str,),
          "true or false": (bool,), "a string or number": (str, int, float)}


class _Fields:
    """Typed reads of one composed MPIJob document (``node``; ``path``: the file, for errors). ``get(*keys,
    expected=KIND, default=None)``: the loaded value at that key path (mapping keys, list indices), ``default`` where
    it or a parent is absent or null, else ChexstackError ``--job FILE:LINE: spec.x.y VALUE: expected KIND`` (``KIND``
    a key of ``_KINDS``; a boolean is no whole number). Read parents before children: a child of a parent that is
    not a mapping (or list) reads as absent."""

    def __init__(self, path: str, node):
        self.path, self.node, self.data = path, node, yaml.safe_load(yaml.serialize(node))

    def get(self, *keys, expected: str, default=None):
        value = self.data
        for key in keys:
            if isinstance(value, dict):
                value = value.get(key)
            elif isinstance(value, list) and isinstance(key, int) and key < len(value):
                value = value[key]
            else:
                value = None
        if value is None:
            return default
        if not isinstance(value, _KINDS[expected]) or (isinstance(value, bool) and bool not in _KINDS[expected]):
            name = "".join("[%d]" % k if isinstance(k, int) else ".%s" % k for k in keys).lstrip(".")
            raise ChexstackError("--job %s:%d: %s %r: expected %s" % (
                self.path, _line(_at(self.node, *keys), self.node), name, value, expected))
        return value

    def items(self, *keys, expected: str) -> list:
        """The list at ``keys`` (``[]`` where absent), each item checked as ``expected``."""
        return [self.get(*keys, i, expected=expected) for i in range(len(self.get(*keys, expected="a list") or []))]


def _check_pod(f: _Fields, *pod) -> None:
    """Type-check every field of a pod spec (``pod``: its key path) that the MPIJob rules read."""
    f.get(*pod, expected="a mapping")
    f.get(*pod, "hostIPC", expected="true or false")
    for i, _ in enumerate(f.items(*pod, "volumes", expected="a mapping")):
        f.get(*pod, "volumes", i, "name", expected="a string")
        f.get(*pod, "volumes", i, "emptyDir", expected="a mapping")
        f.get(*pod, "volumes", i, "emptyDir", "medium", expected="a string")
        f.get(*pod, "volumes", i, "emptyDir", "sizeLimit", expected="a string or number")
    for i, _ in enumerate(f.items(*pod, "containers", expected="a mapping")):
        c = (*pod, "containers", i)
        f.get(*c, "image", expected="a string")
        f.items(*c, "command", expected="a string or number")
        f.items(*c, "args", expected="a string or number")
        for k, _ in enumerate(f.items(*c, "env", expected="a mapping")):
            f.get(*c, "env", k, "name", expected="a string")
        for k, _ in enumerate(f.items(*c, "volumeMounts", expected="a mapping")):
            f.get(*c, "volumeMounts", k, "name", expected="a string")
            f.get(*c, "volumeMounts", k, "mountPath", expected="a string")
        f.get(*c, "resources", expected="a mapping")
        f.get(*c, "resources", "limits", expected="a mapping")
        f.get(*c, "resources", "requests", expected="a mapping")
        f.get(*c, "securityContext", expected="a mapping")
        f.get(*c, "securityContext", "privileged", expected="true or false")
        f.get(*c, "securityContext", "capabilities", expected="a mapping")
        f.items(*c, "securityContext", "capabilities", "add", expected="a string")


def _read_mpijob(path: str, node) -> _MpiJob:
    """The fields the MPIJob rules read, each type-checked (``_Fields``): ChexstackError naming the file, line,
    field and the type expected for the first that is not what the MPIJob API takes."""
    f = _Fields(path, node)
    spec = f.get("spec", expected="a mapping", default={})
    slots = f.get("spec", "slotsPerWorker", expected="a whole number", default=1)
    for name in ("sshAuthMountPath", "mpiImplementation", "launcherCreationPolicy"):
        f.get("spec", name, expected="a string")
    f.get("spec", "mpiReplicaSpecs", expected="a mapping")
    for role in ("Launcher", "Worker"):
        f.get("spec", "mpiReplicaSpecs", role, expected="a mapping")
        f.get("spec", "mpiReplicaSpecs", role, "replicas", expected="a whole number")
        f.get("spec", "mpiReplicaSpecs", role, "template", expected="a mapping")
        _check_pod(f, "spec", "mpiReplicaSpecs", role, "template", "spec")
    workers = f.get("spec", "mpiReplicaSpecs", "Worker", "replicas", expected="a whole number", default=1)
    w_pod = f.get("spec", "mpiReplicaSpecs", "Worker", "template", "spec", expected="a mapping", default={})
    l_pod = f.get("spec", "mpiReplicaSpecs", "Launcher", "template", "spec", expected="a mapping", default={})
    l_node = _at(node, "spec", "mpiReplicaSpecs", "Launcher", "template", "spec", "containers", 0)
    launcher = (l_pod.get("containers") or [{}])[0]
    argv = [str(w) for w in (launcher.get("command") or []) + (launcher.get("args") or [])]
    field_name = "args" if launcher.get("args") else "command"
    if len(argv) >= 3 and argv[1] == "-c":  # /bin/sh -c "mpirun ..."
        try:
            argv = shlex.split(argv[2])
        except ValueError as e:
            raise ChexstackError("--job %s:%d: the launcher's %s %r: %s (expected a shell command line)" % (
                path, _line(_at(l_node, field_name), node), field_name, argv[2], e)) from None
    return _MpiJob(node, spec, slots, workers, w_pod,
                   _at(node, "spec", "mpiReplicaSpecs", "Worker", "template", "spec"),
                   (w_pod.get("containers") or [{}])[0], launcher, argv, _at(l_node, field_name),
                   _at(l_node, field_name, key_node=True))


def _judge_mpijob_ranks(j: Judgement, m: _MpiJob) -> None:
    """One rank per GPU (``slotsPerWorker`` against the worker's GPUs) and mpirun -np within the slots."""
    limits = (m.worker.get("resources") or {}).get("limits") or {}
    slots_node = _at(m.node, "spec", "slotsPerWorker")
    gpus = limits.get(GPU_RESOURCE)
    gpus = int(gpus) if str(gpus).isdigit() else None
    remedy = "one rank per GPU: slotsPerWorker equal to the worker's %s limit" % GPU_RESOURCE
    if gpus is None:
        j.skip("job.rank_per_gpu", "the workers request no %s: no GPU to share" % GPU_RESOURCE)
    elif m.slots > gpus:
        j.add("job.rank_per_gpu", m.line(slots_node), "FAIL", "NCCL_DUPLICATE_GPU", "slotsPerWorker %d on %s GPUs "
              "per worker: two ranks share a GPU and NCCL stops with \"Duplicate GPU detected\"" % (m.slots, gpus),
              remedy)
    elif m.slots < gpus:
        j.add("job.rank_per_gpu", m.line(slots_node), "WARN", "JOB_GPUS_IDLE", "slotsPerWorker %d on %s GPUs per "
              "worker: GPUs idle" % (m.slots, gpus), remedy)
    else:
        j.saw("job.rank_per_gpu", j.at(m.line(slots_node), "slotsPerWorker %d on %d GPUs (%s) per worker"
                                       % (m.slots, gpus, GPU_RESOURCE)))
    np = _np(m.argv, "--job %s:%d" % (j.path, m.line(m.argv_key)))
    what = "mpirun -np %d on %d worker(s) × slotsPerWorker %d = %d slots" % (
        np[1] if np else 0, m.workers, m.slots, m.slots * m.workers)
    if np and np[1] > m.slots * m.workers:
        offset = len(m.launcher.get("command") or []) if m.launcher.get("args") else 0
        j.add("job.slots", m.line(_child(m.argv_node, np[0] - offset)), "FAIL", "MPI_NOT_ENOUGH_SLOTS", what,
              _remedy("MPI_NOT_ENOUGH_SLOTS", gpus=gpus is not None))
    elif np:
        j.saw("job.slots", j.at(m.line(m.argv_key), what))
    else:
        j.skip("job.slots", "the launcher's command has no mpirun -np")


def _judge_shm(j: Judgement, m: _MpiJob) -> None:
    """Several ranks per worker: a memory-backed /dev/shm of at least ``SHM_FLOOR_BYTES`` (or hostIPC)."""
    if m.slots <= 1:
        j.skip("job.shm", "one rank per worker (slotsPerWorker %d): no ranks share the worker's /dev/shm" % m.slots)
        return
    if m.w_pod.get("hostIPC"):
        j.saw("job.shm", j.at(m.line(m.w_node), "hostIPC: true (the host's /dev/shm)"))
        return
    mounts = {v.get("name"): i for i, v in enumerate(m.worker.get("volumeMounts") or [])
              if v.get("mountPath") == "/dev/shm"}
    shm = next(((i, v) for i, v in enumerate(m.w_pod.get("volumes") or []) if v.get("name") in mounts
                and (v.get("emptyDir") or {}).get("medium") == "Memory"), None)
    if shm is None:
        j.add("job.shm", m.line(_at(m.w_node, "containers", 0)), "FAIL", "NCCL_SHM_TOO_SMALL", "%d ranks per worker "
              "share the container's /dev/shm (64 MiB by default) and neither hostIPC nor a memory emptyDir at "
              "/dev/shm is set: NCCL's shared-memory transport fails" % m.slots,
              "add an emptyDir {medium: Memory, sizeLimit: 1Gi} volume mounted at /dev/shm (or hostIPC: true)")
        return
    size = (shm[1].get("emptyDir") or {}).get("sizeLimit")
    size_node = _at(m.w_node, "volumes", shm[0], "emptyDir", "sizeLimit")
    if size is not None and (_quantity(size) or 0) < SHM_FLOOR_BYTES:
        j.add("job.shm", m.line(size_node), "FAIL", "NCCL_SHM_TOO_SMALL", "/dev/shm sizeLimit %s, below %d MiB"
              % (size, SHM_FLOOR_BYTES >> 20), "sizeLimit: 1Gi or more")
    else:
        j.saw("job.shm", j.at(m.line(size_node or _at(m.w_node, "volumes", shm[0])), "/dev/shm a memory emptyDir%s"
                              % (" of %s" % size if size is not None else " without a size limit")))


def _judge_launcher(j: Judgement, m: _MpiJob) -> None:
    """The launcher: Open MPI's run-as-root permission in a form its image's Open MPI honours, and mpirun -x of
    what the ranks need."""
    spec, launcher, argv = m.spec, m.launcher, m.argv
    env = {e.get("name"): str(e.get("value")) for e in launcher.get("env") or []}
    as_root = K8sOptions(ssh_auth_mount_path=spec.get("sshAuthMountPath", "/root/.ssh")).as_root
    impl = {"OpenMPI": "Open MPI"}.get(spec.get("mpiImplementation", "OpenMPI"), "other")
    flag, env_form = ALLOW_RUN_AS_ROOT_FLAG in argv, all(env.get(k) == v for k, v in ALLOW_RUN_AS_ROOT_ENV.items())
    stack = stack_of_image(str(launcher.get("image") or ""))
    mpi = stack.components["mpi"] if stack else None
    ignored = mpi is not None and not root_env_honoured(implementation(mpi.name), mpi.version)
    mpirun = bool(argv) and "mpirun" in argv[0]
    refused = mpirun and as_root and refuses_root(impl, 0)
    line = m.line(m.argv_key)
    if refused and env_form and not flag and ignored:
        j.add("job.run_as_root", line, "FAIL", "MPI_RUN_AS_ROOT",
              "the launcher runs as root with only %s, and its image %s is stack %s's, whose %s %s ignores them "
              "(honoured from Open MPI %s)" % (" and ".join(sorted(ALLOW_RUN_AS_ROOT_ENV)), launcher.get("image"),
                                               stack.name, mpi.name, mpi.version, ROOT_ENV_SINCE),
              "add %s to mpirun (every Open MPI release honours it)" % ALLOW_RUN_AS_ROOT_FLAG)
    if refused and not (flag or env_form):
        j.add("job.run_as_root", line, "FAIL", "MPI_RUN_AS_ROOT", "sshAuthMountPath %s runs the launcher as root and "
              "mpirun has neither %s nor %s" % (spec.get("sshAuthMountPath", "/root/.ssh (the default)"),
                                                ALLOW_RUN_AS_ROOT_FLAG, " and ".join(sorted(ALLOW_RUN_AS_ROOT_ENV))))
    if refused:
        j.saw("job.run_as_root", j.at(line, "mpirun as root with %s" % (
            ALLOW_RUN_AS_ROOT_FLAG if flag else " and ".join(sorted(ALLOW_RUN_AS_ROOT_ENV)))))
    j.skip("job.run_as_root", "the launcher does not run Open MPI's mpirun as root (sshAuthMountPath %s, %s)" % (
        spec.get("sshAuthMountPath", "/root/.ssh"), spec.get("mpiImplementation", "OpenMPI")) if mpirun
        else "the launcher's command is no mpirun")
    if not mpirun:
        j.skip("job.exported_env", "the launcher's command is no mpirun")
        return
    missing = [e.split("=")[0] for e in EXPORTED_ENV if e.split("=")[0] not in _exported(argv)]
    if missing:
        j.add("job.exported_env", line, "WARN", "JOB_ENV_NOT_EXPORTED", "mpirun does not export %s to the ranks "
              "(ranks started through sshd get sshd's environment)" % ", ".join(missing),
              " ".join("-x %s" % e for e in EXPORTED_ENV))
    else:
        j.saw("job.exported_env", j.at(line, "mpirun -x %s" % " -x ".join(e.split("=")[0] for e in EXPORTED_ENV)))


def _judge_resource_names(j: Judgement, m: _MpiJob) -> None:
    """Every container's ``limits`` and ``requests`` name resources the API server accepts
    (``launch.k8s.container_resource_problem``: a standard resource or an extended ``DOMAIN/NAME``, the rule by which
    ``K8sOptions`` refuses ``invoke train --rdma`` at render)."""
    for role in ("Launcher", "Worker"):
        pod = _at(m.node, "spec", "mpiReplicaSpecs", role, "template", "spec", "containers")
        for container in (pod.value if isinstance(pod, yaml.SequenceNode) else []):
            for kind in ("limits", "requests"):
                names = _at(container, "resources", kind)
                for key, _ in (names.value if isinstance(names, yaml.MappingNode) else []):
                    problem = container_resource_problem(key.value)
                    if problem:
                        j.add("job.resource_names", m.line(key), "FAIL", "K8S_RESOURCE_NAME_INVALID",
                              "the %s's resources.%s name %s: %s; the API server refuses the MPIJob's pods"
                              % (role.lower(), kind, key.value, problem),
                              "name the device plugin's resource as it advertises it, DOMAIN/NAME (kubectl describe "
                              "node: Allocatable), such as rdma/hca_shared_devices_a or nvidia.com/gpu (Kubernetes, "
                              "Extended resources: https://kubernetes.io/docs/tasks/configure-pod-container/"
                              "extended-resource/)")
                    else:
                        j.saw("job.resource_names", j.at(m.line(key), "%s %s" % (kind, key.value)))
    j.skip("job.resource_names", "no container asks for resources")


def judge_mpijob(j: Judgement, node) -> None:
    """The rules of ``launch.k8s``'s MPIJob, on one composed MPIJob document."""
    m = _read_mpijob(j.path, node)
    _judge_mpijob_ranks(j, m)
    _judge_shm(j, m)
    for i, container in enumerate(m.w_pod.get("containers") or []):
        _judge_ipc_lock(container, _at(m.w_node, "containers", i), j)
    j.skip("job.ipc_lock", "no worker requests an RDMA device resource")
    _judge_resource_names(j, m)
    policy = m.spec.get("launcherCreationPolicy")
    policy_node = _at(node, "spec", "launcherCreationPolicy")
    if policy != LAUNCHER_CREATION_POLICY:
        j.add("job.launcher_policy", m.line(policy_node or _at(node, "spec", key_node=True)), "WARN",
              "MPI_HOST_UNKNOWN", "launcherCreationPolicy %s: the launcher may start before the workers resolve and "
              "accept ssh (\"ssh: Could not resolve hostname ...-worker-0\")" % (policy or "not set (AtStartup)"),
              MPIJOB_EARLY_LAUNCHER_REMEDY)
    else:
        j.saw("job.launcher_policy", j.at(m.line(policy_node), "launcherCreationPolicy: %s" % policy))
    _judge_launcher(j, m)


def judge_file(path: str) -> Judgement:
    """The judgement of the job file at ``path``: an MPIJob manifest or a Slurm batch script. ChexstackError when
    it is neither, or its YAML does not parse (naming the line)."""
    # line breaks as written: sbatch refuses \r\n (YAML reads it as a break)
    text = read_text(path, "--job %s" % path, "an MPIJob manifest (YAML) or a Slurm batch script")
    if "#SBATCH" in text or text.startswith("#!"):
        j = Judgement(path, SBATCH)
        judge_sbatch(j, text)
        return j
    try:
        docs = [d for d in yaml.compose_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ChexstackError("--job %s%s: not YAML (%s)" % (path, ":%d" % (mark.line + 1) if mark else "",
                                                             getattr(e, "problem", e))) from None
    jobs = [d for d in docs if isinstance(_child(d, "kind"), yaml.ScalarNode) and _child(d, "kind").value == "MPIJob"]
    if not jobs:
        raise ChexstackError("--job %s: neither a Slurm batch script (#SBATCH lines) nor a manifest with kind: "
                             "MPIJob" % path)
    j = Judgement(path, MPIJOB)
    for d in jobs:
        judge_mpijob(j, d)
    return j


def judge_job(path: str) -> tuple[str, list[Finding]]:
    """(kind, findings) of the job file at ``path`` (``judge_file``): "MPIJob" or "Slurm batch script"."""
    j = judge_file(path)
    return j.kind, j.findings


def rule_result(rule: str, j: Judgement) -> CheckResult:
    """One rule's verdict in a job file's report: with findings, the worst one's status, code and remedy,
    ``measured`` its ``FILE:LINE: what``, and every finding of the rule in ``details``; without, PASS only where
    the rule judged something (``measured`` what it saw), else SKIP with why it judged nothing."""
    expected = RULES[rule].expected
    findings = [f for f in j.findings if f.rule == rule]
    if not findings and rule in j.checked:
        return passed(rule, "; ".join(j.checked[rule]), expected)
    if not findings:
        return skipped(rule, j.skipped.get(rule) or Reason("nothing in the file for this rule to judge",
                                                           "NOT_APPLICABLE"), expected)
    ordered = sorted(findings, key=lambda f: (f.status != "FAIL", f.line))
    first = ordered[0]
    verdict = failed if first.status == "FAIL" else warned
    return verdict(rule, "%s:%d: %s" % (first.path, first.line, first.message), expected, first.remedy, first.code,
                   ["%s:%d: %s %s: %s" % (f.path, f.line, f.status, f.code, f.message) for f in ordered])


def job_report(j: Judgement, seconds: float) -> Report:
    """The report of a judged job file, in the node report's published schema (``validate.report_schema``,
    ``selection: job``): one result per rule of its kind (``validate.jobrules.rules_for``), ``host`` the machine
    that judged it."""
    results = [rule_result(rule, j) for rule in rules_for(j.kind)]
    return Report(results, seconds, host=socket.gethostname(), job={"path": j.path, "kind": j.kind})


def validate_job(path: str, json_path: str | None = None) -> int:
    """``invoke validate --job FILE [--json OUT]``: print each finding (file:line, status, code, what, remedy) and
    each rule that had nothing to judge (SKIP, why), write the report as JSON (``job_report``); exit 1 with a FAIL,
    else 0. ChexstackError before judging for a ``json_path`` that cannot be written."""
    if json_path:
        output_file(json_path, "--json")
    start = time.monotonic()
    j = judge_file(path)
    report = job_report(j, time.monotonic() - start)
    for f in sorted(j.findings, key=lambda f: f.line):
        console.print(f.text(), markup=False, highlight=False, soft_wrap=True)
    unchecked = [r for r in report.results if r.status.value == "SKIP"]
    for r in unchecked:
        console.print("%s: SKIP %s (not checked): %s" % (path, r.id, r.measured), markup=False, highlight=False,
                      soft_wrap=True)
    fails = sum(f.status == "FAIL" for f in j.findings)
    console.print("%s (%s): %d FAIL, %d WARN, %d PASS, %d not checked" % (
        Path(path).name, j.kind, fails, len(j.findings) - fails, sum(r.status.value == "PASS" for r in report.results),
        len(unchecked)), markup=False)
    if json_path:
        write_json(report, json_path)
    return ExitCode.FAILED if fails else ExitCode.OK
