"""The CUDA usability probe's output (``facts/cuda_probe.py``, format ``chexstack.cuda_probe`` version 1: JSON lines)
read into values, and the driver API's ``CUresult`` codes it reports.

``CUDA_PROBE`` is its ``Observation``: the probe run by this interpreter (``argv``), and any recorded run of
``cuda_probe.py`` (``also``: another interpreter, another path, a ``--library``, a run wrapped in ``sudo`` or
``timeout``). Parsers never run tools: ``validate``'s ``gpu.cuda`` runs it through ``Context.observe``.

``CUDA_PROGRAM`` reads what else a bundle may hold instead: a recorded run of a CUDA program (gpu_burn, the CUDA
samples' deviceQuery, a framework's one-liner) whose output names a CUDA error the way programs print one — the
driver's ``cuGetErrorString`` text, the driver API's ``CUDA_ERROR_*`` name or the runtime API's ``cudaError*`` name
(``program_errors``).
"""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field

from chexstack.tools import ToolRun
from facts.parsers.observation import Observation, first_command

#: The probe script (beside ``facts/probe.py``), run as a script so that it can run in an image too.
PROBE_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "cuda_probe.py")
FORMAT = "chexstack.cuda_probe"
#: the versions of the format this parser reads
VERSIONS = (1,)

#: ``CUresult`` codes a node's fault gives at a CUDA program's start: code -> (name, meaning). Names and meanings
#: as cuda.h documents them: CUDA driver API reference, Data types, ``enum CUresult``
#: (https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TYPES.html). 35 is not among them: it is the runtime
#: API's ``cudaErrorInsufficientDriver`` (CUDA runtime API, ``cudaError``); the driver API has no code 35.
CU_RESULTS = {
    2: ("CUDA_ERROR_OUT_OF_MEMORY", "the API call failed because it was unable to allocate enough memory or other "
                                    "resources to perform the requested operation"),
    3: ("CUDA_ERROR_NOT_INITIALIZED", "the CUDA driver has not been initialized with cuInit() or initialization "
                                      "has failed"),
    34: ("CUDA_ERROR_STUB_LIBRARY", "the CUDA driver that the application has loaded is a stub library"),
    46: ("CUDA_ERROR_DEVICE_UNAVAILABLE", "the requested CUDA device is unavailable at the current time; devices are "
                                         "often unavailable due to use of CU_COMPUTEMODE_EXCLUSIVE_PROCESS or "
                                         "CU_COMPUTEMODE_PROHIBITED"),
    100: ("CUDA_ERROR_NO_DEVICE", "no CUDA-capable devices were detected by the installed CUDA driver"),
    101: ("CUDA_ERROR_INVALID_DEVICE", "the device ordinal supplied does not correspond to a valid CUDA device"),
    304: ("CUDA_ERROR_OPERATING_SYSTEM", "an OS call within the CUDA API failed or the operation is not supported "
                                         "on this OS"),
    802: ("CUDA_ERROR_SYSTEM_NOT_READY", "the system is not yet ready to start any CUDA work: verify the system "
                                         "configuration is in a valid state and all required driver daemons are "
                                         "actively running"),
    803: ("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "a mismatch between the versions of the display driver and the CUDA "
                                               "driver"),
    999: ("CUDA_ERROR_UNKNOWN", "an unknown internal error has occurred"),
}


@dataclass(frozen=True)
class CudaError:
    """A failed driver API call: ``step`` (``cuInit``, ``cuDeviceGetCount``, ``cuCtxCreate_v2``, …), ``code`` (the
    ``CUresult``), ``name`` / ``string`` (the library's ``cuGetErrorName`` / ``cuGetErrorString``, else the
    documented name of ``CU_RESULTS``; "" unknown)."""

    step: str
    code: int
    name: str = ""
    string: str = ""

    @property
    def meaning(self) -> str:
        """cuda.h's documented meaning of the code ("" for a code ``CU_RESULTS`` does not hold)."""
        return CU_RESULTS.get(self.code, ("", ""))[1]

    @property
    def documented(self) -> str:
        """cuda.h's name of the code (``CU_RESULTS``; "" for a code it does not hold): what a verdict is decided
        by. The library's ``name`` is what it said, which a stub, a shim or a broken library may get wrong (100
        named ``CUDA_ERROR_UNKNOWN``)."""
        return CU_RESULTS.get(self.code, ("", ""))[0]

    @property
    def text(self) -> str:
        """``802 CUDA_ERROR_SYSTEM_NOT_READY ("system not yet initialized") at cuCtxCreate_v2``: the code's
        documented name, and the library's own where it names the code otherwise."""
        name = self.documented or self.name or "(unnamed)"
        other = " (the library names it %s)" % self.name if self.name and self.name != name else ""
        return "%d %s%s%s at %s" % (self.code, name, other, ' ("%s")' % self.string if self.string else "",
                                    self.step)


@dataclass(frozen=True)
class CudaGpu:
    """One device as CUDA enumerates it: ``index`` (CUDA's ordinal), ``name``, ``pci_bus_id`` (``0000:18:00.0``;
    None not reported), ``error`` (None: a context and the allocation worked)."""

    index: int
    name: str | None = None
    pci_bus_id: str | None = None
    error: CudaError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class CudaProbe:
    """What the probe reported. ``version``: the format's (None: no probe header read); ``library``: the library
    asked for; ``loaded``: whether it loaded with every function (None: not reported), ``load_error`` why not and
    ``missing`` the functions it lacks; ``path``: the file the loader mapped; ``driver_version``: cuDriverGetVersion
    (12040 = CUDA 12.4; None not reported); ``init_error`` / ``count_error``: cuInit's / cuDeviceGetCount's failure;
    ``count``: the GPUs CUDA enumerates (None: not reached); ``gpus``: one per device probed; ``complete``: the
    ``end`` record was read (False: cut off or crashed — the last record says where); ``last``: the last record's
    step (``init``, ``gpu 3``); ``cuda_visible_devices``: as the probe saw it (None: unset); ``problems``: lines
    that were not records of this format."""

    version: int | None = None
    library: str | None = None
    loaded: bool | None = None
    load_error: str = ""
    missing: list[str] = field(default_factory=list)
    path: str | None = None
    driver_version: int | None = None
    init_error: CudaError | None = None
    count_error: CudaError | None = None
    count: int | None = None
    gpus: list[CudaGpu] = field(default_factory=list)
    complete: bool = False
    last: str = ""
    cuda_visible_devices: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[CudaGpu]:
        return [g for g in self.gpus if not g.ok]

    @property
    def cuda_version(self) -> str | None:
        """cuDriverGetVersion as ``12.4`` (major * 1000 + minor * 10), or None."""
        v = self.driver_version
        return "%d.%d" % (v // 1000, v % 1000 // 10) if v else None


def _error(record: dict, step: str) -> CudaError:
    code = record.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else -1
    name, _ = CU_RESULTS.get(code, ("", ""))
    return CudaError(step, code, record.get("error_name") or name, record.get("error_string") or "")


def parse_cuda_probe(text: str) -> CudaProbe:
    """The probe's JSON lines -> ``CudaProbe``. Never raises: a line that is not a record of this format (a Python
    traceback, a cut-off line) goes to ``problems``; a format version this parser does not read is a problem and
    ends the reading."""
    out = CudaProbe()
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            out.problems.append(line.strip()[:200])
            continue
        kind = record.get("record") if isinstance(record, dict) else None
        if kind == "probe":
            if record.get("format") != FORMAT or record.get("version") not in VERSIONS:
                out.problems.append("format %r version %r (this parser reads %s %s)" % (
                    record.get("format"), record.get("version"), FORMAT, "/".join(map(str, VERSIONS))))
                return out
            out.version, out.library = record["version"], record.get("library")
            out.cuda_visible_devices = record.get("cuda_visible_devices")
        elif out.version is None:
            out.problems.append(line.strip()[:200])
            continue
        elif kind == "library":
            out.loaded = bool(record.get("loaded"))
            out.load_error, out.path = record.get("error") or "", record.get("path")
            out.missing = [str(m) for m in record.get("missing") or []]
        elif kind == "driver":
            out.driver_version = record.get("version") if isinstance(record.get("version"), int) else None
        elif kind == "init" and record.get("status") != "ok":
            out.init_error = _error(record, "cuInit")
        elif kind == "count":
            if record.get("status") == "ok" and isinstance(record.get("count"), int):
                out.count = record["count"]
            else:
                out.count_error = _error(record, "cuDeviceGetCount")
        elif kind == "gpu" and isinstance(record.get("index"), int):
            error = None if record.get("status") == "ok" else _error(record, record.get("step") or "?")
            out.gpus.append(CudaGpu(record["index"], record.get("name"), record.get("pci_bus_id"), error))
        elif kind == "end":
            out.complete = True
        elif kind != "init":
            out.problems.append(line.strip()[:200])
            continue
        out.last = "gpu %d" % record["index"] if kind == "gpu" else kind
    return out


def _is_probe(argv, env) -> bool:
    """A recorded run of the probe: its command's words name ``cuda_probe.py`` (any interpreter, path, option)."""
    return any(os.path.basename(word) == "cuda_probe.py" for word in first_command(argv, env).argv[:3])


#: The probe, run by this interpreter; a bundle answers with any recorded run of it.
CUDA_PROBE = Observation((sys.executable, PROBE_SCRIPT), _is_probe,
                         lambda run: parse_cuda_probe(run.stdout if isinstance(run, ToolRun) else ""))


#: How CUDA programs print the codes of a node's fault: code -> (the driver's ``cuGetErrorString`` text, the runtime
#: API's ``cudaError`` name). The texts are libcuda's own (as gpu_burn prints them: ../shared/cases/47; and
#: https://github.com/pytorch/pytorch/issues/35710: "cudaGetDeviceProperties returned 802 -> system not yet
#: initialized"); the runtime names: CUDA runtime API reference, ``enum cudaError``
#: (https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html). 304 ``CUDA_ERROR_OPERATING_SYSTEM``
#: ("OS call failed or operation not supported on this OS") is read so that it can be named as what followed.
PROGRAM_FORMS = {
    802: ("system not yet initialized", "cudaErrorSystemNotReady"),
    803: ("system has unsupported display driver / cuda driver combination", "cudaErrorSystemDriverMismatch"),
    100: ("no CUDA-capable device is detected", "cudaErrorNoDevice"),
    46: ("CUDA-capable device(s) is/are busy or unavailable", "cudaErrorDevicesUnavailable"),
    34: ("CUDA driver is a stub library", "cudaErrorStubLibrary"),
    999: (None, "cudaErrorUnknown"),  # "unknown error" alone names no CUDA fault
    304: ("OS call failed or operation not supported on this OS", "cudaErrorOperatingSystem"),
}


@dataclass(frozen=True)
class ProgramError:
    """A CUDA error a program printed: ``code`` (the ``CUresult``), ``name`` (the driver API's), ``line`` (the
    output's line, stripped), ``number`` (its line number in the output, from 1)."""

    code: int
    name: str
    line: str
    number: int


def _forms() -> list[tuple[re.Pattern, int]]:
    out = []
    for code, (text, runtime) in PROGRAM_FORMS.items():
        words = [re.escape(CU_RESULTS[code][0]), re.escape(runtime)]
        if text:
            words.append(re.escape(text))
        out.append((re.compile(r"(?<![\w])(%s)(?![\w])" % "|".join(words), re.IGNORECASE), code))
    return out


_FORMS = _forms()


def program_errors(text: str) -> list[ProgramError]:
    """The CUDA errors of a program's output, in the order printed (the first is the cause, what follows followed
    from it), one per line; [] when it names none. Never raises."""
    found = []
    for number, line in enumerate((text or "").splitlines(), 1):
        for pattern, code in _FORMS:
            if pattern.search(line):
                found.append(ProgramError(code, CU_RESULTS[code][0], line.strip()[:300], number))
                break
    return found


#: CUDA programs whose recorded runs say whether CUDA starts: GPU burn-in and sample programs, and a Python
#: one-liner that imports a CUDA framework (``python -c "import torch; …"``).
CUDA_PROGRAMS = {"gpu_burn", "gpu-burn", "deviceQuery", "deviceQueryDrv", "bandwidthTest", "vectorAdd",
                 "p2pBandwidthLatencyTest", "simpleP2P"}
_FRAMEWORK = re.compile(r"\bimport (torch|cupy|tensorflow|jax)\b|\bfrom (torch|cupy|tensorflow|jax)\b")


def _is_cuda_program(argv, env) -> bool:
    """A recorded run of a CUDA program (``CUDA_PROGRAMS``, or ``python -c`` importing a CUDA framework)."""
    command = first_command(argv, env).argv
    if not command:
        return False
    if command[0] in CUDA_PROGRAMS:
        return True
    return command[0].startswith("python") and "-c" in command and any(_FRAMEWORK.search(w) for w in command)


#: A recorded run of a CUDA program, read for the CUDA errors it printed (stdout and stderr); never run by a check.
CUDA_PROGRAM = Observation(None, _is_cuda_program,
                           lambda run: program_errors(run.output if isinstance(run, ToolRun) else ""))
