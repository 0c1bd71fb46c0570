"""A stand-in CUDA driver library for the tests of ``facts/cuda_probe.py`` and ``gpu.cuda`` on a machine without a
GPU: ``tests/lib/libcuda_standin.c`` built with the system C compiler (``cc``, else ``gcc``; scripts/setup installs
gcc). Its behaviour is the environment variable ``CHEXSTACK_CUDA_STANDIN`` (the C file's header says its words).

``built(folder)`` -> the built library's path; without a compiler the test is skipped saying so (a failure under CI,
where scripts/setup has installed one): the condition is explicit, never a silent pass.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.lib import lanes

SOURCE = Path(__file__).with_name("libcuda_standin.c")
#: the variable the stand-in reads, and the one the probe chooses its library by (facts/cuda_probe.py)
SCENARIO, LIBRARY = "CHEXSTACK_CUDA_STANDIN", "CHEXSTACK_LIBCUDA"


class NoCompiler(Exception):
    """No C compiler on PATH."""


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def build(folder: Path) -> Path:
    """Compile the stand-in into ``folder/libcuda_standin.so``; ``NoCompiler`` without cc/gcc, CalledProcessError
    with the compiler's message when it does not compile."""
    cc = compiler()
    if cc is None:
        raise NoCompiler("no C compiler (cc or gcc) on PATH: scripts/setup installs gcc")
    out = folder / "libcuda_standin.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(out), str(SOURCE)], check=True,
                   capture_output=True, text=True, timeout=120)
    return out


def built(folder: Path) -> Path:
    """``build(folder)``; a missing compiler skips the calling test with the reason (fails it under CI)."""
    try:
        return build(folder)
    except NoCompiler as e:
        lanes.unavailable(str(e))
