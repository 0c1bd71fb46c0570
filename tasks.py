"""chexstack's command line: thin invoke glue over envs/, images/, validate/, trainer/, launch/ and bench/.

Each task parses its options, calls one function of an area module and turns a ``ChexstackError`` into a clear
message and an exit code (no traceback). Run ``invoke --list`` for the tasks, ``invoke --help TASK`` for options.
"""
from __future__ import annotations

import functools
import sys

from invoke import Exit, task

from chexstack.console import console
from chexstack.errors import ChexstackError


def user_errors(fn):
    """Print a ChexstackError as one red message and exit with its code, instead of a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ChexstackError as e:
            console.print("[bold red]error:[/] %s" % e, soft_wrap=True)
            raise Exit(code=e.exit_code) from None

    return wrapper


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


# --- images: render, build, convert (images/) -------------------------------------------------------------------


@task(help={"stack": "stack name (envs/stacks/<name>.yaml)", "format": "docker | singularity",
            "base": "base image reference instead of the manifest's (a local stand-in)"})
@user_errors
def render(c, stack, format="docker", base=None):
    """Print the stack's Dockerfile or Singularity definition (rendered by hpccm from the manifest)."""
    from envs.manifest import load_stack
    from images.render import render as render_recipe

    sys.stdout.write(render_recipe(load_stack(stack), format, base))


@task(help={"stack": "stack name", "runtime": "docker | singularity | all (a SIF from the verified Docker image)",
            "tag": "REPOSITORY:TAG instead of chexstack/<stack>:<version>",
            "base": "base image reference instead of the manifest's (e.g. a local stand-in)",
            "no-cache": "rebuild every layer", "dry-run": "print the Dockerfile, context and labels; build nothing",
            "allow-mismatch": "tag even when verification finds mismatches (listed in an image label)"})
@user_errors
def build(c, stack, runtime="docker", tag=None, base=None, no_cache=False, dry_run=False, allow_mismatch=False):
    """Build the stack's image (docker SDK), verify it inside, tag it only when it matches its manifest."""
    from images.build import build as build_image

    build_image(stack, runtime=runtime, tag=tag, base=base, no_cache=no_cache, dry_run=dry_run,
                allow_mismatch=allow_mismatch)


@task(help={"dockerfile": "path of the Dockerfile", "build-arg": "NAME=VALUE for an ARG without default (repeatable)",
            "output": "write the definition here instead of stdout"}, iterable=["build_arg"])
@user_errors
def convert(c, dockerfile, build_arg=None, output=None):
    """Convert a Dockerfile to a Singularity definition (spython) and repair what it gets wrong."""
    from images.convert import convert_file

    text = convert_file(dockerfile, dict(a.split("=", 1) for a in build_arg or [] if "=" in a))
    if output:
        with open(output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
