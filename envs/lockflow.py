"""``invoke lock``: lock a stack's conda environment, check it for drift, or check an installed environment.

One function per mode, each printing through the shared console and returning the exit code
(0 fit, 1 not fit: drift, no lock, missing packages, a lock without a GPU TensorFlow). Could-not-run problems
(no solver, channels unreachable, bad input) raise ChexstackError (exit 2).
"""
from __future__ import annotations

import sys
from pathlib import Path

from rich.markup import escape

from chexstack.console import console
from chexstack.errors import ChexstackError
from chexstack.inputs import read_text
from chexstack.tools import run_checked
from envs import lock as L
from envs.installed import LISTING_NAMES, check_installed, lock_pins, parse_installed_json, spec_pins
from envs.lockcontent import expected_cudatoolkit, gpu_lock_problems
from envs.manifest import known_stacks, load_stack

KINDS = ("lock", "explicit")


def lock_stack(stack: str, platforms: list[str] | None = None, check: bool = False, kind: str = "lock",
               conda_exe: str | None = None, installed: str | None = None) -> int:
    """Dispatch ``invoke lock`` to its mode; returns the exit code."""
    files = L.conda_files(stack)
    if kind not in KINDS:
        raise ChexstackError("--kind: expected one of %s, got %r" % (", ".join(KINDS), kind))
    if installed:
        return check_installed_file(files, Path(installed), (platforms or [None])[0])
    if check:
        return check_drift(files)
    if kind == "explicit":
        return render_explicit(files, platforms)
    return lock_and_verify(files, platforms, conda_exe)


def check_drift(files: L.CondaFiles) -> int:
    result = L.check_lock(files)
    style = "green" if result.ok else "bold red"
    console.print("[%s]%s[/] %s: %s" % (style, "OK" if result.ok else result.status.upper(), files.stack,
                                        L.shown(files.lockfile)), soft_wrap=True)
    if result.ok:
        console.print("the lock's content hash matches %s and %s" % (files.environment.name,
                                                                      files.virtual_packages.name))
    for m in result.messages:
        console.print("  " + m, soft_wrap=True)
    return 0 if result.ok else 1


def lock_problems(files: L.CondaFiles) -> list[str]:
    """GPU content assertion (envs.lockcontent) for every platform of the stack's lock; [] for CPU stacks."""
    if files.stack not in known_stacks() or not load_stack(files.stack).gpu:
        return []
    lockfile = L.read_lock(files.lockfile)
    vps = L.read_virtual_packages(files.virtual_packages)
    problems = []
    for platform in lockfile.metadata.platforms:
        spec = L.lock_spec(files, [platform])
        problems += gpu_lock_problems(lockfile, platform, vps.get(platform, {}).get("__cuda"),
                                      expected_cudatoolkit(spec, platform))
    return problems


def lock_and_verify(files: L.CondaFiles, platforms: list[str] | None, conda_exe: str | None) -> int:
    cmd = L.run_lock(files, platforms, conda_exe)
    console.print("ran: %s" % " ".join(cmd), soft_wrap=True)
    problems = lock_problems(files)
    if problems:
        rejected = files.lockfile.with_name(files.lockfile.name + ".rejected")
        files.lockfile.replace(rejected)
        console.print("[bold red]FAIL[/] the solved lock is not fit for a GPU stack (moved to %s):" % L.shown(rejected))
        for p in problems:
            console.print("  " + p, soft_wrap=True)
        return 1
    return check_drift(files)


def render_explicit(files: L.CondaFiles, platforms: list[str] | None) -> int:
    """Explicit per-platform lock files from the unified lock, refused when there are pip requirements."""
    L.refuse_explicit(files)
    if not files.lockfile.is_file():
        raise ChexstackError("no lock yet for stack %s (%s): run `invoke lock --stack %s` first"
                             % (files.stack, L.shown(files.lockfile), files.stack))
    cmd = [sys.executable, "-m", "conda_lock", "render", "--kind", "explicit", str(files.lockfile)]
    for p in platforms or []:
        cmd += ["--platform", p]
    run_checked(cmd, "conda-lock render", timeout=None, cwd=str(files.lockfile.parent), tail_lines=5)
    for f in sorted(files.lockfile.parent.glob("conda-*.lock")):
        console.print("wrote %s" % L.shown(f))
    return 0


def check_installed_file(files: L.CondaFiles, listing: Path, platform: str | None) -> int:
    """Every pinned package of the lock (or, without a lock, of the environment file) present at its version and
    pinned build, every installed package judged by the known-bad pairs of envs/rules.yaml, and the rest named as
    not checked (``envs.installed``)."""
    what = "--installed %s" % listing
    installed, kind = parse_installed_json(read_text(listing, what, "`conda list --json`, `pip list --format=json` "
                                                     "or `pip freeze` output"), what)
    if files.lockfile.is_file():
        lockfile = L.read_lock(files.lockfile)
        platform = platform or lockfile.metadata.platforms[0]
        pins, against = lock_pins(lockfile, platform), L.shown(files.lockfile)
    else:
        spec = L.lock_spec(files)
        platform = platform or spec.platforms[0]
        pins, against = spec_pins(spec, platform), "%s (no lock yet)" % L.shown(files.environment)
    report = check_installed(pins, installed, kind)
    console.print("%s (%s) against %s (%s, %d pins):" % (listing, LISTING_NAMES[kind], against, platform, len(pins)),
                  soft_wrap=True)
    for line in report.lines():
        style = "yellow" if line.startswith(("NOT ", "WARN")) else "green" if line.startswith("PASS") else \
            "default" if line.startswith(" ") else "bold red"
        console.print("[%s]%s[/]" % (style, escape(line)), soft_wrap=True)
    return 0 if report.ok else 1
