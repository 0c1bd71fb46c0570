"""Run one Docker build through the docker SDK and stream its progress.

``docker_build(client, tar, labels=..., nocache=...) -> image ID``. Builds are untagged (the caller tags after
verification) and use network mode host (this machine's dockerd has no bridge). Progress: each ``Step N/M``
line as it starts, whether it came from the cache, and how long it took. On failure: ``BuildFailed`` with the
failing step, the last lines of its output and the builder's error.
"""
from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field

import docker
import docker.errors

from chexstack import engine
from chexstack.console import console
from chexstack.errors import ChexstackError, ExitCode

TAIL_LINES = 40
_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$", re.S)


class BuildFailed(ChexstackError):
    """The build stopped; ``step`` is the failing instruction, ``tail`` the end of its output."""

    def __init__(self, step: str, tail: list[str], error: str):
        self.step, self.tail, self.error = step, tail, error
        super().__init__("docker build failed at %s\n--- last %d lines of its output ---\n%s\n--- error ---\n%s"
                         % (step or "(before the first step)", len(tail), "\n".join(tail), error),
                         exit_code=ExitCode.FAILED)


#: The lines a step's "done" line repeats: the Horovod gate's verdict, and the wheel cache's (``horovod key K: wheel
#: PATH`` or ``no wheel: compile``, ``facts/horovod_key.py``), so the build's output says whether Horovod compiled.
VERDICTS = ("horovod key ",)


@dataclass
class _Progress:
    """What the stream said so far: the current step, its output tail, and per-step timings."""

    quiet: bool = False
    step: str = ""
    started: float = 0.0
    cached: bool = False
    tail: deque = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    image_id: str | None = None
    steps: list = field(default_factory=list)

    def _close_step(self) -> None:
        if not self.step:
            return
        took = time.monotonic() - self.started
        self.steps.append((self.step, self.cached, took))
        said = self.verdict()
        if not self.quiet:
            console.print("    [dim]%s %.1f s[/]%s" % ("cached" if self.cached else "done", took,
                                                     (" " + said) if said else ""), soft_wrap=True)

    def verdict(self) -> str:
        """The current step's last verdict line (a Horovod gate's, or ``VERDICTS``), stripped; "" when none."""
        said = [line for line in self.tail if line.startswith(VERDICTS) or "gate: " in line]
        return said[-1].strip() if said else ""

    def feed(self, item: dict) -> None:
        if "errorDetail" in item or "error" in item:
            detail = item.get("errorDetail") or {}
            raise BuildFailed(self.step, list(self.tail), detail.get("message") or item.get("error", ""))
        if "aux" in item and isinstance(item["aux"], dict) and item["aux"].get("ID"):
            self.image_id = item["aux"]["ID"]
        text = item.get("stream") or ""
        for line in text.splitlines():
            m = _STEP.match(line)
            if m:
                self._close_step()
                self.step, self.started, self.cached = line, time.monotonic(), False
                self.tail.clear()
                if not self.quiet:
                    console.print("[bold cyan]%s[/]" % line[:200], soft_wrap=True)
            elif line.strip() == "---> Using cache":
                self.cached = True
            elif line.strip():
                self.tail.append(line)
        m = re.search(r"Successfully built ([0-9a-f]{12,})", text)
        if m and not self.image_id:
            self.image_id = m.group(1)

    def finish(self) -> None:
        self._close_step()


def docker_client() -> docker.DockerClient:
    """A client of the local engine (``chexstack.engine.client``), or ChexstackError saying how to start one."""
    return engine.client(timeout=600)


def docker_build(client: docker.DockerClient, tar, *, labels: dict[str, str] | None = None,
                 nocache: bool = False, quiet: bool = False, steps: list | None = None,
                 target: str | None = None) -> str:
    """Build the context ``tar`` (file object with a ``Dockerfile``) and return the image ID (``sha256:…``).
    ``steps``, when given, receives one ``(step line, from cache, seconds)`` per step; ``target`` builds only up to
    that stage."""
    progress = _Progress(quiet=quiet, steps=steps if steps is not None else [])
    stream = client.api.build(fileobj=tar, custom_context=True, rm=True, forcerm=True, pull=False,
                              nocache=nocache, network_mode="host", labels=labels or {}, decode=True,
                              target=target)
    for item in stream:
        progress.feed(item)
    progress.finish()
    if not progress.image_id:
        raise BuildFailed(progress.step, list(progress.tail), "the builder reported no image ID")
    return client.images.get(progress.image_id).id
