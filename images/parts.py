"""The small parts image recipes are composed of (hpccm primitives + the build-context files they COPY).

A ``Part`` is one step of an image: its hpccm primitives render to Dockerfile or Singularity text late, at the
edge (``images.render``), and ``context`` maps the build-context paths its COPYs read to their source (a file or
folder of this repository, or bytes). Versions never live here: every value comes from the stack manifest through
the recipe that calls a part.

What the parts get right that Dockerfile -> Singularity converters get wrong
(https://github.com/singularityhub/singularity-cli/issues/187,
https://github.com/singularityhub/singularity-cli/issues/20,
https://github.com/singularityhub/singularity-cli/issues/73,
https://github.com/singularityhub/singularity-cli/issues/158):

- ``base``: the image reference is resolved before rendering (manifest or ``--base``); a ``$`` in it is refused,
  so no ``From:`` line can carry an unresolved ARG (singularityhub/singularity-cli#187).
- ``env``: values with spaces or quotes are quoted (hpccm's ``environment`` writes ``K=a b``, which Docker and
  ``export`` both split), and for Singularity hpccm also exports them in ``%post`` (singularityhub/singularity-cli#20).
- ``copy_file``/``copy_dir``: destinations are absolute and, for Singularity, created in ``%setup`` before
  ``%files`` runs (singularityhub/singularity-cli#73).
- no ``USER``: images run as the invoking user; hpccm's ``user`` renders nothing for Singularity, never ``su -``
  (https://github.com/singularityhub/singularity-cli/issues/158).
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import hpccm
import hpccm.config
from hpccm.building_blocks import packages
from hpccm.primitives import baseimage, comment, copy, environment, shell

from chexstack.errors import ChexstackError
from images.naming import IN_IMAGE_HOME
from images.payload import PAYLOAD

REPO = Path(__file__).resolve().parents[1]

#: The host's CA bundle: it holds the TLS-intercepting proxy's CA (brief: "This machine").
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
#: Build-context name of that bundle; only devel stages COPY it, so it never reaches a final image.
CONTEXT_CA = "build-only/ca-certificates.crt"
IMAGE_CA = "/usr/local/share/chexstack-build/ca-certificates.crt"


@dataclass
class Stage:
    """One build stage: its name (``devel``, ``runtime``) and its parts, in order; the last stage is the image."""

    name: str
    parts: list["Part"]


@dataclass
class Part:
    """One recipe step: ``primitives`` (hpccm objects, rendered late) and ``context`` (build-context path ->
    source ``Path`` or ``bytes``) for the files they COPY."""

    name: str
    primitives: list
    context: dict[str, Path | bytes] = field(default_factory=dict)


def quote_value(value: str) -> str:
    """A value as Docker ``ENV``/``LABEL`` and sh ``export`` both read it: bare when safe, else double-quoted
    (``$`` still expands, as in Docker's own ``ENV PATH=/x:$PATH``)."""
    if value and re.fullmatch(r"[A-Za-z0-9_./:@%+,=${}-]+", value):
        return value
    return '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")


class _Base(baseimage):
    """hpccm's ``baseimage``; in a Singularity definition its stage's first ``%post`` (hpccm's sourcing of the
    Docker base's environment) also sets Docker's umask 0022: Apptainer runs ``%post`` under 0002 (observed with
    Apptainer 1.4.5: the cpu stack's /opt/chexstack and /opt/venv/bin came out 775 where Docker's RUN made 755;
    ``convert.dockerfile.DOCKER_ENV`` does the same for converted Dockerfiles), and the sections of one name are
    one script, so the umask holds for the whole stage."""

    def __str__(self):
        text = super().__str__()
        if hpccm.config.g_ctype == hpccm.container_type.SINGULARITY:
            text += "\n    umask 022"
        return text


class _Copy(copy):
    """hpccm's ``copy``; in a Singularity definition the folders its ``%setup`` makes (``_mkdir``) get Docker's
    umask 0022 too: ``%setup`` runs on the build host under the caller's umask (0002 under Apptainer 1.4.5 here:
    the cpu stack's /opt/chexstack and /opt/chexstack/facts came out 775 where Docker's COPY made its missing
    folders 755)."""

    def __str__(self):
        text = super().__str__()
        if hpccm.config.g_ctype == hpccm.container_type.SINGULARITY:
            text = text.replace("%setup\n", "%setup\n    umask 022\n")
        return text


def base(image: str, distro: str, stage: str | None = None) -> Part:
    """``FROM image [AS stage]``; ``distro`` is hpccm's name (``ubuntu16``, ``ubuntu22``, ``centos7``) so that
    package parts pick apt or yum. Raises ChexstackError for an unresolved ``$`` in ``image``."""
    if "$" in image or not image.strip():
        raise ChexstackError("base image %r: expected a resolved image reference (no $VARIABLE)" % image)
    prims = [_Base(image=image, _distro=distro, _arch="x86_64", _as=stage or "")]
    return Part("base", prims)


def os_packages(names: list[str]) -> Part:
    """Distribution packages (apt or yum, chosen by the stage's distro), caches removed in the same layer."""
    return Part("os-packages", [packages(ospackages=sorted(names))])


def env(variables: dict[str, str]) -> Part:
    """``ENV`` (Docker) / ``%environment`` + exports in ``%post`` (Singularity), values quoted when needed."""
    return Part("env", [environment(variables={k: quote_value(v) for k, v in variables.items()})])


def run(*commands: str, name: str = "run") -> Part:
    """One ``RUN`` (Docker) / ``%post`` block (Singularity): the commands joined with ``&&``."""
    return Part(name, [shell(commands=list(commands))])


def copy_file(ctx: str, source: Path | bytes, dest: str, name: str = "copy") -> Part:
    """COPY one build-context file to the absolute path ``dest``; Singularity creates its folder in ``%setup``
    before ``%files`` copies (https://github.com/singularityhub/singularity-cli/issues/73)."""
    return copy_dir(ctx, {"": source}, dest, name)


def copy_dir(ctx: str, files: dict[str, Path | bytes], dest: str, name: str = "copy") -> Part:
    """COPY the build-context folder ``ctx`` (made of ``files``: path below ``ctx`` -> source file, folder or
    bytes; ``""`` for ``ctx`` itself) to the absolute path ``dest``."""
    if not dest.startswith("/") or "$" in dest:
        raise ChexstackError("COPY destination %r: expected an absolute path without variables" % dest)
    context = {("%s/%s" % (ctx, rel)) if rel else ctx: src for rel, src in files.items()}
    return Part(name, [_Copy(src=ctx, dest=dest, _mkdir=True)], context)


def copy_from_stage(stage: str, path: str) -> Part:
    """``COPY --from=stage path path`` (``%files from stage`` in Singularity ≥ 3.2)."""
    return Part("copy-from-%s" % stage, [copy(_from=stage, src=path, dest=path)])


def note(text: str) -> Part:
    return Part("comment", [comment(text)])


def combine(name: str, *parts: Part) -> Part:
    """One part made of several, in order."""
    return Part(name, [p for part in parts for p in part.primitives],
                {k: v for part in parts for k, v in part.context.items()})


def build_ca() -> Part:
    """The host's CA bundle for the downloads of a devel stage (pip, curl, conda): COPYed under a name no other
    stage reads and pointed to by the variables those tools honour. A final stage never inherits it (multi-stage:
    only what it COPYs ``--from`` the devel stage), so it is in no layer and no history entry of the final image.
    Falls back to certifi's bundle on a host without the system bundle."""
    source: Path = HOST_CA_BUNDLE
    if not source.is_file():
        import certifi  # shipped with requests (docker SDK dependency)
        source = Path(certifi.where())
    return combine("build-ca", copy_file(CONTEXT_CA, source, IMAGE_CA),
                   env({k: IMAGE_CA for k in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")}))


def horovod_env_prefix(horovod_env: dict[str, str]) -> str:
    """``K=V K2=V2`` for one command: Horovod's build flags reach its build only, not the image's ENV."""
    return " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(horovod_env.items()))


def chexstack_code() -> Part:
    """The payload (``images.payload.PAYLOAD``: the trainer and the in-image probe) under ``/opt/chexstack``
    (``python -m trainer`` works from any directory through PYTHONPATH). Last in every image: a trainer-only
    change rebuilds only these layers. Build-context names: ``chexstack/<file or folder name>``."""
    home = IN_IMAGE_HOME
    copies = [copy_dir("chexstack/%s" % Path(rel).name, {"": REPO / rel}, inside) for inside, rel in PAYLOAD.items()]
    return combine("chexstack-code", env({"PYTHONPATH": home, "CHEXSTACK_HOME": home}), *copies)
