"""The equivalence proof on the real tool: a Singularity definition built by ``apptainer build`` against the Docker
image of the same recipe.

``build(definition, context, workdir) -> Sandbox``: the definition with every ``Bootstrap: docker`` header rewritten
to ``Bootstrap: docker-daemon`` (``from_local_engine``: there is no registry here; the ``From:`` images are taken
from the local Docker engine through its socket, which the ``apptainer`` wrapper binds in; nothing else of the
definition changes), built with ``apptainer build --sandbox`` in ``context`` (the build context: ``%files`` sources
are relative to it). A sandbox folder, not a SIF: it is the root file system Apptainer assembled, before
``mksquashfs`` packs it unchanged, so its files are read directly from this host (``find -printf``, hashes in
Python) instead of through a container per listing, and the squashing (the slowest step of a SIF build) is left
out; ``apptainer run`` and ``exec`` take the sandbox as they take a SIF
(https://apptainer.org/docs/user/main/build_a_container.html#creating-writable-sandbox-directories).

``compare_images(client, docker_image, sandbox, base, runs, execs) -> [Difference]``: every path (listed as root
in both, whatever the image's USER; type, mode,
owner, group, link target, size; ``NOT_COMPARED`` and Apptainer's own files left out), the contents of the
regular files under 2 MiB that either build added or changed relative to ``base``, the environment of ``exec``
(Apptainer's: ``apptainer exec --cleanenv`` from a host environment holding only ``PATH``, so only the image's
own variables and the runtime's count; the runtime's own, ``RUNTIME_ENV``, are left out), labels (``%labels``
against the Dockerfile's LABELs and MAINTAINER; Apptainer's ``org.label-schema.*`` left out), and the output and
exit status of ``run ARGS`` (``apptainer run --cleanenv``) and ``exec ARGV`` against ``docker run``.

``check_stack(client, stack, base, docker_image, context_dir, runs, execs, docker_verification) -> StackReport``
builds ``invoke render --stack S --format singularity`` and adds the Table 1 rows of the in-image probe.

``build(..., cache=True)`` (every build of the tests) keeps each stage between runs, as Docker keeps its build cache
across clean checkouts (``cached_build``): a stage is built alone once, kept under ``cache_root()`` by
``stage_key`` (the digest of everything its build reads but the network: its text, its ``From:`` image's ID in the
local engine, the build-context files its ``%files`` name, the stages it copies from, the Apptainer version), and a
later stage reads it as ``Bootstrap: localimage`` of the kept sandbox. A stack's devel stage installs TensorFlow and
Horovod (the cpu stack's takes Horovod's wheel from the build context when the key it computes matches the host's
cached wheel, docs/testing.md "The Horovod wheel cache"; else it compiles Horovod, 5 to 8 minutes on 2 cores): it
is built again only when what it reads changes (the cached wheel among it). Like Docker's cache it does not notice a
package index that moved under an unchanged recipe: that is why the stacks pin every package (``envs/stacks``).

Not compared (Apptainer's runtime, for every image, not a definition's to keep): the invoking user (and so
``HOME`` of an image whose USER is not root: Docker's is that user's), the host's home folder and current folder,
the read-only image, ``/.singularity.d`` and the links Apptainer puts at the root
(``/environment``, ``/singularity``, ``/.exec``, ``/.run``, ``/.shell``, ``/.test``).
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import docker
import docker.errors

from chexstack.errors import ChexstackError
from convert.definition import Definition, Stage
from images.sif import require_tool
from tests.lib.leftovers import TEST_LABELS

log = logging.getLogger(__name__)
#: Paths the engines manage, never part of either image's recipe: Docker's init layer (moby's
#: ``daemon/initlayer``: ``/etc/mtab -> /proc/mounts``, ``/.dockerenv``, the bind-mounted hosts files), then
#: Apptainer's own files.
NOT_COMPARED = ("/proc", "/sys", "/dev", "/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/.dockerenv", "/etc/mtab",
                "/.singularity.d", "/environment", "/singularity", "/.exec", "/.run", "/.shell", "/.test")
#: Variables the runtimes set themselves (Docker: ``HOSTNAME``; both shells: the rest).
ENV_NOT_COMPARED = {"HOSTNAME", "PWD", "SHLVL", "_", "OLDPWD"}
#: What ``apptainer exec --cleanenv`` sets for every image (observed with Apptainer 1.4.5): ``APPTAINER_*`` and
#: ``SINGULARITY_*``, the prompt; ``LD_LIBRARY_PATH`` gets ``/.singularity.d/libs`` appended (``strip_runtime``).
RUNTIME_ENV = re.compile(r"^(APPTAINER_|SINGULARITY_)|^(PS1|PROMPT_COMMAND)$")
RUNTIME_LIBS = "/.singularity.d/libs"
#: Apptainer's own build labels.
RUNTIME_LABEL = "org.label-schema."
BUILD_TIMEOUT_S = 3600
RUN_TIMEOUT_S = 600
#: Every path under a root (``/%P``: the same names for ``/`` in a container and for a sandbox folder here).
LISTING = ("find %s -xdev \\( %s \\) -prune -o -printf '/%%P\\t%%y\\t%%m\\t%%U\\t%%G\\t%%l\\t%%s\\t%%T@\\n' "
           "2>/dev/null")


@dataclass(frozen=True)
class Difference:
    what: str
    docker: str
    apptainer: str


class BuildFailed(ChexstackError):
    def __init__(self, output: str, code: int):
        tail = "\n".join(output.strip().splitlines()[-30:])
        super().__init__("apptainer build failed (exit %d)\n--- end of its output ---\n%s" % (code, tail),
                         exit_code=1)


def from_local_engine(definition: str) -> str:
    """``definition`` with each ``Bootstrap: docker`` stage made ``Bootstrap: docker-daemon`` (the same ``From:``
    image, read from the local engine: https://apptainer.org/docs/user/main/docker_and_oci.html); the rest unchanged
    (``convert.definition``: parse and text are inverse). A definition already all ``docker-daemon`` (``invoke
    convert`` of a base only the local engine holds) is returned as it is. ChexstackError when it has no stage of
    either."""
    parsed = Definition.parse(definition)
    if parsed.stages and all(s.bootstrap.lower() == "docker-daemon" for s in parsed.stages):
        return definition
    return parsed.bootstrapped("docker", "docker-daemon").text()


@dataclass
class Sandbox:
    """A sandbox folder that ``apptainer build --sandbox`` made; ``remove()`` deletes it, unless it is ``cached``
    (kept under ``cache_root()`` for the next build of the same inputs; ``run`` and ``exec`` never write to it:
    no ``--writable``)."""

    path: Path
    cached: bool = False

    def remove(self) -> None:
        if not self.cached:
            shutil.rmtree(self.path, ignore_errors=True)


def cache_bytes() -> int:
    """How many bytes of sandboxes ``build(..., cache=True)`` keeps (the most recently used first; the newest
    always): ``CHEXSTACK_TEST_CACHE_BYTES``, else 8 GiB. A stack's devel stage is ~2 GB, a corpus image ~0.1 GB."""
    return int(os.environ.get("CHEXSTACK_TEST_CACHE_BYTES") or 8 << 30)


def cache_root() -> Path:
    """``CHEXSTACK_TEST_CACHE``, else ``$XDG_CACHE_HOME/chexstack-tests``, else ``~/.cache/chexstack-tests``."""
    if os.environ.get("CHEXSTACK_TEST_CACHE"):
        return Path(os.environ["CHEXSTACK_TEST_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "chexstack-tests"


def _tree_digest(digest, context: Path, path: Path) -> None:
    for item in [path] + (sorted(path.rglob("*")) if path.is_dir() and not path.is_symlink() else []):
        st = item.lstat()
        digest.update(("%s\0%o\0" % (item.relative_to(context), st.st_mode)).encode())
        if item.is_symlink():
            digest.update(os.readlink(item).encode() + b"\0")
        elif item.is_file():
            digest.update(hashlib.sha256(item.read_bytes()).hexdigest().encode() + b"\0")


def copied_from(stage) -> list[str | None]:
    """The stages ``stage`` copies from, one per ``%files from S`` section (None where the section's arguments are
    not ``from S``); not the plain ``%files`` sections."""
    return [(words[1] if len(words) == 2 else None) for words in (s.args.split() for s in stage.section("files"))
            if words[:1] == ["from"]]


def stage_key(stage, context: Path, tool_version: str, image_id, keys: dict) -> str | None:
    """SHA-256 (hex) of what ``apptainer build`` reads for ``stage`` (a ``convert.definition.Stage``), the network
    aside: its text, ``tool_version``, ``image_id(From)`` for a ``docker-daemon`` stage, every path under
    ``context`` that its ``%files`` lines name (name, type, mode, link target, contents), and ``keys[S]`` of each
    stage ``S`` it copies from (``%files from S``). None when a ``%files`` line cannot be read or names a stage
    without a key: that stage is not cached."""
    digest = hashlib.sha256()
    digest.update(("%s\0%s\0" % (tool_version, "\n".join(stage.lines()))).encode())
    if stage.bootstrap.lower() == "docker-daemon":
        digest.update(("from %s\0" % image_id(stage.image)).encode())
    for name in copied_from(stage):
        if name not in keys:
            return None
        digest.update(("stage %s %s\0" % (name, keys[name])).encode())
    for section in stage.section("files"):
        if section.args.split()[:1] == ["from"]:
            continue
        for line in section.body:
            try:
                words = shlex.split(line)
            except ValueError:
                return None
            if not words:
                continue
            matches = sorted(context.glob(words[0])) if not os.path.isabs(words[0]) else None
            if not matches:
                return None
            for match in matches:
                _tree_digest(digest, context, match)
    return digest.hexdigest()


def _engine_image_id(name: str) -> str:
    return docker.from_env().images.get(name).id


def _tool_version() -> str:
    return subprocess.run([require_tool(), "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=RUN_TIMEOUT_S, env=_host_env()).stdout.strip()


def _apptainer_build(recipe_text: str, recipe: Path, out: Path, context: Path) -> None:
    recipe.write_text(recipe_text)
    clock = _Phases()
    p = subprocess.run([require_tool(), "build", "--sandbox", str(out), str(recipe)], cwd=context,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=BUILD_TIMEOUT_S,
                       env=_host_env())
    clock("apptainer build --sandbox %s" % out.name)
    if p.returncode != 0:
        shutil.rmtree(out, ignore_errors=True)
        raise BuildFailed(p.stdout, p.returncode)


def cached_build(definition: Definition, context: Path, workdir: Path) -> Sandbox:
    """``definition`` built stage by stage, each stage kept under ``cache_root()/stage-<stage_key>``: a stage
    built before with the same inputs is taken as it is, else it is built alone (with the stages it copies from as
    ``Bootstrap: localimage`` of their kept sandboxes, the way Apptainer reads a sandbox folder) and kept. Apptainer
    keeps no build cache: this is Docker's cache of a step whose inputs did not change. The last stage's sandbox is
    returned (``cached``). A stage that cannot be keyed (``stage_key`` None, or an unnamed stage before the last)
    and every one after it are built as written, once, into ``workdir`` (not cached)."""
    root = cache_root()
    version, keys, stages = _tool_version(), {}, list(definition.stages)
    kept = None
    for i, stage in enumerate(stages):
        last = i == len(stages) - 1
        key = stage_key(stage, context, version, _engine_image_id, keys) if (stage.name or last) else None
        if key is None:
            out = workdir / ("sandbox-%s" % uuid.uuid4().hex[:8])
            _apptainer_build(replace(definition, stages=tuple(stages)).text(), workdir / (out.name + ".def"), out,
                             context)
            return Sandbox(out)
        keys[stage.name] = key
        kept = root / ("stage-" + key)
        if not kept.is_dir():
            root.mkdir(parents=True, exist_ok=True)
            needs = set(copied_from(stage))
            alone = Definition(tuple(s for s in stages[:i] if s.name in needs) + (stage,), definition.preamble)
            # a partial build of its own: two runs (the engine lane and the beside tests) may build one key at once
            partial = root / ("partial-%s-%s" % (key, uuid.uuid4().hex[:8]))
            _apptainer_build(alone.text(), workdir / ("stage-%s.def" % key[:12]), partial, context)
            try:
                partial.rename(kept)
                _size_file(kept).write_text("%d\n" % _tree_bytes(kept))  # measured once, read by every prune
            except OSError:  # the other run kept the same stage first: take that one
                shutil.rmtree(partial, ignore_errors=True)
        os.utime(kept)
        stages[i] = Stage("localimage", str(kept), stage.name, (), stage.keyword, stage.comments)
    _prune_cache(root, cache_bytes())
    return Sandbox(kept, cached=True)


def _tree_bytes(path: Path) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        total += sum(os.lstat(os.path.join(folder, f)).st_size for f in files)
    return total


def _size_file(kept: Path) -> Path:
    """Beside the sandbox, not in it (its files are compared with the Docker image's)."""
    return kept.with_name(kept.name + ".bytes")


def _kept_bytes(kept: Path) -> int:
    """The sandbox's size as recorded when it was kept (measured now, and recorded, when it was not)."""
    try:
        return int(_size_file(kept).read_text())
    except (OSError, ValueError):
        size = _tree_bytes(kept)
        _size_file(kept).write_text("%d\n" % size)
        return size


def _prune_cache(root: Path, budget: int) -> None:
    """Removes the least recently used stage sandboxes under ``root`` beyond ``budget`` bytes (the newest stays),
    each with its recorded size."""
    entries = sorted((p for p in root.iterdir() if p.name.startswith("stage-") and p.is_dir()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    used = 0
    for i, path in enumerate(entries):
        used += _kept_bytes(path)
        if i > 0 and used > budget:
            shutil.rmtree(path, ignore_errors=True)
            _size_file(path).unlink(missing_ok=True)


def build(definition: str, context: Path, workdir: Path, cache: bool = False) -> Sandbox:
    """``apptainer build --sandbox`` of ``definition`` (``from_local_engine``) in the build context ``context``,
    into ``workdir/sandbox-<random>``; with ``cache``, stage by stage through ``cached_build`` (an unchanged
    build is not done again). BuildFailed with the end of the build's output when it fails."""
    workdir.mkdir(parents=True, exist_ok=True)
    recipe = Definition.parse(from_local_engine(definition))
    if cache:
        return cached_build(recipe, context, workdir)
    out = workdir / ("sandbox-%s" % uuid.uuid4().hex[:8])
    _apptainer_build(recipe.text(), workdir / (out.name + ".def"), out, context)
    return Sandbox(out)


# --- running both ways -----------------------------------------------------------------------------------------
def _host_env() -> dict[str, str]:
    """The host environment ``apptainer`` is started with: ``PATH`` alone (``--cleanenv`` still passes the
    host's ``TERM`` and ``LANG``: none here to pass)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _apptainer(args: list[str], sandbox: Sandbox) -> tuple[int, str]:
    p = subprocess.run([require_tool(), "-s"] + args, cwd=sandbox.path.parent, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=_host_env(), timeout=RUN_TIMEOUT_S)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def run_apptainer(sandbox: Sandbox, args: list[str]) -> tuple[int, str]:
    """``apptainer run --cleanenv SANDBOX ARGS``: exit status and output (stdout and stderr together)."""
    return _apptainer(["run", "--cleanenv", str(sandbox.path)] + list(args), sandbox)


def exec_apptainer(sandbox: Sandbox, argv: list[str]) -> tuple[int, str]:
    """``apptainer exec --cleanenv SANDBOX ARGV``."""
    return _apptainer(["exec", "--cleanenv", str(sandbox.path)] + list(argv), sandbox)


def _run(client: docker.DockerClient, image: str, argv: list[str] | None, entrypoint=None,
         files: dict[str, bytes] | None = None, user: str | None = None) -> tuple[int, str]:
    for attempt in (1, 2):  # once more when another process removed the container under us (a shared engine)
        box = client.containers.create(image, argv, entrypoint=entrypoint, network_mode="host", labels=TEST_LABELS,
                                       name="chexstack-harness-%s" % uuid.uuid4().hex[:12], user=user)
        try:
            for path, data in (files or {}).items():
                box.put_archive(os.path.dirname(path), _tar_of(os.path.basename(path), data, 0o644))
            box.start()
            code = box.wait(timeout=RUN_TIMEOUT_S)["StatusCode"]
            return code, box.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        except docker.errors.APIError:
            if attempt == 2:
                raise
        finally:
            try:
                box.remove(force=True)
            except docker.errors.APIError:
                pass
    raise AssertionError("unreachable")


def _tar_of(name: str, data: bytes, mode: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), mode
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def run_docker(client, image: str, args: list[str]) -> tuple[int, str]:
    """``docker run IMAGE ARGS``."""
    return _run(client, image, args or None)


def exec_docker(client, image: str, argv: list[str], files=None, user: str | None = None) -> tuple[int, str]:
    """``docker run --entrypoint ARGV[0] IMAGE ARGV[1:]`` (the image's environment and WORKDIR; its USER, or
    ``user``: the listings read the image's files as root, as the sandbox is read here, whatever its USER)."""
    return _run(client, image, argv[1:], entrypoint=[argv[0]], files=files, user=user)


# --- what each image holds -------------------------------------------------------------------------------------
@dataclass
class Snapshot:
    """An image's files: path -> ("type mode uid gid [link] [size]", mtime)."""

    tree: dict[str, tuple[str, float]]


def _prune(root: str, not_compared) -> str:
    return " -o ".join("-path %s" % shlex.quote(root.rstrip("/") + p) for p in NOT_COMPARED + tuple(not_compared))


def _parse_listing(text: str) -> Snapshot:
    tree = {}
    for line in text.splitlines():
        f = line.split("\t")
        if len(f) == 8:
            path = f[0].rstrip("/") or "/"
            tree[path] = (" ".join(x for x in f[1:6] + [f[6] if f[1] == "f" else ""] if x), float(f[7]))
    return Snapshot(tree)


def docker_snapshot(client, image: str, not_compared=()) -> Snapshot:
    """Every path of ``image`` as a container of it lists them (``find / -xdev``)."""
    _, out = exec_docker(client, image, ["/bin/sh", "-c", LISTING % ("/", _prune("/", not_compared))], user="0")
    return _parse_listing(out)


def sandbox_snapshot(sandbox: Sandbox, not_compared=()) -> Snapshot:
    """Every path of the sandbox, listed on this host with the same ``find -printf``."""
    root = str(sandbox.path)
    out = subprocess.run(["/bin/sh", "-c", LISTING % (shlex.quote(root), _prune(root, not_compared))],
                         stdout=subprocess.PIPE, text=True, errors="replace").stdout
    return _parse_listing(out)


def docker_env(client, image: str) -> dict[str, str]:
    """The environment a ``docker run`` of ``image`` starts with (``ENV_NOT_COMPARED`` left out)."""
    _, out = exec_docker(client, image, ["/usr/bin/env", "-0"])
    return _env_of(out)


def sandbox_env(sandbox: Sandbox) -> dict[str, str]:
    """The environment of ``apptainer exec --cleanenv`` (the runtime's own variables left out)."""
    _, out = exec_apptainer(sandbox, ["/usr/bin/env", "-0"])
    env = {k: v for k, v in _env_of(out).items() if not RUNTIME_ENV.search(k)}
    libs = [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p and p != RUNTIME_LIBS]
    env.pop("LD_LIBRARY_PATH", None)
    if libs:
        env["LD_LIBRARY_PATH"] = ":".join(libs)
    return env


def _env_of(out: str) -> dict[str, str]:
    pairs = [p.split("=", 1) for p in out.split("\0") if "=" in p]
    return {k: v for k, v in pairs if k not in ENV_NOT_COMPARED}


HASHES = "tr '\\n' '\\0' < /.chexstack-harness-paths | xargs -0 -r md5sum"
#: Contents that record the day or second a build made them, not what the recipe made; compared with that field
#: left out, each as (path pattern, the same filter in sh for a container, in Python for a sandbox):
#: - a ``.pyc`` header's bytes 8-12: its source file's mtime (timestamp-based pycs; a hash-based pyc's first half of
#:   the source hash) (PEP 552, https://peps.python.org/pep-0552/): Docker and Apptainer unpack and pip-compile at
#:   different seconds;
#: - ``/etc/shadow``'s third field: the day of the last password change (shadow(5)), the day ``useradd`` or
#:   ``adduser`` ran in a package's postinst: a cached Docker layer keeps the day it was built;
#: - a wheel's ``*.dist-info/RECORD``'s hash column (``path,sha256=<digest>,size``, PyPA "Recording installed
#:   projects": https://packaging.python.org/en/latest/specifications/recording-installed-packages/): the harness
#:   compares every file RECORD lists itself, a pyc without its mtime, a file of 2 MiB or more by size (RECORD's size
#:   column stays compared). Seen on the cpu stack (2026-12-04): Horovod compiled in Docker's devel stage and again
#:   in Apptainer's, Horovod's RECORD was the one difference (every file under 2 MiB it lists matched, the libraries'
#:   sizes too: a C++ build is not bit-reproducible without fixed build paths and timestamps).
STAMPED = (
    (re.compile(r"\.pyc$"), "*.pyc", '{ head -c 8 "$p"; tail -c +13 "$p"; }', lambda data: data[:8] + data[12:]),
    (re.compile(r"^/etc/shadow-?$"), "/etc/shadow|/etc/shadow-", "sed -E 's/^([^:]*:[^:]*:)[0-9]*:/\\1:/' \"$p\"",
     lambda data: re.sub(rb"(?m)^([^:\n]*:[^:\n]*:)[0-9]*:", rb"\1:", data)),
    (re.compile(r"\.dist-info/RECORD$"), "*.dist-info/RECORD", "sed -E 's/,sha256=[A-Za-z0-9_=-]*,/,,/' \"$p\"",
     lambda data: re.sub(rb",sha256=[A-Za-z0-9_=-]*,", b",,", data)),
)
#: ``md5  path`` of each path in /.chexstack-harness-stamped through its ``STAMPED`` filter (sh).
STAMPED_HASHES = ('while IFS= read -r p; do case "$p" in %s *) continue;; esac; echo "${h%%%% *}  $p"; '
                  "done < /.chexstack-harness-stamped" % " ".join("%s) h=$(%s | md5sum);;" % (glob, sh)
                                                                for _, glob, sh, _ in STAMPED))


def stamp_filter(path: str):
    """The Python filter of the ``STAMPED`` entry whose pattern matches ``path``, or None."""
    return next((entry[3] for entry in STAMPED if entry[0].search(path)), None)


def docker_hashes(client, image: str, paths: list[str]) -> dict[str, str]:
    """path -> md5 of each of ``paths`` in ``image`` (a ``STAMPED`` path's through its filter)."""
    if not paths:
        return {}
    plain = [p for p in paths if not stamp_filter(p)]
    stamped = [p for p in paths if stamp_filter(p)]
    files = {"/.chexstack-harness-paths": ("\n".join(plain) + "\n").encode(),
             "/.chexstack-harness-stamped": ("\n".join(stamped) + "\n").encode()}
    script = HASHES + ("; " + STAMPED_HASHES if stamped else "")
    _, out = exec_docker(client, image, ["/bin/sh", "-c", script], files=files, user="0")
    return {line[34:]: line[:32] for line in out.splitlines() if re.match(r"^[0-9a-f]{32}  /", line)}


def sandbox_hashes(sandbox: Sandbox, paths: list[str]) -> dict[str, str]:
    """path -> md5 of each of ``paths`` (regular files) in the sandbox (a ``STAMPED`` path's through its filter)."""
    out = {}
    for p in paths:
        with open(sandbox.path / p.lstrip("/"), "rb") as f:
            data = f.read()
        keep = stamp_filter(p)
        out[p] = hashlib.md5(keep(data) if keep else data).hexdigest()
    return out


_BASES: dict[str, Snapshot] = {}


def base_snapshot(client, base: str) -> Snapshot:
    """The base image's snapshot, made once per image ID."""
    image_id = client.images.get(base).id
    if image_id not in _BASES:
        _BASES[image_id] = docker_snapshot(client, image_id)
    return _BASES[image_id]


# --- comparisons -----------------------------------------------------------------------------------------------
def diff_maps(what: str, docker_side: dict, apptainer_side: dict) -> list[Difference]:
    out = []
    for key in sorted(set(docker_side) | set(apptainer_side)):
        a, b = docker_side.get(key, "(absent)"), apptainer_side.get(key, "(absent)")
        if a != b:
            out.append(Difference("%s %s" % (what, key), str(a), str(b)))
    return out


def tree_differences(client, docker_image: str, sandbox: Sandbox, base: str, not_compared=()) -> list[Difference]:
    """Differences of paths, types, modes, owners, link targets, sizes, and of the contents of the regular files
    under 2 MiB that either build added or changed relative to ``base``."""
    clock = _Phases()
    a, b = docker_snapshot(client, docker_image, not_compared), sandbox_snapshot(sandbox, not_compared)
    old = base_snapshot(client, base)
    clock("listings (%d, %d paths)" % (len(a.tree), len(b.tree)))
    newest = max((m for _, m in old.tree.values()), default=0)
    changed = sorted(p for p in set(a.tree) & set(b.tree)
                     if a.tree[p][0] == b.tree[p][0] and a.tree[p][0].startswith("f ")
                     and int(a.tree[p][0].rsplit(" ", 1)[1]) < 2 << 20
                     and (p not in old.tree or old.tree[p][0] != a.tree[p][0]
                          or max(a.tree[p][1], b.tree[p][1]) > newest))
    diffs = diff_maps("file", {p: v[0] for p, v in a.tree.items()}, {p: v[0] for p, v in b.tree.items()})
    diffs += diff_maps("content", docker_hashes(client, docker_image, changed), sandbox_hashes(sandbox, changed))
    clock("contents (%d files)" % len(changed))
    return diffs


def labels_of(client, docker_image: str, base: str) -> dict[str, str]:
    """The labels a Dockerfile gave ``docker_image`` (the base image's left out), with MAINTAINER's ``Author``."""
    config = client.images.get(docker_image).attrs
    own = dict(config["Config"].get("Labels") or {})
    for key, value in (client.images.get(base).attrs["Config"].get("Labels") or {}).items():
        if own.get(key) == value:
            del own[key]
    if config.get("Author"):
        own["Author"] = config["Author"]
    return own


def sandbox_labels(sandbox: Sandbox, client, base: str) -> dict[str, str]:
    """The sandbox's labels (``/.singularity.d/labels.json``) without Apptainer's ``org.label-schema.*`` and those
    it took from the base image unchanged."""
    found = json.loads((sandbox.path / ".singularity.d" / "labels.json").read_text())
    inherited = client.images.get(base).attrs["Config"].get("Labels") or {}
    return {k: v for k, v in found.items() if not k.startswith(RUNTIME_LABEL) and inherited.get(k) != v}


def compare_images(client, docker_image: str, sandbox: Sandbox, base: str, runs: list[list[str]] = (),
                   execs: list[list[str]] = (), not_compared=(), labels: bool = True) -> list[Difference]:
    """Every difference between the Docker image and the Apptainer sandbox built from ``base`` (module
    docstring)."""
    diffs = tree_differences(client, docker_image, sandbox, base, not_compared)
    docker_side, apptainer_side = docker_env(client, docker_image), sandbox_env(sandbox)
    user = client.images.get(docker_image).attrs["Config"].get("User") or ""
    if user.partition(":")[0] not in ("", "root", "0"):  # HOME is the runtime user's: USER's, the invoking one's
        docker_side.pop("HOME", None)
        apptainer_side.pop("HOME", None)
    diffs += diff_maps("env", docker_side, apptainer_side)
    if labels:
        diffs += diff_maps("label", labels_of(client, docker_image, base), sandbox_labels(sandbox, client, base))
    clock = _Phases()
    for args in runs:
        x, y = run_docker(client, docker_image, args), run_apptainer(sandbox, args)
        if x != y:
            diffs.append(Difference("run %s" % shlex.join(args), "exit %d: %s" % x, "exit %d: %s" % y))
    for argv in execs:
        x, y = exec_docker(client, docker_image, argv), exec_apptainer(sandbox, argv)
        if x != y:
            diffs.append(Difference("exec %s" % shlex.join(argv), "exit %d: %s" % x, "exit %d: %s" % y))
    clock("environment, labels, %d run and %d exec cases" % (len(runs), len(execs)))
    return diffs


def explain(diffs: list[Difference], limit: int = 40) -> str:
    """The differences, one a line, for an assertion message."""
    return "\n".join("%s: docker %r, apptainer %r" % (d.what, d.docker, d.apptainer) for d in diffs[:limit])


# --- a stack's rendered definition -----------------------------------------------------------------------------
#: Paths whose bytes differ between any two builds of the same recipe: made at build time from randomness or the
#: clock (ssh host keys, logs, caches). Not compared.
BUILD_VARIABLE = ("/etc/ssh/ssh_host_*", "/var/log", "/var/cache", "/var/lib/apt/lists", "/tmp")


@dataclass
class StackReport:
    """A stack's definition against its Docker image."""

    differences: list[Difference]
    docker_rows: list
    apptainer_rows: list
    apptainer_ok: bool


def check_stack(client, stack_name: str, base: str, docker_image: str, context_dir: Path,
                runs: list[list[str]] = (), execs: list[list[str]] = (), docker_verification=None) -> StackReport:
    """Build ``invoke render --stack S --format singularity`` with ``apptainer build`` (the build context written
    to ``context_dir``), then compare it with the Docker image: files (``BUILD_VARIABLE`` left out), environment,
    ``run``/``exec``, and every Table 1 row of the in-image probe (``images.sif.probe_sif`` on the sandbox) judged
    against the manifest. ``docker_verification``: the ``images.verify.Verification`` that ``invoke build`` made of
    ``docker_image`` (its rows are taken instead of probing that image again)."""
    from envs.manifest import load_stack
    from images import context
    from images.render import build_context, render
    from images.sif import probe_sif
    from images.verify import LAUNCH_ROWS, compare, probe_image

    stack = load_stack(stack_name)
    for name, src in context.expand(build_context(stack, base)).items():
        target = Path(context_dir) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(src if isinstance(src, bytes) else src.read_bytes())
        if not isinstance(src, bytes) and src.stat().st_mode & 0o111:
            target.chmod(0o755)
    sandbox = build(render(stack, "singularity", base), Path(context_dir), Path(context_dir).parent / "apptainer",
                    cache=True)
    try:
        # labels: `invoke build` gives the Docker image its own (BOM, revision), the SIF gets them at `build --runtime`
        diffs = compare_images(client, docker_image, sandbox, base, runs, execs, BUILD_VARIABLE, labels=False)
        clock = _Phases()
        ours = compare(stack, probe_sif(sandbox.path))
        theirs = docker_verification or compare(stack, probe_image(client, docker_image))
        theirs_rows = [r for r in theirs.rows if r.row not in LAUNCH_ROWS]
        clock("Table 1 probes")
        for a, b in zip(theirs_rows, ours.rows):
            if (a.row, a.found, a.verdict) != (b.row, b.found, b.verdict):
                diffs.append(Difference("Table 1 row %s" % a.row, "%s (%s)" % (a.found, a.verdict),
                                        "%s (%s)" % (b.found, b.verdict)))
        return StackReport(diffs, theirs_rows, ours.rows, ours.ok)
    finally:
        sandbox.remove()


class _Phases:
    """Logs the seconds since the last call, named (``logging`` INFO of this module)."""

    def __init__(self):
        self.last = time.monotonic()

    def __call__(self, what: str) -> None:
        now = time.monotonic()
        log.info("%s: %.1f s", what, now - self.last)
        self.last = now
