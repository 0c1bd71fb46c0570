"""The Horovod build gate: is the Horovod in this interpreter built with what the stack needs?

Run by scripts/setup after building Horovod and inside images after their Horovod step::

    python -m facts.horovod_gate --require framework=TensorFlow,controller=MPI,controller=Gloo

Two checks (https://github.com/horovod/horovod/issues/3858 and https://github.com/horovod/horovod/issues/2619):

1. ``horovodrun --check-build`` lists every required component as ``[X]`` (its exit status means nothing).
2. ``import horovod.tensorflow`` works and the TensorFlow Horovod was compiled against (``horovod/metadata.json``,
   written by Horovod's build) equals the ``tensorflow.__version__`` imported now.

Exit status: 0 fit, 1 not fit (the message lists exactly what is missing), 2 could not run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

from facts.parsers.horovod import format_missing, import_error, parse_check_build, parse_requirements, tf_mismatch

_IMPORT_PROBE = r"""
import json, os, sys
import tensorflow as tf
import horovod
import horovod.tensorflow as hvd
meta = os.path.join(os.path.dirname(horovod.__file__), "metadata.json")
built_for = None
if os.path.exists(meta):
    with open(meta) as f:
        built_for = json.load(f).get("tensorflow")
built = {}
for name in ("mpi_built", "gloo_built", "nccl_built", "ddl_built", "ccl_built"):
    fn = getattr(hvd, name, None)  # Horovod >= 0.17
    if fn is not None:
        built[name] = bool(fn())
print(json.dumps({"tensorflow": tf.__version__, "horovod": horovod.__version__, "built_for": built_for,
                  "built": built}))
"""

#: What the project's own environment needs (scripts/setup builds Horovod with TensorFlow, MPI and Gloo).
DEFAULT_REQUIRE = "framework=TensorFlow,controller=MPI,controller=Gloo"


def check_build_text() -> str:
    """Run ``horovodrun --check-build`` (the one next to this interpreter first) and return its stdout; when it
    printed no report (horovodrun itself failed, e.g. a missing module), raise RuntimeError with its last error
    line."""
    exe = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    if not os.path.exists(exe):
        exe = shutil.which("horovodrun") or ""
    if not exe:
        raise FileNotFoundError("horovodrun not found next to %s or on PATH" % sys.executable)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    p = subprocess.run([exe, "--check-build"], capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0 and "Available Frameworks" not in p.stdout:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError("`horovodrun --check-build` exited %d: %s" % (p.returncode, last))
    return p.stdout


def import_probe() -> dict:
    """Import TensorFlow + Horovod in a fresh interpreter: ``{"tensorflow", "horovod", "built_for",
    "built": {"mpi_built": bool, …}}`` (``built`` empty before Horovod 0.17), or ``{"error": text}``: the exception
    the import raised with all of its message (``facts.parsers.horovod.import_error``)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    p = subprocess.run([sys.executable, "-c", _IMPORT_PROBE], capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:  # the exception with its whole message: Horovod's version mismatch spans lines
        return {"error": import_error(p.stderr) or "exit %d" % p.returncode}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m facts.horovod_gate", description=__doc__.split("\n")[0])
    ap.add_argument("--require", default=DEFAULT_REQUIRE,
                    help="comma-separated KIND=NAME (KIND: framework, controller, tensor_op)")
    ap.add_argument("--quiet", action="store_true", help="print nothing, only set the exit status")
    args = ap.parse_args(argv)
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))
    try:
        required = parse_requirements(args.require)
        text = check_build_text()
    except (ValueError, FileNotFoundError, subprocess.SubprocessError) as e:
        say("horovod gate: cannot run: %s" % e)
        return 2
    except RuntimeError as e:
        say("horovod gate: FAIL: %s" % e)
        return 1
    build = parse_check_build(text)
    if build.problems:
        say("horovod gate: FAIL: could not read `horovodrun --check-build`: %s" % "; ".join(build.problems))
        return 1
    missing = build.missing(required)
    if missing:
        say("horovod gate: FAIL: Horovod v%s built without what this stack needs: %s"
            % (build.version, format_missing(missing)))
        say("  fix: rebuild with HOROVOD_WITH_<COMPONENT>=1 set for each (the build then fails loudly instead of "
            "silently skipping a component), e.g. HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1")
        return 1
    probe = import_probe()
    if "error" in probe:
        say("horovod gate: FAIL: `import horovod.tensorflow` failed: %s" % probe["error"])
        if tf_mismatch(probe["error"]):
            say("  fix: reinstall horovod (--no-cache-dir) after the final TensorFlow install")
        return 1
    if probe["built_for"] and probe["built_for"] != probe["tensorflow"]:
        say("horovod gate: FAIL: horovod built for tensorflow %s, runtime tensorflow %s — reinstall horovod "
            "(--no-cache-dir) after the final TensorFlow install" % (probe["built_for"], probe["tensorflow"]))
        return 1
    say("horovod gate: PASS: Horovod v%s with %s; TensorFlow %s" % (
        build.version, ", ".join("%s=%s" % kn for kn in required), probe["tensorflow"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
