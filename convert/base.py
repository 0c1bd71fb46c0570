"""What a Dockerfile's base image brings to the build: its config (Docker image spec, "Image JSON description":
``Config.Env``, ``User``, ``WorkingDir``, ``Shell``, ``Entrypoint``, ``Cmd``, ``OnBuild``;
https://github.com/moby/docker-image-spec/blob/main/spec.md), which a child Dockerfile inherits without a word of
it in its own text: BuildKit's ``dockerfile2llb`` starts each stage from the base's config (``d.image =
img``), runs its RUNs through ``Config.Shell`` as ``Config.User`` in ``Config.WorkingDir`` with ``Config.Env``,
and dispatches ``Config.OnBuild`` right after the FROM (``dispatchOnBuildTriggers``).

``default_reader()`` -> a reader: ``reader(image) -> BaseImage``, where ``docker build`` would find the base: the
local Docker engine first (``engine_reader``: ``docker image inspect``, through ``chexstack.engine``), then the
image's registry (``registry_reader``: ``chexstack.registry.config``, skopeo, which does the registry's token
dance, trusts a registry's CA where dockerd does and picks this machine's platform from an index, as a pull does).
A base neither holds is a ``BaseImage`` that was not read (``read`` False), saying where it was looked for and why
it is not there (each reader's cause: no engine, not in it, the registry cannot be reached, not trusted, no such
image). ``OFFLINE`` is the reader that reads nothing (the condition made explicit: tests, and a conversion meant
to depend on the Dockerfile's text alone).

``BaseImage.pinned``: a base read from a registry by tag is built from the digest that was read
(``name@sha256:…``), so the definition builds on the very config it was converted against, never on what the tag
names later.

``BaseImage.local_only``: the engine holds the image and it has no ``RepoDigests`` (built or imported here, never
pulled from nor pushed to a registry), so Apptainer must take it from the engine (``Bootstrap: docker-daemon``,
https://apptainer.org/docs/user/main/appendix.html#docker-daemon-archive), not from a registry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from chexstack import registry
from chexstack.errors import ChexstackError


@dataclass(frozen=True)
class BaseImage:
    """A base image's config as read (``read_from``: where, e.g. "the local Docker engine (sha256:...)"), or not
    read (``read_from`` None; ``why_not``: where it was looked for and why it is not there). ``env``: (name,
    value) pairs in the config's order; ``shell``/``entrypoint``/``cmd``: argv lists, None where the config sets
    none; ``onbuild``: the trigger instructions, as ``docker inspect`` gives them; ``pinned``: the reference by
    digest the build pulls (a registry read), None where the image is used as written."""

    image: str
    read_from: str | None = None
    why_not: str = ""
    env: tuple[tuple[str, str], ...] = ()
    user: str = ""
    workdir: str = ""
    shell: tuple[str, ...] | None = None
    entrypoint: tuple[str, ...] | None = None
    cmd: tuple[str, ...] | None = None
    onbuild: tuple[str, ...] = ()
    local_only: bool = False
    pinned: str | None = None

    @property
    def read(self) -> bool:
        return self.read_from is not None


Reader = Callable[[str], BaseImage]


def from_config(image: str, config: dict | None, read_from: str, local_only: bool = False,
                pinned: str | None = None) -> BaseImage:
    """The ``BaseImage`` of an image config's ``Config`` object (``docker image inspect``'s ``Config``, a registry
    config blob's ``config``; None or a missing field: the default, as Docker reads it)."""
    config = config or {}

    def argv(key: str) -> tuple[str, ...] | None:
        value = config.get(key)
        return None if value is None else tuple(value)

    env = tuple(tuple(e.partition("=")[::2]) for e in config.get("Env") or [])
    return BaseImage(image, read_from, "", env, config.get("User") or "", config.get("WorkingDir") or "",
                     argv("Shell"), argv("Entrypoint"), argv("Cmd"), tuple(config.get("OnBuild") or ()), local_only,
                     pinned)


def OFFLINE(image: str) -> BaseImage:
    """Reads nothing: every base is unread."""
    return BaseImage(image, why_not="not looked up (the conversion was asked to read no engine)")


def engine_reader(timeout: int = 30) -> Reader:
    """A reader of the local Docker engine (one client for all the bases of one conversion, made at the first
    call; ``chexstack.engine.optional_client``: none where no engine answers)."""
    from chexstack import engine

    state: dict = {}

    def read(image: str) -> BaseImage:
        if "client" not in state:
            state["client"] = engine.optional_client(timeout)
        client = state["client"]
        if client is None:
            return BaseImage(image, why_not="no Docker engine answers here (DOCKER_HOST or the default socket)")
        import docker.errors
        try:
            attrs = client.images.get(image).attrs
        except docker.errors.ImageNotFound:
            return BaseImage(image, why_not="the local Docker engine does not hold %s" % image)
        except docker.errors.DockerException as e:
            return BaseImage(image, why_not="the local Docker engine did not answer for %s (%s)" % (image, e))
        return from_config(image, attrs.get("Config"), "the local Docker engine (%s)" % attrs.get("Id", "?")[:19],
                           local_only=not attrs.get("RepoDigests"))
    return read


def registry_reader(timeout: float = 30.0) -> Reader:
    """A reader of each base's registry (``chexstack.registry.config``; ``docker.io`` for a name without one): the
    config of this machine's platform, ``pinned`` to the digest read."""
    def read(image: str) -> BaseImage:
        try:
            ref = registry.parse(image, "the base image")
            digest, blob = registry.config(ref, timeout)
        except ChexstackError as e:  # RegistryError: the registry named with the cause; exit 3: no skopeo
            return BaseImage(image, why_not=str(e))
        pinned = ref.pinned(digest)
        return from_config(image, blob.get("config"),
                           "the registry %s (%s)" % (ref.domain or registry.DEFAULT_DOMAIN, pinned), pinned=pinned)
    return read


def first_read(*readers: Reader) -> Reader:
    """The first of ``readers`` that reads the base; none: not read, each one's reason given in turn."""
    def read(image: str) -> BaseImage:
        tried = []
        for reader in readers:
            base = reader(image)
            if base.read:
                return base
            tried.append(base.why_not)
        return BaseImage(image, why_not="; ".join(tried))
    return read


def default_reader(timeout: float = 30.0) -> Reader:
    """Where ``docker build`` finds a base: the local engine, then the image's registry."""
    return first_read(engine_reader(int(timeout)), registry_reader(timeout))


#: ``invoke convert --pull``: where a base's config is read (the words of ``podman build --pull``).
PULL_POLICIES = ("missing", "never")


def pull_reader(policy: str) -> Reader | None:
    """The reader of ``--pull POLICY``: ``missing``, None (``convert``'s default, ``default_reader``); ``never``,
    the local engine only. ChexstackError naming ``--pull`` and the policies for another word."""
    if policy not in PULL_POLICIES:
        raise ChexstackError("--pull %r: expected one of %s" % (policy, ", ".join(PULL_POLICIES)))
    if policy == "missing":
        return None
    return first_read(engine_reader(), lambda image: BaseImage(image, why_not="--pull never: no registry is read"))
