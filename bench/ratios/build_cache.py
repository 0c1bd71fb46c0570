"""Layer-cache benchmark: a full build of the cpu image vs a rebuild after a trainer-only change, side by side in
one run, printed as a ratio.

    .venv/bin/python bench/ratios/build_cache.py [--base IMAGE] [--skip-full]

1. full build: every layer rebuilt (``nocache``): apt, TensorFlow, Horovod compiled, gate, runtime stage, code.
2. trainer-only rebuild: the same context with one trainer file changed (a comment appended in a temporary copy;
   the repository is not touched); only the layers from the trainer's COPY on may rebuild.

Goal: the heavy layers are reused and the trainer-only rebuild takes <= 20 s. ``--skip-full`` times only
the rebuild (the full build is then the last cached one's steps, not a measurement, and no ratio is printed).
Needs a Docker engine; the local Debian base is made when missing (``images.local_base``). Images are built
untagged; the rebuilt one is then verified (timed apart: the ratio is about the build). One round of each, not
alternated rounds as in ``bench/sidebyside.py``: a full build takes many minutes and the gap is orders of magnitude.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from chexstack.console import console
from envs.manifest import load_stack
from images.context import context_tar
from images.docker_build import docker_build, docker_client
from images.local_base import LOCAL_DEBIAN, ensure_debian_base
from images.render import build_context, render
from images.verify import compare, probe_image

GOAL_S = 20.0


def timed_build(client, dockerfile: str, ctx: dict, *, nocache: bool) -> tuple[float, list, str]:
    steps: list = []
    start = time.monotonic()
    image_id = docker_build(client, context_tar(dockerfile, ctx), nocache=nocache, quiet=True, steps=steps)
    return time.monotonic() - start, steps, image_id


def with_changed_trainer(ctx: dict, tmp: Path) -> dict:
    """``ctx`` with the trainer folder replaced by a copy whose ``__init__.py`` has one more comment line."""
    copy = tmp / "trainer"
    shutil.copytree(ctx["chexstack/trainer"], copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    init = copy / "__init__.py"
    init.write_text(init.read_text() + "\n# bench.ratios.build_cache: trainer-only change %f\n" % time.time())
    return {**ctx, "chexstack/trainer": copy}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/ratios/build_cache.py", description=__doc__.split("\n")[0])
    ap.add_argument("--base", default=None, help="base image (default: the local Debian base, made when missing)")
    ap.add_argument("--skip-full", action="store_true", help="time only the trainer-only rebuild")
    args = ap.parse_args(argv)

    client = docker_client()
    base = args.base or LOCAL_DEBIAN
    if args.base is None:
        ensure_debian_base(LOCAL_DEBIAN, client)
    stack = load_stack("cpu")
    dockerfile, ctx = render(stack, "docker", base), build_context(stack, base)

    full_s = None
    if not args.skip_full:
        console.print("full build of the cpu image (no cache): minutes")
        full_s, full_steps, _ = timed_build(client, dockerfile, ctx, nocache=True)
        console.print("  full build: %.1f s, %d steps" % (full_s, len(full_steps)))
    with tempfile.TemporaryDirectory(prefix="chexstack-bench-") as tmp:
        rebuild_s, steps, image_id = timed_build(client, dockerfile, with_changed_trainer(ctx, Path(tmp)),
                                                 nocache=False)
    start = time.monotonic()
    verified = compare(stack, probe_image(client, image_id)).ok
    verify_s = time.monotonic() - start
    rebuilt = [s for s in steps if not s[1] and not s[0].split(" : ", 1)[1].startswith(("FROM", "LABEL"))]
    cached = sum(1 for s in steps if s[1])
    console.print("  trainer-only rebuild: %.1f s; %d of %d steps from the cache; rebuilt: %s"
                  % (rebuild_s, cached, len(steps), "; ".join(s[0].split(" : ", 1)[1][:60] for s in rebuilt)),
                  soft_wrap=True)
    console.print("  verification of the rebuilt image (probe inside, not part of the ratio): %.1f s, %s"
                  % (verify_s, "all rows match" if verified else "MISMATCH"))
    if full_s is not None:
        console.print("[bold]ratio full / trainer-only: %.1fx[/] (%.1f s / %.1f s)" % (full_s / rebuild_s, full_s,
                                                                                     rebuild_s))
    ok = rebuild_s <= GOAL_S
    console.print("goal trainer-only rebuild <= %.0f s: %s" % (GOAL_S, "met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
