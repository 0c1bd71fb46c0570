"""Convert an existing Dockerfile to a Singularity/Apptainer definition that builds and runs the same image, or
refuse (``ChexstackError``, exit 2) naming the line, the instruction and why.

The Dockerfile is read by Docker's own parser (BuildKit's ``frontend/dockerfile/parser`` through the ``dockerfile``
package: continuations, comments, the escape directive, flags, JSON forms and heredocs as Docker reads them); the
mapping of each instruction is ours, because spython's (0.3.14; 0.3.15 differs only in the curl flags of ``ADD``
URLs, singularityhub/singularity-cli#229) loses meaning in the ways singularityhub/singularity-cli#187,
singularityhub/singularity-cli#20, singularityhub/singularity-cli#73, singularityhub/singularity-cli#158,
singularityhub/singularity-cli#229, containerbuildsystem/dockerfile-parse#145 record.
Definition semantics (Apptainer user guide, "Definition Files"): ``%files`` is copied before ``%post``, ``%post``
runs under ``/bin/sh -e`` without ``%environment``, ``%environment`` is sourced at run time after the base image's
environment (``/.singularity.d/env/10-docker2singularity.sh``), ``%runscript`` gets the user's arguments as
``"$@"``, ``%startscript`` is what ``instance start`` runs.

Mapping (Dockerfile reference), per instruction:

- ``FROM image [AS name]``: a ``Bootstrap: docker`` stage (unnamed stages are ``stage<index>``, never a name the
  Dockerfile gives: ``_fresh``), ``docker-daemon``
  for an image only the local engine holds (``convert.base``). The stage inherits the base image's config, read from
  the local engine (``convert.base``; ``_inherit``): its ENV resolves the expansions, RUNs go through its SHELL as its
  USER in its WORKDIR, its ENTRYPOINT and CMD make the runscript, its ONBUILD triggers run right after the FROM. A
  base not read: a refusal naming it where the Dockerfile names a variable only the base defines (a sign that it
  depends on the base's SHELL, USER and WORKDIR too: ../shared/cases 52), the value read at build time where
  Apptainer has it (CMD without ENTRYPOINT and WORKDIR without either: the ENTRYPOINT and CMD the bootstrap
  recorded, ``BASE_RUN``), else a warning saying what may differ (``UNREAD_DIFFERS``). ``ARG``s before
  the first ``FROM`` only resolve ``FROM`` and the global ARGs after them (``--build-arg`` overrides). A name
  without a value there (declared without one, or not declared) resolves only in ``${NAME:-word}`` and
  ``${NAME:+word}``, which read empty and unset alike; anything else of it -> error (``_Blank``). ``FROM <alias>``
  of an empty ``FROM image AS alias`` stage is ``FROM image``; ``--platform`` naming the builder
  (``$BUILDPLATFORM``/``$TARGETPLATFORM``) is dropped, a literal one checked at build time; ``FROM <stage>`` with
  instructions and ``scratch`` are refused. The automatic platform ARGs a stage declares get the builder's values
  (``chexstack_platform``).
- ``ARG``: the value (``--build-arg``, default, or the global one) is ``export``ed in ``%post``
(singularityhub/singularity-cli#187); never in
  ``%environment``. An ``ENV`` of the same name wins, as in Docker. Without a value Docker sets no variable (BuildKit's
  ``dispatchArg``): a value the stage has stays, else the name reads the base image's environment, as a name no ARG
  declares (``_Stage.valueless``: a reference for the shell, refused where a literal is needed, naming the ARG).
- ``ENV``: ``export`` in ``%post`` where it stood (singularityhub/singularity-cli#20) and in ``%environment``; values
are expanded as Docker
  does, with what the Dockerfile defines before the instruction (all pairs of one ENV alike); references to the base
  image's variables stay ``${NAME}``.
- ``RUN``: Docker runs each RUN as ``SHELL + [command]`` (default ``/bin/sh -c``) in a fresh shell, failing only on
  the command's exit status. A single simple command is written as it is; anything else (lists, ``cd``,
  assignments, another ``SHELL``, heredocs) as ``/bin/sh -c '...'``, because under ``sh -e`` ``a && b`` does not
  stop the build when ``a`` fails and ``cd``/variables would leak into the next lines. Exec form runs the argv.
  ``--mount=type=cache|tmpfs``: the command runs with the target emptied and what it wrote there is removed (the
  image holds no cache, as in Docker); ``bind`` (from a stage, an image or the context): a copy at the target,
  removed after it (``_bind``); ``secret``/``ssh`` mounts and ``--network=none`` are refused.
  Heredocs: the body is the script (``RUN <<EOT``), or the whole text goes to the shell; a shebang body is refused.
- ``COPY``/``ADD`` (local, ``--from=name|index|image``): each source goes through ``%files`` to a staging path and
  is put in place in ``%post`` at its position, with Docker's rules: a folder's contents (not the folder),
  ``DEST/`` and ``.`` a folder (several sources need one: BuildKit's rule, ``_transfer_dest``), owner root or
  ``--chown`` (also of the folders it creates), ``--chmod``. ``%files`` copies from the build context with
  ``cp -fLr`` (symbolic links followed, owners lost), so a local source holding symbolic links is refused;
  ``%files from`` keeps links only since Singularity 3.5.3, so ``--from`` goes through a tar the source stage
  makes at its end (links and owners kept, as Docker keeps them, on every release); ``--from=image`` adds a stage
  of that image. ``ADD`` of a local tar archive unpacks it (singularityhub/singularity-cli#229), of a URL
  downloads it following redirects and failing on HTTP errors (curl or wget), mode 600, never unpacked;
  ``--checksum`` is verified. ``--from`` follows a source that is a link and matches a pattern in its last name in
  the source stage (``chexstack_pack``). Other wildcards, git URLs, heredoc sources, ``--parents``, ``--exclude``
  are refused.
  A build-context source is what Docker sends of it: the context's ``.dockerignore`` (or the Dockerfile's own
  ``<name>.dockerignore``) is applied with Docker's rules (``convert.dockerignore``), so a folder with excluded
  members goes through ``%files`` as its sent files and wholly sent subfolders, the folders it sends only in part
  made in ``%post``; a source the ignore file excludes entirely is refused (Docker's COPY fails on it).
- ``WORKDIR``: ``mkdir -p`` + ``cd`` in ``%post`` (after ``USER``, the folders it creates are that user's, as
  BuildKit makes them); ``%runscript`` starts there, in ``/`` without one (Docker's
  default; Apptainer starts in the host's current folder), or in the base image's WORKDIR where its config was read
  (Apptainer's docker bootstraps do not record it); not read, a stage without WORKDIR gets a warning that its
  runscript starts in ``/``.
- Each ``%post`` runs under Docker's umask 0022, with the image's own ``/tmp`` and ``/var/tmp`` (``DOCKER_ENV``).
- ``USER name|uid[:gid]``: later RUNs (not COPY, whose files stay root's, as in Docker) run through ``setpriv`` with
  that uid, its primary gid or the given one, its groups and its HOME (singularityhub/singularity-cli#158: never ``su
  -``). Apptainer always
  runs the image as the invoking user: a warning says so.
- ``ENTRYPOINT``/``CMD``: ``%runscript`` and ``%startscript`` run ``ENTRYPOINT + (arguments or CMD)`` with Docker's
  rules (shell forms through ``SHELL``; ``ENTRYPOINT`` resets an inherited ``CMD``); the base image's ENTRYPOINT and
  CMD where the Dockerfile sets neither or only CMD. ``CMD`` without ``ENTRYPOINT`` (or a WORKDIR without either)
  and the base's config not read: the base's ENTRYPOINT (and CMD) as Apptainer's bootstrap recorded them
  (``BASE_RUN``). Neither and no WORKDIR, the config not read: no runscript, so Apptainer runs the base image's own.
- ``SHELL``: used for the RUN, CMD and ENTRYPOINT shell forms after it. ``LABEL``: one ``%labels`` line per key.
  ``MAINTAINER``: label ``Author`` (Docker's Author field). ``EXPOSE``: a comment (documentation only, in Docker too).
  ``STOPSIGNAL SIGTERM`` and ``HEALTHCHECK NONE``: comments; any other ``STOPSIGNAL``, ``HEALTHCHECK`` and
  ``VOLUME`` are refused (Apptainer has no equivalent; a ``%test`` runs once at build, not on a running service).
  ``ONBUILD``: dropped with a warning (it acts on images built FROM this one only).

``convert(path, build_args, bases) -> Conversion(text, warnings, reads)``; ``save(conversion, output)`` writes the
definition atomically, never over a file the conversion reads (the Dockerfile, where Docker reads its ignore file, a
COPY/ADD source); ``convert_file`` does both and prints the warnings.
"""
from __future__ import annotations

import os
import posixpath
import re
import shlex
import stat
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import dockerfile

from chexstack.errors import ChexstackError
from chexstack.inputs import input_file, read_text
from convert import dockerignore, words
from convert.base import BaseImage, Reader, default_reader
from convert.definition import Definition, Section, Stage
from convert.lint import lint_definition
from convert.words import UnsupportedExpansion

#: The PATH a stage has where its base image's config sets none: BuildKit's dockerfile2llb (convert.go, "make sure
#: that PATH is always set") appends ``system.DefaultPathEnv`` to the image's ENV; Apptainer's %post then has none
#: (observed with Apptainer 1.4.5 on a base without PATH: ``ENV PATH=/a:$PATH`` read it empty).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: ``apptainer build`` also gives %post ``LD_LIBRARY_PATH=/.singularity.d/libs`` (its runtime's folder of host
#: libraries), which a Docker RUN never has: ``ENV LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}/x`` read
#: it (observed with Apptainer 1.4.5 by tests/test_images_equivalence.py); %post takes it out.
#: Every stage's %post starts in the base image's environment, with Docker's umask: a RUN runs under 0022
#: (runc's default; observed with Docker 20.10), Apptainer's ``%post`` under 0002 (observed with Apptainer 1.4.5:
#: the files and folders it makes would be group-writable), and with the image's own ``/tmp`` and ``/var/tmp``:
#: ``apptainer build`` binds the host's into ``%post`` (apptainer/singularity#1838, "added tmp and var/tmp binds to
#: imgbuild engine"; by design, apptainer/singularity#2538 and #1349), so what a RUN leaves there (micromamba's
#: ``WORKDIR /tmp``, ``COPY env.yaml /tmp/``) would land on the host, not in the image, and ``rm -rf /tmp/*`` would
#: empty the host's. Unmounted (lazily: the build's own folder may be under it; observed with Apptainer 1.4.5), or
#: the build stops saying why.
DOCKER_ENV = "\n".join([
    ". /.singularity.d/env/10-docker*.sh", "umask 022",
    'PATH="${PATH:-%s}"; export PATH  # Docker\'s where the base sets none' % DEFAULT_PATH,
    'case ":${LD_LIBRARY_PATH:-}:" in *:/.singularity.d/libs:*) LD_LIBRARY_PATH=$(echo ":$LD_LIBRARY_PATH:" | sed '
    '"s|:/.singularity.d/libs:|:|g; s|^:*||; s|:*$||"); if [ -n "$LD_LIBRARY_PATH" ]; then export LD_LIBRARY_PATH; '
    'else unset LD_LIBRARY_PATH; fi ;; esac  # Apptainer\'s own, not the base\'s',
    "for d in /tmp /var/tmp; do  # the image's own, as in Docker's RUN (apptainer build binds the host's)",
    "  if grep -q \"^[^ ]* [^ ]* [^ ]* [^ ]* $d \" /proc/self/mountinfo; then umount -l \"$d\" || { echo \"cannot "
    "unmount the host's $d that apptainer build binds in: what the build writes there would not be the image's; "
    "build as root or set 'mount tmp = no' in apptainer.conf\" >&2; exit 1; }; fi",
    "done"])
DEFAULT_SHELL = ["/bin/sh", "-c"]
#: Where %post keeps the base image's ENTRYPOINT and CMD as Apptainer's docker bootstrap wrote them into the
#: runscript before %post runs (``OCI_ENTRYPOINT='"a" "b"'``, each argument double-quoted for ``eval``; apptainer's
#: ``internal/pkg/build/sources/conveyorPacker_oci.go``, ``insertRunScript``), before %runscript replaces it.
BASE_RUN = "/.singularity.d/chexstack-base-run.sh"
BASE_RUN_SAVE = ("grep -E '^OCI_(ENTRYPOINT|CMD)=' /.singularity.d/runscript > %s || { echo \"the bootstrap "
                 "recorded no OCI_ENTRYPOINT in /.singularity.d/runscript: the base image's ENTRYPOINT is not "
                 "known\" >&2; exit 1; }" % BASE_RUN)
STAGING = "/.chexstack-copy"
#: Shell builtins whose effect outlives the command: such a RUN is never written inline in %post.
_STATEFUL = {"cd", "set", "export", "unset", "exit", "exec", ".", "source", "alias", "unalias", "shift", "trap",
             "umask", "ulimit", "readonly", "local", "return", "eval", "wait", "break", "continue", "hash", "read",
             "pushd", "popd", "shopt", "declare", "typeset", "getopts", "builtin", "command", "!"}
_REDIRECTS = {">", ">>", "<", ">&", "<&", ">|", "|"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The predefined ARGs (Dockerfile reference, "Predefined ARGs"; moby's ``builtinAllowedBuildArgs``): the docker CLI
#: also passes them from its proxy configuration, and a --build-arg of one is consumed without an ARG.
_PROXY_ARGS = {v for p in ("HTTP", "HTTPS", "FTP", "NO", "ALL") for v in ("%s_PROXY" % p, "%s_proxy" % p.lower())}
#: Global ARGs Docker gives a value of its own (Dockerfile reference, "Automatic platform ARGs in the global scope"
#: and the predefined ones).
_DOCKER_SETS = {"TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT", "BUILDPLATFORM", "BUILDOS", "BUILDARCH",
                "BUILDVARIANT"} | _PROXY_ARGS

#: What ``$NAME`` (op "") and ``${NAME<op>WORD}`` give, read in the base image's environment (BuildKit's
#: shell/lex.go).
_BASE_READS = {"": "the image's {name}, empty where it sets none",
               ":-": "{word} only where the image sets no {name}, or an empty one",
               "-": "{word} only where the image sets no {name}",
               ":+": "{word} only where the image sets {name}, not empty",
               "+": "{word} only where the image sets {name}"}

#: Shell functions a stage's %post defines when it needs them (Dockerfile reference: COPY, ADD, USER), by need:
#: ``convert/templates/<need>.sh``, the text written as it is (its final newline dropped).
HELPERS = {name: (resources.files("convert") / "templates" / ("%s.sh" % name)).read_text().removesuffix("\n")
           for name in ("copy", "add", "from", "fetch", "mount", "as", "workdir", "platform",
                                               "pack", "bind")}
#: What may differ from Docker where a base image's config is not read (the warning says it).
UNREAD_DIFFERS = ("; what may differ: the RUNs run as root, not as its USER; relative paths and the RUNs start in /, "
                  "not in its WORKDIR; the RUNs go through /bin/sh -c, not its SHELL; a name only its ENV defines is "
                  "refused where its value is needed here; and %post needs a "
                  "/bin/sh in it (a base without a shell, e.g. a distroless one, cannot be built)")
#: The automatic platform ARGs (Dockerfile reference, "Automatic platform ARGs in the global scope"): BuildKit's
#: ``frontend/dockerfile/dockerfile2llb/platform.go`` (``defaultArgs``) sets them from the build and target
#: platforms, each the builder's own (containerd's ``platforms.DefaultSpec``, normalized: arm64 has no variant) on a
#: native build, which an Apptainer build always is; ``chexstack_platform`` gives them in %post (``uname``).
_PLATFORM_ARGS = {"TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT", "BUILDPLATFORM", "BUILDOS",
                  "BUILDARCH", "BUILDVARIANT"}
_NATIVE = re.compile(r"^\$(\{(BUILD|TARGET)PLATFORM\}|(BUILD|TARGET)PLATFORM)$")


@dataclass
class _Stage:
    name: str
    image: str
    bootstrap: str = "docker"
    base: BaseImage | None = None
    files: dict = field(default_factory=dict)  # source stage (None: the build context) -> [(src, staged)]
    post: list = field(default_factory=list)
    environment: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    helpers: list = field(default_factory=list)
    vars: dict = field(default_factory=dict)  # name -> value (None: declared, value unknown)
    valueless: dict = field(default_factory=dict)  # name -> line of an ARG that declares it without a value
    env_names: set = field(default_factory=set)
    workdir: str | None = None
    user: str | None = None
    shell: list = field(default_factory=lambda: list(DEFAULT_SHELL))
    entrypoint: list | None = None
    cmd: list | None = None
    cmd_set: bool = False
    cmd_at: object = None  # the CMD instruction
    empty: bool = True  # no instruction after its FROM (nor a base's ONBUILD trigger): an alias of its image
    base_run: bool = False  # the runscript takes the base's ENTRYPOINT (and CMD, none set) from the bootstrap's
    comments: list = field(default_factory=list)

    def need(self, helper: str) -> None:
        for h in (["copy"] if helper in ("add", "from") else []) + [helper]:
            if h not in self.helpers:
                self.helpers.append(h)

    def known(self) -> dict[str, str]:
        return {k: v for k, v in self.vars.items() if v is not None}


class _Blank:
    """The names the global scope leaves without a value: an ARG declared before the first FROM without one is
    unset for the classic builder and BuildKit's ``buildMetaArgs`` (only an ARG with a value is added to the global
    scope), empty for older BuildKit releases; a name no global ARG declares is unset. ``${NAME:-word}`` and
    ``${NAME:+word}`` read empty and unset alike (BuildKit's ``frontend/dockerfile/shell/lex.go``: the colon forms
    take an empty value as unset), so ``convert.words`` resolves them; ``$NAME``, ``${NAME-word}`` and
    ``${NAME+word}`` stay references, refused in FROM. Not among them: the automatic platform ARGs (``TARGETARCH``...)
    and the predefined proxy ARGs, which Docker gives values of its own (the build machine, the client's proxy
    configuration)."""

    def __init__(self, known: dict[str, str]):
        self.known = known

    def __contains__(self, name: str) -> bool:
        return name not in self.known and name not in _DOCKER_SETS


class _Unset:
    """The names a stage whose base image's config was read knows to be unset: neither the base's ENV nor the
    Dockerfile (ARG with a value, ENV) defines them, so Docker expands them as unset (``$NAME`` empty,
    ``${NAME-word}`` the word). Not among them: a name an ARG declares whose value is not known here, and the
    automatic platform and proxy ARGs, which Docker gives values of its own."""

    unset = True

    def __init__(self, stage: _Stage):
        self.stage = stage

    def __contains__(self, name: str) -> bool:
        return name not in self.stage.vars and name not in _DOCKER_SETS


@dataclass
class Conversion:
    """The definition's ``text``, the conversion's ``warnings`` and the paths of the build context it ``reads``
    (each with what it is to the conversion: the Dockerfile, where Docker looks for the ignore file, each COPY/ADD
    source from the context), which ``save`` never writes over."""

    text: str
    warnings: list[str] = field(default_factory=list)
    reads: list[tuple[Path, str]] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)  # warning kind -> how many
    runs: str = ""  # what `apptainer run` does (``run_behaviour``)

    def summary(self) -> str:
        """One line: what the definition could not keep exactly (the warnings by kind) and what `apptainer run`
        of it does."""
        kept = ("nothing to warn of" if not self.kinds else "%d warning%s (%s)" % (
            len(self.warnings), "" if len(self.warnings) == 1 else "s",
            ", ".join("%s: %d" % kv for kv in sorted(self.kinds.items()))))
        return "summary: %s; %s" % (kept, self.runs)


class _Converter:
    def __init__(self, path: Path, build_args: dict[str, str | None], bases: Reader):
        self.path = path
        self.bases = bases
        self.trigger: str | None = None  # the base image's ONBUILD trigger being converted (after its FROM)
        #: ``--build-arg NAME`` whose NAME the environment does not set (``parse_build_args``: None): the docker CLI
        #: sends it without a value, which the daemon drops, so the ARG keeps its default.
        self.unset = sorted(k for k, v in build_args.items() if v is None)
        self.given = set(build_args)
        self.build_args = {k: v for k, v in build_args.items() if v is not None}
        self.declared: set[str] = set()  # every name an ARG declares, in the global scope or a stage
        self.global_args: dict[str, str | None] = {}
        self.global_valueless: set[str] = set()  # global ARGs declared without a value (and no --build-arg)
        self.stages: list[_Stage] = []
        self.named: set[str] = set()  # the stage names the Dockerfile gives (``run``)
        self.warnings: list[str] = []
        self.kinds: dict[str, int] = {}  # warning kind -> count
        self.cmd: dockerfile.Command | None = None
        self.context = dockerignore.Context(path.parent, path)
        own, shared = dockerignore.candidates(path.parent, path)
        self.reads: list[tuple[Path, str]] = [
            (path, "the Dockerfile being converted"),
            (own, "where Docker reads this Dockerfile's own ignore file"),
            (shared, "where Docker reads the build context's ignore file")]

    # --- errors -------------------------------------------------------------------------------------------------
    def fail(self, why: str) -> None:
        c = self.cmd
        first = c.original.splitlines()[0] if c else ""
        raise ChexstackError("%s:%s: %s: %s%s" % (self.path, c.start_line if c else "?", first, self._trigger(), why))

    def note(self, kind: str, text: str) -> None:
        """A warning (``text``, the whole line) of ``kind`` (the summary counts them by kind)."""
        self.warnings.append(text)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def warn(self, why: str, kind: str = "") -> None:
        self.note(kind or self.cmd.cmd.upper(),
                  "%s:%d: %s: %s%s" % (self.path, self.cmd.start_line, self.cmd.cmd, self._trigger(), why))

    def _trigger(self) -> str:
        """While a base image's ONBUILD trigger is converted: which one (the line named is the FROM's)."""
        return "" if self.trigger is None else "the base image's trigger ONBUILD %s: " % self.trigger

    @property
    def stage(self) -> _Stage:
        return self.stages[-1]

    # --- words --------------------------------------------------------------------------------------------------
    def words(self, text: str, known: dict | None = None, split: bool = True, blank=()) -> list:
        if not blank and self.stages and self.stage.base is not None and self.stage.base.read:
            blank = _Unset(self.stage)
        try:
            return words.words(text, self.stage.known() if known is None else known, split, blank)
        except UnsupportedExpansion as e:
            self.fail(str(e))

    def text(self, text: str, what: str, known: dict | None = None) -> str:
        """``text`` expanded to one literal value, or an error naming what it refers to."""
        word = self.words(text, known, split=False)[0]
        value = words.literal(word)
        if value is None:
            self.undefined(what, word)
        return value

    def undefined(self, what: str, word: list) -> None:
        """Refuse ``word`` of ``what``, which refers to a variable this Dockerfile gives no value: one no ARG or ENV
        defines, or one a stage's ARG declares without a value (``_arg``). Either way Docker reads the base image's
        environment, which a definition cannot see."""
        ref = next(p for p in word if isinstance(p, words.Ref))
        st = self.stage
        if ref.name in st.valueless and ref.name not in st.vars:
            n = ref.name
            self.fail("%s refers to $%s, which ARG %s (line %d) declares without a value and no --build-arg sets: "
                      "Docker then sets no variable, so %s reads the base image's environment (it is %s), which a "
                      "definition cannot see; give it a value: ARG %s=VALUE, or --build-arg %s=VALUE (%s= for the "
                      "empty value)" % (what, n, n, st.valueless[n], _spelled(ref),
                                        _BASE_READS[ref.op].format(name=n, word=_spelled(ref.word)), n, n, n))
        if st.base is not None and st.base.read:
            self.fail("%s refers to $%s, which neither this Dockerfile nor the base image %s's ENV (read from %s) "
                      "defines: Docker reads it empty; define it with ARG or ENV" % (what, ref.name, st.image,
                                                                                   st.base.read_from))
        self.fail("%s refers to $%s, which this Dockerfile does not define: %s" % (what, ref.name,
                                                                                 self._base_unread(st)))

    def _base_unread(self, st: _Stage) -> str:
        """The real reason of a refusal that depends on ``st``'s base image: its config was not read."""
        return ("the build depends on the base image %s's config (its ENV, and with it the SHELL, USER, WORKDIR, "
                "ENTRYPOINT and CMD the RUNs and the runscript inherit), which could not be read: %s; `docker pull "
                "%s` into the local engine (or build it there), then convert again" % (st.image, st.base.why_not,
                                                                                       st.image))

    def _fresh(self, name: str) -> str:
        """``name``, or ``name-N`` for the first N that makes it a name neither the Dockerfile (any of its ``FROM ...
        AS``, before or after this one) nor this conversion gives a stage: the converter's own names never collide
        with a user's."""
        taken = self.named | {s.name for s in self.stages}
        out, n = name, 1
        while out in taken:
            out, n = "%s-%d" % (name, n), n + 1
        return out

    # --- instructions -------------------------------------------------------------------------------------------
    def run(self) -> list[_Stage]:
        try:
            commands = dockerfile.parse_file(str(self.path))
        except dockerfile.GoParseError as e:
            raise ChexstackError("%s: not a Dockerfile Docker can read: %s" % (self.path, e)) from None
        # every stage name the Dockerfile gives, before any is converted: the names this converter makes for
        # unnamed stages and --from images (``_fresh``) must never be one of them
        self.named = {c.value[2].lower() for c in commands if c.cmd.upper() == "FROM" and len(c.value) == 3}
        for c in commands:
            self.cmd = c
            name = c.cmd.upper()
            if name != "FROM" and name != "ARG" and not self.stages:
                self.fail("expected FROM (or ARG) before any other instruction")
            if name != "FROM" and self.stages:
                self.stage.empty = False
            getattr(self, "_" + name.lower(), self._unknown)(c)
        if not self.stages:
            raise ChexstackError("%s: no FROM instruction: not a Dockerfile (or an empty one)" % self.path)
        self._finish()
        self._build_arg_warnings()
        return self.stages

    def _build_arg_warnings(self) -> None:
        """What ``docker build`` says of the build arguments, which does not change the definition: a ``--build-arg
        NAME`` the environment does not set passes nothing; one no ARG declares (global or in a stage; the
        predefined proxy ARGs aside) is not consumed, in the classic builder's words (moby's
        ``BuildArgs.WarnOnUnusedBuildArgs``; BuildKit ignores it silently)."""
        for name in self.unset:
            self.note('build-arg',
                "%s: --build-arg %s: %s is not set in this environment, so Docker passes no value "
                "(the ARG keeps its default)" % (self.path, name, name))
        unused = sorted(self.given - self.declared - _PROXY_ARGS)
        if unused:
            self.note('build-arg',
                "%s: [Warning] One or more build-args [%s] were not consumed (no ARG declares them; "
                "the definition does not use them either)" % (self.path, " ".join(unused)))

    def _unknown(self, c) -> None:
        self.fail("not a Dockerfile instruction (expected FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, LABEL, "
                  "CMD, ENTRYPOINT, SHELL, EXPOSE, VOLUME, HEALTHCHECK, STOPSIGNAL, ONBUILD or MAINTAINER)")

    def _from(self, c) -> None:
        platform = None
        for flag in c.flags:
            opt, _, val = flag.partition("=")
            if opt != "--platform":
                self.fail("%s: not converted" % flag)
            if _NATIVE.match(val.strip()):
                continue  # the platform that builds (or is built for, the same on a native build): Apptainer's own
            args, blank = self._global_scope()
            platform = words.literal(self.words(val, args, split=False, blank=blank)[0])
            if not platform or not re.match(r"^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?$", platform):
                self.fail("%s: not converted: Apptainer pulls and builds for the machine that builds; write "
                          "--platform=$BUILDPLATFORM, or OS/ARCH[/VARIANT] of the machine that will build" % flag)
        if len(c.value) not in (1, 3) or (len(c.value) == 3 and c.value[1].upper() != "AS"):
            self.fail("expected FROM IMAGE [AS NAME]")
        args, blank = self._global_scope()
        word = self.words(c.value[0], args, split=False, blank=blank)[0]
        missing = words.unknown(word)
        undeclared = [n for n in missing if n not in self.global_args]
        if undeclared:
            n = undeclared[0]
            self.fail("FROM refers to $%s, %s; declare it before the first FROM (ARG %s=VALUE, or ARG %s and "
                      "--build-arg %s=VALUE)" % (n, "which Docker sets itself (the platform it builds for, the "
                                                 "client's proxy)" if n in _DOCKER_SETS else
                                                 "which no ARG before the first FROM declares (Docker expands FROM "
                                                 "with those only, and gives --build-arg values to those only)",
                                                 n, n, n))
        if missing:
            told = [p for p in word if isinstance(p, words.Ref) and p.name in blank and p.op in ("-", "+")]
            self.fail("ARG %s has no value; pass it as a build argument (--build-arg %s=VALUE)%s"
                      % (", ".join(missing), missing[0],
                         "" if not told else "; ${%s%s...} tells an empty ARG from one without a value, which "
                         "Docker's builders do not agree on (${%s:%s...} does not)"
                         % (told[0].name, told[0].op, told[0].name, told[0].op)))
        image = words.literal(word)
        names = [s.name for s in self.stages]
        alias = next((s for s in self.stages if s.name == image.lower()), None)
        if alias is not None and not alias.empty:
            self.fail("FROM a previous stage (%s) is not converted: an Apptainer stage starts from an image, and "
                      "%s's instructions are not in one; to convert it, make %s's instructions part of this stage, "
                      "or copy what you need with COPY --from=%s" % (image, image, image, image))
        if alias is not None:  # an empty `FROM image AS alias` stage: FROM alias is FROM image (BuildKit resolves
            image = alias.image  # a stage name first, then the image: dockerfile2llb's allDispatchStates)
        if image == "scratch":
            self.fail("FROM scratch is not converted: its stage has no shell, and the converted COPY/RUN run in "
                      "%post; to convert it, start the stage FROM an image with a /bin/sh (e.g. the one whose files "
                      "it copies), or build this image with Docker and convert a Dockerfile FROM it")
        name = c.value[2].lower() if len(c.value) == 3 else self._fresh("stage%d" % len(self.stages))
        if name in names:
            self.fail("stage name %s is used twice" % name)
        base = alias.base if alias is not None else self.bases(image)
        self.stages.append(_Stage(name, base.pinned or image, "docker-daemon" if base.local_only else "docker", base))
        self.stage.post.append(DOCKER_ENV)
        if platform:  # a native build only: the build stops where the machine that builds is another platform
            self.stage.need("platform")
            self.stage.post.append('[ "$(chexstack_platform BUILDPLATFORM)" = %s ] || { echo "FROM --platform=%s: '
                                   'this machine builds for $(chexstack_platform BUILDPLATFORM); build on a %s '
                                   'machine" >&2; exit 1; }' % (shlex.quote(platform), platform, platform))
        self._inherit(c, base)

    def _inherit(self, c, base: BaseImage) -> None:
        """What the stage takes from its base image's config (``convert.base``): its ENV (known to the expansions;
        in ``%post`` and ``%environment`` through the bootstrap's own ``10-docker2singularity.sh``), SHELL, USER,
        WORKDIR (``%post`` goes there), ENTRYPOINT and CMD, then its ONBUILD triggers, run right after the FROM as
        BuildKit's ``dispatchOnBuildTriggers`` does. A base that is not read: a warning that the stage assumes
        Docker's defaults (root, ``/``, ``/bin/sh -c``, no ENV), or, where the Dockerfile refers to the base's
        config, a refusal naming it (``undefined``, ``_finish``)."""
        st = self.stage
        if not base.read:
            self.warn(kind='base config not read', why=
                "the base image %s's config (ENV, USER, WORKDIR, SHELL, ENTRYPOINT, CMD, ONBUILD) was not "
                "read: %s; the definition assumes Docker's defaults (root, /, /bin/sh -c), which the base "
                "may not keep (`docker pull %s`, then convert again)%s" % (base.image, base.why_not, base.image,
                                                                          UNREAD_DIFFERS))
            return
        for name, value in base.env + (() if any(n == "PATH" for n, _ in base.env) else (("PATH", DEFAULT_PATH),)):
            st.vars[name] = value
            st.env_names.add(name)
        if base.shell:
            st.shell = list(base.shell)
        if base.workdir:
            st.workdir = posixpath.normpath(base.workdir)
            st.post += ["mkdir -p %s" % shlex.quote(st.workdir), "cd %s" % shlex.quote(st.workdir)]
        if base.user:
            self._set_user(base.user, "the base image's USER")
        st.entrypoint = list(base.entrypoint or [])
        st.cmd = list(base.cmd) if base.cmd is not None else None
        st.empty = not base.onbuild
        for trigger in base.onbuild:
            self.trigger = trigger
            try:
                commands = dockerfile.parse_string(trigger + "\n")
            except dockerfile.GoParseError as e:
                self.fail("not an instruction Docker can read: %s" % e)
            for t in commands:
                self.cmd = t._replace(start_line=c.start_line, end_line=c.end_line, original=c.original)
                if t.cmd.upper() in ("FROM", "ONBUILD", "MAINTAINER"):  # Docker refuses these as triggers
                    self.fail("%s is not allowed as an ONBUILD trigger" % t.cmd.upper())
                getattr(self, "_" + t.cmd.lower(), self._unknown)(self.cmd)
        self.trigger, self.cmd = None, c

    def _arg(self, c) -> None:
        """Each word is one declaration: a ``#`` after the first word is no comment (Dockerfile reference, "Format":
        "A # marker anywhere else in a line is treated as an argument"; BuildKit's ``parseNameOrNameVal`` splits the
        rest into more names), so ``ARG A=1  # note`` also declares ``#`` and ``note`` without a value, which set
        nothing: a warning. A declaration with a value whose name the shell cannot export is refused."""
        odd = [d for d in c.value if not _NAME.match(d.partition("=")[0])]
        if any("=" in d for d in odd):
            self.fail("ARG %s: not a variable name %%post can export (Docker passes it to RUN's environment only)"
                      % next(d for d in odd if "=" in d).partition("=")[0])
        if "#" in c.value:
            rest = c.value[c.value.index("#"):]
            self.warn(kind='ARG', why=
                "%s: the words after the first are no comment to Docker (a # marker is one only at the start "
                "of a line): it declares them as more ARGs without a value, which set nothing; the definition "
                "exports none of them (put the comment on a line of its own)" % " ".join(rest))
        elif odd:
            self.warn(kind='ARG', why=
                "%s: not variable names; Docker declares them as ARGs without a value, which set nothing; the "
                "definition exports none of them" % " ".join(odd))
        for decl in c.value:
            name, eq, default = decl.partition("=")
            self.declared.add(name)
            if not _NAME.match(name):
                continue
            if not self.stages:  # BuildKit's buildMetaArgs: a default is expanded with the global ARGs before it,
                if name in self.build_args:  # and not at all when --build-arg gives the ARG a value
                    self.global_args[name] = self.build_args[name]
                elif eq:
                    known, blank = self._global_scope()
                    self.global_args[name] = words.literal(self.words(default, known, False, blank)[0])
                else:
                    self.global_args[name] = None
                    self.global_valueless.add(name)
                continue
            st = self.stage
            if name in self.build_args:
                value = [self.build_args[name]]
            elif eq:
                value = self.words(default, split=False)[0]
            elif self.global_args.get(name) is not None:
                value = [self.global_args[name]]
            else:
                value = None
            if name in st.env_names:
                continue
            if value is None and name in _PLATFORM_ARGS:  # Docker's own value: the machine that builds
                st.need("platform")
                st.vars[name] = None
                st.post.append('export %s="$(chexstack_platform %s)"' % (name, name))
                continue  # an ENV of the same name wins over the ARG (Dockerfile reference, "Using ARG variables")
            if value is None and (name not in self.global_args or name in self.global_valueless):
                # BuildKit's dispatchArg adds a variable only for an ARG with a value (the classic builder's
                # FilterAllowed alike): a value the stage has stays, else the base image's environment decides
                if name not in st.vars:
                    st.valueless[name] = c.start_line
                continue
            st.vars[name] = words.literal(value) if value is not None else None
            if value is not None:
                st.post.append("export %s=%s" % (name, words.shell(value)))

    def _global_scope(self) -> tuple[dict[str, str], _Blank]:
        """What FROM and the ARGs before the first FROM see: the values of the global ARGs declared so far
        (``--build-arg`` over defaults; a build argument no global ARG declares is not seen, as in Docker), every
        other name empty or unset (``_Blank``)."""
        args = {k: self.build_args.get(k, v) for k, v in self.global_args.items()
                if v is not None or k in self.build_args}
        return args, _Blank(args)

    def _env(self, c) -> None:
        """Every pair of one ENV is expanded with the variables as they were before it (Dockerfile reference,
        "Environment replacement": ``ENV abc=hello`` then ``ENV abc=bye def=$abc`` gives def=hello; BuildKit's
        ``dispatch`` expands the whole instruction, ``EnvCommand.Expand``, before ``dispatchEnv`` adds a pair; the
        classic builder alike). So a later pair of the same name replaces an earlier one, and a pair that refers to a
        base image variable (written ``${NAME}``, read when ``%post`` and ``%environment`` run their exports one
        after the other) is written before the pair of this ENV that sets that variable; two pairs that each refer
        to the other's variable are refused."""
        st = self.stage
        known = st.known()
        # a name whose value is not known here but an earlier ENV exported (its value read from the base image's,
        # e.g. PATH=/a:$PATH then PATH=/b:$PATH) stays ${NAME}: %post and %environment export in the Dockerfile's
        # order, so the shell reads exactly the value Docker had; an ARG's is exported in %post only, not at run time
        args_only = {n for n, v in st.vars.items() if v is None and n not in st.env_names}
        pairs: dict[str, list] = {}
        for name, raw in zip(c.value[0::2], c.value[1::2]):
            word = self.words(raw, known, split=False)[0]
            for ref in words.unknown(word):
                if ref in args_only:
                    self.fail("ENV %s refers to $%s, an ARG whose value is not known at conversion (it reads the "
                              "base image's environment), and %%environment has no ARGs: give ARG %s a value "
                              "(ARG %s=VALUE or --build-arg %s=VALUE)" % (name, ref, ref, ref, ref))
            pairs.pop(name, None)
            pairs[name] = word
        left = list(pairs)
        while left:
            free = [n for n in left if not any(n in words.unknown(pairs[o]) for o in left if o != n)]
            if not free:
                names = [n for n in left if any(n in words.unknown(pairs[o]) for o in left if o != n)]
                self.fail("%s each take another one's value from before this ENV (the base image's, not known at "
                          "conversion), which exports run one after the other cannot keep; give one of them a "
                          "literal value" % (", ".join(names[:-1]) + " and " + names[-1]))
            name = free[0]
            left.remove(name)
            line = "export %s=%s" % (name, words.shell(pairs[name]))
            st.vars[name] = words.literal(pairs[name])
            st.env_names.add(name)
            st.post.append(line)
            st.environment.append(line)

    def _label(self, c) -> None:
        for key, raw in zip(c.value[0::2], c.value[1::2]):
            k = self.text(key, "LABEL key %s" % key)
            v = self.text(raw, "LABEL %s" % k)
            if not k or re.search(r"\s", k):
                self.fail("label key %r: an Apptainer %%labels key is one word" % k)
            if "\n" in v:
                self.fail("label %s: a %%labels value is one line" % k)
            self.stage.labels.append((k, v))

    def _maintainer(self, c) -> None:
        self.stage.labels.append(("Author", " ".join(c.value)))  # Docker's Author field; the user guide's label

    def _workdir(self, c) -> None:
        """``mkdir -p`` + ``cd``; after ``USER``, the folders it creates are that user's: BuildKit's
        ``dispatchWorkdir`` (``dockerfile2llb/convert.go``) makes the folder with ``llb.Mkdir(wd, 0755,
        WithParents(true), WithUser(d.image.Config.User))``, and its MkdirAll chowns each folder it creates, never one
        that exists. ``llb.WithUser`` reads ``name|uid[:group|gid]``: a uid without a group gets the same gid, a name
        its passwd uid and gid (``chexstack_workdir``). The classic builder made every WORKDIR root's."""
        path = self.text(c.value[0], "WORKDIR")
        if not path:
            self.fail("%s expands to nothing: %s" % (c.value[0], self._read_unset()))
        st = self.stage
        st.workdir = posixpath.normpath(posixpath.join(st.workdir or "/", path))
        q = shlex.quote(st.workdir)
        if st.user:
            st.need("workdir")
            st.post += ["chexstack_workdir %s %s" % (shlex.quote(st.user), q), "cd %s" % q]
        else:
            st.post += ["mkdir -p %s" % q, "cd %s" % q]

    def _user(self, c) -> None:
        spec = self.text(c.value[0], "USER")
        if not spec:
            self.fail("%s expands to nothing: %s" % (c.value[0], self._read_unset()))
        self._set_user(spec, "USER")

    def _read_unset(self) -> str:
        """Why a word the base image's config was read for expands to nothing."""
        st = self.stage
        return ("neither this Dockerfile nor the base image %s's ENV (read from %s) defines what it names, so Docker "
                "reads it empty; define it with ARG or ENV" % (st.image, st.base.read_from))

    def _set_user(self, spec: str, what: str) -> None:
        """The user later RUNs run as (``what``: the instruction, or the base image's config)."""
        user, _, group = spec.partition(":")
        st = self.stage
        st.user = None if user in ("root", "0") and group in ("", "root", "0") else spec
        st.post.append("# %s %s: the RUN commands after it run as %s" % (what, spec, spec if st.user else "root"))
        if st.user:
            st.need("as")

    def _shell(self, c) -> None:
        if not c.json or not c.value:
            self.fail('SHELL takes the JSON form, e.g. SHELL ["/bin/bash", "-c"]')
        if re.search(r"(cmd|powershell|pwsh)(\.exe)?$", c.value[0], re.I):
            self.fail("a Windows shell is not converted")
        self.stage.shell = list(c.value)

    def _expose(self, c) -> None:
        ports = [self.text(p, "EXPOSE") for p in c.value]
        self.stage.comments.append("# EXPOSE %s: documentation only in Docker too; Apptainer uses the host's "
                                   "network" % " ".join(ports))

    def _stopsignal(self, c) -> None:
        sig = self.text(c.value[0], "STOPSIGNAL").upper()
        if sig not in ("SIGTERM", "TERM", "15"):
            self.fail("STOPSIGNAL %s has no definition equivalent (Apptainer stops instances with SIGTERM unless "
                      "`apptainer instance stop --signal %s` is given); remove it" % (sig, sig))

    def _healthcheck(self, c) -> None:
        if c.value and c.value[0].upper() == "NONE":
            return
        self.fail("Apptainer has no health checks: %test runs once, at build time and by `apptainer test`, where "
                  "the service is not running; remove HEALTHCHECK (or put a build-time check in a RUN)")

    def _volume(self, c) -> None:
        self.fail("Apptainer images have no volumes: the path is read-only in the SIF at run time; bind a host "
                  "folder instead (`apptainer run --bind HOST:PATH`) and remove VOLUME")

    def _onbuild(self, c) -> None:
        self.warn(kind='ONBUILD dropped', why=
            "dropped: ONBUILD triggers act only on images built FROM this one (Docker runs them there, not "
            "here), and a definition has no triggers; this image builds the same without it")

    # --- RUN ----------------------------------------------------------------------------------------------------
    def _run(self, c) -> None:
        st = self.stage
        mounts, fills = [], []
        for n, flag in enumerate(c.flags, 1):
            opt, _, val = flag.partition("=")
            if opt == "--mount":
                kv = dict(p.partition("=")[::2] for p in val.split(","))
                kind = kv.get("type", "bind")
                target = kv.get("target") or kv.get("dst") or kv.get("destination")
                if kind not in ("cache", "tmpfs", "bind"):
                    self.fail("%s: a %s mount is not converted: its files come from the machine that builds (a "
                              "secret, an ssh agent), which %%post cannot be given without the image holding them; "
                              "fetch them in a RUN that removes them, or COPY them" % (flag, kind))
                if not target:
                    self.fail("%s: a %s mount needs a target (Docker refuses it too)" % (flag, kind))
                mounts.append(posixpath.normpath(posixpath.join(st.workdir or "/", target)))
                fills.append(self._bind(flag, kv, c.start_line, n) if kind == "bind" else None)
                if kind != "bind":
                    self.warn(kind='RUN cache mount', why=
                        "%s: %%post runs without the cache; what the command writes to %s is removed after it, "
                        "as Docker keeps it out of the image" % (flag, mounts[-1]))
            elif opt == "--network" and val in ("default", "host"):
                continue
            else:
                self.fail("%s is not converted (%%post has the build machine's network and privileges)" % flag)
        argv = self._run_argv(c)
        line = self._command_line(argv, c)
        hidden = ["%s-hidden-%d-%d" % (STAGING, c.start_line, i) for i in range(len(mounts))]
        if mounts:
            st.need("mount")
        for t, h, fill in zip(mounts, hidden, fills):
            st.post.append("chexstack_mount %s" % _args(t, h))
            if fill:
                st.need("bind")
                st.post.append("chexstack_bind %s" % _args(fill, t))
        st.post.append(line)
        st.post += ["chexstack_unmount %s" % _args(t, h) for t, h in reversed(list(zip(mounts, hidden)))]

    def _bind(self, flag: str, kv: dict, line: int, n: int) -> str:
        """``RUN --mount=type=bind[,from=STAGE|IMAGE],source=PATH``: the files the command sees at the target, a
        path of ``%post`` (``chexstack_bind`` puts it there, ``chexstack_unmount`` takes it away after the command).
        BuildKit's ``dispatchRunMounts`` (frontend/dockerfile/dockerfile2llb/convert_runmount.go) binds ``source``
        (default: the root) of the named stage or image, or of the build context without ``from``; read-only unless
        ``rw``, whose writes are discarded: here the copy is writable and discarded alike."""
        src = kv.get("source") or kv.get("src") or "/"
        if posixpath.normpath("/" + src.lstrip("/")) == "/":
            self.fail("%s: a bind of the whole %s is not converted; name the files it needs (source=PATH)"
                      % (flag, "stage %s" % kv["from"] if kv.get("from") else "build context"))
        if re.search(r"[*?\[\s]", src):
            self.fail("%s: a source with a pattern or spaces is not converted" % flag)
        name = posixpath.basename(posixpath.normpath(src))
        staged = "%s-%d-m%d/%s" % (STAGING, line, n, name)
        origin = self._origin(self.text(kv["from"], "--mount from")) if kv.get("from") else None
        self.warn(kind="RUN bind mount", why="%s: the command sees a writable copy of %s at the target, removed "
                  "after it (Docker's bind is read-only%s)" % (flag, src, ", or writable with rw, its writes "
                                                                "discarded alike" if "rw" not in kv else ""))
        if origin is None:
            self.stage.files.setdefault(None, []).extend(self._local_source(src, staged))
            return staged
        self._pack(origin, "%d-m%d" % (line, n), src, name, staged)
        return staged + ".tar"

    def _run_argv(self, c) -> list[str]:
        st = self.stage
        if c.json:
            return list(c.value)
        text = c.value[0]
        if c.heredocs:
            if text.strip() == "<<%s" % c.heredocs[0].name or re.match(r"^<<-?['\"]?\w+['\"]?$", text.strip()):
                body = c.heredocs[0].content
                if body.startswith("#!"):
                    self.fail("a heredoc with a shebang runs as its own program; write it to a file with COPY and "
                              "RUN it")
                return st.shell + [body]
            return st.shell + [text + "".join("\n" + h.content + h.name for h in c.heredocs)]
        return st.shell + [text]

    def _command_line(self, argv: list[str], c) -> str:
        st = self.stage
        if st.user:
            return "chexstack_as %s %s" % (shlex.quote(st.user), shlex.join(argv))
        if argv[:2] == DEFAULT_SHELL and len(argv) == 3 and _simple(argv[2]):
            return argv[2]
        return shlex.join(argv)

    # --- COPY / ADD ---------------------------------------------------------------------------------------------
    def _copy(self, c) -> None:
        self._transfer(c, add=False)

    def _add(self, c) -> None:
        self._transfer(c, add=True)

    def _transfer(self, c, add: bool) -> None:
        """COPY (``add`` False) or ADD: each source staged through ``%files`` (or fetched, for an ADD of a URL) and
        put in place by a helper of ``HELPERS`` in ``%post``."""
        if c.heredocs:
            self.fail("heredoc sources are not converted; put the text in a file next to the Dockerfile")
        opts = self._transfer_options(c)
        parts = self._transfer_parts(c)
        if len(parts) < 2:
            self.fail("expected SOURCE... DEST")
        sources, dest = parts[:-1], self._transfer_dest(parts[:-1], parts[-1])
        origin = self._origin(opts.get("--from"))
        owner, mode = opts.get("--chown", ""), opts.get("--chmod", "")
        if "--checksum" in opts and not (add and all(_is_url(s) for s in sources)):
            self.fail("--checksum is only for ADD of URLs")
        for i, src in enumerate(sources, 1):
            url = add and origin is None and _is_url(src)  # BuildKit's dispatchCopy: an HTTP source is fetched as
            # it is (llb.HTTP), never matched as a pattern (frontend/dockerfile/dockerfile2llb/convert.go)
            pattern = not url and re.search(r"[*?\[]", src)
            if pattern and origin is not None and not re.search(r"[*?\[]", posixpath.dirname(src)):
                # COPY --from=stage with a pattern in its last name (e.g. a wheel named by its architecture): matched
                # in the source stage at build time (``chexstack_pack``), where the files are
                if not re.match(r"^[A-Za-z0-9_@%+=:,.*?\[\]!-]+$", posixpath.basename(src)):
                    self.fail("wildcard source %s: only letters, digits, ._-+=:,@% and the pattern's *?[] are "
                              "converted in a pattern's name" % src)
            elif pattern:
                self.fail("wildcard source %s is not converted (list the files)" % src)
            if re.search(r"\s", src) or re.search(r"\s", dest):
                self.fail("paths with spaces are not converted (%%files splits on whitespace)")
            if add and origin is None and (src.startswith("git@") or src.endswith(".git")):
                self.fail("ADD of a git repository is not converted; clone it in a RUN")
            if add and origin is None and _is_url(src):
                self._fetch(src, dest, owner, mode, opts.get("--checksum", ""))
                continue
            name = posixpath.basename(src.rstrip("/")) or "root"
            if pattern:
                name = "matches"
            if origin is None and name == ".":
                name = "context"
            staged = "%s-%d-%d/%s" % (STAGING, c.start_line, i, name)
            if origin is not None:
                self._copy_from(origin, "%d-%d" % (c.start_line, i), src, name, staged, dest, owner, mode)
                continue
            st = self.stage
            st.files.setdefault(origin, []).extend(self._local_source(src, staged))
            st.need("add" if add else "copy")
            helper = "chexstack_add" if add else "chexstack_copy"
            st.post.append("%s %s" % (helper, _args(staged, dest, owner, mode)))

    def _transfer_options(self, c) -> dict[str, str]:
        """COPY/ADD's ``--from``, ``--chown``, ``--chmod``, ``--checksum`` values (``--link`` ignored: layer reuse
        only, same files); any other flag is an error."""
        opts = {}
        for flag in c.flags:
            opt, _, val = flag.partition("=")
            if opt in ("--from", "--chown", "--chmod", "--checksum") and val:
                opts[opt] = self.text(val, opt)
            elif opt == "--link":
                continue  # layer reuse only, same files
            else:
                self.fail("%s is not converted" % flag)
        return opts

    def _transfer_parts(self, c) -> list[str]:
        """COPY/ADD's sources and destination, each expanded to one literal value."""
        if c.json:
            return [self.text(v, "%s argument" % c.cmd) for v in c.value]
        parts = []
        for w in self.words(" ".join(c.value)):
            value = words.literal(w)
            if value is None:
                self.undefined("%s argument" % c.cmd.upper(), w)
            parts.append(value)
        return parts

    def _transfer_dest(self, sources: list[str], dest: str) -> str:
        """The absolute destination (relative ones from WORKDIR), ending in / where it is a folder.

        With several sources the destination must be a folder. BuildKit's ``dispatchCopy``
        (``frontend/dockerfile/dockerfile2llb/convert.go``) makes a destination a folder when it is ``.`` or ends in
        ``/`` (``if cfg.params.DestPath == "." || ... DestPath[len(DestPath)-1] == filepath.Separator { dest +=
        "/" }``): those are kept, ``.`` being the WORKDIR. Any other destination is refused: the Dockerfile
        reference requires "a directory (must end with a slash /)", the classic builder refuses it ("When using
        COPY with more than one source file, the destination must be a directory and end with a /", ``.`` too),
        and BuildKit would copy each source to that one path, a folder only if it already is one."""
        if len(sources) > 1 and not (dest.endswith("/") or dest == "."):
            self.fail("with more than one source the destination must be a folder: end it in / (or write ., the "
                      "WORKDIR); BuildKit reads only those as a folder, the classic builder only a trailing /")
        if not dest.startswith("/"):
            is_dir = dest.endswith("/") or dest in (".", "..")
            return posixpath.normpath(posixpath.join(self.stage.workdir or "/", dest)) + ("/" if is_dir else "")
        if len(sources) > 1 or dest.endswith("/"):
            return dest.rstrip("/") + "/"
        return dest

    def _fetch(self, url: str, dest: str, owner: str, mode: str, checksum: str) -> None:
        """ADD of a URL: ``chexstack_fetch`` in ``%post`` (``--checksum`` sha256 only; no ``--chmod``)."""
        st = self.stage
        if checksum and not checksum.startswith("sha256:"):
            self.fail("--checksum %s: only sha256 is converted" % checksum)
        st.need("fetch")
        st.post.append("chexstack_fetch %s" % _args(url, dest, owner, checksum[len("sha256:"):]))
        if mode:
            self.fail("--chmod with a URL source is not converted")

    def _copy_from(self, origin: str, tag: str, src: str, name: str, staged: str, dest: str, owner: str,
                   mode: str) -> None:
        """COPY --from: the stage ``origin`` packs ``src`` with tar at its end, this stage's ``%files from`` takes the
        archive (``tag``: the instruction's line and source number) and ``chexstack_from`` unpacks it."""
        self._pack(origin, tag, src, name, staged)
        st = self.stage
        st.need("from")
        st.post.append("chexstack_from %s" % _args(staged + ".tar", dest, owner, mode))

    def _pack(self, origin: str, tag: str, src: str, name: str, staged: str) -> None:
        """The stage ``origin`` packs ``src`` at its end (``chexstack_pack``), this stage's ``%files from`` takes the
        archive to ``staged``.tar."""
        st = self.stage
        # `%files from` follows symlinks before Singularity 3.5.3: the stage packs the path with tar at its
        # end instead (links and owners kept on every release, as Docker's COPY --from keeps them)
        packed = "/.chexstack-from-%s.tar" % tag
        parent = posixpath.dirname(posixpath.normpath("/" + src.lstrip("/"))) or "/"
        source = next(s for s in self.stages if s.name == origin)
        # BuildKit's dispatchCopy copies a source path that is a symbolic link as what it points to
        # (``llb.Copy`` with ``FollowSymlinks: true``, frontend/dockerfile/dockerfile2llb/convert.go) and matches
        # a pattern among the stage's files (``AllowWildcard``): chexstack_pack does both in the source stage
        source.need("pack")
        base = posixpath.basename(posixpath.normpath("/" + src.lstrip("/"))) or "."
        source.post.append("chexstack_pack %s %s %s" % (shlex.quote(parent), base if name == "matches" else
                                                        shlex.quote(base), packed))
        st.files.setdefault(origin, []).append((packed, staged + ".tar"))

    def _local_source(self, src: str, staged: str) -> list[tuple[str, str]]:
        """The ``%files`` lines of a build-context source: the source whole, or, where the context's ignore file
        excludes some of its members, what Docker sends of it (``convert.dockerignore``), the folders it does not
        send whole made (with their modes) in ``%post`` before the copy."""
        local = posixpath.normpath(src.lstrip("/"))
        if local.startswith(".."):
            self.fail("source %s is outside the build context" % src)
        self.reads.append((self.path.parent / local, "the source %s of %s at line %d"
                           % (src, self.cmd.cmd.upper(), self.cmd.start_line)))
        try:
            selection = self.context.select(local)
        except dockerignore.Excluded:
            self.fail("source %s is not in the build context Docker sends (the context's %s excludes it), so this %s "
                      "fails in Docker; remove the pattern or the instruction"
                      % (src, self.context.path.name, self.cmd.cmd.upper()))
        for entry in [local] if selection is None else selection.copy:
            here = self.path.parent / entry
            if re.search(r"\s", entry):
                self.fail("paths with spaces are not converted (%%files splits on whitespace): %s" % entry)
            if here.is_symlink() or (here.is_dir() and any(p.is_symlink() for p in here.rglob("*"))):
                self.fail("source %s holds symbolic links: Apptainer's %%files follows them (cp -L), Docker "
                          "copies them as links; replace them or ADD a tar archive of the folder" % src)
        if not (self.path.parent / local).exists():
            self.warn(kind='source not in the context', why=
                "source %s is not in the build context (%s); it must be there when the SIF is built"
                % (src, self.path.parent))
        if selection is None:
            return [(local, staged)]

        def inside(path: str) -> str:
            return posixpath.join(staged, posixpath.relpath(path, local))

        st = self.stage
        st.post.append("mkdir -p %s" % shlex.quote(staged))
        for folder in selection.folders:
            st.post.append("mkdir -p %s" % shlex.quote(inside(folder)))
            if selection.modes[folder] != 0o755:
                st.post.append("chmod %o %s" % (selection.modes[folder], shlex.quote(inside(folder))))
        shown = ", ".join(selection.left_out[:8]) + (
            " and %d more" % (len(selection.left_out) - 8) if len(selection.left_out) > 8 else "")
        self.warn(kind='.dockerignore', why=
            "source %s: the context's %s leaves out %s, as Docker does (the build context as it is now: "
            "convert again after adding files there)" % (src, self.context.path.name, shown))
        return [(path, inside(path)) for path in selection.copy]

    def _origin(self, ref: str | None) -> str | None:
        """The stage ``--from`` names (a name, an index, or an image, for which a stage is added)."""
        if ref is None:
            return None
        names = [s.name for s in self.stages[:-1]]
        if ref.isdigit():
            if int(ref) >= len(names):
                self.fail("--from=%s: there is no earlier stage %s" % (ref, ref))
            return names[int(ref)]
        if ref.lower() in names:
            return ref.lower()
        if ref.lower() == self.stage.name:
            self.fail("--from=%s names the stage itself" % ref)
        base = self.bases(ref)
        extra = _Stage(self._fresh("image%d" % sum(1 for s in self.stages if s.name.startswith("image"))),
                       base.pinned or ref,
                       "docker-daemon" if base.local_only else "docker", base, post=[DOCKER_ENV])
        self.stages.insert(len(self.stages) - 1, extra)
        return extra.name

    # --- ENTRYPOINT / CMD ---------------------------------------------------------------------------------------
    def _entrypoint(self, c) -> None:
        st = self.stage
        if not st.workdir and not st.base.read:
            self.warn(kind='start folder', why=
                "no WORKDIR before it: the runscript starts in / (Docker's default); the base image's own "
                "WORKDIR was not read (Apptainer does not record it), add WORKDIR to keep it")
        st.entrypoint = list(c.value) if c.json else st.shell + [c.value[0]]
        if not st.cmd_set:
            st.cmd = []  # "If CMD is defined from the base image, setting ENTRYPOINT will reset CMD to an empty value"

    def _cmd(self, c) -> None:
        st = self.stage
        st.cmd = list(c.value) if c.json else st.shell + [c.value[0]]
        st.cmd_set, st.cmd_at = True, c

    def _finish(self) -> None:
        final = self.stages[-1]
        for st in self.stages:
            if st.user:
                self.cmd = None
                self.note('image user',
                    "%s: USER %s: the RUN commands after it run as that user; the SIF itself "
                    "runs as the invoking host user (Apptainer has no image user)"
                    % (self.path, st.user))
        if final.entrypoint is None and (final.cmd is not None or final.workdir):
            # the base's config not read: Apptainer's docker bootstrap records its ENTRYPOINT and CMD in the
            # runscript it writes before %post (OCI_ENTRYPOINT/OCI_CMD, apptainer's
            # internal/pkg/build/sources/conveyorPacker_oci.go insertRunScript), which %post keeps (BASE_RUN)
            final.base_run = True
            final.post.append(BASE_RUN_SAVE)
            self.cmd = final.cmd_at
            what = ("CMD without ENTRYPOINT: the runscript runs it with the base image's ENTRYPOINT, as Docker does, "
                    "taken at build time from what Apptainer's bootstrap recorded of %s (OCI_ENTRYPOINT)"
                    % final.image if final.cmd is not None else
                    "WORKDIR %s without ENTRYPOINT or CMD: the runscript starts there, as `docker run` does, and "
                    "runs the base image %s's ENTRYPOINT and CMD as Apptainer's bootstrap recorded them"
                    % (final.workdir, final.image))
            self.note('runscript from the bootstrap',
                "%s:%s: %s" % (self.path, final.cmd_at.start_line if final.cmd_at else "-", what))


def _spelled(part) -> str:
    """A ``words.Ref`` (or a word of parts) as the Dockerfile spells it: ``$NAME``, ``${NAME:-word}``."""
    if isinstance(part, words.Ref):
        return "$%s" % part.name if not part.op else "${%s%s%s}" % (part.name, part.op, _spelled(part.word))
    return "".join(p if isinstance(p, str) else _spelled(p) for p in part)


def _is_url(src: str) -> bool:
    return bool(re.match(r"^https?://", src))


def _args(*values: str) -> str:
    """Shell words for the helpers, trailing empty ones dropped."""
    values = list(values)
    while values and values[-1] == "":
        values.pop()
    return " ".join(shlex.quote(v) for v in values)


def _simple(command: str) -> bool:
    """True when ``command`` behaves the same written in a ``sh -e`` script as run by ``sh -c``: one simple command
    or pipeline, no lists, no state left behind (cd, assignments, set...)."""
    if "\n" in command:
        return False
    try:
        lex = shlex.shlex(command, posix=True, punctuation_chars=True)
        lex.whitespace_split = True
        tokens = list(lex)
    except ValueError:
        return False
    if not tokens:
        return False
    argv = []
    for t in tokens:
        if t and set(t) <= set("();<>|&"):
            if t not in _REDIRECTS:
                return False
        else:
            argv.append(t)
    while argv and _ASSIGNMENT.match(argv[0]):
        argv.pop(0)
    return bool(argv) and argv[0] not in _STATEFUL


def _runscript(st: _Stage) -> list[str]:
    lines = ["cd %s" % shlex.quote(st.workdir or "/")]
    if st.base_run:
        lines += ["OCI_ENTRYPOINT='' OCI_CMD=''", ". %s  # the base image's, as Apptainer's bootstrap recorded them"
                  % BASE_RUN]
        lines.append('if [ "$#" -eq 0 ]; then %s; fi' % (
            "set -- %s" % shlex.join(st.cmd) if st.cmd is not None else 'eval "set -- $OCI_CMD"'))
        lines.append('[ -n "$OCI_ENTRYPOINT" ] || [ "$#" -gt 0 ] || { echo "no command specified" >&2; exit 125; }')
        lines.append('eval "exec $OCI_ENTRYPOINT \\"\\$@\\""')
        return lines
    if st.cmd:
        lines.append('if [ "$#" -eq 0 ]; then set -- %s; fi' % shlex.join(st.cmd))
    if st.entrypoint:
        lines.append('exec %s "$@"' % shlex.join(st.entrypoint))
    else:
        if not st.cmd:
            lines.append('[ "$#" -gt 0 ] || { echo "no command specified" >&2; exit 125; }')
        lines.append('exec "$@"')
    return lines


def run_behaviour(final: _Stage) -> str:
    """What `apptainer run IMAGE [ARGS]` of the definition does: its folder, user and command."""
    user = "as the invoking host user" + (" (Docker: USER %s)" % final.user if final.user else "")
    if final.entrypoint is None and not final.base_run:
        return ("`apptainer run` runs the base image %s's own runscript (its ENTRYPOINT/CMD as Apptainer's bootstrap "
                "recorded them) in the host's current folder, %s" % (final.image, user))
    where = "in %s" % (final.workdir or "/")
    if final.base_run:
        what = "the base image's ENTRYPOINT (read at build time) with %s" % (
            "ARGS, else the base image's CMD" if final.cmd is None else "ARGS, else %s" % shlex.join(final.cmd))
    else:
        what = "%s%s" % (shlex.join(final.entrypoint) + " " if final.entrypoint else "",
                         "ARGS" + (", else %s" % shlex.join(final.cmd) if final.cmd else ""))
    return "`apptainer run` starts %s %s and runs %s" % (where, user, what)


def write(stages: list[_Stage], source: str) -> Definition:
    """The definition of the converted ``stages`` (``source``: the Dockerfile's name, for the header comment)."""
    # an empty stage no COPY --from reads (``FROM image AS alias``, only ever a name for its image) builds nothing
    stages = [st for st in stages if st is stages[-1] or len(st.post) > 1 or st.files or st.comments]
    multi = len(stages) > 1
    return Definition(tuple(Stage(st.bootstrap, st.image, st.name if multi else None, _sections(st, st is stages[-1]))
                            for st in stages),
                      ("# Converted from %s by `invoke convert` (chexstack): Docker's meaning of each instruction, "
                       "see convert/dockerfile.py" % source,))


def _sections(st: _Stage, final: bool) -> tuple[Section, ...]:
    """A converted stage's sections: ``%files`` (per source stage), and for the final stage ``%labels``; ``%post``
    (the base environment, the helpers it needs, then the instructions); for the final stage ``%environment``,
    ``%runscript`` and ``%startscript``."""
    def section(name: str, lines: list[str], args: str = "") -> Section:
        return Section(name, args, tuple("\n".join(lines).split("\n")))

    out = [section("files", ["%s %s" % pair for pair in pairs], "from %s" % origin if origin else "")
           for origin, pairs in st.files.items()]
    if final and st.labels:
        out.append(section("labels", ["%s %s" % kv for kv in st.labels]))
    if len(st.post) > 1 or st.comments or st.helpers:
        out.append(section("post", st.post[:1] + [HELPERS[h] for h in st.helpers] + st.post[1:] + st.comments))
    if final and st.environment:
        out.append(section("environment", st.environment))
    if final and (st.entrypoint is not None or st.base_run):
        out += [section("runscript", _runscript(st)), section("startscript", _runscript(st))]
    return tuple(out)


def convert(dockerfile_path: str | Path, build_args: dict[str, str | None] | None = None,
            bases: Reader | None = None) -> Conversion:
    """The definition of ``dockerfile_path`` that builds and runs as Docker would, and the conversion's warnings.
    ``build_args`` as ``parse_build_args`` gives them (None: given without a value the environment has); ``bases``
    reads each base image's config (``convert.base``; default: the local Docker engine's, else its registry's,
    ``default_reader()``;
    ``convert.base.OFFLINE`` reads none). Errors: ``ChexstackError`` naming the file, the line, the instruction and
    why it cannot be kept."""
    path = input_file(dockerfile_path, str(dockerfile_path), "a Dockerfile")
    read_text(path, str(path), "a Dockerfile")
    conv = _Converter(path, build_args or {}, bases or default_reader())
    stages = conv.run()
    text = write(stages, path.name).text()
    return Conversion(lint_definition(text, str(path)), conv.warnings, conv.reads, conv.kinds,
                      run_behaviour(stages[-1]))


def _same(a: Path, b: Path) -> bool:
    """``a`` and ``b`` are one file (a link or a hard link to it included), or one path where neither exists yet."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def save(conversion: Conversion, output: str | Path, option: str = "--output") -> Path:
    """Write ``conversion``'s definition to ``output``: refused (``ChexstackError`` naming ``option``, the path and
    the file it is) when ``output`` is, or links to, a file the conversion reads (``Conversion.reads``); written
    atomically (a temporary file beside the target, then renamed over it: a failed write leaves the old file, or
    none, never part of the definition), through a symbolic link to the file it names, with the mode the file had
    (a new one: 0666 less the umask, as ``open`` makes it). A path that is not a regular file (``/dev/stdout``, a
    pipe) is written in place. Folders and permissions are ``chexstack.outputs.output_file``'s to check first."""
    output = Path(output)
    for path, what in conversion.reads:
        if _same(output, path):
            raise ChexstackError("%s %s: that is %s (%s); writing the definition there would change the build it "
                                 "converts: choose another path" % (option, output, what, path))
    target = Path(os.path.realpath(output))
    try:
        if output.exists() and not output.is_file():  # os.stat follows the links: /dev/stdout to a pipe too
            with open(output, "w") as f:
                f.write(conversion.text)
            return output
        if target.exists():
            mode = stat.S_IMODE(target.stat().st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".%s." % target.name)
    except OSError as e:
        raise ChexstackError("%s %s: cannot write it (%s)" % (option, output, e.strerror or e)) from None
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as f:
            f.write(conversion.text)
        os.replace(tmp, target)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise ChexstackError("%s %s: cannot write it (%s); nothing was written"
                                 % (option, output, e.strerror or e)) from None
        raise
    return output


def parse_build_args(items: list[str] | None, environ: dict[str, str] | None = None) -> dict[str, str | None]:
    """``["CUDA_VERSION=11.8.0", "TOKEN", ...]`` -> ``{"CUDA_VERSION": "11.8.0", "TOKEN": <$TOKEN>}``, as the docker
    CLI reads ``--build-arg``: a NAME without ``=VALUE`` takes its value from the environment (``environ``, default
    ``os.environ``; docker build reference, "--build-arg": "the daemon will propagate the value from the local
    environment"), and None where the environment does not set it: the CLI then sends the name without a value,
    which the daemon drops, so the ARG keeps its default (``NAME=`` is the empty value). The last of one name wins.
    A NAME that is not a variable name is an error."""
    environ = os.environ if environ is None else environ
    out: dict[str, str | None] = {}
    for item in items or []:
        name, eq, value = item.partition("=")
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise ChexstackError("--build-arg %r: expected NAME=VALUE or NAME (its value from the environment)"
                                 % item)
        out[name] = value if eq else environ.get(name)
    return out


def convert_file(dockerfile_path: str | Path, build_args: dict[str, str | None] | None = None,
                 output: str | Path | None = None, bases: Reader | None = None) -> str:
    """Like ``convert``, the warnings printed to stderr; with ``output``, the definition ``save``d there."""
    import sys

    result = convert(dockerfile_path, build_args, bases)
    if output is not None:
        save(result, output)
    for w in result.warnings:
        print("warning: %s" % w, file=sys.stderr)
    print(result.summary(), file=sys.stderr)
    return result.text
