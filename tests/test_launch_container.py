"""The container launch command of ``invoke train --stack`` (no Docker needed: interfaces and GPUs given)."""
from __future__ import annotations

import pytest

from chexstack.errors import ChexstackError
from launch.container import docker_plan, singularity_plan
from launch.request import TrainRequest
from tests.lib.paths import SAMPLE
from tests.lib.runs import request

LABELS = SAMPLE / "Data_Entry_2017_v2020.csv.gz"
IMAGES = SAMPLE / "images-64"


def _request(tmp_path, **kw) -> TrainRequest:
    base = dict(gpus=0, np=2, images=str(IMAGES), labels=str(LABELS), image_size=64, epochs=1,
                output=str(tmp_path / "out"))
    base.update(kw)
    return request(**base)


def test_cpu_ranks_with_a_network_use_gloo(tmp_path):
    plan = docker_plan(_request(tmp_path), "chexstack/cpu:x", gpus_here=0, interfaces=["eth0", "lo"])
    argv = plan.argv
    import resource
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    memlock = "memlock=-1" if hard == resource.RLIM_INFINITY else "memlock=%d" % hard
    assert argv[:8] == ["docker", "run", "--rm", "--network", "host", "--ipc=host", "--ulimit", memlock]
    assert argv[10:14] == ["--init", "--name", plan.container, "-w"]  # tini as PID 1 passes SIGTERM on
    assert plan.container.startswith("chexstack-train-")
    assert argv[argv.index("chexstack/cpu:x") - 2:argv.index("chexstack/cpu:x")] == ["-e", "CHEXSTACK_OUTPUT_LOCK"]
    assert "%s:/output" % (tmp_path / "out") in argv and "%s:/data/images:ro" % IMAGES in argv
    assert "%s:/data/labels/%s:ro" % (LABELS, LABELS.name) in argv
    assert "--gpus" not in argv and "CUDA_VISIBLE_DEVICES=" in argv
    tail = argv[argv.index("chexstack/cpu:x"):]
    assert tail[:7] == ["chexstack/cpu:x", "horovodrun", "-np", "2", "-H", "localhost:2", "--gloo"]
    assert tail[7:10] == ["python", "-m", "trainer"]
    assert tail[tail.index("--images") + 1] == "/data/images" and tail[tail.index("--output") + 1] == "/output"
    assert plan.controller == "gloo" and not (tmp_path / "out").exists()  # planning creates nothing


def test_loopback_only_container_runs_mpi_as_root(tmp_path):
    plan = docker_plan(_request(tmp_path), "img", network="none", gpus_here=0, interfaces=["lo"])
    assert plan.controller == "mpi" and "only loopback" in plan.reason
    assert "--network" in plan.argv and plan.argv[plan.argv.index("--network") + 1] == "none"
    assert "OMPI_ALLOW_RUN_AS_ROOT=1" in plan.argv and "--mpi" in plan.argv
    assert "OMPI_MCA_btl_vader_single_copy_mechanism=none" in plan.argv


def test_gloo_requested_on_loopback_stops_before_launch(tmp_path):
    with pytest.raises(ChexstackError, match=r"loopback.*exit 139.*--controller mpi"):
        docker_plan(_request(tmp_path, controller="gloo"), "img", network="none", gpus_here=0, interfaces=["lo"])


def test_gpus_are_passed_only_when_present(tmp_path):
    plan = docker_plan(_request(tmp_path, gpus=2, np=None), "img", gpus_here=2, interfaces=["eth0"])
    assert plan.argv[plan.argv.index("--gpus") + 1] == "all" and "CUDA_VISIBLE_DEVICES=" not in plan.argv
    with pytest.raises(ChexstackError, match="--gpus 2: this machine has 0"):
        docker_plan(_request(tmp_path, gpus=2, np=None), "img", gpus_here=0, interfaces=["eth0"])


def test_bad_network_and_missing_data(tmp_path):
    with pytest.raises(ChexstackError, match="--network 'bridge'"):
        docker_plan(_request(tmp_path), "img", network="bridge", gpus_here=0, interfaces=["eth0"])
    # the request's paths are checked once, at the seam (launch.plan), before any target
    with pytest.raises(ChexstackError, match="--images .*/nope: no such directory"):
        in_image(_request(tmp_path, images=str(tmp_path / "nope")))
    with pytest.raises(ChexstackError, match="--labels .*/nope.csv: no such file"):
        in_image(_request(tmp_path, labels=str(tmp_path / "nope.csv")))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ChexstackError, match="--output .*/file is a file, not a folder"):
        in_image(_request(tmp_path, output=str(tmp_path / "file")))


def in_image(req):
    """The plan of ``req`` in the cpu stack's image through the seam (``launch.plan``: checked there first)."""
    import launch

    return launch.plan(req, launch.where(stack="cpu"))


def test_singularity_without_the_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ChexstackError) as e:
        singularity_plan(_request(tmp_path), str(tmp_path / "x.sif"))
    assert e.value.exit_code == 3 and "apptainer or singularity" in str(e.value)


@pytest.mark.docker
@pytest.mark.slow
def test_sigterm_stops_the_container_and_a_second_run_is_refused(tmp_path, client, cpu_build):
    """In the built cpu image (the session's cpu_build): the launcher holds the output lock and rank 0
    inside accepts it (the run starts); a second launch is refused; SIGTERM to the launcher stops the container,
    exit 143 with the checkpoint line."""
    import json
    import signal

    import docker.errors

    from tests.lib import cli as cmd
    from tests.lib.runs import ENV, SMALL

    out = tmp_path / "in-image"
    # epochs enough that training cannot end while the second launch is refused (4 steps an epoch: under CI's load
    # 4 epochs ended first, and the signal then came after training); the signal ends it
    run = cmd.Launcher("--stack", "cpu", *SMALL, "--epochs", "40", "--early-stop", "0", "--output", str(out), env=ENV)
    run.wait_for("epoch 1:")
    name = next(l for l in run.lines if l.startswith("launch: ")).split("--name ", 1)[1].split()[0]
    assert client.containers.get(name).status == "running"
    second = cmd.invoke("train", "--stack", "cpu", *SMALL, "--epochs", "40", "--output", str(out), env=ENV,
                        timeout=600)
    assert second.returncode == 2 and "is in use by another run (pid %d" % run.proc.pid in second.stderr
    run.proc.send_signal(signal.SIGTERM)
    code, text = run.finish()
    assert code == 143, text
    state = json.loads((out / "checkpoint" / "state.json").read_text())
    assert "interrupted by SIGTERM after epoch %d" % state["epoch"] in text and "continue with --resume" in text
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(name)


@pytest.mark.docker
def test_a_chexstack_image_with_another_trainer_is_named_before_the_run(tmp_path, client, debian_base):
    """Label ``org.chexstack.code.sha256`` against this checkout's code (trainer/, probe): a match says nothing, another
    digest or none names the image and the rebuild; an image chexstack did not build is not judged."""
    import io

    import docker.errors

    from images import labels
    from launch.container import trainer_drift
    from tests.lib.leftovers import TEST_LABELS

    cases = {"same": {labels.STACK: "cpu", labels.CODE: labels.code_digest()},
             "other": {labels.STACK: "cpu", labels.CODE: "0" * 64},
             "unrecorded": {labels.STACK: "cpu"},
             "foreign": {"maintainer": "someone else"}}
    refs = {}
    try:
        for name, lab in cases.items():
            refs[name] = "chexstack-test/drift:%s" % name
            client.images.build(fileobj=io.BytesIO(("FROM %s\n" % debian_base).encode()), tag=refs[name],
                                labels={**lab, **TEST_LABELS}, network_mode="host", rm=True)
        assert trainer_drift(refs["same"], "cpu") is None
        assert trainer_drift(refs["foreign"], "cpu") is None
        assert trainer_drift("chexstack-test/drift:absent", "cpu") is None
        other = trainer_drift(refs["other"], "cpu")
        assert other == ("image chexstack-test/drift:other holds other code (trainer/, probe: 000000000000) than this "
                         "checkout (%s): this run uses the image's copy; to run this checkout's code: invoke build "
                         "--stack cpu" % labels.code_digest()[:12])
        assert "does not record which code it holds" in trainer_drift(refs["unrecorded"], "cpu")
    finally:
        for ref in refs.values():
            try:
                client.images.remove(ref)
            except docker.errors.DockerException:
                pass


@pytest.mark.docker
def test_an_image_that_is_not_built_is_named_never_pulled(tmp_path, client):
    """A chexstack tag exists only where it was built: no pull from Docker Hub (a registry error), but the build."""
    from launch.container import docker_interfaces

    with pytest.raises(ChexstackError) as e:
        docker_interfaces("chexstack/ngc:0.1.0-000000000000", "host", "ngc")
    assert str(e.value) == ("image chexstack/ngc:0.1.0-000000000000 is not in this Docker engine: build it (invoke "
                            "build --stack ngc) or give --image")


def test_a_label_folder_given_as_the_label_file_is_named_as_such(tmp_path):
    with pytest.raises(ChexstackError, match=r"--labels .*: a directory; expected the label file"):
        in_image(_request(tmp_path, labels=str(tmp_path)))


# --- runs in an image write as the calling user (issue 15) ------------------------------------------------------
USER = (4321, 4321)  # a non-root user without an entry in the image's /etc/passwd


def _as_user(monkeypatch, uid_gid=USER):
    monkeypatch.setattr("os.getuid", lambda: uid_gid[0])
    monkeypatch.setattr("os.getgid", lambda: uid_gid[1])


def test_docker_runs_as_the_calling_user_unless_root_is_asked_for(tmp_path, monkeypatch):
    _as_user(monkeypatch)
    argv = docker_plan(_request(tmp_path), "img", gpus_here=0, interfaces=["eth0"]).argv
    user = argv.index("--user")
    assert argv[user:user + 6] == ["--user", "4321:4321", "--tmpfs",
                                   "/home/chexstack:rw,exec,uid=4321,gid=4321,mode=700", "-e", "HOME=/home/chexstack"]
    assert user < argv.index("img")
    assert "--user" not in docker_plan(_request(tmp_path), "img", gpus_here=0, interfaces=["eth0"], as_root=True).argv
    _as_user(monkeypatch, (0, 0))  # root calling: the image's root, as before
    assert "--user" not in docker_plan(_request(tmp_path), "img", gpus_here=0, interfaces=["eth0"]).argv


def test_singularity_runs_as_the_user_and_fakeroot_on_request(tmp_path, monkeypatch):
    monkeypatch.setattr("images.sif.require_tool", lambda: "apptainer")
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"")
    monkeypatch.setattr("os.getuid", lambda: 1000)
    assert "--fakeroot" not in singularity_plan(_request(tmp_path), str(sif)).argv
    assert singularity_plan(_request(tmp_path), str(sif), as_root=True).argv[:3] == ["apptainer", "exec", "--fakeroot"]
    monkeypatch.setattr("os.getuid", lambda: 0)  # root is root in the container already
    assert "--fakeroot" not in singularity_plan(_request(tmp_path), str(sif), as_root=True).argv


def test_singularity_binds_the_driver_only_for_a_gpu_run(tmp_path, monkeypatch):
    monkeypatch.setattr("images.sif.require_tool", lambda: "apptainer")
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"")
    assert "--nv" not in singularity_plan(_request(tmp_path), str(sif)).argv
    plan = singularity_plan(_request(tmp_path, gpus=2), str(sif))
    assert plan.argv[:3] == ["apptainer", "exec", "--nv"]


def test_as_root_needs_a_stack():
    from launch.options import check_applicable

    with pytest.raises(ChexstackError, match="--as-root applies to a run in a stack's image"):
        check_applicable("local", None, {"as_root": True}, ("local", "slurm", "k8s"))
    with pytest.raises(ChexstackError, match="--as-root applies to --launcher local only"):
        check_applicable("k8s", "cpu", {"as_root": True}, ("local", "slurm", "k8s"))


def _user_folder(uid_gid=USER):
    """A folder the non-root user owns (a pytest tmp_path is root's, mode 700: that user could not enter it)."""
    import os
    import tempfile

    folder = tempfile.mkdtemp(prefix="chexstack-test-user-")
    os.chmod(folder, 0o755)
    os.chown(folder, *uid_gid)
    return folder


@pytest.mark.docker
def test_a_container_run_writes_as_the_calling_user_with_a_writable_home(tmp_path, monkeypatch, debian_base):
    """The real dockerd: the plan's ``docker run`` options, a shell in place of horovodrun, as a non-root user:
    what it writes into --output belongs to that user, and HOME takes files."""
    import os
    import shutil
    import subprocess

    from images.local_base import LOCAL_DEBIAN

    if os.geteuid() != 0:
        pytest.skip("needs root to make a folder owned by another user")
    folder = _user_folder()
    try:
        for as_root, owner in ((False, USER[0]), (True, 0)):
            _as_user(monkeypatch)
            plan = docker_plan(_request(tmp_path, output=folder), LOCAL_DEBIAN, gpus_here=0, interfaces=["eth0"],
                               as_root=as_root)
            monkeypatch.undo()
            name = "written-as-root" if as_root else "written"
            script = 'id -u; echo "$HOME"; touch "$HOME/.probe" && touch /output/%s' % name
            argv = plan.argv[:plan.argv.index(LOCAL_DEBIAN) + 1] + ["sh", "-c", script]
            run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            assert run.returncode == 0, run.stderr
            assert run.stdout.split()[:2] == ([str(USER[0]), "/home/chexstack"] if not as_root else ["0", "/root"])
            assert os.stat(os.path.join(folder, name)).st_uid == owner
    finally:
        shutil.rmtree(folder)


@pytest.mark.docker
@pytest.mark.slow
def test_a_non_root_user_trains_in_the_cpu_image_and_owns_the_outputs(client, cpu_build):
    """``invoke train --stack cpu`` started by a non-root user in the docker group (in the session's cpu_build
    image): the run succeeds and every file in --output is that user's."""
    import grp
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from tests.lib.paths import REPO
    from tests.lib.runs import SMALL

    if os.geteuid() != 0:
        pytest.skip("needs root to start a process as another user")
    python = os.path.realpath(sys.executable)
    closed = [d for d in Path(python).parents if not os.stat(d).st_mode & 0o001]
    if closed:
        pytest.skip("the venv's Python (%s) cannot be run by uid %d: %s is not searchable by others (the docker "
                    "--user ownership itself is tested above)" % (python, USER[0], closed[-1]))
    folder = _user_folder()
    try:
        out = os.path.join(folder, "out")
        run = subprocess.run(
            [sys.executable, "-m", "chexstack", "train", "--stack", "cpu", *SMALL, "--epochs", "1", "--output", out],
            cwd=folder, capture_output=True, text=True, timeout=300,
            user=USER[0], group=USER[1], extra_groups=[grp.getgrnam("docker").gr_gid],
            env={**os.environ, "HOME": folder, "PYTHONPATH": str(REPO), "COLUMNS": "120"})
        assert run.returncode == 0, run.stdout + run.stderr
        assert "--user %d:%d" % USER in run.stdout
        owners = {os.path.relpath(os.path.join(root, n), out): os.lstat(os.path.join(root, n)).st_uid
                  for root, dirs, files in os.walk(out) for n in dirs + files}
        assert "metrics.json" in owners and set(owners.values()) == {USER[0]}, owners
    finally:
        shutil.rmtree(folder)


def test_singularity_hands_every_rank_the_sif_files_sha256(tmp_path, monkeypatch):
    """Issue 22: the run record names the SIF the ranks ran in by its digest (a SIF cannot hold its own)."""
    import hashlib

    monkeypatch.setattr("images.sif.require_tool", lambda: "apptainer")
    sif = tmp_path / "x.sif"
    sif.write_bytes(b"SIF bytes")
    argv = singularity_plan(_request(tmp_path), str(sif)).argv
    assert "CHEXSTACK_SIF_SHA256=%s" % hashlib.sha256(b"SIF bytes").hexdigest() in argv
