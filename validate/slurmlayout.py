"""What a Slurm batch script asks of Slurm for its ranks and their GPUs, read as sbatch and srun read their options
(``invoke validate --job``'s rule ``job.rank_per_gpu``, ``validate.jobfile``).

The options, in every form Slurm takes them, short or long, ``=VALUE`` or ``VALUE`` (sbatch(1), srun(1):
https://slurm.schedmd.com/sbatch.html, https://slurm.schedmd.com/srun.html):

- nodes: ``-N``/``--nodes=N`` (``MIN-MAX``: a count only where both are the same; ``Layout.node_range`` and
  ``Layout.task_range`` give both ends);
- tasks: ``-n``/``--ntasks=N`` (the job's or the step's), ``--ntasks-per-node=N`` ("If used with the --ntasks option,
  the --ntasks option will take precedence and the --ntasks-per-node will be treated as a maximum count of tasks per
  node"), ``--ntasks-per-gpu=N``;
- GPUs: ``--gres=gpu[:TYPE][:N]`` (per node; a count left out is 1), ``-G``/``--gpus=[TYPE:]N`` (the job's or step's
  total), ``--gpus-per-node=[TYPE:]N``, ``--gpus-per-task=[TYPE:]N``.

A value sbatch or srun would refuse in an option read here (``value_problem``: ``--gres=gpu:a100:x``, ``-N`` with
no value) is named as such, never read as no GPU or no task count.

A step (``srun``) inherits the allocation's options (sbatch exports them, ``SLURM_NNODES``, ``SLURM_NTASKS``,
``SLURM_NTASKS_PER_NODE``, ..., which srun reads as its own) and overrides those it gives; a step that asks for GPUs
in any form asks for its own (the allocation's GPU options no longer apply to it).

One rank per GPU is judged on what the options state: tasks per node against GPUs per node where both are per node
(``-n`` over ``-N`` nodes puts at least ceil(n / N) tasks on one node), else the job's tasks against its GPUs in all
(``-G``: more tasks than GPUs shares one); ``--gpus-per-task=1`` and ``--ntasks-per-gpu=1`` are one rank per GPU by
construction. Where the options do not say (GPUs per node and a task count without the node count), the rule is not
judged: ``Verdict.status`` SKIP, never PASS.

What each task sees of its node's GPUs (``gpu_binding``: ``--gpu-bind`` in each of its types, and the implicit
``per_task:N`` of ``--gpus-per-task=N``) and the most tasks one node runs (``most_tasks_per_node``) serve the rule
``job.gpu_binding`` (``GPU_BIND_SOURCE``).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: Short options (sbatch and srun) -> their long names: the ones this module reads.
SHORT = {"-N": "--nodes", "-n": "--ntasks", "-G": "--gpus"}
#: Short options that take a value (sbatch(1), srun(1)): ``-A acct``, ``-c 4``, ``-o FILE``, ... A value is either
#: attached (``-N2``) or the next word.
_SHORT_VALUE = set("ABCDGJLMNSTWacdeimnopqrtwx")
#: Long options that take a value as the next word when given without ``=`` (the rest are flags: ``--exclusive``).
_LONG_VALUE = frozenset("--" + n for n in (
    "account", "begin", "chdir", "clusters", "comment", "constraint", "container", "container-image",
    "container-mounts", "container-name", "container-workdir", "cpu-bind", "cpus-per-gpu", "cpus-per-task",
    "dependency", "distribution", "error", "exclude", "export", "gpu-bind", "gpus", "gpus-per-node",
    "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "input", "job-name", "licenses", "mail-type",
    "mail-user", "mem", "mem-per-cpu", "mem-per-gpu", "mpi", "network", "nodefile", "nodelist", "nodes", "ntasks",
    "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-node", "ntasks-per-socket", "output", "partition", "qos",
    "reservation", "signal", "threads-per-core", "time", "tmp", "wckey"))
#: The options that lay out a job's or step's tasks, and those that ask for its GPUs.
TASK_OPTIONS = ("--nodes", "--ntasks", "--ntasks-per-node", "--ntasks-per-gpu")
GPU_OPTIONS = ("--gres", "--gpus", "--gpus-per-node", "--gpus-per-task", "--ntasks-per-gpu")
_GRES_GPU = re.compile(r"^(?:gres/)?gpu(?::([\w.-]+))?(?::(\d+))?(?:\(.*\))?$")


#: The values sbatch(1) and srun(1) take for the options this module reads (their ``=VALUE``), as a pattern and
#: what an error says was expected; sbatch refuses a script with any other ("Invalid numeric value", "Invalid
#: generic resource (gres) specification"): https://slurm.schedmd.com/sbatch.html#OPT_nodes,
#: https://slurm.schedmd.com/sbatch.html#OPT_ntasks, https://slurm.schedmd.com/sbatch.html#OPT_gres,
#: https://slurm.schedmd.com/sbatch.html#OPT_gpus.
_COUNT = re.compile(r"^\d+$")
_TYPED_COUNT = re.compile(r"^(?:[\w.-]+:)?\d+$")
_VALUES = {
    "--nodes": (re.compile(r"^\d+(?:-\d+)?$"), "a node count N or a range MIN-MAX"),
    "--ntasks": (_COUNT, "a whole number of tasks"),
    "--ntasks-per-node": (_COUNT, "a whole number of tasks per node"),
    "--ntasks-per-gpu": (_COUNT, "a whole number of tasks per GPU"),
    "--gpus": (_TYPED_COUNT, "[TYPE:]N GPUs, N a whole number"),
    "--gpus-per-node": (_TYPED_COUNT, "[TYPE:]N GPUs, N a whole number"),
    "--gpus-per-task": (_TYPED_COUNT, "[TYPE:]N GPUs, N a whole number"),
}
_GRES_ITEM = re.compile(r"^(?:gres/)?gpu\b")


def value_problem(option: "Option") -> str | None:
    """What is wrong with ``option``'s value, for the options whose values this module reads (``_VALUES`` and
    ``--gres``'s ``gpu[:TYPE][:N]`` items), as ``"VALUE: expected WHAT"``; None where sbatch would take it (or
    the option is not one read here)."""
    if option.name == "--gres":
        bad = [item for item in option.value.split(",") if not item.strip() or (
            _GRES_ITEM.match(item.strip()) and not _GRES_GPU.match(item.strip()))]
        if bad or not option.value:
            return "%r: expected gpu[:TYPE][:N], N a whole number (a comma-separated list of NAME[:TYPE][:N])" % (
                bad[0] if bad else option.value)
        return None
    if option.name not in _VALUES:
        return None
    pattern, expected = _VALUES[option.name]
    if not option.value:
        return "no value: expected %s" % expected
    return None if pattern.match(option.value) else "%r: expected %s" % (option.value, expected)


@dataclass(frozen=True)
class Option:
    """One option as given: its long ``name``, ``value``, the ``line`` it is on, and as it was ``written``."""

    name: str
    value: str
    line: int
    written: str

    def where(self) -> str:
        return "%s, line %d" % (self.written, self.line)


def read_options(words: list[str], line: int) -> tuple[dict[str, Option], int]:
    """The options of an ``#SBATCH`` line's words or of an ``srun`` command's words after ``srun``, by long name
    (short ones named by ``SHORT``; the last one given counts, as in Slurm), and the index of the first word that is
    no option (the program, whose own options are not srun's)."""
    found: dict[str, Option] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if not word.startswith("-") or word == "-":
            break
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if not eq and name in _LONG_VALUE and i + 1 < len(words):
                i, value, written = i + 1, words[i + 1], "%s %s" % (word, words[i + 1])
            else:
                written = word
        else:
            name, value = word[:2], word[2:].lstrip("=")
            written = word
            if not value and word[1:2] in _SHORT_VALUE and i + 1 < len(words):
                i, value, written = i + 1, words[i + 1], "%s %s" % (word, words[i + 1])
            name = SHORT.get(name, name)
        found[name] = Option(name, value, line, written)
        i += 1
    return found, i


def _count(value: str) -> int | None:
    """N of ``N`` or ``TYPE:N``; None otherwise."""
    last = value.rsplit(":", 1)[-1]
    return int(last) if last.isdigit() else None


def gres_gpus(value: str) -> int | None:
    """The GPUs per node of a ``--gres`` value (``gpu:4``, ``gpu:v100:4``, ``gpu`` = 1, ``gres/gpu:2``, in a
    comma-separated list); None when it asks for none."""
    for item in value.split(","):
        m = _GRES_GPU.match(item.strip())
        if m:
            if m.group(2) is not None:
                return int(m.group(2))
            typed = m.group(1)
            return int(typed) if typed and typed.isdigit() else 1
    return None


@dataclass(frozen=True)
class Layout:
    """The options of a job (its ``#SBATCH`` lines) or of one step (``srun``: ``over`` its allocation's), with
    what they say of its nodes, tasks and GPUs. Each count is (value, how it follows from the options)."""

    options: dict[str, Option]

    def over(self, allocation: "Layout") -> "Layout":
        """This step's options over its allocation's: the step's own win, and a step that asks for GPUs in any form
        has only its own GPU options."""
        inherited = {k: v for k, v in allocation.options.items()
                     if not (k in GPU_OPTIONS and any(g in self.options for g in GPU_OPTIONS))}
        return Layout({**inherited, **self.options})

    def own_layout(self) -> bool:
        """Whether these options lay out tasks or GPUs themselves (a step that does; one that does not runs the
        allocation's)."""
        return any(name in self.options for name in TASK_OPTIONS + GPU_OPTIONS)

    def problems(self) -> list[tuple["Option", str]]:
        """(option, ``value_problem``) of each option whose value sbatch or srun would refuse."""
        return [(o, p) for o in self.options.values() if (p := value_problem(o))]

    def _int(self, name: str) -> int | None:
        opt = self.options.get(name)
        return _count(opt.value) if opt is not None else None

    def nodes(self) -> tuple[int, str] | None:
        """The node count: ``--nodes`` (a ``MIN-MAX`` range only where both are the same), else one node where
        nothing asks for more (no ``--nodes``, no ``--ntasks``: Slurm's default); None where Slurm chooses."""
        opt = self.options.get("--nodes")
        if opt is None:
            return None if "--ntasks" in self.options else (1, "one node: no -N/--nodes or -n/--ntasks")
        known = self.node_range()
        return (known[0], opt.where()) if known and known[0] == known[1] else None

    def node_range(self) -> tuple[int, int, str] | None:
        """(fewest, most, as written) nodes ``--nodes`` allows: ``N`` is (N, N), ``MIN-MAX`` (MIN, MAX); None
        without a readable ``--nodes``."""
        opt = self.options.get("--nodes")
        low, _, high = opt.value.partition("-") if opt else ("", "", "")
        if not low.isdigit() or not (high.isdigit() or not high):
            return None
        return int(low), int(high or low), opt.where()

    def task_range(self) -> tuple[int, int, str] | None:
        """(fewest, most, how) task slots of the allocation: ``tasks()`` where it says (both the same), else
        ``--ntasks-per-node`` × a ``MIN-MAX`` node range (Slurm gives between MIN and MAX nodes); None where the
        options do not say."""
        tasks = self.tasks()
        if tasks:
            return tasks[0], tasks[0], tasks[1]
        per_node, nodes = self._int("--ntasks-per-node"), self.node_range()
        if per_node and nodes:
            return per_node * nodes[0], per_node * nodes[1], "%d per node (%s) × %d to %d nodes (%s)" % (
                per_node, self.options["--ntasks-per-node"].where(), nodes[0], nodes[1], nodes[2])
        return None

    def tasks_per_node(self) -> tuple[int, str] | None:
        """The most tasks on one node: ``--ntasks-per-node`` (capped by ``--ntasks``, and by ceil(ntasks / nodes)
        where the nodes are known), else ceil(ntasks / nodes); None where the options do not say."""
        per_node, tasks, nodes = self._int("--ntasks-per-node"), self._int("--ntasks"), self.nodes()
        spread = math.ceil(tasks / nodes[0]) if tasks and nodes else None
        ntasks = self.options.get("--ntasks")
        if per_node:
            how = self.options["--ntasks-per-node"].where()
            if spread is not None and spread < per_node:
                return spread, "%d tasks (%s) over %d node(s) (%s)" % (tasks, ntasks.where(), nodes[0], nodes[1])
            if tasks and tasks < per_node:
                return tasks, "%d tasks (%s)" % (tasks, ntasks.where())
            return per_node, how
        if spread is not None:
            return spread, "%d tasks (%s) over %d node(s) (%s)%s" % (
                tasks, ntasks.where(), nodes[0], nodes[1], "" if tasks % nodes[0] == 0 else ": at least %d on one"
                % spread)
        return None

    def tasks(self) -> tuple[int, str] | None:
        """The task count: ``--ntasks``, else ``--ntasks-per-node`` × the nodes; None where the options do not
        say."""
        if self._int("--ntasks"):
            return self._int("--ntasks"), self.options["--ntasks"].where()
        per_node, nodes = self._int("--ntasks-per-node"), self.nodes()
        if per_node and nodes:
            return per_node * nodes[0], "%d per node (%s) × %d node(s) (%s)" % (
                per_node, self.options["--ntasks-per-node"].where(), nodes[0], nodes[1])
        return None

    def gpus_per_node(self) -> tuple[int, str] | None:
        """GPUs per node: ``--gpus-per-node``, else ``--gres=gpu...``; None without either."""
        for name in ("--gpus-per-node", "--gres"):
            opt = self.options.get(name)
            count = (_count(opt.value) if name == "--gpus-per-node" else gres_gpus(opt.value)) if opt else None
            if count is not None:
                return count, opt.where()
        return None

    def gpus(self) -> tuple[int, str] | None:
        """The GPUs in all: ``-G``/``--gpus``, else the GPUs per node × the nodes; None where they do not say."""
        if self._int("--gpus") is not None:
            return self._int("--gpus"), self.options["--gpus"].where()
        per_node, nodes = self.gpus_per_node(), self.nodes()
        if per_node and nodes:
            return per_node[0] * nodes[0], "%d per node (%s) × %d node(s) (%s)" % (
                per_node[0], per_node[1], nodes[0], nodes[1])
        return None

    def asks_for_gpus(self) -> bool:
        return any(self._int(n) for n in ("--gpus", "--gpus-per-node", "--gpus-per-task", "--ntasks-per-gpu")) or \
            bool(self.gpus_per_node() and self.gpus_per_node()[0])

    def line(self, *names: str) -> int:
        """The line of the first of ``names`` given, else of any option (0 without one)."""
        opts = [self.options[n] for n in names if n in self.options] or list(self.options.values())
        return opts[0].line if opts else 0


@dataclass(frozen=True)
class Verdict:
    """One rank per GPU, judged: ``status`` PASS, FAIL (more ranks than GPUs: ``NCCL_DUPLICATE_GPU``), WARN (GPUs
    no rank uses: ``JOB_GPUS_IDLE``) or SKIP (``code`` ``NOT_APPLICABLE``: no GPU asked for; ``JOB_LAYOUT_UNKNOWN``:
    the options do not say), ``line`` the option that decides, ``message`` what the options say."""

    status: str
    line: int
    message: str
    code: str | None = None


def _compare(ranks: int, gpus: int, unit: str, what: str, line: int, idle_ok: bool) -> Verdict:
    if ranks > gpus:
        return Verdict("FAIL", line, "%s: more ranks than GPUs%s, so two ranks share a GPU and NCCL stops with "
                       "\"Duplicate GPU detected\"" % (what, unit), "NCCL_DUPLICATE_GPU")
    if ranks < gpus and not idle_ok:
        return Verdict("WARN", line, "%s: %d GPU(s)%s idle" % (what, gpus - ranks, unit), "JOB_GPUS_IDLE")
    return Verdict("PASS", line, what)


def rank_per_gpu(layout: Layout, step: bool = False) -> Verdict:
    """One rank per GPU in ``layout`` (module docstring). ``step``: a step with its own layout, smaller than its
    allocation by choice (a sweep's counts): only more ranks than GPUs is a fault, idle GPUs are the allocation's."""
    if not layout.asks_for_gpus():
        return Verdict("SKIP", 0, "asks for no GPU (--gres=gpu, -G/--gpus, --gpus-per-node, --gpus-per-task): no "
                       "GPU to share", "NOT_APPLICABLE")
    per_task = layout.options.get("--gpus-per-task")
    if per_task is not None and _count(per_task.value):
        count = _count(per_task.value)
        what = "%d GPU(s) per task (%s)" % (count, per_task.where())
        return Verdict("PASS", per_task.line, what + ": each rank its own") if count == 1 else Verdict(
            "WARN", per_task.line, "%s: a rank uses one, %d of each task's idle" % (what, count - 1), "JOB_GPUS_IDLE")
    per_gpu = layout.options.get("--ntasks-per-gpu")
    if per_gpu is not None and _count(per_gpu.value):
        count = _count(per_gpu.value)
        return _compare(count, 1, " per GPU", "%d task(s) per GPU (%s)" % (count, per_gpu.where()), per_gpu.line,
                        True)
    per_node, gpus_per_node = layout.tasks_per_node(), layout.gpus_per_node()
    tasks_line = layout.line("--ntasks-per-node", "--ntasks", "--nodes")
    if per_node and gpus_per_node:
        return _compare(per_node[0], gpus_per_node[0], " per node", "%d task(s) per node (%s) on %d GPU(s) per node "
                        "(%s)" % (per_node[0], per_node[1], gpus_per_node[0], gpus_per_node[1]), tasks_line, step)
    tasks, gpus = layout.tasks(), layout.gpus()
    if tasks and gpus:
        return _compare(tasks[0], gpus[0], " in all", "%d task(s) (%s) on %d GPU(s) in all (%s)" % (
            tasks[0], tasks[1], gpus[0], gpus[1]), tasks_line, step)
    given = [o.where() for n, o in layout.options.items() if n in TASK_OPTIONS + GPU_OPTIONS]
    return Verdict("SKIP", layout.line(*GPU_OPTIONS), "GPUs asked for, but the options (%s) do not say how many "
                   "tasks share a node's GPUs: give --ntasks-per-node and --gpus-per-node"
                   % ", ".join(given), "JOB_LAYOUT_UNKNOWN")


#: ``--gpu-bind=[verbose,]TYPE`` (sbatch(1), srun(1): https://slurm.schedmd.com/srun.html#OPT_gpu-bind): ``none`` (no
#: binding: each task sees the GPUs of its node's allocation), ``closest`` (the GPUs near the task's CPUs: a socket's or
#: NUMA node's), ``single:TASKS_PER_GPU`` ("like closest, except that each task can only be bound to a single GPU"),
#: ``per_task:N`` (N GPUs each), ``map_gpu:LIST`` (one GPU each, by index), ``mask_gpu:LIST`` (each task the GPUs of
#: its bit mask). ``--gpus-per-task=N`` "will implicitly set --gpu-bind=per_task:<gpus_per_task>, but that can be
#: overridden with an explicit --gpu-bind specification" (https://slurm.schedmd.com/sbatch.html#OPT_gpus-per-task).
#: Slurm enforces the binding per task, through the device cgroup or each task's own CUDA_VISIBLE_DEVICES.
GPU_BIND_SOURCE = ("https://slurm.schedmd.com/srun.html#OPT_gpu-bind; "
                   "https://slurm.schedmd.com/sbatch.html#OPT_gpus-per-task")


@dataclass(frozen=True)
class GpuBinding:
    """What each task of a job or step sees of its node's GPUs under Slurm's GPU binding.

    ``kind``: "none" (each task sees the node's allocated GPUs), "per_task" (each task sees ``per_task`` GPUs of its
    own), "near" (the GPUs near its CPUs: how many depends on the node's topology) or "unknown" (a ``--gpu-bind``
    type Slurm does not document); ``how`` the option(s) as written, ``line`` where (0: no option)."""

    kind: str
    per_task: int | None
    how: str
    line: int


def gpu_binding(layout: Layout) -> GpuBinding:
    """The GPU binding of ``layout`` (``GPU_BIND_SOURCE``): an explicit ``--gpu-bind`` wins over the implicit
    ``per_task:N`` of ``--gpus-per-task=N``."""
    bind, per_task = layout.options.get("--gpu-bind"), layout.options.get("--gpus-per-task")
    if bind is not None:
        parts = [p for p in bind.value.split(",") if p != "verbose"]
        kind, _, arg = (",".join(parts) or "none").partition(":")
        if kind == "none":
            return GpuBinding("none", None, bind.written, bind.line)
        if kind == "closest":
            return GpuBinding("near", None, bind.written, bind.line)
        if kind in ("single", "map_gpu"):
            return GpuBinding("per_task", 1, bind.written, bind.line)
        if kind == "per_task" and arg.isdigit():
            return GpuBinding("per_task", int(arg), bind.written, bind.line)
        if kind == "mask_gpu" and arg:
            try:
                bits = [bin(int(m.split("*")[0], 16)).count("1") for m in arg.split(",") if m]
            except ValueError:
                bits = []
            if bits:
                return GpuBinding("per_task", min(bits), bind.written, bind.line)
        return GpuBinding("unknown", None, bind.written, bind.line)
    if per_task is not None and _count(per_task.value):
        return GpuBinding("per_task", _count(per_task.value), "%s (implicitly --gpu-bind=per_task:%d)" % (
            per_task.written, _count(per_task.value)), per_task.line)
    return GpuBinding("none", None, "no --gpu-bind or --gpus-per-task", 0)


def most_tasks_per_node(layout: Layout) -> tuple[int, str] | None:
    """The most tasks one node of ``layout`` runs: ``Layout.tasks_per_node``, else, without a task option, the task
    count ``--gpus=X --gpus-per-task=Y`` states (X / Y, over ``--nodes``) or one (Slurm's default: one task per
    node), else, where only the task count is known, that count (Slurm may place them
    all on one node); None where the options do not say."""
    known = layout.tasks_per_node()
    if known is not None:
        return known
    gpus, per_task = layout._int("--gpus"), layout._int("--gpus-per-task")
    if not any(name in layout.options for name in ("--ntasks", "--ntasks-per-node", "--ntasks-per-gpu")):
        if gpus and per_task:  # sbatch(1): "--gpus=X --gpus-per-task=Y" states the task count, X / Y
            tasks, how = gpus // per_task, "%s over %s" % (layout.options["--gpus"].written,
                                                          layout.options["--gpus-per-task"].written)
            nodes = layout._int("--nodes") if "--nodes" in layout.options else None
            if nodes:
                return math.ceil(tasks / nodes), "%d tasks (%s) over %d node(s)" % (tasks, how, nodes)
            return tasks, "%d tasks (%s), nodes not stated: up to %d on one node" % (tasks, how, tasks)
        return 1, "one task per node: no -n/--ntasks or --ntasks-per-node (Slurm's default)"
    tasks = layout.tasks()
    return (tasks[0], "%s, nodes not stated: up to %d on one node" % (tasks[1], tasks[0])) if tasks else None
