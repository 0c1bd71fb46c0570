"""A stack's pins for shell scripts, from its manifest (the one place they are written).

``python -m envs.pins STACK COMPONENT...`` prints ``package==version`` per component (``Stack.pin``);
``python -m envs.pins STACK --horovod-env`` prints the manifest's ``build.horovod_env`` as ``NAME=value`` lines.
``scripts/setup`` installs the host's TensorFlow and builds its Horovod from the cpu stack's pins this way.
Exit 2 with one ``envs.pins: error:`` line for an unknown stack or component, or a component without package.
"""
from __future__ import annotations

import sys

from chexstack.errors import ChexstackError
from envs.manifest import load_stack


def lines(argv: list[str]) -> list[str]:
    if len(argv) < 2:
        raise ChexstackError("usage: python -m envs.pins STACK (COMPONENT... | --horovod-env)")
    stack = load_stack(argv[0])
    if argv[1:] == ["--horovod-env"]:
        return ["%s=%s" % kv for kv in sorted(stack.build.horovod_env.items())]
    unknown = [c for c in argv[1:] if c not in stack.components]
    if unknown:
        raise ChexstackError("stack %s has no component %s; rows: %s"
                             % (stack.name, ", ".join(unknown), ", ".join(stack.components)))
    return [stack.pin(c) for c in argv[1:]]


def main(argv: list[str] | None = None) -> int:
    try:
        print("\n".join(lines(sys.argv[1:] if argv is None else argv)))
    except ChexstackError as e:
        print("envs.pins: error: %s" % e, file=sys.stderr)
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
