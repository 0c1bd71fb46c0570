"""The one door to the local Docker engine (docker SDK; ``DOCKER_HOST`` or the default socket).

``client(timeout)`` -> a connected ``docker.DockerClient``, or ChexstackError saying how to start an engine;
``optional_client(timeout)`` -> the same, or None where an engine is only nice to have (labels for a warning, a
run record's image ID, a node check that reports the missing engine itself). Every chexstack module that talks to
Docker gets its client here.
"""
from __future__ import annotations

from chexstack.errors import ChexstackError

START_HINT = "start one with scripts/start-dockerd (scripts/setup --docker installs it)"


def client(timeout: int = 600):
    """A client of the local engine that answered a ping; ChexstackError (exit 2) when none answers."""
    import docker
    import docker.errors
    try:
        c = docker.from_env(timeout=timeout)
        c.ping()
        return c
    except docker.errors.DockerException as e:
        raise ChexstackError("no Docker engine answers (%s); %s" % (e, START_HINT)) from None


def optional_client(timeout: int = 60):
    """``client(timeout)``, or None when the SDK is missing or no engine answers."""
    try:
        return client(timeout)
    except (ChexstackError, ImportError):
        return None
