"""scripts/testcluster's refusals: bad arguments exit 2 naming the argument and what was expected (no root or
running cluster needed: they are checked first)."""
from __future__ import annotations

import os

import pytest

from tests.lib.testcluster import script


@pytest.mark.parametrize("args, message", [
    (("plug", str(os.getpid()), "10.213.57.12"), "address '10.213.57.12': expected 10.213.57.100 to 10.213.57.254"),
    (("plug", str(os.getpid()), "10.0.0.150"), "address '10.0.0.150': expected 10.213.57.100 to 10.213.57.254"),
    (("plug", "0", "10.213.57.150"), "process '0': expected the PID of a running process"),
    (("plug", "10.213.57.150"), "usage: scripts/testcluster plug [--overlay] PID ADDR"),
    (("up", "0"), "number of hosts '0': expected 1 to 50"),
    (("plug-shaped", "fast", str(os.getpid()), "10.213.57.150"), "rate 'fast': expected a rate such as 200mbit"),
    (("plug-shaped", "200mbit", "10.213.57.150"), "usage: scripts/testcluster plug-shaped RATE PID ADDR"),
])
def test_bad_arguments_exit_2_naming_what_was_expected(args, message):
    result = script(*args, timeout=30)
    assert result.returncode == 2 and message in result.stderr, result.stderr
