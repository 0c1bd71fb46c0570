"""The invariants every rendered definition keeps, checked in one place for ``images.render`` (stack recipes) and
``convert.dockerfile`` (converted Dockerfiles), on the final text in either format:

- no base line (``FROM`` / ``From:``) holds a ``$``: Singularity does not expand build arguments there, so an
  unresolved ARG becomes a literal image name (https://github.com/singularityhub/singularity-cli/issues/187);
- no ``su -``: a Dockerfile ``USER`` turned into ``su -`` starts a login shell that drops the environment and the
  build's working directory (https://github.com/singularityhub/singularity-cli/issues/158).
"""
from __future__ import annotations

import re

from chexstack.errors import ChexstackError

_BASE_LINE = re.compile(r"^(FROM|From:)\s")
_SU_LOGIN = re.compile(r"^\s*su\s+-")


def lint_definition(text: str, origin: str) -> str:
    """``text`` unchanged when it keeps the invariants; else a ``ChexstackError`` naming ``origin`` (e.g.
    ``stack cpu`` or the Dockerfile's path), the line and the rule."""
    for number, line in enumerate(text.splitlines(), start=1):
        if _BASE_LINE.match(line) and "$" in line:
            raise ChexstackError("%s: rendered line %d %r: the base image holds an unresolved variable"
                                 % (origin, number, line))
        if _SU_LOGIN.match(line):
            raise ChexstackError("%s: rendered line %d %r: USER must not become `su -`" % (origin, number, line))
    return text
