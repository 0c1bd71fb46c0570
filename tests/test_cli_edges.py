"""The edges a new user hits first on the command line (issue 15): an empty check selection, an unknown launcher
with other options, a folder where a file is expected, and the ``chexstack`` command from any folder."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from chexstack.errors import ChexstackError
from chexstack.inputs import input_file
from launch.options import check_applicable
from tests.lib import cli as cmd
from tests.lib.paths import REPO
from validate.report import select


def test_an_empty_check_selection_is_an_error():
    with pytest.raises(ChexstackError, match=r"^--only gpu --skip gpu: selects no check") as err:
        select(["gpu"], ["gpu"])
    assert err.value.exit_code == 2
    with pytest.raises(ChexstackError, match=r"^--only gpu.dcgm --skip gpu: selects no check"):
        select(["gpu.dcgm"], ["gpu"])


def test_an_unknown_launcher_is_named_before_any_other_rule():
    with pytest.raises(ChexstackError) as err:
        check_applicable("pbs", None, {"render": True}, ("local", "slurm", "k8s"))
    assert str(err.value) == "unknown launcher 'pbs': expected local, slurm or k8s"
    with pytest.raises(ChexstackError, match="--render applies to --launcher slurm or k8s only"):
        check_applicable("local", None, {"render": True}, ("local", "slurm", "k8s"))


def test_a_folder_where_a_file_is_expected_is_called_a_folder(tmp_path):
    from bench.main import expand_results
    from convert.dockerfile import convert
    from envs.lock import conda_files
    from envs.lockflow import check_installed_file

    with pytest.raises(ChexstackError, match=r": is a folder; expected a Dockerfile$"):
        convert(tmp_path)
    with pytest.raises(ChexstackError, match=r": no such file \(expected a Dockerfile\)$"):
        convert(tmp_path / "Dockerfile")
    with pytest.raises(ChexstackError, match=r"^result %s: is a folder; expected a sweep JSON file$" % tmp_path):
        expand_results([str(tmp_path)])
    with pytest.raises(ChexstackError, match=r"^--installed %s: is a folder; expected `conda list" % tmp_path):
        check_installed_file(conda_files("cpu"), tmp_path, None)
    (tmp_path / "f").write_text("x")
    assert input_file(tmp_path / "f", "x") == tmp_path / "f"


def test_a_file_where_the_trainer_expects_a_folder_is_called_a_file(tmp_path):
    from trainer import sources
    from trainer.errors import TrainerError

    (tmp_path / "labels.csv").write_text("x")
    with pytest.raises(TrainerError, match=r"--data .*labels.csv: is a file; expected a folder$"):
        sources.find_label_file(str(tmp_path / "labels.csv"))
    with pytest.raises(TrainerError, match=r"--images .*labels.csv: is a file; expected a folder$"):
        sources.index_images(str(tmp_path / "labels.csv"))


def _chexstack(*args: str, cwd, pythonpath) -> subprocess.CompletedProcess:
    """The ``chexstack`` command as a process, its modules from ``pythonpath`` (the entry point itself)."""
    return cmd.invoke(*args, cwd=cwd, env={"PYTHONPATH": str(pythonpath), "NO_COLOR": "1"}, command=cmd.CHEXSTACK)


def test_chexstack_command_works_from_another_folder(tmp_path):
    """``chexstack validate`` where no tasks.py is: the tasks come with the package, not from the folder."""
    run = _chexstack("validate", "--only", "mpi.version", "--json", "report.json", cwd=tmp_path, pythonpath=REPO)
    assert run.returncode in (0, 1), run.stdout + run.stderr
    assert "chexstack validate" in run.stdout and "mpi.version" in run.stdout
    assert json.loads((tmp_path / "report.json").read_text())["results"][0]["id"] == "mpi.version"
    refused = _chexstack("validate", "--only", "gpu", "--skip", "gpu", cwd=tmp_path, pythonpath=REPO)
    assert refused.returncode == 2 and "error: --only gpu --skip gpu: selects no check" in refused.stderr
    listed = _chexstack("--list", cwd=tmp_path, pythonpath=REPO)
    assert listed.returncode == 0 and "validate" in listed.stdout and "bench-report" in listed.stdout


def test_the_installed_package_has_the_command_and_its_tasks(tmp_path):
    """A wheel of this checkout (what ``pip install`` puts on a node) has the ``chexstack`` console script and the
    tasks module, and ``chexstack`` runs from that installation alone, outside any checkout."""
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv*", "runs", "build", "tests", "*.egg-info",
                                                             "__pycache__", "bench"))
    shutil.copytree(REPO / "bench", src / "bench", ignore=shutil.ignore_patterns("results", "__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    wheel = next((tmp_path / "wheel").glob("chexstack-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        entry_points = z.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "tasks.py" in names and "chexstack/cli.py" in names and "convert/templates/copy.sh" in names
    assert "chexstack = tasks:main" in entry_points
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    run = _chexstack("--list", cwd=tmp_path, pythonpath=site)
    assert run.returncode == 0 and "validate" in run.stdout, run.stdout + run.stderr
    where = subprocess.run([sys.executable, "-c", "import tasks, chexstack.cli; print(tasks.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(site)})
    assert where.stdout.strip() == str(site / "tasks.py")


def _into_a_closed_pipe(command: tuple[str, ...], *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``COMMAND ARGS | head -0``, deterministically: stdout is a pipe whose read end is closed before it starts."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([*command, *args], stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              timeout=120, env={**os.environ, "COLUMNS": "120", **(env or {})})
    finally:
        os.close(write)


@pytest.mark.parametrize("command", [(cmd.INVOKE,), cmd.CHEXSTACK], ids=["invoke", "chexstack"])
def test_a_closed_pipe_ends_the_command_quietly_with_141(command):
    """``invoke --help train | head -1`` ended in a BrokenPipeError traceback (invoke's help printing) or Python's
    "Exception ignored ... BrokenPipeError" at exit. Now every way a command writes ends quietly with 128 + SIGPIPE,
    as a shell reports a tool SIGPIPE ended: invoke's task help written while it prints (11 kB: more than a pipe
    write's buffer) and written at exit (a short help, stdout buffered), and a task's rich table."""
    # PYTHONUNBUFFERED "1": each print is written at once; "" (unset, Python's rule): stdout is block-buffered
    for args, unbuffered in ((("--help", "train"), "1"), (("--help", "render"), ""), (("stacks",), "1")):
        ran = _into_a_closed_pipe(command, *args, env={"PYTHONUNBUFFERED": unbuffered})
        assert (ran.returncode, ran.stderr) == (141, ""), (args, unbuffered, ran.returncode, ran.stderr)


def test_a_broken_pipe_that_is_not_the_output_keeps_its_traceback(tmp_path):
    """The hook ends quietly only when stdout or stderr is closed indeed: a BrokenPipeError of a socket or a
    child's stdin is an error to show."""
    from chexstack import cli

    seen = []
    with open(tmp_path / "out", "w") as out:
        saved = os.dup(1)
        os.dup2(out.fileno(), 1)  # stdout a file: open
        try:
            cli._excepthook(BrokenPipeError, BrokenPipeError(32, "Broken pipe"), None,
                            previous=lambda *exc: seen.append(exc[0]))
        finally:
            os.dup2(saved, 1)
            os.close(saved)
    assert seen == [BrokenPipeError]


@pytest.mark.parametrize("command", [(cmd.INVOKE,), cmd.CHEXSTACK], ids=["invoke", "chexstack"])
def test_a_command_line_the_parser_cannot_read_exits_2_not_validates_1(command):
    """An unknown option, an option without its value, an unknown task or sub-collection is 'could not run' (2),
    with the parser's message in the user's terms as an ``error:`` line; invoke's own status for it is 1, which is
    validate's FAIL (a node with a problem), so ``invoke validate --fsat`` looked like a failed node to a script."""
    for args, message in ((("validate", "--fsat"), "error: No idea what '--fsat' is!"),
                          (("validate", "--only"), "error: validate: --only needs a value\n"),
                          (("train", "--epochs"), "error: train: --epochs needs a value\n"),  # a NumberOption
                          (("no-such-task",), "error: No idea what 'no-such-task' is!"),
                          (("--list", "nothing"), "error: Sub-collection 'nothing' not found!")):
        ran = cmd.invoke(*args, command=command, env={"NO_COLOR": "1"})
        assert (ran.returncode, ran.stdout) == (2, ""), (args, ran.returncode, ran.stdout, ran.stderr)
        assert ran.stderr.startswith(message), (args, ran.stderr)
    if command == cmd.CHEXSTACK:  # its own options are parsed after tasks.py loads, too
        ran = cmd.invoke("--fsat", command=command)
        assert ran.returncode == 2 and ran.stderr.startswith("error: No idea what '--fsat' is!"), ran.stderr
