"""facts.openmpi's version-dependent run-as-root rule, and every launcher that starts Open MPI's mpirun applying it:
the environment form (OMPI_ALLOW_RUN_AS_ROOT + _CONFIRM) is honoured by mpirun from Open MPI 4.0.2 (ompi#5598 in
4.0.0, ompi#6920/#6911 for mpirun in 4.0.2); older releases, the study's NGC (3.1.3) and conda (4.0.0) stacks
among them, need --allow-run-as-root. The Slurm renderers (train and the bench sweep, both models' hybrid steps)
and ``invoke validate --job`` read the one rule."""
from __future__ import annotations

import pytest

from bench import batch
from envs.manifest import load_stack
from facts.openmpi import ROOT_ENV_SINCE, root_env_honoured
from images.naming import image_ref, stack_of_image
from launch import slurm
from launch.job import JobSpec, Mount
from tests.lib.sweeps import sweep_request


@pytest.mark.parametrize("implementation,version,honoured", [
    ("Open MPI", "3.1.3", False),   # NGC 19.06 (Table 1)
    ("Open MPI", "4.0.0", False),   # the conda stack: the variables exist, mpirun ignores them
    ("Open MPI", "4.0.1", False),   # ompi#6920
    ("Open MPI", ROOT_ENV_SINCE, True),
    ("Open MPI", "4.1.4", True),
    ("Open MPI", None, True),       # unknown: a current release
    ("MPICH", "3.3", True),         # no rule to satisfy
])
def test_the_environment_form_is_honoured_from_open_mpi_4_0_2(implementation, version, honoured):
    assert root_env_honoured(implementation, version) is honoured


def _hybrid(stack: str) -> str:
    spec = JobSpec(name="j", stack=load_stack(stack), image="/shared/%s.sif" % stack, nodes=2, ranks_per_node=4,
                   gpus=True, trainer_args=("--output", "/scratch/r"), mounts=(Mount("/scratch/r"),))
    return slurm.render(spec, "hybrid", mpirun_version_output="mpirun (Open MPI) %s\n" % spec.stack.version("mpi"),
                        render_host="login01")


@pytest.mark.parametrize("stack,flag", [("ngc", True), ("conda", True), ("cpu", False), ("hopper", False)])
def test_the_hybrid_script_adds_the_option_where_the_images_open_mpi_ignores_the_variables(stack, flag):
    text = _hybrid(stack)
    assert text.count("export OMPI_ALLOW_RUN_AS_ROOT=1\n") == 1 and "export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" in text
    assert ("mpirun --allow-run-as-root -np 8 " in text) is flag


def test_the_bench_sweeps_hybrid_steps_apply_the_same_rule(tmp_path):
    req = sweep_request(counts=(1, 8), label="ngc-hybrid", launcher="slurm", stack="ngc", model="densenet121",
                       batch_size=32, steps=5, warmup_steps=1)
    target = batch.BatchTarget(image="/shared/ngc.sif", per_node=4, gpus=True, results="/shared/bench")
    text = batch.render_slurm(req, target, tmp_path, "hybrid", mpirun_version_output="mpirun (Open MPI) 3.1.3\n",
                              render_host="login01")
    assert text.count("mpirun --allow-run-as-root -np ") == 2 and "export OMPI_ALLOW_RUN_AS_ROOT=1" in text


def test_an_image_names_its_stack():
    assert stack_of_image("nvcr.io/nvidia/tensorflow:19.06-py3").name == "ngc"
    assert stack_of_image("registry.example.com:5000/" + image_ref(load_stack("conda"))).name == "conda"
    assert stack_of_image("chexstack/cpu").name == "cpu"
    assert stack_of_image("nvidia/cuda:10.0-base") is None and stack_of_image("") is None


def test_every_script_that_starts_the_hosts_mpirun_exports_the_permission_once(tmp_path):
    """Bare metal (the environment's MPI, flavour unknown: the environment form only, harmless to others) and
    hybrid, for a training run and a sweep alike; pyxis starts no mpirun."""
    bare = JobSpec(name="j", stack=None, image="/shared/venv/bin/python", nodes=1, ranks_per_node=2, gpus=False,
                   trainer_args=("--output", "/scratch/r"), mounts=(Mount("/scratch/r"),), workdir="/shared/chexstack")
    req = sweep_request(counts=(1, 2), label="bare", launcher="slurm", stack=None, model="densenet121",
                       batch_size=32, steps=5, warmup_steps=1)
    target = batch.BatchTarget(image="/shared/venv/bin/python", per_node=2, gpus=False, results="/shared/bench",
                               workdir="/shared/chexstack")
    pyxis = JobSpec(name="j", stack=load_stack("cpu"), image="r/chexstack/cpu:1", nodes=1, ranks_per_node=2,
                    gpus=False, trainer_args=("--output", "/scratch/r"), mounts=(Mount("/scratch/r"),))
    for text in (slurm.render(bare), batch.render_slurm(req, target, tmp_path), _hybrid("cpu")):
        assert text.count("export OMPI_ALLOW_RUN_AS_ROOT=1\n") == 1, text
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in slurm.render(pyxis, "pyxis")
