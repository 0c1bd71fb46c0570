"""Issue 40, item 8: ``bench/device_validate.sh`` validates a lent GPU node from a copy of the checkout, its
dependencies carried as wheels. Here (no GPU, no network needed): its dry run prints every step of the node's run
without running one, and its size check refuses a wheel set over the cap of what may travel with the checkout."""
from __future__ import annotations

import os
import subprocess

from tests.lib.paths import REPO

SCRIPT = REPO / "bench" / "device_validate.sh"


def script(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_the_script_parses_and_refuses_an_unknown_option():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    bad = script("--gpu")
    assert bad.returncode == 2 and "unknown option '--gpu'" in bad.stderr


def test_the_dry_run_prints_every_step_of_the_nodes_run_and_runs_none(tmp_path):
    out, venv, wheels = tmp_path / "out", tmp_path / "venv", tmp_path / "wheels"
    dry = script("--dry-run", env={"OUT": str(out), "VENV": str(venv), "WHEELS": str(wheels), "PYTHON": "python3"})
    assert dry.returncode == 0, dry.stderr
    steps = [line[2:] for line in dry.stdout.splitlines() if line.startswith("+ ")]
    assert steps == [
        "rm -rf %s" % venv,
        "python3 -m venv %s || { python3 -m venv --without-pip %s && %s/bin/python %s/pip-*.whl/pip install -q "
        "--no-index --find-links %s pip; }" % (venv, venv, venv, wheels, wheels),
        "%s/bin/python -m pip install -q --no-index --find-links %s -c requirements/constraints.txt invoke rich "
        "pydantic PyYAML docker numpy psutil packaging" % (venv, wheels),
        "mkdir -p %s" % out,
        "%s/bin/python facts/cuda_probe.py > %s/cuda-probe.jsonl" % (venv, out),
        "env PYTHONPATH=%s %s/bin/invoke validate --collect %s/bundle --json %s/report.json > %s/validate.log 2>&1"
        % (REPO, venv, out, out, out),
        "tar -czf %s/validate-bundle.tar.gz -C %s bundle" % (out, out),
    ]
    assert "missing: the wheels in WHEELS=%s" % wheels in dry.stderr  # none prepared: said, not run
    assert not out.exists() and not venv.exists()
    real = script(env={"OUT": str(out), "VENV": str(venv), "WHEELS": str(wheels)})
    assert real.returncode == 2 and "nothing was run" in real.stderr and not venv.exists()


def test_the_prepare_dry_run_downloads_wheels_for_the_nodes_python_within_the_constraints(tmp_path):
    dry = script("--prepare", "--dry-run", env={"WHEELS": str(tmp_path / "w"), "TARGET_PYTHON": "3.12"})
    assert dry.returncode == 0, dry.stderr
    download = next(line for line in dry.stdout.splitlines() if " -m pip download " in line)
    assert "--only-binary=:all: --implementation cp --python-version 3.12" in download
    assert "--platform manylinux_2_17_x86_64" in download and "-c requirements/constraints.txt" in download
    assert download.endswith("invoke rich pydantic PyYAML docker numpy psutil packaging pip")
    assert not (tmp_path / "w").exists()


def test_the_size_check_counts_the_checkout_and_the_wheels_against_the_cap(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "big-1.0-py3-none-any.whl").write_bytes(b"\0" * (3 * 1024 * 1024))
    fits = script("--check-size", env={"WHEELS": str(wheels), "CAP_MIB": "64"})
    assert fits.returncode == 0, fits.stderr
    assert "+ wheels 3072 KiB" in fits.stdout and "cap 64 MiB" in fits.stdout
    over = script("--check-size", env={"WHEELS": str(wheels), "CAP_MIB": "3"})
    assert over.returncode == 1 and "is over the cap of 3 MiB (CAP_MIB)" in over.stderr
