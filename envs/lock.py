"""Conda locks for a stack: ``envs/conda/<stack>/{environment.yml, virtual-packages.yml, conda-lock.yml}``.

The pipeline is conda-lock's own (source parser → lock specification → solver → unified lock file):

- ``lock_spec(files)`` builds the lock specification from our environment file with conda-lock's
  ``make_lock_spec`` (channels, platforms, conda and pip dependencies).
- ``content_hashes(files)`` is conda-lock's content hash of that specification together with the stack's explicit
  virtual packages (``virtual-packages.yml``: ``__cuda`` = the stack's CUDA, ``__glibc`` = the base OS's glibc), so
  a lock made on any host is the lock for the cluster (https://github.com/conda/conda-lock/issues/101).
- ``run_lock(files)`` runs the ``conda-lock lock`` CLI with that virtual-package spec; it needs a solver (conda,
  mamba or micromamba) and reachable channels, and fails with a clear ChexstackError otherwise.
- ``check_lock(files)`` compares the committed lock's content hash with the current inputs and names the file that
  changed (``environment.yml`` through conda-lock's ``input_sha`` metadata, ``virtual-packages.yml`` through ours).
- ``refuse_explicit(files)``: an explicit lock turns pip requirements into comments that ``conda create --file``
  ignores (https://github.com/conda/conda-lock/issues/285), so explicit output is refused when the environment has a pip
  section.

The GPU content assertion lives in ``envs.lockcontent``, the post-install check in ``envs.installed``.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from conda_lock.content_hash import backwards_compatible_content_hashes, compute_content_hashes
from conda_lock.lockfile import parse_conda_lock_file
from conda_lock.lockfile.v1.models import InputMeta
from conda_lock.lockfile.v2prelim.models import Lockfile
from conda_lock.models.lock_spec import LockSpecification
from conda_lock.src_parser import make_lock_spec
from conda_lock.virtual_package import VirtualPackageSpec, virtual_package_repo_from_specification
from pydantic import ValidationError

from chexstack.errors import ChexstackError
from chexstack.tools import run
from envs.manifest import validation_error, yaml_mapping

REPO_ROOT = Path(__file__).resolve().parents[1]
CONDA_DIR = Path(__file__).resolve().parent / "conda"
LOCK_NAME = "conda-lock.yml"
#: Offline PyPI→conda name mapping used only to build the specification for hashing. conda-lock consults the
#: mapping there just to name the implicit ``pip`` dependency (``pip`` → ``pip`` in the real mapping too), so the
#: specification, and its hash, equal those of a real ``conda-lock lock`` run with the default online mapping.
OFFLINE_MAPPING = CONDA_DIR / "pypi-mapping.json"
#: Custom metadata key (``conda-lock --mdy``) holding the sha256 of virtual-packages.yml at lock time.
VP_SHA_KEY = "chexstack_virtual_packages_sha256"


@dataclass(frozen=True)
class CondaFiles:
    """The conda files of one stack: inputs (environment, virtual packages) and the unified lock."""

    stack: str
    environment: Path
    virtual_packages: Path
    lockfile: Path


def shown(path: Path) -> str:
    """A path as printed: relative to the repository root when inside it."""
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def conda_stacks(conda_dir: Path = CONDA_DIR) -> list[str]:
    """Stacks that have an ``environment.yml``, sorted."""
    return sorted(p.parent.name for p in conda_dir.glob("*/environment.yml"))


def conda_files(stack: str, conda_dir: Path = CONDA_DIR) -> CondaFiles:
    """Paths of ``stack``'s conda files; ChexstackError listing the stacks that have them if it has none."""
    if not stack:
        raise ChexstackError("no stack given: add --stack NAME; stacks with a conda environment: %s"
                             % (", ".join(conda_stacks(conda_dir)) or "none"))
    d = conda_dir / stack
    files = CondaFiles(stack, d / "environment.yml", d / "virtual-packages.yml", d / LOCK_NAME)
    if not files.environment.is_file():
        raise ChexstackError("stack %r has no conda environment (%s); stacks with one: %s"
                             % (stack, shown(files.environment), ", ".join(conda_stacks(conda_dir)) or "none"))
    if not files.virtual_packages.is_file():
        raise ChexstackError("%s: missing; a lock needs the target's virtual packages (__cuda, __glibc), else "
                             "conda-lock uses the locking host's (https://github.com/conda/conda-lock/issues/101)"
                             % shown(files.virtual_packages))
    return files


def read_virtual_packages(path: Path) -> dict[str, dict[str, str]]:
    """``{platform: {"__cuda": "10.1", ...}}`` from a virtual-packages.yml, validated with conda-lock's model."""
    data = yaml_mapping(path.read_text(), path, "virtual package subdirs")
    try:
        spec = VirtualPackageSpec.model_validate(data)
    except ValidationError as e:
        raise validation_error(path, e) from None
    return {subdir: dict(s.packages) for subdir, s in spec.subdirs.items()}


def read_environment(path: Path) -> dict:
    """The environment file as a mapping; ChexstackError unless it has a ``dependencies`` list."""
    env = yaml_mapping(path.read_text(), path, "environment fields")
    if not isinstance(env.get("dependencies"), list):
        raise ChexstackError("%s: field dependencies: expected a list of conda specs" % shown(path))
    return env


def pip_requirements(path: Path) -> list[str]:
    """The requirements of the environment file's ``pip:`` section (empty when it has none)."""
    reqs: list[str] = []
    for dep in read_environment(path)["dependencies"]:
        if isinstance(dep, dict):
            reqs.extend(str(r) for r in dep.get("pip") or [])
    return reqs


def lock_spec(files: CondaFiles, platforms: list[str] | None = None) -> LockSpecification:
    """conda-lock's lock specification for the stack (platforms from the file unless ``platforms`` is given)."""
    try:
        return make_lock_spec(src_files=[files.environment], platform_overrides=platforms or None,
                              mapping_url=str(OFFLINE_MAPPING))
    except (ValueError, KeyError, TypeError) as e:
        raise ChexstackError("%s: conda-lock cannot read it: %s" % (shown(files.environment), e)) from None


def _platforms_checked(files: CondaFiles, platforms: list[str] | None) -> list[str]:
    spec_platforms = lock_spec(files, platforms).platforms
    declared = read_virtual_packages(files.virtual_packages)
    missing = [p for p in spec_platforms if p not in declared]
    if missing:
        raise ChexstackError("%s: field subdirs: expected virtual packages for platform(s) %s (the lock targets "
                             "them; never rely on the locking host's: https://github.com/conda/conda-lock/issues/101)"
                             % (shown(files.virtual_packages), ", ".join(missing)))
    return spec_platforms


def content_hashes(files: CondaFiles, platforms: list[str] | None = None) -> dict[str, str]:
    """conda-lock's content hash per platform for the current environment file + virtual-packages.yml."""
    platforms = _platforms_checked(files, platforms)
    spec = lock_spec(files, platforms)
    vpr = virtual_package_repo_from_specification(files.virtual_packages)
    return compute_content_hashes(spec, vpr)


def file_sha256(path: Path) -> str:
    """sha256 of an input file exactly as conda-lock's ``--md input_sha`` metadata records it."""
    return InputMeta.get_input_sha256(src_file=path)


def spec_summary(files: CondaFiles, platforms: list[str] | None = None) -> str:
    """The lock specification as text: channels, and per platform the virtual packages, conda and pip
    requirements and conda-lock's content hash (the golden files show what a lock would be made from)."""
    spec = lock_spec(files, platforms)
    vps = read_virtual_packages(files.virtual_packages)
    hashes = content_hashes(files, platforms)
    lines = ["stack: %s" % files.stack, "environment: %s" % shown(files.environment),
             "channels: %s" % ", ".join(c.url for c in spec.channels)]
    for platform in spec.platforms:
        lines.append("platform %s:" % platform)
        lines.append("  virtual packages: %s" % ", ".join("%s=%s" % kv for kv in sorted(vps[platform].items())))
        for manager in ("conda", "pip"):
            deps = sorted((d for d in spec.dependencies[platform] if d.manager == manager), key=lambda d: d.name)
            lines.append("  %s: %s" % (manager, ", ".join(
                "%s %s%s" % (d.name, getattr(d, "version", ""), " [%s]" % d.build if getattr(d, "build", None)
                              else "") for d in deps) or "-"))
        lines.append("  content hash: %s" % hashes[platform])
    return "\n".join(lines) + "\n"


@dataclass
class LockCheck:
    """Result of ``check_lock``: ``status`` "ok", "missing" or "drift"; ``changed`` names the drifted inputs."""

    stack: str
    lockfile: Path
    status: str
    messages: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def read_lock(path: Path) -> Lockfile:
    """Parse a unified lock with conda-lock's models; ChexstackError naming the file if it is not one."""
    try:
        return parse_conda_lock_file(path)
    except (ValidationError, ValueError, yaml.YAMLError) as e:
        raise ChexstackError("%s: not a conda-lock unified lock file: %s"
                             % (shown(path), str(e).splitlines()[0])) from None


def check_lock(files: CondaFiles) -> LockCheck:
    """Is ``files.lockfile`` the lock of the current inputs? Never solves; works without channels."""
    if not files.lockfile.is_file():
        return LockCheck(files.stack, files.lockfile, "missing", [
            "no lock yet for stack %s (%s): run `invoke lock --stack %s` where the conda channels are reachable "
            "(docs/stacks.md, 'Conda locks')" % (files.stack, shown(files.lockfile), files.stack)])
    lock = read_lock(files.lockfile)
    wanted = _platforms_checked(files, None)
    spec = lock_spec(files, sorted(set(wanted) | set(lock.metadata.platforms)))
    vpr = virtual_package_repo_from_specification(files.virtual_packages)
    result = LockCheck(files.stack, files.lockfile, "ok")
    for platform in wanted:
        if platform not in lock.metadata.content_hash:
            result.messages.append("platform %s is not in the lock" % platform)
            continue
        if lock.metadata.content_hash[platform] not in backwards_compatible_content_hashes(spec, vpr, platform):
            result.messages.append("platform %s: the lock's content hash %s… no longer matches the inputs"
                                   % (platform, lock.metadata.content_hash[platform][:12]))
    if not result.messages:
        return result
    result.status = "drift"
    result.changed = _changed_inputs(files, lock)
    if result.changed:
        result.messages.append("changed since the lock: %s; re-lock with `invoke lock --stack %s`"
                               % (", ".join(result.changed), files.stack))
    else:
        result.messages.append("the input files match the lock's recorded hashes (or none were recorded): the lock "
                               "was made differently; re-lock with `invoke lock --stack %s`" % files.stack)
    return result


def _changed_inputs(files: CondaFiles, lock: Lockfile) -> list[str]:
    changed = []
    recorded = {Path(k).name: v.sha256 for k, v in (lock.metadata.inputs_metadata or {}).items()}
    env_sha = recorded.get(files.environment.name)
    if env_sha and env_sha != file_sha256(files.environment):
        changed.append(shown(files.environment))
    vp_sha = (lock.metadata.custom_metadata or {}).get(VP_SHA_KEY)
    if vp_sha and vp_sha != file_sha256(files.virtual_packages):
        changed.append(shown(files.virtual_packages))
    return changed


def refuse_explicit(files: CondaFiles) -> None:
    """ChexstackError when the environment has pip requirements: an explicit lock only comments them out."""
    reqs = pip_requirements(files.environment)
    if reqs:
        raise ChexstackError(
            "%s has pip requirements (%s): an explicit lock file only lists them as `# pip ...` comments and "
            "`conda create --file` installs none of them (https://github.com/conda/conda-lock/issues/285, #161). "
            "Use the unified lock %s with `conda-lock install`."
            % (shown(files.environment), ", ".join(reqs), files.lockfile.name))


def find_solver(conda_exe: str | None = None) -> Path:
    """The conda/mamba/micromamba executable conda-lock will solve with: ``conda_exe``, ``$CONDA_EXE``, or the
    first of micromamba, mamba, conda on PATH. ChexstackError when there is none (conda-lock would otherwise try
    to download one)."""
    for cand in (conda_exe, os.environ.get("CONDA_EXE"), "micromamba", "mamba", "conda"):
        if not cand:
            continue
        path = Path(cand) if Path(cand).is_file() else (Path(shutil.which(cand)) if shutil.which(cand) else None)
        if path:
            return path
    raise ChexstackError("no conda solver: conda-lock needs micromamba, mamba or conda on PATH (or --conda PATH / "
                         "$CONDA_EXE) and reachable channels; lock where both exist (docs/stacks.md, 'Conda locks')")


def lock_command(files: CondaFiles, solver: Path, platforms: list[str], metadata_yaml: Path) -> list[str]:
    """The ``conda-lock lock`` command line for the stack: explicit virtual packages, unified lock, input hashes.

    Both ``input_sha`` and ``input_md5``: conda-lock 4.0 writes a lock with only one of them that its own parser
    then rejects (``InputMeta`` requires both keys, the writer drops the null one)."""
    cmd = [sys.executable, "-m", "conda_lock", "lock", "--file", str(files.environment),
           "--virtual-package-spec", str(files.virtual_packages), "--lockfile", str(files.lockfile),
           "--kind", "lock", "--md", "input_sha", "--md", "input_md5", "--mdy", str(metadata_yaml),
           "--conda", str(solver)]
    if solver.name.startswith("micromamba"):
        cmd.append("--micromamba")
    elif solver.name.startswith("mamba"):
        cmd.append("--mamba")
    for p in platforms:
        cmd += ["--platform", p]
    return cmd


def run_lock(files: CondaFiles, platforms: list[str] | None = None, conda_exe: str | None = None) -> list[str]:
    """Solve and write ``files.lockfile`` with conda-lock; returns the command that ran.

    Raises ChexstackError (no traceback) when conda-lock, a solver or the channels are unavailable, with the end
    of conda-lock's output. The caller checks the lock's content afterwards (``envs.lockcontent``).
    """
    platforms = _platforms_checked(files, platforms)
    solver = find_solver(conda_exe)
    with tempfile.TemporaryDirectory(prefix="chexstack-lock-") as tmp:
        meta = Path(tmp) / "metadata.yml"
        meta.write_text(yaml.safe_dump({VP_SHA_KEY: file_sha256(files.virtual_packages)}))
        cmd = lock_command(files, solver, platforms, meta)
        proc = run(cmd, timeout=None)
    if not proc.ok:
        raise ChexstackError("conda-lock failed for stack %s (%s): %s\nIf the channels (%s) are unreachable "
                             "from this machine, lock where they are (docs/stacks.md, 'Conda locks')."
                             % (files.stack, "exit %d" % proc.rc if proc.rc is not None else proc.why_not(),
                                failure_summary(proc.stderr or proc.stdout), ", ".join(_channels(files))))
    return cmd


def failure_summary(output: str) -> str:
    """The cause in conda-lock's output: the exception line of a traceback, else its last lines."""
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    if any(ln.startswith("Traceback") for ln in lines):
        return lines[-1].strip()
    return "\n".join(lines[-8:]) or "(no output)"


def _channels(files: CondaFiles) -> list[str]:
    return [str(c) for c in read_environment(files.environment).get("channels") or []]
