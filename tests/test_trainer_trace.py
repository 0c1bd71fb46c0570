"""The train step is traced once: the optimizer's slots exist before ``model.fit``'s first call
(``trainer.compat.create_optimizer_weights``), so TF 2 does not trace the step a second time without the variables
its first call created. A process of its own (``hvd.init()``, world size 1), the benchmark's own rank script."""
from __future__ import annotations

import subprocess
import sys

import pytest

from bench.ratios.first_step import RANK
from tests.lib.paths import REPO

pytestmark = pytest.mark.slow


def _traces(variant: str) -> int:
    """The train step's tracing count in one rank of ``bench/ratios/first_step.py`` (its ``RANK`` script: the
    benchmark and this test run the same code), MobileNet at 32 px, 1 step of 8 images."""
    run = subprocess.run([sys.executable, "-c", RANK, variant, "mobilenet", "32", "1"], cwd=REPO,
                         capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2",
                              "CUDA_VISIBLE_DEVICES": ""})
    assert run.returncode == 0, run.stderr[-3000:]
    return int(run.stdout.split("traces ")[-1])


def test_the_trainers_compiled_model_traces_its_train_step_once():
    assert _traces("trainer") == 1
    assert _traces("lazy") == 2  # what it saves: Keras' lazily made slots cost a second trace
