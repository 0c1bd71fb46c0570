# The two quick-start commands (README): `make demo` and `make test`. Both set up first (idempotent).
SHELL := /bin/bash
VENV ?= .venv
SAMPLE ?= ../shared/data/chestxray14

.PHONY: setup setup-docker setup-legacy setup-testcluster setup-apptainer demo lint test test-fast test-slow \
	test-docker test-cluster test-legacy

setup:
	scripts/setup

setup-docker:
	scripts/setup --docker

# Also the test cluster's Debian packages (Slurm, munge, sshd, iperf3: scripts/testcluster) and its registry's
# (docker-registry, skopeo: scripts/setup --registry).
setup-testcluster:
	scripts/setup --docker --testcluster --registry

# Also Apptainer (`apptainer`, `singularity` on PATH: scripts/setup-apptainer), made beside the venv's Horovod
# compile; one scripts/setup run installs every host package in one apt-get step first.
setup-apptainer:
	scripts/setup --docker --testcluster --registry --apptainer

# .venv-tf112: Python 3.6 / TensorFlow 1.12.0 / Horovod 0.16.1, for tests/test_trainer_legacy.py.
setup-legacy:
	scripts/setup-legacy

# Train 2 Horovod ranks (CPU) on the real 800-image ChestX-ray14 sample; prints 14 AUROCs and images/s.
# Starts afresh each time (the trainer refuses to overwrite a checkpoint without --resume). With 800 images, 20 %
# of the patients for validation and no test split: every pathology then has positives to compute an AUROC on.
demo: setup
	rm -rf runs/demo
	$(VENV)/bin/invoke train --gpus 0 --np 2 --images $(SAMPLE)/images-64 \
	  --labels $(SAMPLE)/Data_Entry_2017_v2020.csv.gz --image-size 64 --epochs 2 \
	  --val-fraction 0.2 --test-fraction 0 --output runs/demo

# ruff with pyproject.toml's [tool.ruff] rules (pyflakes, import order, 120 columns, complexity <= 18); `make test`
# runs it before the suite, and tests/test_lint.py in the unit lane.
lint: setup
	$(VENV)/bin/ruff check .

# Everything the tests need (Open MPI, Horovod, Docker engine, debootstrap, the TF 1.12 venv), then the whole
# suite. setup-legacy runs after every setup step that may call apt-get (its own apt step then finds Open MPI).
# The tests bring the test cluster up once (tests/lib/testcluster.py, as root) and take it down at the end.
# scripts/test-lanes runs the engine lane (docker or cluster) and, beside it, the host lane (the rest), which sets up
# the TF 1.12 venv first (scripts/setup-legacy: only that lane's tests use it; exit 3, no Python 3.6 here: they skip).
test: setup-apptainer
	$(VENV)/bin/ruff check .
	VENV=$(VENV) scripts/test-lanes $(PYTEST_ARGS)

# The lanes (tests/lib/lanes.py, CONTRIBUTING.md "Tests"), which together are `make test`. The unit lane needs only
# `make setup` (no dockerd, no test cluster, no legacy venv); a lane's own setup comes first, as in `make test`.
test-fast: setup
	$(VENV)/bin/python -m pytest -m "not slow and not docker and not cluster and not legacy" $(PYTEST_ARGS)

test-slow: setup
	$(VENV)/bin/python -m pytest -m "slow and not docker and not cluster and not legacy" $(PYTEST_ARGS)

test-docker: setup-apptainer
	$(VENV)/bin/python -m pytest -m "docker and not cluster" $(PYTEST_ARGS)

test-cluster: setup-apptainer
	$(VENV)/bin/python -m pytest -m cluster $(PYTEST_ARGS)

test-legacy: setup
	scripts/setup-legacy || [ $$? = 3 ]
	$(VENV)/bin/python -m pytest -m legacy $(PYTEST_ARGS)
