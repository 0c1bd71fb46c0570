"""Issue 42, item 7: Slurm's own OCI containers (``srun --container``). The batch script is golden text (a bundle
made of a real umoci ``config.json`` and a real ``images.oci`` record, tests/data/oci); a missing bundle, a missing
record or missing tools give clear errors; the node launcher's Gloo wiring from Slurm's variables; the run record's
``container`` block. The job for real across chex1 and chex2: tests/test_launch_slurm_oci_cluster.py."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from chexstack.errors import ChexstackError, ExitCode
from envs.manifest import load_stack
from images import oci
from launch import slurm, slurm_oci
from launch.job import JobSpec, Mount
from launch.schedulers import SCHEDULERS, select
from tests.lib import cli as cmd
from tests.lib.golden import assert_golden
from tests.lib.paths import REPO
from trainer import runtime, slurm_gloo

DATA = REPO / "tests" / "data" / "oci"
#: where the golden script's bundle is (the test's own folder is put there in the text)
SHOWN = "/shared/bundles/chexstack-cpu"
TRAINER_ARGS = ("--data", "/data/chestxray14", "--model", "densenet121", "--epochs", "5",
                "--output", "/scratch/chexstack/run1")
MOUNTS = (Mount("/data/chestxray14", read_only=True), Mount("/scratch/chexstack/run1"))


@pytest.fixture
def bundle(tmp_path):
    """A bundle folder: the real config.json and record of tests/data/oci, an empty rootfs."""
    folder = tmp_path / "bundle"
    (folder / "rootfs").mkdir(parents=True)
    for name in ("config.json", oci.RECORD):
        shutil.copy(DATA / name, folder / name)
    return folder


def _spec(image, gpus=False, nodes=2, per_node=2):
    return JobSpec(name="chexstack-cxr", stack=load_stack("cpu"), image=str(image), nodes=nodes,
                   ranks_per_node=per_node, gpus=gpus, trainer_args=TRAINER_ARGS, mounts=MOUNTS)


def test_oci_script_golden_and_bash_clean(bundle):
    opts = slurm.SlurmOptions(output="/scratch/chexstack/run1/slurm-%j.out")
    text = slurm_oci.render(_spec(bundle), opts).replace(str(bundle), SHOWN)
    assert_golden("launch/slurm-oci-2x2cpu.sbatch", text)
    proc = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert ('srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=2 --container="$job_bundle"' in text)
    assert "python -m trainer.slurm_gloo --ranks-per-node 2 --data /data/chestxray14" in text
    record = json.loads((DATA / oci.RECORD).read_text())
    assert "export CHEXSTACK_OCI_DIGEST=%s" % record["digest"] in text
    config = json.loads(text.split("<<'CHEXSTACK_OCI_CONFIG'\n")[1].split("\nCHEXSTACK_OCI_CONFIG")[0])
    assert config["process"]["cwd"] == "/opt/chexstack"
    binds = {m["destination"]: m["options"] for m in config["mounts"] if m["type"] == "bind"}
    assert binds == {"/etc/hosts": ["bind", "ro"], "/data/chestxray14": ["rbind", "ro"],
                     "/scratch/chexstack/run1": ["rbind", "rw"]}
    assert not any(n["type"] in ("network", "uts") for n in config["linux"]["namespaces"])


def test_gpu_ranks_take_the_nodes_gpus(bundle):
    text = slurm_oci.render(_spec(bundle, gpus=True, per_node=4), slurm.SlurmOptions())
    assert "--cpus-per-task=4 --gpus-per-node=4 --container=" in text and "#SBATCH --gpus-per-node=4" in text


def test_the_container_option_picks_the_oci_scheduler_and_renders_through_invoke(bundle, tmp_path):
    assert select("slurm", "cpu", "oci") is SCHEDULERS["slurm-oci"] is slurm_oci.OCI
    out = tmp_path / "run"
    r = cmd.run("train", "--launcher", "slurm", "--stack", "cpu", "--container", str(bundle), "--gpus", "0",
                "--nodes", "2", "--ntasks-per-node", "2", "--data", "synthetic", "--output", str(out), "--render")
    assert r.returncode == 0, r.stderr
    assert "--container=\"$job_bundle\"" in r.stdout and "--ranks-per-node 2" in r.stdout
    assert "ln -sfn -- %s/rootfs" % bundle in r.stdout


@pytest.mark.parametrize("extra, message", [
    (("--container", "relative/bundle"), "--container relative/bundle: expected the absolute path of an OCI bundle"),
    (("--container", "/nonexistent/chexstack-bundle"), "OCI bundle /nonexistent/chexstack-bundle: no such folder"),
    (("--container", "/b", "--hybrid"), "--container runs Slurm's own OCI containers and --hybrid"),
    (("--container", "/b", "--image", "x.sif"), "--container /b names the image (an OCI bundle): leave out --image"),
])
def test_bad_container_options_are_clear_errors(extra, message, tmp_path):
    r = cmd.run("train", "--launcher", "slurm", "--stack", "cpu", "--gpus", "0", "--nodes", "2",
                "--ntasks-per-node", "2", "--data", "synthetic", "--output", str(tmp_path / "o"), "--render", *extra)
    assert r.returncode == ExitCode.USAGE and message in r.stderr, r.stderr


def test_container_applies_to_slurm_only(bundle):
    r = cmd.run("train", "--container", str(bundle), "--gpus", "0", "--data", "synthetic")
    assert r.returncode == ExitCode.USAGE and "--container" in r.stderr and "slurm" in r.stderr, r.stderr


def test_a_folder_that_is_no_bundle_or_has_no_record_is_named(bundle):
    (bundle / oci.RECORD).unlink()
    with pytest.raises(ChexstackError, match="no chexstack-oci.json, so the image and digest it came from are unknown"):
        oci.read_bundle(str(bundle))
    shutil.rmtree(bundle / "rootfs")
    with pytest.raises(ChexstackError, match="no rootfs, so not an OCI runtime bundle"):
        oci.read_bundle(str(bundle))


def test_missing_tools_name_the_setup_flag(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ChexstackError, match=r"missing: skopeo, umoci; scripts/setup --testcluster") as e:
        oci.make_bundle("chexstack/cpu:any", str(tmp_path / "b"))
    assert e.value.exit_code == ExitCode.TOOL_MISSING


def test_slurm_config_shares_the_nodes_network_and_host_name():
    umoci = {"hostname": "umoci-default", "process": {"terminal": True},
             "linux": {"namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount")]}}
    out = oci.slurm_config(umoci)
    assert [n["type"] for n in out["linux"]["namespaces"]] == ["pid", "ipc", "mount"]
    assert "hostname" not in out and out["process"]["terminal"] is False


#: a container step's environment: the batch script's own SLURM_NODEID (0 on every node, observed), srun's
SLURM = {"SLURM_NODEID": "0", "SLURM_STEP_NODELIST": "chex[1-2]", "SLURM_STEP_NUM_NODES": "2", "SLURM_JOB_ID": "7",
         "SLURM_STEP_ID": "0", "SLURM_SRUN_COMM_HOST": "10.213.57.11", "SLURM_STEP_NUM_TASKS": "2"}


def test_the_node_launcher_wires_gloo_from_slurms_variables():
    node, nodes, address, port = slurm_gloo.layout(SLURM, 2, hostname="chex2")
    assert (node, nodes, address, port) == (1, 2, "10.213.57.11", 20056)
    assert slurm_gloo.layout(SLURM, 2, hostname="chex1.cluster")[0] == 0
    assert slurm_gloo.expand_hostlist("gpu[08-10,12],login") == ["gpu08", "gpu09", "gpu10", "gpu12", "login"]
    env = slurm_gloo.rank_env(node, nodes, 1, 2, address, port, "eth0")
    assert (env["HOROVOD_RANK"], env["HOROVOD_SIZE"], env["HOROVOD_LOCAL_RANK"], env["HOROVOD_CROSS_RANK"]) == \
        ("3", "4", "1", "1")
    assert env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] == "10.213.57.11" and env["HOROVOD_CONTROLLER"] == "gloo"
    with pytest.raises(slurm_gloo.SlurmEnvError, match="SLURM_STEP_NODELIST not set"):
        slurm_gloo.layout({k: v for k, v in SLURM.items() if k != "SLURM_STEP_NODELIST"}, 2, hostname="chex1")
    with pytest.raises(slurm_gloo.SlurmEnvError, match="host node9: expected one of the step's 2 nodes"):
        slurm_gloo.layout(SLURM, 2, hostname="node9")
    with pytest.raises(slurm_gloo.SlurmEnvError, match="srun must start one task per node"):
        slurm_gloo.layout(dict(SLURM, SLURM_STEP_NUM_TASKS="4"), 2, hostname="chex1")


def test_the_run_record_names_the_bundle_its_digest_and_the_wiring(monkeypatch):
    record = json.loads((DATA / oci.RECORD).read_text())
    env = slurm_oci.oci_env(oci.BundleRecord(bundle="/b", **{k: record[k] for k in
                                                               ("image", "image_id", "digest", "manifest_sha256")}))
    for name, value in dict(env, CHEXSTACK_RENDEZVOUS=slurm_gloo.RENDEZVOUS).items():
        monkeypatch.setenv(name, value)
    got = runtime.container()
    assert got["runtime"] == "oci" and got["bundle"] == "/b" and got["digest"] == record["digest"]
    assert got["image_id"] == record["image_id"] and "gloo from Slurm" in got["rendezvous"]


def test_the_study_runs_it_as_a_fourth_system(bundle):
    """``invoke study --systems ...,slurm-oci --bundle DIR``: one batch script per repeat, a job step per count,
    each ``srun --container`` of the job's bundle with one task per node; a study without --bundle is refused."""
    ran = cmd.run("study", "--systems", "baremetal,slurm-oci", "--np", "1,2", "--stack", "cpu", "--hosts",
                  "chex1,chex2", "--repeats", "2", "--results", "/shared/study", "--bundle", str(bundle),
                  "--model", "mobilenet", "--render")
    assert ran.returncode == 0, ran.stderr
    script = ran.stdout.split("# --- slurm-oci:host, round 1: ")[1].split("\n", 1)[1].split("# --- ")[0]
    proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --nodelist=chex1,chex2" in script and "job_bundle=/shared/study/study-" in script
    assert 'srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=1 --container="$job_bundle"' in script
    assert 'srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpus-per-task=1 --container="$job_bundle"' in script
    from bench import study

    req = study.StudyRequest(sweep=study.SweepRequest(counts=(1, 2), gpus=False, label="s", launcher="slurm",
                                                      stack="cpu"),
                             systems=("baremetal", "slurm-oci"), hosts=("chex1", "chex2"), results="/shared/study")
    with pytest.raises(ChexstackError, match="--systems slurm-oci runs an OCI bundle: give --bundle DIR"):
        study.preflight(req)


def test_build_refuses_a_bundle_folder_that_exists_before_building(bundle):
    r = cmd.run("build", "--stack", "cpu", "--bundle", str(bundle))
    assert r.returncode == ExitCode.USAGE and "--bundle %s: already exists" % bundle in r.stderr, r.stderr
