"""Parse ``horovodrun --check-build`` output.

``horovodrun --check-build`` exits 0 whatever Horovod was built with (``sys.exit(0)`` in
horovod/runner/launch.py; https://github.com/horovod/horovod/issues/3858, fixtures 41-42), so the ``[X]`` marks are the
only truth.
The command exists from Horovod 0.17.0 (older releases: import + ``hvd.init()`` instead).

Sections, as printed by Horovod 0.17-0.28::

    Horovod v0.27.0:

    Available Frameworks:
        [ ] TensorFlow
        [X] PyTorch
    Available Controllers:
        [ ] MPI
        [X] Gloo
    Available Tensor Operations:
        [ ] NCCL ...
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Section heading -> the key used in requirements (``framework=TensorFlow``).
SECTIONS = {
    "Available Frameworks": "framework",
    "Available Controllers": "controller",
    "Available Tensor Operations": "tensor_op",
}

_VERSION = re.compile(r"^Horovod v(\S+?):?\s*$")
_MARK = re.compile(r"^\s*\[([ xX])\]\s+(\S.*?)\s*$")


@dataclass
class CheckBuild:
    """What one ``horovodrun --check-build`` printed.

    ``built[kind][name]`` is True for ``[X]``, False for ``[ ]``; kind is one of ``SECTIONS`` values.
    ``problems`` lists what could not be read (no version line, a missing section).
    """

    version: str | None = None
    built: dict[str, dict[str, bool]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def has(self, kind: str, name: str) -> bool:
        return self.built.get(kind, {}).get(name, False)

    def missing(self, required: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The (kind, name) pairs of ``required`` that are not marked ``[X]``, in the given order."""
        return [(k, n) for k, n in required if not self.has(k, n)]


def parse_check_build(text: str) -> CheckBuild:
    """Parse the text of ``horovodrun --check-build``; lines outside the three sections are ignored."""
    out = CheckBuild()
    kind = None
    for raw in text.splitlines():
        line = raw.rstrip()
        m = _VERSION.match(line.strip())
        if m:
            out.version = m.group(1)
            continue
        heading = line.strip().rstrip(":")
        if heading in SECTIONS:
            kind = SECTIONS[heading]
            out.built.setdefault(kind, {})
            continue
        m = _MARK.match(line)
        if m and kind is not None:
            out.built[kind][m.group(2)] = m.group(1) in "xX"
    if out.version is None:
        out.problems.append("no 'Horovod vX.Y.Z:' line")
    for heading, kind in SECTIONS.items():
        if kind not in out.built:
            out.problems.append("section '%s:' missing" % heading)
    return out


def parse_requirements(spec: str) -> list[tuple[str, str]]:
    """``"framework=TensorFlow,controller=MPI"`` -> ``[("framework", "TensorFlow"), ("controller", "MPI")]``.

    Raises ValueError naming the bad item and the kinds expected.
    """
    pairs = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        kind, sep, name = item.partition("=")
        if not sep or kind not in SECTIONS.values() or not name:
            raise ValueError(
                "bad Horovod requirement %r: expected KIND=NAME with KIND one of %s"
                % (item, ", ".join(SECTIONS.values()))
            )
        pairs.append((kind, name))
    return pairs


def format_missing(missing: list[tuple[str, str]]) -> str:
    """The message of https://github.com/horovod/horovod/issues/3858: ``missing: framework=TensorFlow, controller=MPI,
    tensor_op=NCCL``."""
    return "missing: " + ", ".join("%s=%s" % kn for kn in missing)


def build_from_api(version: str | None, frameworks: list[str], built: dict[str, bool]) -> CheckBuild:
    """The same ``CheckBuild`` from Horovod's Python API in one interpreter (``hvd.mpi_built()``, ``gloo_built()``,
    ``nccl_built()``, … : Horovod ≥ 0.17), for when ``horovodrun --check-build`` is too slow: it starts one
    interpreter per framework and controller (about 20 s with TensorFlow 2.15 on 2 cores).

    ``frameworks``: the frameworks whose ``horovod.<fw>`` imported; ``built``: ``{"mpi_built": bool, …}``.
    """
    out = CheckBuild(version=version)
    flag = lambda name: bool(built.get(name))  # noqa: E731
    out.built["framework"] = {name: name in frameworks for name in ("TensorFlow", "PyTorch", "MXNet")}
    out.built["controller"] = {"MPI": flag("mpi_built"), "Gloo": flag("gloo_built")}
    out.built["tensor_op"] = {"NCCL": flag("nccl_built"), "DDL": flag("ddl_built"), "CCL": flag("ccl_built"),
                              "MPI": flag("mpi_built"), "Gloo": flag("gloo_built")}
    if not built:
        out.problems.append("no build flags (hvd.mpi_built() & co. exist from Horovod 0.17.0)")
    return out


_MISMATCH = re.compile(r"Framework (\w+) installed with version (\S+) but found version (\S+?)\.?\s*$", re.M)
#: The rest of HorovodVersionMismatchError's message (horovod/common/exceptions.py, Horovod >= 0.21), on lines of its
#: own: what is left of it when only the last line of the import's stderr was kept.
_MISMATCH_TAIL = "Reinstall Horovod using `pip install --no-cache-dir` to build with the new version"
#: Before Horovod 0.21 the same condition is an ImportError of Horovod's library: TensorFlow's C++ symbols it was
#: linked against are not in the TensorFlow found (https://github.com/horovod/horovod/issues/898, #656).
_UNDEFINED_TF_SYMBOL = re.compile(r"(?:mpi_lib\S*\.so\S*: )?undefined symbol: _ZN\d*tensorflow\S*")
#: The line a Python traceback names its exception on: unindented, ``[module.]Name: message`` (or the bare name).
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b")


def version_mismatch(text: str) -> tuple[str, str, str] | None:
    """``HorovodVersionMismatchError: Framework tensorflow installed with version 2.3.0 but found version 2.4.1.``
    (https://github.com/horovod/horovod/issues/2619) -> ``("tensorflow", "2.3.0", "2.4.1")`` (framework, built for,
    found), else None."""
    m = _MISMATCH.search(text or "")
    return (m.group(1), m.group(2), m.group(3)) if m else None


@dataclass(frozen=True)
class TFMismatch:
    """Horovod built for another TensorFlow than the one it imports: ``built_for`` and ``found`` where the error
    names them (HorovodVersionMismatchError), None where it does not (an undefined TensorFlow symbol, a message cut
    to its last line); ``line`` the line that says so."""

    built_for: str | None
    found: str | None
    line: str


def tf_mismatch(text: str) -> TFMismatch | None:
    """Whether a failed ``import horovod.tensorflow`` (its stderr, or the error the import probe kept) says Horovod
    was built for another TensorFlow: Horovod >= 0.21's HorovodVersionMismatchError ("Framework tensorflow installed
    with version X but found version Y.", horovod/horovod#2619), the end of that message alone, or an older Horovod's
    ``undefined symbol: _ZN10tensorflow…`` (horovod/horovod#898); else None."""
    text = text or ""
    m = _MISMATCH.search(text)
    if m and m.group(1).lower() == "tensorflow":
        return TFMismatch(m.group(2), m.group(3), m.group(0).strip())
    for line in text.splitlines():
        if "HorovodVersionMismatchError" in line or _MISMATCH_TAIL in line or _UNDEFINED_TF_SYMBOL.search(line):
            return TFMismatch(None, None, line.strip())
    return None


def import_error(stderr: str, limit: int = 2000) -> str:
    """What a failed Python import printed last: the traceback's exception with the whole of its message (from the
    last unindented ``Name: …`` line to the end: HorovodVersionMismatchError's message spans three lines, the
    versions on the first), at most ``limit`` characters; the last line when no exception line is found."""
    lines = (stderr or "").strip().splitlines()
    start = next((i for i in range(len(lines) - 1, -1, -1) if _EXCEPTION_LINE.match(lines[i])), len(lines) - 1)
    return "\n".join(line.rstrip() for line in lines[max(start, 0):])[:limit]
