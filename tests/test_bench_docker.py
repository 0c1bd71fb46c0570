"""`invoke bench --stack cpu` with the real Docker engine: every count runs inside the verified cpu image
(`launch.container`, as `invoke train --stack`) and the record names the image and its ID."""
from __future__ import annotations

import pytest

from bench.results import load_sweep
from tests.lib import cli as cmd
from tests.lib.runs import FAST_MODEL

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_sweep_inside_the_stack_image(cpu_build, tmp_path):
    run = cmd.invoke("bench", "--stack", "cpu", "--np", "1,2", "--data", "synthetic", *FAST_MODEL,
                     "--batch-size", "4", "--image-size", "64", "--steps", "3", "--warmup-steps", "1",
                     "--label", "cpu-image", "--output", str(tmp_path), timeout=1800, env={"COLUMNS": "200"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "launch: docker run --rm --network host --ipc=host" in run.stdout and cpu_build.ref in run.stdout
    [path] = tmp_path.glob("cpu-image-*.json")
    sweep = load_sweep(path)
    assert sweep.record.stack == "cpu" and sweep.record.image == cpu_build.ref
    assert sweep.record.image_id and sweep.record.image_id.startswith("sha256:")
    assert sweep.record.versions["horovod"] == "0.28.1" and [p.count for p in sweep.points] == [1, 2]
