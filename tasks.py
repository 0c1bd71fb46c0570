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


# --- validate (node fitness checks) -------------------------------------------------------------------------------
@task(help={"stack": "stack to validate against (envs/stacks/<name>.yaml): its CUDA floor, image and Horovod build",
            "hosts": "comma-separated hosts of a multi-node run (mpirun, NCCL and ib_write_bw across them)",
            "json": "also write the report as JSON to this file",
            "only": "comma-separated check ids or areas to run (e.g. gpu,ib.ports)",
            "skip": "comma-separated check ids or areas to leave out"})
@user_errors
def validate(c, stack=None, hosts=None, json=None, only=None, skip=None):
    """Is this node fit to run the stack at full speed? A table of checks; exit 0 no FAIL, 1 FAIL, 2 cannot run."""
    from validate.report import validate as run_validate

    code = run_validate(stack, _csv(hosts), json, _csv(only), _csv(skip))
    if code:
        raise Exit(code=code)
