"""tasks.py's glue: option parsing errors are clear messages (exit 2), never tracebacks (review findings 5, 7, N4)."""
from __future__ import annotations

import inspect
import json
import os
import re
import shutil

import pytest

import tasks
from chexstack import cli
from tests.lib import cli as cmd
from tests.lib.paths import SAMPLE


def _tasks() -> dict[str, cli.Task]:
    return {name.replace("_", "-"): obj for name, obj in vars(tasks).items() if isinstance(obj, cli.Task)}


def _number_options() -> list[tuple[str, str, type]]:
    out = []
    for name, t in _tasks().items():
        for arg in t.get_arguments():
            if isinstance(arg, cli.NumberOption):
                out.append((name, arg.names[0], arg.number))
    return out


def test_every_task_uses_chexstack_task_and_every_number_option_is_checked():
    """An int default makes invoke convert the option; a fraction must be declared in ``floats``."""
    assert set(_tasks()) >= {"stacks", "lock", "train", "validate", "bench", "bench-report"}
    for name, t in _tasks().items():
        assert not t.auto_shortflags, name
        params = inspect.signature(t.body).parameters
        assert t.floats <= set(params), (name, t.floats)
        numbers = {arg.attr_name or arg.name for arg in t.get_arguments() if isinstance(arg, cli.NumberOption)}
        for p in params.values():
            if isinstance(p.default, int) and not isinstance(p.default, bool) or "fraction" in p.name:
                assert p.name in numbers, (name, p.name)
    assert ("train", "val-fraction", float) in _number_options() and ("bench", "steps", int) in _number_options()


@pytest.mark.parametrize("task, option, number", _number_options())
def test_a_bad_number_names_the_option_and_what_was_expected(task, option, number):
    run = cmd.run(task, "--%s" % option, "abc")
    expected = "a whole number" if number is int else "a number"
    assert run.returncode == 2, run.stdout + run.stderr
    assert "error: --%s 'abc': expected %s" % (option, expected) in run.stderr
    assert "Traceback" not in run.stderr and "ValueError" not in run.stderr


def test_numbers_still_parse():
    """A fraction of 0.1 and a non-finite value: parsed, and refused."""
    assert cli._finite_float("0.1") == 0.1
    with pytest.raises(ValueError):
        cli._finite_float("inf")
    run = cmd.run("train", "--launcher", "slurm", "--stack", "cpu", "--np", "2", "--data", "synthetic",
                 "--val-fraction", "0.2", "--output", "/shared/runs/r", "--render")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "--val-fraction 0.2" in run.stdout


def test_unknown_launcher_is_named():
    run = cmd.run("train", "--launcher", "foo")
    assert run.returncode == 2
    assert run.stderr.strip() == "error: unknown launcher 'foo': expected local, slurm or k8s"
    bench = cmd.run("bench", "--launcher", "foo")
    assert bench.returncode == 2 and "unknown launcher 'foo': expected local, mpirun, slurm or k8s" in bench.stderr


def test_dash_h_is_help_and_the_list_shows_whole_first_lines():
    run = cmd.run("train", "-h")
    assert run.returncode == 0 and run.stdout.startswith("Usage: inv[oke] [--core-opts] train")
    assert "-h," not in run.stdout and "--hybrid" in run.stdout
    listing = cmd.run("--list").stdout
    assert "or check an installed environment." in " ".join(listing.split())


def test_output_that_is_not_a_terminal_is_120_columns_or_columns(monkeypatch):
    """Review finding N3: logs and CI output wrapped at rich's 80 columns; validate used 160 of its own."""
    from chexstack.console import LOG_WIDTH, width_for

    class Pipe:
        def isatty(self):
            return False

    class Tty(Pipe):
        def isatty(self):
            return True

    monkeypatch.delenv("COLUMNS", raising=False)
    assert width_for(Pipe()) == LOG_WIDTH == 120 and width_for(Tty()) is None
    monkeypatch.setenv("COLUMNS", "200")
    assert width_for(Pipe()) == 200
    for args, widest in ((["stacks"], 120), (["validate", "--hosts", "node1.invalid", "--only", "mpi"], 120)):
        ran = cmd.invoke(*args, env={"COLUMNS": None}, expect=0 if args == ["stacks"] else 1)  # consoles at import
        assert max(len(line) for line in ran.stdout.splitlines()) == widest, (args, ran.stdout)


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_after_a_task_with_a_positional_argument_is_its_help(flag):
    """invoke's parser would take ``bench-report -h`` as the results file ``-h``; it prints the task's help."""
    positional = [name for name, t in _tasks().items() if t.positional]
    assert "bench-report" in positional
    for name in positional:
        run = cmd.run(name, flag)
        assert run.returncode == 0, run.stdout + run.stderr
        assert run.stdout.startswith("Usage: inv[oke] [--core-opts] %s" % name), run.stdout
        assert "no such file" not in run.stdout + run.stderr


@pytest.mark.parametrize("args, message", [
    (["train", "--render"], "--render applies to --launcher slurm or k8s only (this is --launcher local)"),
    (["train", "--submit"], "--submit applies to --launcher slurm or k8s only (this is --launcher local)"),
    (["train", "--hybrid"], "--hybrid applies to --launcher slurm only (this is --launcher local)"),
    (["train", "--launcher", "slurm", "--stack", "ngc", "--rdma", "rdma/x", "--render"],
     "--rdma applies to --launcher k8s only (this is --launcher slurm)"),
    (["train", "--per-node", "2"], "--per-node applies to --launcher slurm or k8s only (this is --launcher local)"),
    (["train", "--network", "none"], "--network applies to a run in a stack's image: add --stack S"),
    (["train", "--runtime", "singularity"], "--runtime applies to a run in a stack's image: add --stack S"),
    (["train", "--launcher", "k8s", "--stack", "ngc", "--network", "none", "--render"],
     "--network applies to --launcher local only (this is --launcher k8s)"),
    (["bench", "--gpus", "1", "--hosts", "a:1"],
     "--hosts applies to --launcher mpirun only (this is --launcher local)"),
    (["bench", "--gpus", "1", "--render"],
     "--render applies to --launcher slurm or k8s only (this is --launcher local)"),
    (["bench", "--gpus", "1", "--results", "/x"], "--results applies to --launcher slurm or k8s only"),
])
def test_an_option_without_effect_for_the_launcher_is_refused_before_anything_runs(args, message):
    """``invoke train --render`` without a scheduler would start a full training run here (review finding)."""
    run = cmd.run(*args, "--data", "synthetic") if args[0] == "train" else cmd.run(*args)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "error: " + message in run.stderr
    assert "launch:" not in run.stdout and "Traceback" not in run.stderr


@pytest.mark.parametrize("task, known", [("render", "conda, cpu, hopper, ngc"), ("build", "conda, cpu, hopper, ngc"),
                                         ("lock", "conda, cpu")])
def test_a_missing_stack_is_a_clear_error(task, known):
    """Not invoke's "did not receive required positional arguments: 'stack'" (exit 1): --stack is an option."""
    run = cmd.run(task)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stderr.startswith("error: no stack given: add --stack NAME;") and known in run.stderr


def test_every_trainer_option_is_an_invoke_train_option():
    """The trainer's parser is the one declaration: each of its options (but the throughput mode, which is
    ``invoke bench``'s) is an option of ``invoke train``, with the trainer's help."""
    from launch.options import THROUGHPUT_OPTIONS
    from trainer import cli
    flags = {name for a in tasks.train.get_arguments() for name in a.names}
    for action in cli.parser()._actions:
        if action.option_strings and action.dest != "help" and action.dest not in THROUGHPUT_OPTIONS:
            assert action.dest.replace("_", "-") in flags, action.dest
    for flag in ("lr", "seed", "weights", "warmup-epochs", "train-val-list", "test-list"):
        assert flag in flags
    help_text = cmd.run("train", "--help", expect=0).stdout
    assert "python -m trainer --lr: base learning rate" in help_text


def test_invoke_train_help_says_each_trainer_default_once():
    """``--input-resize`` read ``(auto) (trainer default auto)``: a trainer help that states its default (argparse's
    ``%(default)s``, as ``python -m trainer --help`` expands it) gets no second one, another gets "(trainer default
    X)"; every default (not None, not a switch) is in exactly one parenthesis of its help."""
    import re

    from launch.options import trainer_options
    from trainer import cli
    for o in trainer_options():
        assert "%(" not in o.help, o.help
        if o.default is None or o.is_switch:
            continue
        shown = {str(o.default)} | ({"%g" % o.default} if isinstance(o.default, float) else set())
        groups = [g for g in re.findall(r"\(([^()]*)\)", o.help) if shown & set(re.split(r"[\s,;:]+", g))]
        assert len(groups) == 1, (o.help, groups)
    by_name = {o.name: o.help for o in trainer_options()}
    assert by_name["input_resize"].endswith("auto: device on GPUs from PNGs (auto)")
    assert by_name["rotation"].endswith("+- degrees (5)") and by_name["lr"].endswith("(0.001, CheXNet's)")
    assert by_name["epochs"].endswith("(also with --resume) (trainer default 1)")
    trainer_help = " ".join(cli.parser().format_help().split())
    assert "auto: device on GPUs from PNGs (auto)" in trainer_help and "(0.001, CheXNet's)" in trainer_help
    shown_help = " ".join(cmd.run("train", "--help", expect=0).stdout.split())
    assert "from PNGs (auto)" in shown_help and "trainer default auto" not in shown_help


def test_trainer_options_reach_the_trainer_and_are_judged_by_its_parser(tmp_path):
    from launch.options import trainer_argv
    from launch.request import TrainRequest
    values = {"data": "synthetic", "output": "o", "epochs": 2, "resume": False, "lr": "0.01", "seed": "3",
              "weights": "w.h5", "test_list": None}
    argv = trainer_argv(tasks.train.body, values)
    # the task's own options in its signature's order, then the others in the trainer's parser's order
    assert argv == ("--data", "synthetic", "--epochs", "2", "--output", "o", "--weights", "w.h5", "--lr", "0.01",
                    "--seed", "3")
    req = TrainRequest(argv=argv)
    # paths among them are made absolute (ranks may start elsewhere); words that are not paths stay
    absolute = req.with_absolute_paths().argv
    assert absolute[5] == os.path.abspath("o") and absolute[7] == os.path.abspath("w.h5")
    words = ("--data", "synthetic", "--weights", "none", "--output", "/o")
    assert TrainRequest(argv=words).with_absolute_paths().argv == words
    # a value of the trainer's type is judged by its parser; the type itself while invoke parses (the trainer's
    # type, launch.options.TrainerOption.number: every number option of the trainer, not only those stated)
    p = cmd.run("train", "--data", "synthetic", "--monitor", "x", "--output", str(tmp_path / "bad"))
    assert p.returncode == 2 and "--monitor: invalid choice: 'x'" in p.stdout + p.stderr, p.stdout + p.stderr
    assert "Traceback" not in p.stdout + p.stderr and not (tmp_path / "bad").exists()
    p = cmd.run("train", "--data", "synthetic", "--seed", "x", "--output", str(tmp_path / "bad"))
    assert p.returncode == 2 and p.stderr == "error: --seed 'x': expected a whole number\n", p.stdout + p.stderr
    assert not (tmp_path / "bad").exists()


def test_a_switch_that_turns_a_trainer_default_off_is_its_no_flag():
    """The trainer's ``--no-hflip`` (argparse store_false, dest ``hflip``) is invoke's ``--[no-]hflip`` (a True
    default: not given), and only ``--no-hflip`` reaches the trainer; it was ``--hflip=STRING`` before."""
    from launch.options import trainer_argv
    assert "--[no-]hflip" in cmd.run("train", "--help").stdout
    assert trainer_argv(tasks.train.body, {"data": "synthetic", "hflip": True}) == ("--data", "synthetic")
    assert trainer_argv(tasks.train.body, {"data": "synthetic", "hflip": False}) == ("--data", "synthetic",
                                                                                      "--no-hflip")
    rendered = cmd.run("train", "--launcher", "slurm", "--stack", "cpu", "--data", "synthetic", "--output",
                       "/shared/x", "--render", "--no-hflip")
    assert rendered.returncode == 0 and " --no-hflip" in rendered.stdout, rendered.stdout + rendered.stderr


def test_trainer_input_files_are_mounted_read_only_in_images_and_jobs(tmp_path):
    from launch.cluster import ClusterOptions, job_spec
    from launch.container import mounts
    from tests.lib.runs import request
    req = request(data="synthetic", output=str(tmp_path / "o"), weights=str(tmp_path / "w.h5"))
    binds, inside = mounts(req)
    assert (str(tmp_path / "w.h5"), str(tmp_path / "w.h5"), True) in binds
    assert inside.argv == ("--data", "synthetic", "--output", "/output", "--weights", str(tmp_path / "w.h5"))
    spec = job_spec(req, ClusterOptions(launcher="slurm", stack="cpu"))
    assert any(m.source == str(tmp_path) and m.read_only for m in spec.mounts), spec.mounts
    from chexstack.errors import ChexstackError
    with pytest.raises(ChexstackError, match="--weights w/w.h5 is a path relative to this machine"):
        job_spec(request(data="synthetic", output="/shared/o", weights="w/w.h5"),
                 ClusterOptions(launcher="slurm", stack="cpu"))


def test_evaluate_names_the_options_it_needs():
    p = cmd.run("evaluate", "--images", "x")
    assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr
    assert "invoke evaluate needs --model, --labels" in p.stdout + p.stderr, p.stdout + p.stderr


@pytest.mark.parametrize("np", ["0", "-1"])
def test_evaluate_refuses_fewer_than_one_rank(tmp_path, np):
    model = tmp_path / "model-best.h5"
    model.write_text("m")
    p = cmd.run("evaluate", "--model", str(model), "--images", str(tmp_path), "--labels",
                str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"), "--output", str(tmp_path / "out"), "--np", np)
    assert p.returncode == 2 and "--np %s: at least one rank is needed" % np in p.stderr, p.stdout + p.stderr
    assert "-m trainer" not in p.stdout and not (tmp_path / "out").exists()


def _training_run(folder, predictions=True):
    """A training run's --output as rank 0 leaves it after an epoch: metrics.json, checkpoint/state.json and (with
    ``predictions``) predictions.csv, 2 validation rows."""
    (folder / "checkpoint").mkdir(parents=True)
    (folder / "checkpoint" / "state.json").write_text('{"epoch": 1, "model_file": "epoch-0001.h5"}\n')
    (folder / "metrics.json").write_text('{"run": {}, "epochs": [{"epoch": 1}]}\n')
    if predictions:
        (folder / "predictions.csv").write_text("Image Index,label_Atelectasis\na.png,0\nb.png,1\n")
    return {p.name: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_evaluate_refuses_a_training_runs_folder_and_writes_nothing(tmp_path):
    """The reported fault: ``invoke evaluate --model RUN/model-best.h5 ... --output RUN`` replaced the run's 153
    validation predictions by the evaluation's 30, exit 0. Refused before anything starts, naming the file; the
    trainer's own door refuses it too (a bare ``python -m trainer evaluate``, each rank of ``--np``)."""
    from trainer import evaluate
    from trainer.errors import TrainerError

    run = tmp_path / "run"
    before = _training_run(run)
    (tmp_path / "images").mkdir()
    for name in ("model-best.h5", "labels.csv"):
        (tmp_path / name).write_text("x")
    args = ["--model", str(tmp_path / "model-best.h5"), "--images", str(tmp_path / "images"), "--labels",
            str(tmp_path / "labels.csv"), "--output", str(run)]
    p = cmd.run("evaluate", *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert ("error: --output %s holds a training run (%s/metrics.json): this evaluation's predictions.csv would "
            "overwrite the run's validation predictions %s/predictions.csv; choose another --output, e.g. "
            "%s/evaluation" % (run, run, run, run)) in " ".join(p.stderr.split()), p.stderr
    assert "-m trainer" not in p.stdout  # nothing started
    assert {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before

    assert evaluate.main(args) == 2
    assert {p.name: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # no lock file either

    only_checkpoint = tmp_path / "started"
    _training_run(only_checkpoint, predictions=False)
    (only_checkpoint / "metrics.json").unlink()
    with pytest.raises(TrainerError, match="holds a training run \\(%s/checkpoint/state.json\\): this evaluation's "
                       "predictions.csv would be written as the run's" % only_checkpoint):
        evaluate.check_output(str(only_checkpoint))
    # an evaluation's own folder (the default runs/evaluate) and a new one are not a training run
    (tmp_path / "evaluated").mkdir()
    (tmp_path / "evaluated" / "evaluation.json").write_text("{}")
    (tmp_path / "evaluated" / "predictions.csv").write_text("Image Index\n")
    evaluate.check_output(str(tmp_path / "evaluated"))
    evaluate.check_output(str(tmp_path / "new"))


def test_evaluate_runs_one_process_or_local_horovod_ranks():
    from launch.evaluate import evaluate_args, evaluate_argv

    args = evaluate_args("m.h5", "imgs", "l.csv", "test_list.txt", "out")
    assert args == ["evaluate", "--model", "m.h5", "--images", "imgs", "--labels", "l.csv", "--output", "out",
                    "--list", "test_list.txt"]
    assert evaluate_argv(args, 1, python="/py") == (["/py", "-m", "trainer", *args], {})
    argv, _ = evaluate_argv(args, 2)
    assert argv[0].endswith("horovodrun") and argv[argv.index("-np") + 1] == "2" and argv[-len(args):] == args


def test_evaluate_refuses_to_replace_another_models_evaluation(tmp_path):
    """A second ``invoke evaluate`` of another model into the same folder (the default runs/evaluate) replaced the
    first one's evaluation.json and predictions.csv. Refused before anything starts, naming the earlier model; the
    same model, label file and list again score the same and replace their own."""
    from trainer import evaluate, labels, outputs
    from trainer.errors import TrainerError

    (tmp_path / "images").mkdir()
    for name in ("a/model-best.h5", "b/model-best.h5"):
        (tmp_path / name).parent.mkdir()
        (tmp_path / name).write_text(name)
    label_file = str(SAMPLE / "Data_Entry_2017_v2020.csv.gz")
    folder = tmp_path / "evaluate"
    folder.mkdir()
    model_a, model_b = str(tmp_path / "a/model-best.h5"), str(tmp_path / "b/model-best.h5")
    earlier = {"model": model_a, "model_sha256": outputs.file_sha256(model_a), "label_file": label_file,
               "label_sha256": labels.read_text(label_file)[1], "list": None}
    (folder / "evaluation.json").write_text(json.dumps(earlier))
    (folder / "predictions.csv").write_text("Image Index\n")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    args = ["--model", model_b, "--images", str(tmp_path / "images"), "--labels", label_file, "--output", str(folder)]
    p = cmd.run("evaluate", *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert ("error: --output %s holds the evaluation of another model (%s/a/model-best.h5, SHA-256 %s) (%s): this "
            "evaluation would replace it and its predictions.csv; choose another --output, e.g. %s/b"
            % (folder, tmp_path, earlier["model_sha256"], folder / "evaluation.json", folder)
            ) in " ".join(p.stderr.split()), p.stderr
    assert "-m trainer" not in p.stdout
    assert evaluate.main(args) == 2
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    # the same model again, or with another list: its own evaluation is replaced / another list is refused
    evaluate.check_output(str(folder), model_a, label_file, None)
    (tmp_path / "test_list.txt").write_text("x.png\n")
    with pytest.raises(TrainerError, match="another --list \\(none: every labelled image\\)"):
        evaluate.check_output(str(folder), model_a, label_file, str(tmp_path / "test_list.txt"))
    # the same paths, files changed since: said so, not "another file" with the path the user just gave
    (tmp_path / "a/model-best.h5").write_text("retrained")
    with pytest.raises(TrainerError, match=re.escape("another model (%s, SHA-256 %s, the same path: the file changed "
                                                     "since)" % (model_a, earlier["model_sha256"]))):
        evaluate.check_output(str(folder), model_a, label_file, None)
    edited = tmp_path / "labels.csv.gz"
    shutil.copyfile(label_file, edited)
    (folder / "evaluation.json").write_text(json.dumps(dict(earlier, model_sha256=outputs.file_sha256(model_a),
                                                            label_file=str(edited), label_sha256="0" * 64)))
    with pytest.raises(TrainerError, match=re.escape("another label file (%s, SHA-256 %s, the same path: the file "
                                                     "changed since)" % (edited, "0" * 64))):
        evaluate.check_output(str(folder), model_a, str(edited), None)


def test_prepare_refuses_a_negative_shard_size_naming_what_zero_means(tmp_path):
    p = cmd.run("prepare", "--images", str(tmp_path), "--labels", str(SAMPLE / "Data_Entry_2017_v2020.csv.gz"),
                "--output", str(tmp_path / "prep"), "--shard-images", "-1")
    assert p.returncode == 2 and not (tmp_path / "prep").exists()
    assert ("--shard-images -1: expected a positive number of images a shard, or 0 (the default: the trainer's own "
            "size)") in " ".join(p.stderr.split()), p.stderr
