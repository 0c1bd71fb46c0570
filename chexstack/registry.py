"""Image references and OCI registries: parse ``host[:port]/path[:tag][@sha256:…]``, resolve a tag to its digest,
read an image's config, push a local engine image, and say in one line why a registry could not be used.

The grammar is distribution/reference's (https://github.com/distribution/reference/blob/main/reference.go, the
grammar in its docstring; normalisation in normalize.go): ``name [":" tag] ["@" digest]``, a name of at most 255
characters, ``[domain "/"] path``, the first component a domain when it holds a ``.`` or a ``:`` or is
``localhost``. No maintained Python package implements it (the docker SDK's ``docker.utils.parse_repository_tag``
splits on the last ``@``/``:`` without checking either part), so it is written here once; the digest is the OCI
image spec's ``sha256:`` + 64 lowercase hex digits (https://github.com/opencontainers/image-spec/blob/main/descriptor.md#digests).

Registries are reached with skopeo (https://github.com/containers/skopeo, Debian's 1.9; ``scripts/setup
--registry``), which trusts a registry's CA where dockerd does (``/etc/docker/certs.d/<host:port>/ca.crt``,
containers-certs.d(5)) and reads credentials where docker login writes them. Errors: ``RegistryError`` (a
``ChexstackError``, exit 2) whose message names the registry, what was being done and the cause (cannot be
reached, TLS not trusted, credentials refused, no such image); ``ChexstackError`` exit 3 without skopeo.
"""
from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from chexstack import tools
from chexstack.errors import ChexstackError, ExitCode

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[_.]|__|-+)"
_PATH_COMPONENT = r"%s(?:%s%s)*" % (_ALNUM, _SEPARATOR, _ALNUM)
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = r"(?:%s(?:\.%s)*|\[[a-fA-F0-9:]+\])" % (_DOMAIN_COMPONENT, _DOMAIN_COMPONENT)
_DOMAIN = r"%s(?::[0-9]+)?" % _HOST
_TAG = r"[\w][\w.-]{0,127}"
_REFERENCE = re.compile(r"^(?:(?P<domain>%s)/)?(?P<path>%s(?:/%s)*)(?::(?P<tag>%s))?(?:@(?P<digest>[^@]+))?$"
                        % (_DOMAIN, _PATH_COMPONENT, _PATH_COMPONENT, _TAG))
_SHA256 = re.compile(r"^sha256:[a-f0-9]{64}$")
NAME_MAX = 255
INSTALL_HINT = "install it with scripts/setup --registry (Debian's skopeo)"
#: Seconds a push may take (the cpu image is 2.5 GB; skopeo compresses each layer on one core).
PUSH_TIMEOUT_S = 3600.0
INSPECT_TIMEOUT_S = 120.0


class RegistryError(ChexstackError):
    """A registry could not be used: the message names it, what was done and why (exit 2)."""


@dataclass(frozen=True)
class Reference:
    """An image reference: ``domain`` (``host[:port]``, None for a name without one), ``path`` (``a/b``),
    ``tag`` and ``digest`` (``sha256:`` + 64 hex), each None when absent."""

    domain: str | None
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """``domain/path`` (or ``path``): the repository."""
        return "%s/%s" % (self.domain, self.path) if self.domain else self.path

    def __str__(self) -> str:
        return self.name + (":" + self.tag if self.tag else "") + ("@" + self.digest if self.digest else "")

    def pinned(self, digest: str | None = None) -> str:
        """``name@digest`` (this reference's own digest when none is given)."""
        digest = digest or self.digest
        if not digest:
            raise ValueError("%s has no digest" % self)
        return "%s@%s" % (self.name, digest)


def parse(text: str, what: str = "image reference") -> Reference:
    """``text`` as a ``Reference``; ChexstackError naming ``what`` (an option: ``--push``) and what was expected
    when it is not one (distribution/reference's grammar, a sha256 digest)."""
    m = _REFERENCE.match(text or "")
    expected = "expected [HOST[:PORT]/]PATH[:TAG][@sha256:<64 hex digits>] (lowercase path components)"
    if not m:
        raise ChexstackError("%s %r: not an image reference; %s" % (what, text, expected))
    domain, path = m.group("domain"), m.group("path")
    if domain and not ("." in domain or ":" in domain or domain == "localhost"):  # a path component, then
        if not re.match("^%s$" % _PATH_COMPONENT, domain):
            raise ChexstackError("%s %r: not an image reference (%r is neither a registry, which has a '.' or a "
                                 "':', nor a lowercase path component); %s" % (what, text, domain, expected))
        domain, path = None, domain + "/" + path
    digest = m.group("digest")
    if digest is not None and not _SHA256.match(digest):
        raise ChexstackError("%s %r: digest %r is not sha256:<64 lowercase hex digits>" % (what, text, digest))
    ref = Reference(domain, path, m.group("tag"), digest)
    if len(ref.name) > NAME_MAX:
        raise ChexstackError("%s %r: the name is longer than %d characters" % (what, text, NAME_MAX))
    return ref


def is_registry_reference(text: str) -> bool:
    """Whether ``text`` parses as a reference that names a registry (``host[:port]/…``)."""
    try:
        return parse(text).domain is not None
    except ChexstackError:
        return False


def require_registry(ref: Reference, what: str) -> Reference:
    """``ref`` when it names a registry, else ChexstackError naming ``what``."""
    if ref.domain is None:
        raise ChexstackError("%s %r: names no registry; expected HOST[:PORT]/PATH[:TAG] (e.g. "
                             "10.213.57.1:5000/chexstack/cpu:v1)" % (what, str(ref)))
    return ref


#: What skopeo's (containers/image's and Go's) messages say, in order, as the cause shown to the user.
_CAUSES = (
    (re.compile(r"x509: |tls: |certificate", re.I),
     "its TLS certificate is not trusted here (put its CA in /etc/docker/certs.d/{registry}/ca.crt)"),
    (re.compile(r"unauthorized|authentication required|denied|invalid username/password", re.I),
     "it refused the credentials (docker login {registry})"),
    (re.compile(r"connection refused|no route to host|network is unreachable|i/o timeout|no such host|"
                r"server misbehaving|connection reset|dial tcp", re.I),
     "it cannot be reached"),
    (re.compile(r"manifest unknown|name unknown|not found", re.I), "it has no such image"),
)


def cause(stderr: str, registry: str) -> str:
    """One line: why skopeo could not use ``registry``, from its ``stderr`` (the detail it gave, in brackets)."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    detail = lines[-1] if lines else "no output"
    detail = re.sub(r'^time="[^"]*" level=\w+ msg="(.*)"$', r"\1", detail).replace('\\"', '"')
    detail = re.sub(r'^Error parsing image name "[^"]*": ', "", detail)
    for pattern, text in _CAUSES:
        if pattern.search(stderr):
            return "%s (%s)" % (text.format(registry=registry), detail)
    return detail


def _skopeo(argv: list[str], registry: str, doing: str, timeout: float) -> tools.ToolRun:
    run = tools.run(["skopeo"] + argv, timeout=timeout)
    if run.missing:
        raise ChexstackError("%s needs skopeo, which is not on PATH: %s" % (doing, INSTALL_HINT),
                             exit_code=ExitCode.TOOL_MISSING)
    if not run.ok:
        why = run.why_not() if run.rc is None else cause(run.stderr or run.stdout, registry)
        raise RegistryError("registry %s: %s: %s" % (registry, doing, why))
    return run


def _manifest_digest(ref: Reference, domain: str, doing: str, timeout: float) -> str:
    """The digest skopeo gives for the manifest ``ref`` names; RegistryError ``registry DOMAIN: DOING: …``."""
    run = _skopeo(["inspect", "--format", "{{.Digest}}", "docker://%s" % ref], domain, doing, timeout)
    digest = run.stdout.strip()
    if not _SHA256.match(digest):
        raise RegistryError("registry %s: %s: skopeo printed %r, not a sha256 digest" % (domain, doing, digest[:100]))
    return digest


def resolve(ref: Reference) -> str:
    """The digest (``sha256:…``) of the manifest ``ref`` names in its registry: a tag resolved, a digest checked to
    exist there. RegistryError when the registry cannot be reached, is not trusted, refuses, or has no such image."""
    require_registry(ref, "image")
    digest = _manifest_digest(ref, ref.domain, "cannot resolve %s" % ref, INSPECT_TIMEOUT_S)
    if ref.digest and digest != ref.digest:
        raise RegistryError("registry %s: %s answered with the manifest %s" % (ref.domain, ref, digest))
    return digest


#: The registry of a reference that names none (distribution/reference's normalize.go: ``docker.io``).
DEFAULT_DOMAIN = "docker.io"


def config(ref: Reference, timeout: float = INSPECT_TIMEOUT_S) -> tuple[str, dict]:
    """``(digest, config)`` of the image ``ref`` names in its registry (``docker.io`` where it names none): the
    manifest's digest (``sha256:…``; an index's where the registry serves one) and the image config of this
    machine's platform, as a pull would choose it (skopeo's ``inspect --raw --config`` of ``name@digest``: the blob
    as stored, whose ``config`` object holds ``Env``, ``User``, ``WorkingDir``, ``Entrypoint``, ``Cmd`` (the OCI
    image spec's config, https://github.com/opencontainers/image-spec/blob/main/config.md) and, in a Docker image's
    config, ``Shell`` and ``OnBuild``; without ``--raw`` skopeo converts it to the OCI form, which drops those two:
    found by the cluster test, a micromamba base's SHELL lost). RegistryError
    naming the registry and the cause when it cannot be read; ChexstackError exit 3 without skopeo."""
    domain = ref.domain or DEFAULT_DOMAIN
    digest = ref.digest or _manifest_digest(ref, domain, "cannot read %s" % ref, timeout)
    run = _skopeo(["inspect", "--raw", "--config", "docker://%s" % ref.pinned(digest)], domain,
                  "cannot read the config of %s" % ref, timeout)
    try:
        blob = json.loads(run.stdout)
    except ValueError as e:
        raise RegistryError("registry %s: the config of %s is not JSON (%s)" % (domain, ref, e)) from None
    if not isinstance(blob, dict) or not isinstance(blob.get("config") or {}, dict):
        raise RegistryError("registry %s: the config of %s has no config object" % (domain, ref))
    return digest, blob


def check_reachable(ref: Reference) -> None:
    """Before minutes of work: the registry of ``ref`` answers over trusted TLS and accepts our credentials (an
    image not there yet is fine). RegistryError otherwise."""
    run = tools.run(["skopeo", "inspect", "--raw", "docker://%s" % ref], timeout=INSPECT_TIMEOUT_S)
    if run.missing:
        raise ChexstackError("--push needs skopeo, which is not on PATH: %s" % INSTALL_HINT,
                             exit_code=ExitCode.TOOL_MISSING)
    if run.ok:
        return
    why = run.why_not() if run.rc is None else cause(run.stderr, ref.domain)
    if why.startswith("it has no such image"):
        return
    raise RegistryError("registry %s: cannot push to %s: %s" % (ref.domain, ref, why))


def push(image_id: str, target: Reference) -> str:
    """Copy the engine's image ``image_id`` (``sha256:…``, exactly that image, never a tag that may have moved) to
    ``target`` (``host[:port]/path[:tag]``, tag ``latest`` when none) and return the digest the registry stored
    it under. RegistryError naming the registry and the cause when it fails."""
    require_registry(target, "--push")
    if target.digest:
        raise ChexstackError("--push %s: a push names a tag, not a digest (the registry gives the digest)" % target)
    dest = target if target.tag else Reference(target.domain, target.path, "latest")
    with tempfile.TemporaryDirectory(prefix="chexstack-push-") as tmp:
        digest_file = Path(tmp) / "digest"
        _skopeo(["copy", "-q", "--digestfile", str(digest_file), "docker-daemon:%s" % image_id,
                 "docker://%s" % dest], target.domain, "cannot push %s" % dest, PUSH_TIMEOUT_S)
        digest = digest_file.read_text().strip() if digest_file.exists() else ""
    if not _SHA256.match(digest):
        raise RegistryError("registry %s: pushed %s but skopeo wrote no digest (%r)" % (target.domain, dest, digest))
    return digest
