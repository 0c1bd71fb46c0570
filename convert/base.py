"""What a Dockerfile's base image brings to the build: its config (Docker image spec, "Image JSON description":
``Config.Env``, ``User``, ``WorkingDir``, ``Shell``, ``Entrypoint``, ``Cmd``, ``OnBuild``;
https://github.com/moby/docker-image-spec/blob/main/spec.md), which a child Dockerfile inherits without a word of
it in its own text: BuildKit's ``dockerfile2llb`` starts each stage from the base's config (``d.image =
img``), runs its RUNs through ``Config.Shell`` as ``Config.User`` in ``Config.WorkingDir`` with ``Config.Env``,
and dispatches ``Config.OnBuild`` right after the FROM (``dispatchOnBuildTriggers``).

``engine_reader()`` -> a reader: ``reader(image) -> BaseImage``, the config of ``image`` as the local Docker engine
holds it (``docker image inspect``, through ``chexstack.engine``), or a ``BaseImage`` that was not read (``read``
False) saying where it was looked for and why it is not there. No registry is read: a manifest and config from a
registry would need the registry's token dance and a platform choice of their own, and no registry is reachable
where this project is tested; ``docker pull IMAGE`` puts the image in the engine, where it is read.
``OFFLINE`` is the reader that reads nothing (the condition made explicit: tests, and a conversion meant to depend
on the Dockerfile's text alone).

``BaseImage.local_only``: the engine holds the image and it has no ``RepoDigests`` (built or imported here, never
pulled from nor pushed to a registry), so Apptainer must take it from the engine (``Bootstrap: docker-daemon``,
https://apptainer.org/docs/user/main/appendix.html#docker-daemon-archive), not from a registry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class BaseImage:
    """A base image's config as read (``read_from``: where, e.g. "the local Docker engine (sha256:...)"), or not
    read (``read_from`` None; ``why_not``: where it was looked for and why it is not there). ``env``: (name,
    value) pairs in the config's order; ``shell``/``entrypoint``/``cmd``: argv lists, None where the config sets
    none; ``onbuild``: the trigger instructions, as ``docker inspect`` gives them."""

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

    @property
    def read(self) -> bool:
        return self.read_from is not None


Reader = Callable[[str], BaseImage]


def from_config(image: str, config: dict | None, read_from: str, local_only: bool = False) -> BaseImage:
    """The ``BaseImage`` of an image config's ``Config`` object (``docker image inspect``'s ``Config``, a registry
    config blob's ``config``; None or a missing field: the default, as Docker reads it)."""
    config = config or {}

    def argv(key: str) -> tuple[str, ...] | None:
        value = config.get(key)
        return None if value is None else tuple(value)

    env = tuple(tuple(e.partition("=")[::2]) for e in config.get("Env") or [])
    return BaseImage(image, read_from, "", env, config.get("User") or "", config.get("WorkingDir") or "",
                     argv("Shell"), argv("Entrypoint"), argv("Cmd"), tuple(config.get("OnBuild") or ()), local_only)


def OFFLINE(image: str) -> BaseImage:
    """Reads nothing: every base is unread."""
    return BaseImage(image, why_not="not looked up (the conversion was asked to read no engine)")


#: Where a base that is not read was looked for (the refusal and the warning name it).
NO_REGISTRY = "convert reads no registry"


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
            return BaseImage(image, why_not="no Docker engine answers here (DOCKER_HOST or the default socket), "
                                            "and %s" % NO_REGISTRY)
        import docker.errors
        try:
            attrs = client.images.get(image).attrs
        except docker.errors.ImageNotFound:
            return BaseImage(image, why_not="the local Docker engine does not hold %s, and %s" % (image, NO_REGISTRY))
        except docker.errors.DockerException as e:
            return BaseImage(image, why_not="the local Docker engine did not answer for %s (%s), and %s"
                                            % (image, e, NO_REGISTRY))
        return from_config(image, attrs.get("Config"), "the local Docker engine (%s)" % attrs.get("Id", "?")[:19],
                           local_only=not attrs.get("RepoDigests"))
    return read
