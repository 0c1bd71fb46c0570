"""``Plan``: how one run starts on this machine, whatever the target (``launch.plan``): horovodrun here or across
hosts, ``docker run`` or ``singularity exec`` of a stack's image, or the follower of a submitted Slurm job. Every
target returns it; ``launch.local.execute`` runs it under the output lock."""
from __future__ import annotations

import dataclasses
import shlex


@dataclasses.dataclass(frozen=True)
class Plan:
    """``argv``: the command; ``env``: added to this process's environment for it; ``controller``: the Horovod
    controller the ranks use ("gloo" or "mpi") and ``reason``: why; ``warnings``: said before it starts;
    ``container``: the ``docker run --name`` of a container the run starts (removed by ``force_stop`` when the
    client was killed); ``shown``: what to print instead of the command line (a submission and its follower)."""

    argv: list[str]
    env: dict[str, str]
    controller: str
    reason: str
    warnings: tuple[str, ...] = ()
    container: str | None = None
    shown: str | None = None

    def command_line(self) -> str:
        """The exact command, environment first, as a shell would take it (or ``shown``)."""
        if self.shown:
            return self.shown
        return " ".join(["%s=%s" % (k, shlex.quote(v)) for k, v in sorted(self.env.items())] +
                        [shlex.join(self.argv)])

    def with_warning(self, warning: str) -> "Plan":
        return dataclasses.replace(self, warnings=self.warnings + (warning,))

    def force_stop(self) -> None:
        """Remove the plan's container if it still exists (after its ``docker run`` client was killed)."""
        if self.container is None:
            return
        import docker.errors

        from chexstack import engine

        client = engine.optional_client()
        try:
            if client is not None:
                client.containers.get(self.container).remove(force=True)
        except docker.errors.DockerException:  # gone already (--rm), or being removed
            pass
