"""Equivalence harness: build a Singularity/Apptainer definition the way Apptainer does, inside Docker containers
from the same base images (no Apptainer is installable here), and compare the result with the Docker build of the
same recipe.

Emulated (Apptainer user guide, "Definition Files" and "Build Environment"; Apptainer's ``internal/pkg/build/files``):

- each stage starts from its ``From:`` image, which must be in the local engine (``docker-daemon:`` semantics);
  the base image's ENV is written to ``/.singularity.d/env/10-docker2singularity.sh``;
- ``%setup`` runs under ``/bin/sh -e`` with ``SINGULARITY_ROOTFS=APPTAINER_ROOTFS=/``;
- ``%files``: every line ``SRC [DST]`` from the build context (globs expanded), the parent of DST created, then
  ``/bin/cp -fLr SRC... DST`` (so as root: owner root, mode masked by the umask 022, symlinks followed), all before
  ``%post`` (``CopyFromHost``);
- ``%files from STAGE``: ``SRC`` resolved in the stage's filesystem (a link named as SRC is followed there), DST's
  parent created, an existing folder DST gets SRC's name inside it, then copied as moby's ``CopyWithTar`` copies
  (``CopyFromStage``, Singularity >= 3.5.3 and Apptainer): owners, modes and symbolic links inside kept as they are, also before ``%post``;
- ``%post`` (same-named sections concatenated in order) runs as ``/bin/sh -e`` (or ``%post -c SHELL``) with a
  clean environment (``PATH`` Apptainer's default, ``HOME=/root``): no ``%environment``, no base ENV unless sourced;
- ``%environment`` -> ``/.singularity.d/env/90-environment.sh``, ``%runscript``/``%startscript`` ->
  ``/.singularity.d/runscript``/``startscript`` (``#!/bin/sh``); no ``%runscript``: one made from the base image's
  ENTRYPOINT/CMD, as Apptainer does for docker bootstraps; ``%labels`` -> ``/.singularity.d/labels.json``;
  ``%test`` runs at the end of the build, in the run-time environment.
- ``run ARGS`` / ``exec ARGV``: a clean environment, every ``/.singularity.d/env/*.sh`` sourced in name order,
  then the runscript with ARGS, or ARGV.

Not emulated (limits of a Docker emulation, none of which a definition can change): the host's environment and
home folder and current directory passed into ``run``/``exec`` (compared here with a clean environment and ``/``),
the invoking user (everything runs as root, as ``apptainer build`` does), the read-only SIF and the host bind
mounts, ``%setup`` running on the host, Apptainer's own ``/.singularity.d`` files and variables (``APPTAINER_*``,
``PS1``), globs in ``%files from`` sources.

``Emulator(client, context).build(definition) -> Built(image, stages)``; ``run_docker``/``run_emulated`` give
``(exit status, output)``; ``file_tree``, ``run_env`` and ``compare_images`` return the comparisons (``Difference``
rows). Containers and intermediate images are named ``chexstack-harness-*`` and removed by ``Built.remove()``.
"""
from __future__ import annotations

import glob
import io
import json
import logging
import os
import re
import shlex
import tarfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import docker
import docker.errors

from chexstack.errors import ChexstackError

log = logging.getLogger(__name__)
APPTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SOURCE_ENV = 'for f in /.singularity.d/env/*.sh; do [ -f "$f" ] && . "$f"; done'
#: Paths the engine or the harness manages, never part of either image's recipe.
NOT_COMPARED = ("/proc", "/sys", "/dev", "/.singularity.d", "/etc/hostname", "/etc/hosts", "/etc/resolv.conf",
                "/.dockerenv")
#: The ``Difference.what`` of a symlink that Apptainer's ``%files`` from the build context (``cp -fLr``) copied as
#: what it points to.
FOLLOWED = "symlink followed by %files "
#: Variables the runtimes set themselves.
ENV_NOT_COMPARED = {"HOSTNAME", "PWD", "SHLVL", "_", "OLDPWD"}


@dataclass
class Section:
    name: str
    args: str
    lines: list[str]


@dataclass
class Stage:
    header: dict[str, str]
    sections: list[Section] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.header.get("stage", "")

    def body(self, name: str) -> list[str]:
        return [l for s in self.sections if s.name == name for l in s.lines]


def parse_definition(text: str) -> list[Stage]:
    """The stages of a definition: header keys (lower case) and sections in order."""
    stages: list[Stage] = []
    section: Section | None = None
    for raw in text.splitlines():
        line = raw.rstrip("\n")
        key = re.match(r"^\s*(Bootstrap|From|Stage|Include|Registry|Namespace)\s*:\s*(.*?)\s*$", line, re.I)
        if key and (section is None or key.group(1).lower() == "bootstrap"):
            if key.group(1).lower() == "bootstrap":
                stages.append(Stage({}))
                section = None
            if not stages:
                raise ChexstackError("definition: %r before Bootstrap:" % line)
            stages[-1].header[key.group(1).lower()] = key.group(2)
            continue
        m = re.match(r"^%(\w+)\s*(.*)$", line)
        if m and stages:
            section = Section(m.group(1).lower(), m.group(2).strip(), [])
            stages[-1].sections.append(section)
        elif section is not None:
            section.lines.append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            raise ChexstackError("definition: %r outside any section" % line)
    for st in stages:
        if st.header.get("bootstrap", "").lower() != "docker" or not st.header.get("from"):
            raise ChexstackError("definition: the harness emulates `Bootstrap: docker` stages with a From: image")
    return stages


def _quote_env(name: str, value: str) -> str:
    return "export %s=%s" % (name, shlex.quote(value))


@dataclass
class Built:
    image: str
    stages: dict[str, str]
    client: docker.DockerClient
    kept: set = field(default_factory=set)  # reused images, never removed

    def remove(self) -> None:
        for image in (set(self.stages.values()) | {self.image}) - {""} - self.kept:
            try:
                self.client.images.remove(image, force=True, noprune=False)
            except docker.errors.APIError:
                pass


class BuildFailed(ChexstackError):
    def __init__(self, what: str, output: str):
        tail = "\n".join(output.strip().splitlines()[-30:])
        super().__init__("emulated apptainer build failed at %s\n--- end of its output ---\n%s" % (what, tail),
                         exit_code=1)


class Emulator:
    """Builds a definition as Apptainer would (see the module docstring)."""

    def __init__(self, client: docker.DockerClient, context: Path):
        self.client, self.context = client, Path(context)

    def build(self, definition: str, reuse: dict[str, str] | None = None) -> Built:
        """The emulated image of ``definition``. ``reuse`` maps a stage name to an image taken as that stage's
        result instead of building it (its %post is then not emulated: say so wherever the result is reported)."""
        stages = parse_definition(definition)
        built = Built("", {}, self.client)
        try:
            for i, st in enumerate(stages):
                if st.name in (reuse or {}):
                    built.stages[st.name] = built.image = self.client.images.get(reuse[st.name]).id
                    built.kept.add(built.image)
                    continue
                try:
                    image = self._stage(st, built)
                except docker.errors.APIError:  # the container was removed under us (a shared engine): once more
                    image = self._stage(st, built)
                built.stages[st.name or "stage%d" % i] = image
                built.image = image
        except Exception:
            built.remove()
            raise
        return built

    # --- one stage --------------------------------------------------------------------------------------------
    def _stage(self, st: Stage, built: Built) -> str:
        base = st.header["from"]
        try:
            config = self.client.images.get(base).attrs["Config"] or {}
        except docker.errors.ImageNotFound:
            raise ChexstackError("emulated build: From: %s is not in the local engine (the harness builds from "
                                 "local images only)" % base) from None
        name = "chexstack-harness-%s" % uuid.uuid4().hex[:12]
        box = self.client.containers.run(base, ["infinity"], entrypoint=["sleep"], detach=True, name=name,
                                         network_mode="host", user="0")
        try:
            env = [_quote_env(*e.split("=", 1)) for e in config.get("Env") or []]
            self._write(box, "/.singularity.d/env/10-docker2singularity.sh", "#!/bin/sh\n" + "\n".join(env) + "\n")
            clock = _Phases()
            self._sh(box, "\n".join(st.body("setup")), "%setup",
                     env={"SINGULARITY_ROOTFS": "/", "APPTAINER_ROOTFS": "/"})
            for section in st.sections:
                if section.name == "files":
                    self._files(box, section, built)
            clock("stage %s: %%setup, %%files" % st.name)
            posts = [s for s in st.sections if s.name == "post"]
            shell = next((re.sub(r"^-c\s+", "", s.args) for s in posts if s.args.startswith("-c")), "/bin/sh")
            self._sh(box, "\n".join(st.body("post")), "%post", shell=shell)
            clock("stage %s: %%post" % st.name)
            self._metadata(box, st, config)
            if st.body("test"):
                self._sh(box, SOURCE_ENV + "\n" + "\n".join(st.body("test")), "%test")
            image = box.commit(changes=['ENTRYPOINT []', 'CMD ["/bin/sh"]']).id
            clock("stage %s: commit" % st.name)
        finally:
            try:
                box.remove(force=True)
            except docker.errors.APIError:
                pass
        return image

    def _metadata(self, box, st: Stage, config: dict) -> None:
        env = "\n".join(st.body("environment"))
        self._write(box, "/.singularity.d/env/90-environment.sh", "#!/bin/sh\n%s\n" % env)
        runscript = st.body("runscript")
        if not any(s.name == "runscript" for s in st.sections):
            runscript = _docker_runscript(config)
        self._write(box, "/.singularity.d/runscript", "#!/bin/sh\n%s\n" % "\n".join(runscript), mode=0o755)
        if any(s.name == "startscript" for s in st.sections):
            self._write(box, "/.singularity.d/startscript", "#!/bin/sh\n%s\n" % "\n".join(st.body("startscript")),
                        mode=0o755)
        labels = {}
        for line in st.body("labels"):
            if line.strip():
                key, _, value = line.strip().partition(" ")
                labels[key] = value.strip()
        self._write(box, "/.singularity.d/labels.json", json.dumps(labels, indent=1, sort_keys=True) + "\n")

    def _files(self, box, section: Section, built: Built) -> None:
        origin = re.match(r"^from\s+(\S+)$", section.args)
        if section.args and not origin:
            raise ChexstackError("definition: %%files %s: expected `%%files` or `%%files from STAGE`" % section.args)
        for line in section.lines:
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            src, dst = parts[0], (parts[1] if len(parts) > 1 else parts[0])
            inbox = "/.chexstack-harness-in-%s" % uuid.uuid4().hex[:8]
            self._exec(box, ["mkdir", "-p", inbox], "%%files %s" % line)
            if origin:
                name = self._from_stage(box, built, origin.group(1), src, inbox, line)
                script = _place_from_stage("%s/%s" % (inbox, name), dst, src.split("/")[-1])
            else:
                names = self._from_context(box, src, inbox, line)
                paths = " ".join(shlex.quote("%s/%s" % (inbox, n)) for n in names)
                parent = dst if len(names) > 1 else os.path.dirname(dst.rstrip("/")) or "/"
                script = "mkdir -p %s\n/bin/cp -fLr %s %s" % (shlex.quote(parent), paths, shlex.quote(dst))
            self._sh(box, "%s\nrm -rf %s" % (script, shlex.quote(inbox)), "%%files %s" % line)

    def _from_context(self, box, src: str, inbox: str, line: str) -> list[str]:
        matches = sorted(glob.glob(str(self.context / src)))
        if not matches:
            raise BuildFailed("%%files %s" % line, "no such file in the build context %s: %s" % (self.context, src))
        buf = io.BytesIO()
        names = []
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for i, path in enumerate(matches):
                name = "%d/%s" % (i, os.path.basename(path.rstrip("/")))
                tar.add(path, arcname=name, filter=_root_owned)
                names.append(name)
        box.put_archive(inbox, buf.getvalue())
        return names

    def _from_stage(self, box, built: Built, stage: str, src: str, inbox: str, line: str) -> str:
        """``src`` of the stage's result, as it is there (owners, modes, links, times), put under ``inbox``; a
        symbolic link named as ``src`` (or on its way) is resolved in the stage's filesystem first, as Apptainer's
        ``CopyFromStage`` does. Returns the name of what is in ``inbox``."""
        if stage not in built.stages:
            raise BuildFailed("%%files %s" % line, "no earlier stage %s" % stage)
        if re.search(r"[*?\[]", src):
            raise ChexstackError("definition: %%files from %s: %s: the harness does not expand globs in a stage's "
                                 "sources" % (stage, line.strip()))
        holder = self.client.containers.create(built.stages[stage], ["true"], name="chexstack-harness-%s"
                                               % uuid.uuid4().hex[:12])
        try:
            stream, stat = holder.get_archive(src)
            if stat.get("linkTarget"):  # Docker gives the link fully resolved inside the container
                stream, stat = holder.get_archive(stat["linkTarget"])
            box.put_archive(inbox, stream)  # streamed: a stage's folder may be gigabytes
        except docker.errors.NotFound:
            raise BuildFailed("%%files %s" % line, "no %s in stage %s" % (src, stage)) from None
        finally:
            holder.remove(force=True)
        return stat["name"]

    # --- container primitives ---------------------------------------------------------------------------------
    def _write(self, box, path: str, text: str, mode: int = 0o644) -> None:
        self._exec(box, ["mkdir", "-p", os.path.dirname(path)], path)
        box.put_archive(os.path.dirname(path), _tar_of(os.path.basename(path), text.encode(), mode))

    def _exec(self, box, argv: list[str], what: str, env: dict | None = None) -> str:
        code, out = box.exec_run(argv, environment=env or {}, user="0", workdir="/")
        text = (out or b"").decode("utf-8", "replace")
        if code != 0:
            raise BuildFailed(what, "%s\n(exit status %d)" % (text, code))
        return text

    def _sh(self, box, script: str, what: str, shell: str = "/bin/sh", env: dict | None = None) -> None:
        if not script.strip():
            return
        path = "/.chexstack-harness-script"
        self._write(box, path, script + "\n", mode=0o700)
        clean = ["env", "-i", "PATH=%s" % APPTAINER_PATH, "HOME=/root", "TERM=dumb"]
        clean += ["%s=%s" % kv for kv in (env or {}).items()]
        try:
            self._exec(box, clean + shlex.split(shell) + ["-e", path], what)
        finally:
            box.exec_run(["rm", "-f", path], user="0")


def _place_from_stage(staged: str, dst: str, name: str) -> str:
    """The shell commands that put ``staged`` (a stage's file or folder as the stage has it) at ``dst`` as
    Apptainer's ``CopyFromStage`` does (internal/pkg/build/files/copy.go): DST's parent made (DST itself when it ends
    in ``/``), an existing folder DST gets ``name`` (the source's own name) inside it; then moby's ``CopyWithTar``:
    a folder's contents go into DST (made ``0755`` root when absent), a file to DST, with their owners, modes, times
    and symbolic links as they are (Singularity >= 3.5.3: links inside are never followed). ``staged`` is on the
    same filesystem: a folder that DST does not hold yet is moved (renamed), not copied again."""
    q = shlex.quote
    return "\n".join([
        "s=%s; d=%s" % (q(staged), q(dst)),
        'if [ ! -e "$d" ]; then case "$d" in */) mkdir -p "$d" ;; *) mkdir -p "$(dirname "$d")" ;; esac; fi',
        'if [ -d "$d" ]; then d="${d%%/}/"%s; fi' % q(name),
        'if [ -d "$s" ] && [ -e "$d" ]; then find "$s" -mindepth 1 -maxdepth 1 -exec cp -af {} "$d"/ \\;',
        'elif [ -d "$s" ]; then mv "$s" "$d" && chown 0:0 "$d" && chmod 0755 "$d" && touch "$d"',
        'else mv -f "$s" "$d"; fi'])


def _tar_of(name: str, data: bytes, mode: int) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size, info.mode = len(data), mode
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _docker_runscript(config: dict) -> list[str]:
    """The runscript Apptainer makes for a docker bootstrap without %runscript: ENTRYPOINT + (args or CMD)."""
    entry, cmd = config.get("Entrypoint") or [], config.get("Cmd") or []
    lines = ['if [ "$#" -eq 0 ]; then set -- %s; fi' % shlex.join(cmd)] if cmd else []
    return lines + ["exec %s \"$@\"" % shlex.join(entry) if entry else 'exec "$@"']


# --- running both ways -----------------------------------------------------------------------------------------
def _run(client: docker.DockerClient, image: str, argv: list[str] | None, entrypoint=None, env=None,
         workdir=None, files: dict[str, bytes] | None = None) -> tuple[int, str]:
    for attempt in (1, 2):  # once more when another process removed the container under us (a shared engine)
        name = "chexstack-harness-%s" % uuid.uuid4().hex[:12]
        box = client.containers.create(image, argv, entrypoint=entrypoint, name=name, network_mode="host",
                                       environment=env, working_dir=workdir)
        try:
            for path, data in (files or {}).items():
                box.put_archive(os.path.dirname(path), _tar_of(os.path.basename(path), data, 0o644))
            box.start()
            code = box.wait(timeout=600)["StatusCode"]
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


def run_docker(client, image: str, args: list[str]) -> tuple[int, str]:
    """``docker run IMAGE ARGS``."""
    return _run(client, image, args or None)


def exec_docker(client, image: str, argv: list[str], files=None) -> tuple[int, str]:
    """``docker run --entrypoint ARGV[0] IMAGE ARGV[1:]`` (the image's environment and WORKDIR)."""
    return _run(client, image, argv[1:], entrypoint=[argv[0]], files=files)


def _clean(script: str, args: list[str]) -> list[str]:
    return ["env", "-i", "PATH=%s" % APPTAINER_PATH, "HOME=/root", "/bin/sh", "-c", SOURCE_ENV + "\n" + script,
            "sh"] + list(args)


def run_emulated(client, image: str, args: list[str]) -> tuple[int, str]:
    """``apptainer run IMAGE ARGS``: clean environment, env files sourced, the runscript with ARGS."""
    return _run(client, image, _clean('exec /bin/sh /.singularity.d/runscript "$@"', args), entrypoint=[],
                workdir="/")


def exec_emulated(client, image: str, argv: list[str], files=None) -> tuple[int, str]:
    """``apptainer exec IMAGE ARGV``."""
    return _run(client, image, _clean('exec "$@"', argv), entrypoint=[], workdir="/", files=files)


# --- comparisons -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Difference:
    what: str
    docker: str
    apptainer: str


LISTING = ("find / -xdev \\( %s \\) -prune -o -printf '%%p\\t%%y\\t%%m\\t%%U\\t%%G\\t%%l\\t%%s\\t%%T@\\n' 2>/dev/null; "
           "echo @@chexstack-env@@; /usr/bin/env -0")
HASHES = "tr '\\n' '\\0' < /.chexstack-harness-paths | xargs -0 -r md5sum"


@dataclass
class Snapshot:
    """An image as a run sees it: path -> (type mode uid gid [link] [size], mtime) and the run-time environment."""

    tree: dict[str, tuple[str, float]]
    env: dict[str, str]


def snapshot(client, image: str, emulated: bool, not_compared=()) -> Snapshot:
    """One run of ``image`` (``exec``, Docker's or the emulated one) listing every path and the environment."""
    skip = " -o ".join("-path %s" % shlex.quote(p) for p in NOT_COMPARED + tuple(not_compared))
    _, out = (exec_emulated if emulated else exec_docker)(client, image, ["/bin/sh", "-c", LISTING % skip])
    listing, _, env = out.partition("@@chexstack-env@@\n")
    tree = {}
    for line in listing.splitlines():
        f = line.split("\t")
        if len(f) == 8:
            tree[f[0]] = (" ".join(x for x in f[1:6] + [f[6] if f[1] == "f" else ""] if x), float(f[7]))
    pairs = [p.split("=", 1) for p in env.split("\0") if "=" in p]
    return Snapshot(tree, {k: v for k, v in pairs if k not in ENV_NOT_COMPARED})


def hashes(client, image: str, emulated: bool, paths: list[str]) -> dict[str, str]:
    """path -> md5 of each of ``paths`` in ``image``."""
    if not paths:
        return {}
    data = ("\n".join(paths) + "\n").encode()
    run = exec_emulated if emulated else exec_docker
    _, out = run(client, image, ["/bin/sh", "-c", HASHES], files={"/.chexstack-harness-paths": data})
    return {line[34:]: line[:32] for line in out.splitlines() if re.match(r"^[0-9a-f]{32}  /", line)}


_BASES: dict[str, Snapshot] = {}


def base_snapshot(client, base: str) -> Snapshot:
    """The base image's snapshot, made once per image ID."""
    image_id = client.images.get(base).id
    if image_id not in _BASES:
        _BASES[image_id] = snapshot(client, image_id, False)
    return _BASES[image_id]


def tree_differences(client, docker_image: str, emulated_image: str, base: str, not_compared=()) -> list:
    """Differences of paths, types, modes, owners, link targets, sizes, and the contents of the regular files under
    2 MiB that either build added or changed relative to ``base``."""
    clock = _Phases()
    a = snapshot(client, docker_image, False, not_compared)
    b = snapshot(client, emulated_image, True, not_compared)
    old = base_snapshot(client, base)
    clock("listings (%d, %d paths)" % (len(a.tree), len(b.tree)))
    newest = max((m for _, m in old.tree.values()), default=0)
    changed = sorted(p for p in set(a.tree) & set(b.tree)
                     if a.tree[p][0] == b.tree[p][0] and a.tree[p][0].startswith("f ")
                     and int(a.tree[p][0].rsplit(" ", 1)[1]) < 2 << 20
                     and (p not in old.tree or old.tree[p][0] != a.tree[p][0] or max(a.tree[p][1], b.tree[p][1]) > newest))
    ha, hb = hashes(client, docker_image, False, changed), hashes(client, emulated_image, True, changed)
    clock("contents (%d files)" % len(changed))
    # a symlink in Docker's image that is a file or folder in Apptainer's: %files copies with `cp -L`; one row for
    # it, none for what its copy holds
    followed = sorted(p for p in a.tree if a.tree[p][0].startswith("l ") and p in b.tree
                      and not b.tree[p][0].startswith("l "))
    inside = tuple(p + "/" for p in followed)
    diffs = [Difference(FOLLOWED + p, a.tree[p][0], b.tree[p][0]) for p in followed]
    diffs += [d for d in diff_maps("file", {p: v[0] for p, v in a.tree.items()}, {p: v[0] for p, v in b.tree.items()})
              if d.what[5:] not in followed and not d.what[5:].startswith(inside)]
    diffs += [d for d in diff_maps("content", ha, hb) if not d.what[8:].startswith(inside)]
    return diffs + diff_maps("env", a.env, b.env)


def diff_maps(what: str, docker_side: dict, apptainer_side: dict) -> list[Difference]:
    out = []
    for key in sorted(set(docker_side) | set(apptainer_side)):
        a, b = docker_side.get(key, "(absent)"), apptainer_side.get(key, "(absent)")
        if a != b:
            out.append(Difference("%s %s" % (what, key), str(a), str(b)))
    return out


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


def compare_images(client, docker_image: str, emulated_image: str, base: str, runs: list[list[str]] = (),
                   execs: list[list[str]] = (), not_compared=(), labels: bool = True) -> list[Difference]:
    """Every difference between the Docker image and the emulated Apptainer image built from ``base``: file tree and
    contents (``tree_differences``), run-time environment, labels (``%labels`` against the Dockerfile's LABELs and
    MAINTAINER), and the output and exit status of ``run ARGS`` and ``exec ARGV`` for each given case."""
    diffs = tree_differences(client, docker_image, emulated_image, base, not_compared)
    if labels:
        _, text = exec_emulated(client, emulated_image, ["cat", "/.singularity.d/labels.json"])
        diffs += diff_maps("label", labels_of(client, docker_image, base), json.loads(text))
    for args in runs:
        x, y = run_docker(client, docker_image, args), run_emulated(client, emulated_image, args)
        if x != y:
            diffs.append(Difference("run %s" % shlex.join(args), "exit %d: %s" % x, "exit %d: %s" % y))
    for argv in execs:
        x, y = exec_docker(client, docker_image, argv), exec_emulated(client, emulated_image, argv)
        if x != y:
            diffs.append(Difference("exec %s" % shlex.join(argv), "exit %d: %s" % x, "exit %d: %s" % y))
    return diffs


# --- a stack's rendered definition -----------------------------------------------------------------------------
#: Paths whose bytes differ between any two builds of the same recipe: made at build time from randomness or the
#: clock (ssh host keys, logs, caches). Not compared.
BUILD_VARIABLE = ("/etc/ssh/ssh_host_*", "/var/log", "/var/cache", "/var/lib/apt/lists", "/tmp")


@dataclass
class StackReport:
    """The cpu (or another) stack's definition against its Docker image."""

    differences: list[Difference]
    followed: list[str]  # symlinks that Apptainer's %files copies as their targets (also in ``differences``)
    docker_rows: list
    apptainer_rows: list
    apptainer_ok: bool
    reused: list[str]


def probe_emulated(client, image: str) -> dict:
    """The in-image probe's JSON as ``apptainer exec IMAGE python probe.py`` gives it."""
    from images.verify import PROBE
    code, out = exec_emulated(client, image, ["python", PROBE])
    try:
        return json.loads(out[out.index("{"):]) if code == 0 else {"error": "exit %d: %s" % (code, out[-500:])}
    except ValueError:
        return {"error": "probe printed no JSON: %s" % out[-500:]}


def check_stack(client, stack_name: str, base: str, docker_image: str, context_dir: Path,
                reuse: dict[str, str] | None = None, runs: list[list[str]] = (),
                execs: list[list[str]] = (), docker_verification=None) -> StackReport:
    """Build ``invoke render --stack S --format singularity`` as Apptainer would (the build context written to
    ``context_dir``), then compare it with the Docker image: file tree and contents (``BUILD_VARIABLE`` left out),
    run-time environment, every Table 1 row of the in-image probe judged against the manifest, ``run``/``exec``.
    ``docker_verification``: the ``images.verify.Verification`` that ``invoke build`` made of ``docker_image``
    (its Table 1 rows are taken instead of probing that image again); phases and their seconds are logged (INFO)."""
    from envs.manifest import load_stack
    from images import context
    from images.render import build_context, render
    from images.verify import LAUNCH_ROWS, compare, probe_image

    stack = load_stack(stack_name)
    for name, src in context.expand(build_context(stack, base)).items():
        target = Path(context_dir) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(src if isinstance(src, bytes) else src.read_bytes())
        if not isinstance(src, bytes) and src.stat().st_mode & 0o111:
            target.chmod(0o755)
    clock = _Phases()
    built = Emulator(client, Path(context_dir)).build(render(stack, "singularity", base), reuse)
    clock("emulated build")
    try:
        # labels: `invoke build` gives the Docker image its own (BOM, revision), the SIF gets them at `build --runtime`
        diffs = compare_images(client, docker_image, built.image, base, runs, execs, BUILD_VARIABLE, labels=False)
        clock("files, environment, run, exec")
        ours = compare(stack, probe_emulated(client, built.image))
        theirs = docker_verification or compare(stack, probe_image(client, docker_image))
        theirs_rows = [r for r in theirs.rows if r.row not in LAUNCH_ROWS]
        clock("Table 1 probes")
        for a, b in zip(theirs_rows, ours.rows):
            if (a.row, a.found, a.verdict) != (b.row, b.found, b.verdict):
                diffs.append(Difference("Table 1 row %s" % a.row, "%s (%s)" % (a.found, a.verdict),
                                        "%s (%s)" % (b.found, b.verdict)))
        followed = [d.what[len(FOLLOWED):] for d in diffs if d.what.startswith(FOLLOWED)]
        return StackReport(diffs, followed, theirs_rows, ours.rows, ours.ok, sorted(reuse or {}))
    finally:
        built.remove()
        clock("emulated image removed")


class _Phases:
    """Logs the seconds since the last call, named (``logging`` INFO of this module)."""

    def __init__(self):
        self.last = time.monotonic()

    def __call__(self, what: str) -> None:
        now = time.monotonic()
        log.info("%s: %.1f s", what, now - self.last)
        self.last = now
