"""Slurm batch scripts (pyxis and the hybrid model): golden text, `bash -n`, the host/image MPI check, submit."""
from __future__ import annotations

import re
import subprocess

import pytest

from chexstack.errors import ChexstackError
from envs.manifest import Component, load_stack
from launch import slurm
from launch.job import JobSpec, Mount, layout
from launch.mpi_compat import check_hybrid
from launch.submit import submit_slurm
from tests.lib import cli as cmd
from tests.lib.golden import assert_golden

TRAINER_ARGS = ("--data", "/data/chestxray14", "--model", "densenet121", "--batch-size", "32", "--epochs", "5",
                "--output", "/scratch/chexstack/run1")
MOUNTS = (Mount("/data/chestxray14", read_only=True), Mount("/scratch/chexstack/run1"))


def _spec(image="registry.example.com:5000/chexstack/cpu:0.1.0-0123456789ab", gpus=True, nodes=2, per_node=4,
          stack=None):
    return JobSpec(name="chexstack-cxr", stack=stack or load_stack("cpu"), image=image, nodes=nodes,
                   ranks_per_node=per_node, gpus=gpus, trainer_args=TRAINER_ARGS, mounts=MOUNTS)


def _with_mpi(version: str, name: str = "Open MPI"):
    stack = load_stack("cpu")
    comps = dict(stack.components, mpi=Component(version=version, name=name, source="test"))
    return stack.model_copy(update={"components": comps})


def _bash_n(text: str) -> None:
    proc = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_pyxis_script_golden_and_bash_clean():
    text = slurm.render(_spec(), "pyxis")
    assert_golden("launch/slurm-pyxis-2x4gpu.sbatch", text)
    _bash_n(text)
    assert "srun --mpi=pmix '--container-image=registry.example.com:5000#chexstack/cpu:0.1.0-0123456789ab'" in text
    assert "#SBATCH --gpus-per-node=4" in text and "#SBATCH --ntasks-per-node=4" in text


def test_pyxis_cpu_ranks_have_no_gpu_directive():
    text = slurm.render(_spec(gpus=False, nodes=1, per_node=2), "pyxis")
    assert_golden("launch/slurm-pyxis-1x2cpu.sbatch", text)
    _bash_n(text)
    assert "gpus-per-node" not in text and "one task per CPU rank" in text


def test_hybrid_script_golden_and_bash_clean(fixture_text):
    host = "mpirun (Open MPI) 4.1.2\n\nReport bugs to http://www.open-mpi.org/community/help/\n"
    text = slurm.render(_spec(image="/shared/images/chexstack-cpu.sif"), "hybrid", mpirun_version_output=host,
                        render_host="login01")
    assert_golden("launch/slurm-hybrid-2x4gpu.sbatch", text)
    _bash_n(text)
    assert "singularity exec --nv --bind /data/chestxray14:/data/chestxray14:ro" in text
    assert "mpirun -np 8 -bind-to none -map-by slot" in text
    assert "*'(Open MPI) 4.1.'*" in text  # the job-time guard repeats the check


def test_another_release_series_on_the_rendering_machine_warns_and_the_job_checks_again(fixture_text, capsys):
    """../shared/fixtures: a machine with Open MPI 2.1.1 renders for the cpu stack's image (Open MPI 4.1.4). It may
    be a workstation, not the cluster: a warning naming both, and the script's guard checks where the job runs."""
    text = slurm.render(_spec(image="/x.sif"), "hybrid", mpirun_version_output=fixture_text(
        "mpirun-version-openmpi-2.1.1.txt"), render_host="laptop")
    err = capsys.readouterr().err
    assert "warning: hybrid model: on this machine host Open MPI 2.1.1 and image Open MPI 4.1.4" in err
    assert "pyxis" in err
    assert "# Render-time MPI check on laptop: host Open MPI 2.1.1 and image Open MPI 4.1.4" in text
    assert "*'(Open MPI) 4.1.'*" in text


def test_no_mpirun_on_the_rendering_machine_still_renders_the_guarded_script(monkeypatch, capsys):
    monkeypatch.setenv("PATH", "/nonexistent")
    text = slurm.render(_spec(image="/x.sif"), "hybrid", render_host="laptop")
    assert "mpirun not found on PATH" in capsys.readouterr().err
    assert "*'(Open MPI) 4.1.'*" in text


def test_hybrid_guard_runs_against_the_real_host_mpirun():
    """The job-time guard, executed with this host's real mpirun (Open MPI 4.1.4): passes for a 4.1 image and
    stops with the message for a 3.1 image (the NGC 19.06 column)."""
    def guard(stack):
        text = slurm.render(_spec(image="/x.sif", stack=stack), "hybrid",
                            mpirun_version_output="mpirun (Open MPI) %s\n" % stack.version("mpi"), render_host="h")
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("image_mpi="))
        end = next(i for i, line in enumerate(lines) if line == "esac")
        return subprocess.run(["bash", "-c", "\n".join(lines[start:end + 1])], capture_output=True, text=True)

    assert guard(_with_mpi("4.1.4")).returncode == 0
    bad = guard(_with_mpi("3.1.3"))
    assert bad.returncode == 1 and "image has Open MPI 3.1.x" in bad.stderr
    assert re.search(r"host mpirun is 'mpirun \(Open MPI\) \d+\.\d+\.\d+'", bad.stderr)  # both versions named


@pytest.mark.parametrize("host,image,compatible", [
    ("mpirun (Open MPI) 4.1.4", ("4.1.4", "Open MPI"), True),
    ("mpirun (Open MPI) 4.1.6", ("4.1.4", "Open MPI"), True),
    ("mpirun (Open MPI) 4.0.0", ("4.1.4", "Open MPI"), False),
    ("mpirun (Open MPI) 3.1.3", ("3.1", "OpenMPI"), True),
    ("HYDRA build details:\n    Version:                                 4.0.2", ("4.1.4", "Open MPI"), False),
    ("bash: mpirun: command not found", ("4.1.4", "Open MPI"), False),
])
def test_hybrid_rule(host, image, compatible):
    result = check_hybrid(_with_mpi(*image), host)
    assert result.compatible is compatible, result.reason


def test_enroot_uri():
    assert slurm.enroot_uri("nvcr.io/nvidia/tensorflow:19.06-py3") == "nvcr.io#nvidia/tensorflow:19.06-py3"
    assert slurm.enroot_uri("localhost/chexstack/cpu:1") == "localhost#chexstack/cpu:1"
    assert slurm.enroot_uri("chexstack/cpu:0.1.0-abc") == "chexstack/cpu:0.1.0-abc"
    assert slurm.enroot_uri("/shared/cpu.sqsh") == "/shared/cpu.sqsh"


@pytest.mark.parametrize("image", ["chexstack-cpu.sqsh", "./chexstack-cpu.sqsh", "images/chexstack-cpu.sqsh",
                                   "chexstack-cpu.squashfs", "chexstack-cpu.sqfs", "images/chexstack-cpu.SQFS"])
def test_a_relative_squashfs_image_is_refused_never_pulled(image):
    """../shared/cases/29: pyxis pulls `chexstack-cpu.sqsh` from Docker Hub (NVIDIA/pyxis#67, #127)."""
    with pytest.raises(ChexstackError, match=r"--image %s: a squashfs image must be an absolute path the nodes see, "
                       r"e.g. /shared/images/%s \(pyxis treats a name without a leading / or \./ "
                       r"as a registry image: docker://%s\)" % (re.escape(image), re.escape(image.rsplit("/", 1)[-1]),
                                                                re.escape(image))):
        slurm.render(_spec(image=image), "pyxis")
    text = slurm.render(_spec(image="/shared/images/chexstack-cpu.sqsh"), "pyxis")
    assert "--container-image=/shared/images/chexstack-cpu.sqsh" in text
    assert "# Image: the squashfs file /shared/images/chexstack-cpu.sqsh on shared storage" in text
    assert "pulls" not in text.split("#SBATCH")[0]
    name = image.rsplit("/", 1)[-1]
    text = slurm.render(_spec(image="/shared/images/" + name), "pyxis")
    assert "--container-image=/shared/images/%s" % name in text
    assert "# Image: the squashfs file /shared/images/%s on shared storage" % name in text


@pytest.mark.parametrize("image", ["chexstack-cpu.sif", "images/chexstack.sif", "/shared/images/chexstack-cpu.sif"])
def test_a_sif_is_refused_for_pyxis_with_the_hybrid_model_named(image):
    """../shared/cases/29's image names: pyxis runs squashfs files and registry images, not a SIF (it was rendered
    as a registry pull); the hybrid model runs one."""
    with pytest.raises(ChexstackError, match=r"--image %s: a SIF is Apptainer's image format, which pyxis cannot run "
                       r".*use --hybrid" % re.escape(image)):
        slurm.render(_spec(image=image), "pyxis")


def test_bad_values_cannot_change_the_script():
    with pytest.raises(ChexstackError, match="--partition"):
        slurm.render(_spec(), "pyxis", slurm.SlurmOptions(partition="gpu\n#SBATCH --uid=0"))
    with pytest.raises(ChexstackError, match="RFC 1123"):
        JobSpec(name="Bad Name", stack=load_stack("cpu"), image="x", nodes=1, ranks_per_node=1, gpus=False,
                trainer_args=())
    # arguments are shell-quoted, not interpreted
    spec = JobSpec(name="q", stack=load_stack("cpu"), image="x", nodes=1, ranks_per_node=1, gpus=False,
                   trainer_args=("--output", "/tmp/$(reboot)"))
    assert "'/tmp/$(reboot)'" in slurm.render(spec)


def test_layout():
    assert [layout(n, 4) for n in (1, 2, 3, 4, 8)] == [(1, 1), (1, 2), (1, 3), (1, 4), (2, 4)]
    assert layout(6, 4) == (2, 3)
    with pytest.raises(ChexstackError, match="evenly"):
        layout(5, 4)


def test_submit_without_sbatch_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without sbatch (the test cluster installs one here)
    with pytest.raises(ChexstackError, match="sbatch not found on PATH"):
        submit_slurm("#!/bin/bash\n")


def test_the_train_script_creates_its_output_folder_before_srun_mounts_it(tmp_path):
    """Review finding 12: pyxis fails when a mount source does not exist. The script, run by bash with a stand-in
    `srun` that checks every --container-mounts source, creates the output folder first (data stays read-only)."""
    data, output = tmp_path / "data", tmp_path / "runs" / "r1"
    data.mkdir()
    spec = JobSpec(name="chexstack-cxr", stack=load_stack("cpu"), image="registry.example.com/chexstack/cpu:1",
                   nodes=1, ranks_per_node=2, gpus=False, trainer_args=("--output", str(output)),
                   mounts=(Mount(str(data), read_only=True), Mount(str(output))))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/bash\nfor a in \"$@\"; do case $a in --container-mounts=*)\n"
                                  "  IFS=, read -ra ms <<< \"${a#--container-mounts=}\"\n"
                                  "  for m in \"${ms[@]}\"; do src=${m%%:*}; [ -d \"$src\" ] || "
                                  "{ echo \"missing mount source $src\"; exit 9; }; done;; esac; done\necho srun ok\n")
    (bin_dir / "srun").chmod(0o755)
    run = subprocess.run(["bash", "-c", slurm.render(spec, "pyxis")], capture_output=True, text=True,
                         env={"PATH": "%s:/usr/bin:/bin" % bin_dir})
    assert run.returncode == 0 and run.stdout.strip() == "srun ok", run.stdout + run.stderr
    assert output.is_dir()
    assert slurm.output_dirs((Mount("/data", read_only=True),)) == ""


def test_a_rendered_script_says_its_output_folder_must_exist_before_sbatch():
    """New-user report: `invoke train --launcher slurm --render` wrote `#SBATCH --output=/shared/runs/r1/slurm-%j.out`
    and only the script's own mkdir made that folder, which runs after Slurm opened the file: `sbatch` on the
    rendered script failed with no log. The comment at the top says so (--submit creates the folder first)."""
    result = cmd.run("train", "--launcher", "slurm", "--stack", "cpu", "--gpus", "8", "--data", "/shared/cxr",
                     "--output", "/shared/runs/r1", "--render")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    first_directive = next(i for i, line in enumerate(lines) if line.startswith("#SBATCH"))
    note = lines[first_directive - 1]
    assert note.startswith("# Before sbatch: mkdir -p /shared/runs/r1 (Slurm opens "
                           "--output=/shared/runs/r1/slurm-%j.out before this script and its mkdir run") and \
        "--submit creates it first" in note
    assert all(line.startswith("#") for line in lines[:first_directive])
    assert "#SBATCH --output=/shared/runs/r1/slurm-%j.out" in lines
    assert slurm.output_folder_note("%x-%j.out") == ""  # sbatch's own folder: nothing to create
    assert "Before sbatch" not in slurm.render(_spec(), "pyxis")


def _baremetal_spec(gpus=False):
    return JobSpec(name="chexstack-baremetal-run1-0a1b2c", stack=None, image="/shared/envs/chexstack/bin/python",
                   nodes=2, ranks_per_node=2, gpus=gpus, trainer_args=TRAINER_ARGS, mounts=(MOUNTS[1],),
                   env={"CUDA_VISIBLE_DEVICES": ""}, workdir="/shared/chexstack")


def test_baremetal_script_golden_and_bash_clean():
    """Bare metal (no stack): the host's mpirun inside the allocation runs the shared environment's Python."""
    opts = slurm.SlurmOptions(time="00:20:00", partition="debug", account="proj1",
                              output="/scratch/chexstack/run1/slurm-%j.out")
    text = slurm.render(_baremetal_spec(), "pyxis", opts)
    assert_golden("launch/slurm-baremetal-2x2cpu.sbatch", text)
    _bash_n(text)
    assert "mpirun --tag-output -np 4 -bind-to none -map-by slot" in text
    assert "\ncd /shared/chexstack\n" in text and "/shared/envs/chexstack/bin/python -m trainer --data" in text
    for line in ("--time=00:20:00", "--partition=debug", "--account=proj1", "--output=/scratch/chexstack/run1/"):
        assert "#SBATCH " + line in text
    with pytest.raises(ChexstackError, match="runs a Python environment, not stack cpu's image"):
        slurm.render_baremetal(_spec())


def test_requeue_script_golden_and_a_restart_resumes_from_a_committed_checkpoint(tmp_path):
    """--requeue: #SBATCH --requeue, and the trainer gets --resume only on a restart (SLURM_RESTART_COUNT > 0) of a
    run that committed a checkpoint; a first start, or a restart before the first commit, starts afresh."""
    opts = slurm.SlurmOptions(time="00:20:00", output="/scratch/chexstack/run1/slurm-%j.out", requeue=True)
    text = slurm.render(_baremetal_spec(), "pyxis", opts)
    assert_golden("launch/slurm-baremetal-2x2cpu-requeue.sbatch", text)
    _bash_n(text)
    assert "#SBATCH --requeue" in text and text.rstrip().endswith("--output /scratch/chexstack/run1 $resume")

    spec = JobSpec(name="r", stack=None, image="python", nodes=1, ranks_per_node=1, gpus=False,
                   trainer_args=("--data", "synthetic", "--output", str(tmp_path)))

    def resume_word(restarts: str | None) -> str:
        env = {"PATH": "/usr/bin:/bin"}
        if restarts is not None:
            env["SLURM_RESTART_COUNT"] = restarts
        script = "set -euo pipefail\n%s\necho \"[$resume]\"" % slurm.requeue_lines(spec)
        run = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return run.stdout.splitlines()[-1]

    assert resume_word("1") == resume_word(None) == "[]"  # no checkpoint committed yet
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "state.json").write_text('{"epoch": 1, "model_file": "epoch-0001.h5"}')
    assert resume_word(None) == resume_word("0") == "[]"
    assert resume_word("2") == "[--resume]"
    resumed = JobSpec(name="r", stack=None, image="python", nodes=1, ranks_per_node=1, gpus=False,
                      trainer_args=spec.trainer_args + ("--resume",))
    assert slurm.requeue_lines(resumed) == ""  # a resubmitted --resume run resumes on every start


def test_requeue_applies_to_the_baremetal_script_only():
    from launch.cluster import ClusterOptions

    for kwargs in ({"launcher": "k8s", "stack": "cpu"}, {"launcher": "slurm", "stack": "cpu"},
                   {"launcher": "slurm", "stack": None, "slurm_model": "hybrid"}):
        with pytest.raises(ChexstackError, match="--requeue applies to --launcher slurm on bare metal"):
            ClusterOptions(requeue=True, **kwargs)


def test_job_names_are_unique_per_output_folder_and_valid_labels():
    from launch.cluster import job_name

    names = {job_name("ngc", "/shared/runs/r1"), job_name("ngc", "/other/runs/r1"), job_name("ngc", "/shared/r2"),
             job_name(None, "/shared/runs/r1")}
    assert len(names) == 4
    assert job_name("ngc", "/shared/runs/r1").startswith("chexstack-ngc-r1-")
    assert job_name(None, "/shared/runs/r1").startswith("chexstack-baremetal-r1-")
    long = job_name("ngc", "/shared/" + "Very_Long Folder Name." * 5)
    JobSpec(name=long, stack=load_stack("cpu"), image="x", nodes=1, ranks_per_node=1, gpus=False, trainer_args=())
    assert len(long) <= 63


def test_geometry_from_nodes_and_tasks_per_node():
    from launch.cluster import ClusterOptions, geometry
    from tests.lib.runs import request

    req = request(data="synthetic", output="/shared/r")
    both = geometry(req, ClusterOptions("slurm", None, nodes=2, ntasks_per_node=2))
    assert (both[0].ranks(), both[1], both[2]) == (4, 2, 2)
    assert geometry(request(np=6, data="synthetic"), ClusterOptions("slurm", None, nodes=3))[1:] == (3, 2)
    assert geometry(request(np=6, data="synthetic"),
                    ClusterOptions("slurm", None, ntasks_per_node=3))[1:] == (2, 3)
    with pytest.raises(ChexstackError, match="--np 3 disagrees with --nodes 2 × --ntasks-per-node 2 = 4 ranks"):
        geometry(request(np=3), ClusterOptions("slurm", None, nodes=2, ntasks_per_node=2))
    with pytest.raises(ChexstackError, match="5 ranks cannot be spread evenly over --nodes 2"):
        geometry(request(np=5), ClusterOptions("slurm", None, nodes=2))
    with pytest.raises(ChexstackError, match="--nodes 0: expected 1 or more"):
        ClusterOptions("slurm", None, nodes=0)
