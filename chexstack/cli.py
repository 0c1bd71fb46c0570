"""The ``chexstack`` command: the tasks of ``tasks.py`` (the same ones ``invoke ...`` runs in the checkout) from any
folder, and on a node where only the package is installed (``pip install chexstack``: ``tasks`` is installed as a
module beside the packages, pyproject ``[tool.setuptools] py-modules``).

``chexstack validate`` = ``invoke validate`` run in the checkout; ``chexstack --list``, ``chexstack --help TASK``
work as invoke's. Built on invoke's ``Program`` with the tasks collection given, so no ``tasks.py`` is looked for
in the current folder (https://docs.pyinvoke.org/en/stable/concepts/library.html).
"""
from __future__ import annotations

from importlib import metadata

NAME = "chexstack"


def program():
    """invoke's ``Program`` over the project's tasks, named ``chexstack``."""
    from invoke import Collection, Program

    import tasks

    try:
        version = metadata.version(NAME)
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed (PYTHONPATH)
        version = "unknown"
    return Program(namespace=Collection.from_module(tasks), name=NAME, binary=NAME, binary_names=[NAME],
                   version=version)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``chexstack`` console script (pyproject ``[project.scripts]``); exits with the task's
    code. ``argv``: the full command line (default ``sys.argv``)."""
    program().run(argv)
