"""Consistency findings over Table 1, the stack manifests, the rules and the conda inputs (``invoke stacks --check``).

Each ``Finding`` has the ``stack``, the ``field`` (a Table 1 row or manifest field), a ``message``, a ``severity``
("error": cannot work as stated; "warning": a stated value contradicts its source; "info": worth knowing) and
the ``source`` of the fact that contradicts it. ``subject`` says whose text is inconsistent:

- "table1": the published Table 1 (facts about the paper: shown, never fixed, never a failing exit code);
- "manifest": this repository's own files (manifests, conda inputs): fixable, so errors and warnings are
  ``blocking`` and ``invoke stacks --check`` exits 1 on them (what a CI job wants).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from packaging.version import Version

from envs import lock, rules
from envs.manifest import Stack, known_stacks, load_stack
from envs.table1 import load_table1

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
_VERSION_IN_TEXT = re.compile(r"[0-9]+(?:\.[0-9]+)*")
#: A conda lock of a CUDA environment made without the target's __cuda holds a CPU build or fails to solve.
VIRTUAL_PACKAGES_SOURCE = ("conda-lock --virtual-package-spec; https://github.com/conda/conda-lock/issues/101 "
                           "(a CUDA environment locks differently without the target's virtual packages)")


@dataclass(frozen=True)
class Finding:
    stack: str
    field: str
    message: str
    severity: Severity
    source: str
    subject: Literal["table1", "manifest"]

    @property
    def blocking(self) -> bool:
        return self.subject == "manifest" and self.severity in ("error", "warning")

    def as_dict(self) -> dict:
        return dict(asdict(self), blocking=self.blocking)


def split_reported(text: str) -> tuple[str, str | None]:
    """"OpenMPI 3.1.3" → ("OpenMPI", "3.1.3"); "10.2" → ("", "10.2"); no version → (text, None)."""
    m = list(_VERSION_IN_TEXT.finditer(text))
    if not m:
        return text.strip(), None
    return text[:m[-1].start()].strip(), m[-1].group(0)


def norm_name(name: str) -> str:
    """Name as compared: lower case, letters and digits only ("OpenMPI" = "Open MPI")."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _table1_cells(stack: Stack) -> dict[str, str]:
    table = load_table1()
    col = next((c for c in table.columns if c.stack == stack.name), None)
    return {r.component: r.cell(col.key) for r in table.rows} if col else {}


def reported_vs_table1(stack: Stack) -> list[Finding]:
    """The manifest's ``reported`` texts must be Table 1's cells exactly."""
    out = []
    for comp, cell in _table1_cells(stack).items():
        got = stack.components[comp].reported
        if got != cell:
            out.append(Finding(stack.name, "components.%s.reported" % comp,
                               "expected Table 1's cell %r, the manifest has %r" % (cell, got), "error",
                               "envs/table1.yaml", "manifest"))
    return out


def reported_vs_shipped(stack: Stack) -> list[Finding]:
    """Table 1's text against what the artifact really contains (release notes, lock, base image)."""
    labels = {r.component: r.label for r in load_table1().rows}
    out = []
    for comp, c in stack.components.items():
        if c.reported is None or c.version is None:
            continue
        name, rep = split_reported(c.reported)
        if rep is None or rep == c.version and not name:
            continue
        if name and c.name and norm_name(name) != norm_name(c.name):
            out.append(Finding(stack.name, comp, "Table 1 names %s; the artifact is %s %s"
                               % (c.reported, c.name, c.version), "info", c.source, "table1"))
        elif rules.same_release(rep, c.version):
            if rep != c.version:
                finer = "more" if len(rep.split(".")) > len(c.version.split(".")) else "less"
                out.append(Finding(stack.name, comp, "Table 1's %s %s is %s precise than its source's %s"
                                   % (labels[comp], c.reported, finer, c.version), "info", c.source, "table1"))
        else:
            out.append(Finding(stack.name, comp, "Table 1 reports %s %s; the artifact ships %s"
                               % (labels[comp], c.reported, c.version), "warning", c.source, "table1"))
    return out


def driver_findings(stack: Stack) -> list[Finding]:
    """Table 1's driver against Table 1's CUDA and against the CUDA the artifact ships."""
    drv, cuda = stack.components["cuda_driver"].reported, stack.components["cuda"]
    if not drv or cuda.reported is None:
        return []
    out = []
    v = rules.check_driver(drv, cuda.reported)
    if v.status != "PASS":
        sev: Severity = "error" if v.status == "FAIL" else "warning"
        out.append(Finding(stack.name, "cuda_driver", "Table 1's CUDA %s with its driver %s: %s"
                           % (cuda.reported, drv, v.message), sev, v.source, "table1"))
    if cuda.version and cuda.version != cuda.reported:
        s = rules.check_driver(drv, cuda.version)
        sev = {"PASS": "info", "WARN": "warning", "FAIL": "error"}[s.status]
        out.append(Finding(stack.name, "cuda_driver", "with the CUDA the artifact ships (%s): %s"
                           % (cuda.version, s.message), sev, s.source, "table1"))
    return out


def _value(stack: Stack, comp: str) -> str | None:
    c = stack.components[comp]
    return c.version or (split_reported(c.reported)[1] if c.reported else None)


def tf_tested_findings(stack: Stack) -> list[Finding]:
    """TensorFlow's tested build (tensorflow.org) against the stack's CUDA, cuDNN and Python.

    A CUDA mismatch is a warning for conda/PyPI builds and info for NGC images (NVIDIA builds TensorFlow from
    source against the container's CUDA)."""
    tf = _value(stack, "tensorflow")
    tested = rules.tf_tested(tf) if tf else None
    if tested is None:
        return []
    subject = "table1" if stack.table1_column else "manifest"
    where = "the %s stack" % stack.name
    src = tested.source
    out = []
    cuda, cudnn, py = _value(stack, "cuda"), _value(stack, "cudnn"), _value(stack, "python")
    built = "NVIDIA builds TensorFlow from source in the image" if stack.family == "ngc" else None
    if stack.gpu and cuda and not rules.same_release(tested.cuda, cuda):
        msg = "TensorFlow %s's tested GPU build uses CUDA %s / cuDNN %s%s; %s has CUDA %s" % (
            tested.tensorflow, tested.cuda, tested.cudnn, " (%s)" % tested.note if tested.note else "", where, cuda)
        out.append(Finding(stack.name, "tensorflow", msg + ("" if built is None else " (%s)" % built),
                           "info" if built else "warning", src, subject))
    if stack.gpu and cudnn and not rules.same_release(tested.cudnn, cudnn):
        out.append(Finding(stack.name, "cudnn", "TensorFlow %s's tested GPU build uses cuDNN %s; %s has %s"
                           % (tested.tensorflow, tested.cudnn, where, cudnn), "info", src, subject))
    if py and not tested.python_ok(py):
        out.append(Finding(stack.name, "python", "TensorFlow %s is tested with Python %s; %s has %s"
                           % (tested.tensorflow, ", ".join(tested.python), where, py), "warning", src, subject))
    return out


def horovod_env_findings(stack: Stack) -> list[Finding]:
    """Each ``HOROVOD_*`` variable of ``build.horovod_env`` against the build variables of the stack's Horovod
    release (envs/rules.yaml ``horovod_build_env``): unknown -> error (a typo such as HOROVOD_WITH_GLUE, or another
    release's variable: the build silently ignores it); documented but not read, or not decidable -> info. Other
    variables (CMAKE_POLICY_VERSION_MINIMUM, CC) are the build tools' own and not judged."""
    version = stack.components["horovod"].version
    if not version:
        return []
    names = rules.horovod_build_variables()
    out = []
    for var in sorted(v for v in stack.build.horovod_env if v.startswith("HOROVOD_")):
        known = rules.horovod_build_variable(version, var)
        if known.status == "read":
            continue
        message = known.message
        if known.status == "unknown":
            close = [] if var in names else difflib.get_close_matches(var, names, n=1)
            message += ": the build ignores it" + ("; did you mean %s?" % close[0] if close else "")
        out.append(Finding(stack.name, "build.horovod_env.%s" % var, message,
                           "error" if known.status == "unknown" else "info", known.source, "manifest"))
    return out


def horovod_findings(stack: Stack) -> list[Finding]:
    """Horovod build variables the stack's Horovod release does not know; Table 1's Horovod without horovodrun."""
    out = horovod_env_findings(stack)
    hvd = stack.components["horovod"]
    if hvd.reported:
        rep = split_reported(hvd.reported)[1]
        if rep and not rules.horovod_has(rep, "horovodrun"):
            out.append(Finding(stack.name, "horovod", "Table 1's Horovod %s predates horovodrun: launch it with "
                               "mpirun" % rep, "info", rules.horovod_feature_source("horovodrun"), "table1"))
    return out


def min_driver_findings(stack: Stack) -> list[Finding]:
    """A GPU stack's ``min_driver`` must be at least its CUDA's floor."""
    cuda = stack.components["cuda"].version
    if not stack.gpu or not cuda:
        return []
    floor = rules.min_driver_for_cuda(cuda)
    if stack.min_driver is None:
        return [Finding(stack.name, "min_driver", "a GPU stack needs min_driver (CUDA %s: >= %s)"
                        % (cuda, floor.driver), "error", floor.source, "manifest")]
    if Version(stack.min_driver) < Version(floor.driver):
        return [Finding(stack.name, "min_driver", "min_driver %s is below CUDA %s's floor %s"
                        % (stack.min_driver, cuda, floor.driver), "error", floor.source, "manifest")]
    return []


def virtual_package_findings(stack: Stack, conda_dir: Path = lock.CONDA_DIR) -> list[Finding]:
    """The conda lock's target (virtual-packages.yml) against the stack: __cuda = the stack's CUDA (major.minor),
    not above the Table 1 driver's CUDA; __glibc = the base OS's glibc
    (https://github.com/conda/conda-lock/issues/101)."""
    if stack.name not in lock.conda_stacks(conda_dir):
        return []
    files = lock.conda_files(stack.name, conda_dir)
    path = lock.shown(files.virtual_packages)
    out = []
    cuda = stack.components["cuda"].version
    os_c = stack.components["os"]
    glibc = rules.glibc_for_os(os_c.name or "", os_c.version or "") if os_c.version else None
    for platform, pkgs in lock.read_virtual_packages(files.virtual_packages).items():
        vcuda = pkgs.get("__cuda")
        if stack.gpu and cuda:
            want = "%d.%d" % rules.parse_version(cuda).release[:2]
            if vcuda is None or not rules.same_release(vcuda, want) or vcuda.count(".") != want.count("."):
                out.append(Finding(stack.name, "%s:%s.__cuda" % (path, platform), "expected __cuda %s (the stack's "
                                   "CUDA), got %s" % (want, vcuda), "error", VIRTUAL_PACKAGES_SOURCE, "manifest"))
            drv = stack.components["cuda_driver"].reported
            if vcuda and drv:
                ceiling = rules.max_cuda_for_driver(drv)
                if Version(vcuda) > Version(ceiling.cuda):
                    out.append(Finding(stack.name, "%s:%s.__cuda" % (path, platform), "__cuda %s exceeds driver %s's"
                                       " CUDA %s: the lock would be valid but the image would not start"
                                       % (vcuda, drv, ceiling.cuda), "error", ceiling.source, "manifest"))
        elif vcuda is not None:
            out.append(Finding(stack.name, "%s:%s.__cuda" % (path, platform), "a CPU stack declares __cuda %s"
                               % vcuda, "error", VIRTUAL_PACKAGES_SOURCE, "manifest"))
        if glibc and pkgs.get("__glibc") != glibc:
            out.append(Finding(stack.name, "%s:%s.__glibc" % (path, platform), "expected __glibc %s (%s %s), got %s"
                               % (glibc, os_c.name, os_c.version, pkgs.get("__glibc")), "error",
                               rules.glibc_source(), "manifest"))
    return out


CHECKS = (reported_vs_table1, reported_vs_shipped, driver_findings, tf_tested_findings, horovod_findings,
          min_driver_findings, virtual_package_findings)


def stack_findings(stack: Stack) -> list[Finding]:
    """Every finding for one stack, most severe first (stable order otherwise)."""
    found = [f for check in CHECKS for f in check(stack)]
    return sorted(found, key=lambda f: SEVERITY_ORDER[f.severity])


def stack_order() -> list[str]:
    """Table 1's stacks in its column order, then the other manifests by name."""
    first = [c.stack for c in load_table1().columns]
    return first + [n for n in known_stacks() if n not in first]


def all_findings(stacks: list[str] | None = None) -> list[Finding]:
    """Findings for ``stacks`` (default: every manifest, ``stack_order``), grouped by stack."""
    return [f for name in (stacks or stack_order()) for f in stack_findings(load_stack(name))]
