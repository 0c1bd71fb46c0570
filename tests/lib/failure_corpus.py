"""The failure corpus (``tests/data/failures/NN-slug/``): real failure reports of Horovod, NCCL, Open MPI, Apptainer,
Slurm, the NVIDIA container toolkit and driver, each run through its product entry in this process, and the
confusion between the class each case expects and the class the product gives.

A case is a folder with ``case.yaml`` and its input (``input:``, e.g. ``job.log``). The input's leading ``#`` lines are
its comment header (source, what is posted verbatim, what is RECONSTRUCTED); the entry reads the input without them.
``case.yaml``::

    title: one line
    sources: [{url: ..., what: ...}]     # the thread(s); ``fix:`` says which comment holds the fix
    fix: URL (comment)
    entry: train --explain               # or: validate --from (a bundle folder), validate --job (a job file)
    input: job.log
    class: oom                           # one of CLASSES
    causes: [[phrase, or, alternative], [another]]   # each group: at least one phrase in the output (any case)
    must_not: [phrase]                   # none of these in the output (any case)
    remedy: the gist of the fix

The given class is read from the output, never from the case, in the explanation proper (before its ``full log:`` /
``last lines`` part): the first bracketed cause code (``[NCCL_SHM_EXHAUSTED]``, mapped by CODE_CLASSES), else the class
whose words (CLASS_WORDS) come first; "no failure" and PASS read as ``none``, "unclassified failure" as
``unclassified`` (whatever the line it quotes), and a failure that names no class only "rank N exited"
(``rank_exit``). ``python -m tests.lib.failure_corpus`` prints the report (table and confusion) standalone.
"""
from __future__ import annotations

import collections
import dataclasses
import re
import sys
import tempfile
from pathlib import Path

import yaml

from tests.lib import cli as cmd
from tests.lib.paths import REPO

CORPUS = REPO / "tests" / "data" / "failures"

#: The vocabulary of expected classes (a fault kind each): what the case's evidence shows went wrong first.
CLASSES = {
    "oom": "memory exhausted (GPU memory, or the host's OOM killer / Slurm's cgroup)",
    "killed": "a rank killed from outside (SIGKILL) with no error of its own",
    "time_limit": "the scheduler's wall-clock limit ended the job",
    "gpu_init": "a rank could not initialise CUDA / open its GPU",
    "cuda_driver": "the host's driver is too old for the CUDA runtime",
    "version_mismatch": "two parts that must match do not (driver library vs kernel module, ...)",
    "build": "a framework extension not built, or linked against another library than the one loaded",
    "container_start": "the container never started (Apptainer FATAL, docker/nvidia-container-cli refusals)",
    "mpi_init": "MPI_Init failed in the ranks (runtime/PMIx mismatch)",
    "launch": "the launcher could not start or keep its daemons (ssh, lost daemon)",
    "memlock": "RDMA memory registration refused by the locked-memory limit",
    "nccl_network": "NCCL's network transport (IB completion errors, socket connects)",
    "nccl_shm": "NCCL's shared-memory transport (/dev/shm)",
    "hang": "a stall or deadlock (Horovod stall warnings, collective timeouts)",
    "crash": "a native crash (segmentation fault, abort, heap corruption)",
    "scheduler": "the scheduler refused the step/allocation",
    "python_exception": "an exception in the training code",
}
#: What the output may give besides a class: no failure found (or PASS), a failure it could not class, or only a
#: rank's exit.
NON_CLASSES = ("none", "unclassified", "rank_exit")

#: A cause code's class, by the code's leading part (the longest match wins).
CODE_CLASSES = {
    "TF_OUT_OF_MEMORY": "oom", "OOM": "oom", "GPU_OOM": "oom", "GPU_OUT_OF_MEMORY": "oom", "HOST_OOM": "oom",
    "CUDA_DRIVER_TOO_OLD": "cuda_driver", "CUDA_INIT": "gpu_init", "GPU_INIT": "gpu_init", "NO_DEVICES": "gpu_init",
    "NVML_DRIVER_LIBRARY_MISMATCH": "version_mismatch", "NCCL_VERSION_MISMATCH": "version_mismatch",
    "HOROVOD_TF_MISMATCH": "build", "HOROVOD_BUILD_INCOMPLETE": "build", "HOROVOD_IMPORT": "build",
    "APPTAINER": "container_start", "SINGULARITY": "container_start", "CONTAINER": "container_start",
    "NVIDIA_CONTAINER": "container_start", "NVIDIA_RUNTIME": "container_start", "NV_": "container_start",
    "NVIDIA_DRIVER_NOT_LOADED": "container_start", "PYXIS": "container_start",
    "MPI_PMI_MISMATCH": "mpi_init", "MPI_INIT": "mpi_init", "MPI_WORLD_BROKEN": "mpi_init",
    "MPI_": "launch", "MPI_HANG": "hang", "MPI_RANK_FAILED": "rank_exit",
    "MEMLOCK": "memlock", "NCCL_IB_MEMREG_FAILED": "memlock",
    "NCCL_": "nccl_network", "NCCL_SHM": "nccl_shm", "SHM_": "nccl_shm", "NCCL_HANG": "hang",
    "HOROVOD_STALL": "hang", "STALL": "hang", "HANG": "hang",
    "SLURM_TIME_LIMIT": "time_limit", "TIME_LIMIT": "time_limit", "SLURM_": "scheduler",
    "SEGFAULT": "crash", "CRASH": "crash", "ABORT": "crash",
}
#: Each class's words in an explanation (case-insensitive regular expressions).
CLASS_WORDS = {
    "oom": r"out of memory|out-of-memory|\boom\b|oom[- ]kill|resource ?exhausted|memory (?:was )?exhausted",
    "killed": r"\bsigkill\b|signal 9\b|killed from outside|was killed",
    "time_limit": r"time limit|timelimit|wall[- ]clock limit",
    "gpu_init": r"cuinit|cuda init|initiali[sz]e cuda|cuda initiali[sz]ation|invalid device ordinal|"
                r"no (?:supported|cuda) devices?|no gpu|could not (?:open|use) (?:its|the) gpu|cuda context",
    "cuda_driver": r"driver (?:version )?is insufficient|driver (?:is )?too old|older than the cuda",
    "version_mismatch": r"version mismatch|do(?:es)? not match the (?:loaded|kernel)",
    "build": r"undefined symbol|has not been built|not built|built against|check-build",
    "container_start": r"container (?:never started|start|creation|could not start)|apptainer|singularity|"
                       r"nvidia-container|could not select device driver|container toolkit",
    "mpi_init": r"mpi_init|mpi init|ompi_rte_init|pmix|opal error",
    "launch": r"launch failed|lost communication|was lost|daemon",
    "memlock": r"locked[- ]memory|memlock|ulimit -l",
    "nccl_network": r"net/ib|nccl[^;\n]*(?:socket|network|connect)|connection (?:timed out|refused|reset|abort)|"
                    r"completion (?:with )?(?:error|status)|status=12",
    "nccl_shm": r"/dev/shm|shared memory segment|shm too small",
    "hang": r"\bstall|\bhang|\bhung\b|deadlock",
    "crash": r"segmentation fault|sigsegv|signal 11\b|\baborted\b|sigabrt|core dumped|fatal python error|"
             r"invalid pointer|heap corruption",
    "scheduler": r"\bgres\b|generic resource|unable to create step|node configuration is not available",
    "python_exception": r"traceback|exception",
}
_CODE = re.compile(r"\[([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\]")
_NONE = re.compile(r"^(?:no failure|pass\b)|\bno failure found\b", re.I | re.M)
_UNCLASSIFIED = re.compile(r"unclassified failure", re.I)
_RANK_EXIT = re.compile(r"exited first, with code|exited on signal", re.I)
#: The classes read only when no other class is named (a generic exception or a rank's exit says little).
_GENERIC = {"python_exception"}


@dataclasses.dataclass(frozen=True, eq=False)
class Case:
    """One corpus case: its folder's name, its metadata and the path of its input."""
    name: str
    meta: dict
    input: Path

    @property
    def expected(self) -> str:
        return self.meta["class"]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the product's entry gave for a case: its exit status, its output, the class read from it, the cause
    groups and must-not phrases it missed or held."""
    case: Case
    returncode: int
    output: str
    given: str
    missing: tuple[tuple[str, ...], ...]
    forbidden: tuple[str, ...]

    @property
    def no_failure(self) -> bool:
        """The output says no failure / PASS, or the entry exits 0 (validate: a PASS; train --explain: no failure
        found or a finished run, ``launch.failure.Explained``)."""
        return self.given == "none" or self.returncode == 0

    @property
    def passed(self) -> bool:
        return (not self.no_failure and self.given == self.case.expected and not self.missing
                and not self.forbidden and self.returncode != 2)


def load_cases(root: Path = CORPUS) -> list[Case]:
    """Every case under ``root``, by name. ValueError naming the file and field for a case that is not well formed."""
    cases = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        meta_path = folder / "case.yaml"
        meta = yaml.safe_load(meta_path.read_text())
        for field in ("title", "sources", "entry", "input", "class", "causes", "must_not", "remedy"):
            if field not in meta:
                raise ValueError("%s: no %r field" % (meta_path, field))
        if meta["class"] not in CLASSES:
            raise ValueError("%s: class %r is not one of %s" % (meta_path, meta["class"], ", ".join(CLASSES)))
        if meta["entry"] not in ("train --explain", "validate --from", "validate --job"):
            raise ValueError("%s: entry %r is not train --explain, validate --from or validate --job"
                             % (meta_path, meta["entry"]))
        if not all(str(s.get("url", "")).startswith("https://") for s in meta["sources"]):
            raise ValueError("%s: every source needs an https:// url" % meta_path)
        source = folder / meta["input"]
        if not source.exists():
            raise ValueError("%s: input %s does not exist" % (meta_path, source))
        cases.append(Case(folder.name, meta, source))
    return cases


def without_header(text: str) -> str:
    """The input below its leading ``#`` comment lines (the case's provenance, not part of the evidence)."""
    lines = text.splitlines(keepends=True)
    start = 0
    while start < len(lines) and lines[start].startswith("#"):
        start += 1
    return "".join(lines[start:])


def diagnosis(output: str) -> str:
    """The explanation proper: the output before the quoted log (``full log:`` / ``last lines``)."""
    return re.split(r"\nfull log:|\nlast lines", output, maxsplit=1)[0]


def _code_class(code: str) -> str | None:
    prefixes = [p for p in CODE_CLASSES if code.startswith(p)]
    return CODE_CLASSES[max(prefixes, key=len)] if prefixes else None


def given_class(output: str) -> str:
    """The class the output names first (see the module's docstring)."""
    text = diagnosis(output)
    if _NONE.search(text.strip().splitlines()[0] if text.strip() else "") or not text.strip():
        return "none"
    if _UNCLASSIFIED.search(text):  # the line it quotes holds class words by construction: no class
        return "unclassified"
    codes = [cls for cls in (_code_class(m.group(1)) for m in _CODE.finditer(text)) if cls and cls not in NON_CLASSES]
    if codes:  # the product's own cause code says the class
        return codes[0]
    found = []  # (position, class)
    for cls, words in CLASS_WORDS.items():
        m = re.search(words, text, re.I)
        if m and cls not in _GENERIC:
            found.append((m.start(), cls))
    if found:
        return min(found)[1]
    for cls in _GENERIC:
        if re.search(CLASS_WORDS[cls], text, re.I):
            return cls
    return "rank_exit" if _RANK_EXIT.search(text) else "unclassified"


def _entry_args(case: Case, folder: Path) -> list[str]:
    entry = case.meta["entry"]
    if entry == "validate --from":
        return ["validate", "--from", str(case.input)]
    stripped = folder / case.input.name
    stripped.write_text(without_header(case.input.read_text()))
    return ["train", "--explain", str(stripped)] if entry == "train --explain" else \
        ["validate", "--job", str(stripped)]


_RUNS: dict[str, Outcome] = {}


def run_case(case: Case) -> Outcome:
    """The case through its entry, in this process (``tests.lib.cli.run``), once per session. The cause phrases are
    looked for in the explanation proper (``diagnosis``: a quoted log tail is no diagnosis), the must-not phrases in
    the whole output."""
    if case.name in _RUNS:
        return _RUNS[case.name]
    with tempfile.TemporaryDirectory() as tmp:
        ran = cmd.run(*_entry_args(case, Path(tmp)))
    output = ran.stdout + ("\n" + ran.stderr if ran.stderr.strip() else "")
    low, explained = output.lower(), diagnosis(output).lower()
    missing = tuple(tuple(group) for group in _groups(case.meta["causes"])
                    if not any(str(p).lower() in explained for p in group))
    forbidden = tuple(p for p in case.meta["must_not"] if str(p).lower() in low)
    _RUNS[case.name] = Outcome(case, ran.returncode, output, given_class(output), missing, forbidden)
    return _RUNS[case.name]


def _groups(causes: list) -> list[list[str]]:
    return [[str(p) for p in (c if isinstance(c, list) else [c])] for c in causes]


def report(outcomes: list[Outcome]) -> str:
    """The corpus report: one line per case (expected, given, verdict, what it missed), the cases given no failure
    or PASS counted apart, and the confusion of expected vs given classes."""
    lines = ["failure corpus: %d cases, %d right, %d given no failure/PASS" % (
        len(outcomes), sum(o.passed for o in outcomes), sum(o.no_failure for o in outcomes)), ""]
    width = max(len(o.case.name) for o in outcomes)
    for o in outcomes:
        why = []
        if o.no_failure:
            why.append("NO FAILURE FOUND")
        if o.given != o.case.expected:
            why.append("class %s" % o.given)
        why += ["missing %s" % " | ".join(g) for g in o.missing]
        why += ["must not say %r" % p for p in o.forbidden]
        lines.append("%-*s  %-16s %-16s %s%s" % (width, o.case.name, o.case.expected, o.given,
                                                 "ok" if o.passed else "FAIL",
                                                 "" if o.passed else ": " + "; ".join(why)))
    lines += ["", "confusion (rows: expected class, columns: given class):"]
    given = sorted({o.given for o in outcomes})
    table = collections.Counter((o.case.expected, o.given) for o in outcomes)
    rows = sorted({o.case.expected for o in outcomes})
    first = max(len(r) for r in rows + ["expected"])
    lines.append(" " * first + "  " + "  ".join("%*s" % (max(len(g), 3), g) for g in given))
    for r in rows:
        lines.append("%-*s  " % (first, r) + "  ".join(
            "%*s" % (max(len(g), 3), table[(r, g)] or ".") for g in given))
    return "\n".join(lines)


def main() -> int:
    outcomes = [run_case(c) for c in load_cases()]
    print(report(outcomes))
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
