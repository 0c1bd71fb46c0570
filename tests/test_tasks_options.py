"""Every trainer option is declared once, by the trainer's parser (``trainer/cli.py``): the tasks that run
``python -m trainer`` (train, bench, study) and a sweep's request take it from there, its help derives from the
trainer's and its default is the trainer's (the task's is "not given"). Architecture review 3, move 3."""
from __future__ import annotations

import dataclasses

import pytest

import tasks
from bench.sweep import SweepRequest, throughput_argv
from launch.options import (
    SWEEP_DEFAULTS,
    SWEEP_NAMES,
    SWEEP_OPTIONS,
    THROUGHPUT_OPTIONS,
    trainer_options,
    with_trainer_options,
)
from tests.lib import cli as cmd
from trainer import cli

#: The tasks whose trainer is ``python -m trainer`` (train, and the throughput mode's sweeps)
TRAINER_TASKS = (tasks.train, tasks.bench, tasks.study)
DESTS = {a.dest for a in cli.parser()._actions if a.option_strings} - {"help"}


def _own_parameters(task) -> list[str]:
    """The parameters the task's body declares in its own code (not those ``with_trainer_options`` adds)."""
    code = task.body.__wrapped__.__code__
    return list(code.co_varnames[:code.co_argcount])


@pytest.mark.parametrize("task", TRAINER_TASKS, ids=lambda t: t.name)
def test_every_trainer_option_of_a_task_is_the_trainers(task):
    import inspect

    params = inspect.signature(task.body).parameters
    taken = {o.name: o for o in task.body.trainer_options}
    # every parameter named as a trainer option is one the task took from the trainer's parser (a sweep's own
    # --output is the folder of its JSON: each count's trainer --output is the sweep's to choose)
    names, dests = (({}, DESTS) if task is tasks.train else (SWEEP_NAMES, set(SWEEP_OPTIONS + THROUGHPUT_OPTIONS)))
    assert {names.get(d, d) for d in dests} & set(params) <= set(taken), task.name
    shown = "".join(cmd.run(task.name, "--help", expect=0).stdout.split())  # (help wraps at hyphens too)
    for name, option in taken.items():
        assert params[name].default == option.not_given, (task.name, name, params[name].default)  # trainer's applies
        # its help is the trainer's (the task may say more after it)
        assert option.help.startswith("python -m trainer %s: " % option.flag)
        assert "".join(option.help.split()) in shown, (task.name, name)


@pytest.mark.parametrize("task", (tasks.bench, tasks.study), ids=lambda t: t.name)
def test_a_sweep_declares_no_throughput_option_of_its_own(task):
    own = set(_own_parameters(task))
    throughput = set(SWEEP_OPTIONS + THROUGHPUT_OPTIONS) | set(SWEEP_NAMES.values())
    assert not own & throughput, own & throughput
    assert {o.name for o in task.body.trainer_options} == {SWEEP_NAMES.get(d, d) for d in SWEEP_OPTIONS}


def test_a_sweep_request_carries_the_trainers_options_as_argv():
    fields = {f.name for f in dataclasses.fields(SweepRequest)}
    assert not fields & (DESTS | set(SWEEP_NAMES.values())), fields & DESTS
    # not given: the trainer's defaults, and the sweep's data where the trainer has none
    req = SweepRequest(counts=(1, 2), label="x")
    parser = cli.parser()
    for dest in SWEEP_OPTIONS:
        value = getattr(req.options, dest)
        assert value == SWEEP_DEFAULTS.get(dest, parser.get_default(dest)), dest
    argv = throughput_argv(req, "/o")
    assert argv[argv.index("--batch-size") + 1] == str(parser.get_default("batch_size"))
    assert "--amp" not in argv and "--horovod-timeline" not in argv
    given = SweepRequest(counts=(1,), label="x", argv=("--batch-size", "8", "--horovod-timeline"))
    assert given.batch_size == 8 and given.timeline and "--horovod-timeline" in throughput_argv(given, "/o")


def test_a_task_cannot_restate_a_trainer_default():
    def body(c, epochs=1, **trainer):
        pass

    with pytest.raises(ValueError, match="epochs defaults to 1"):
        with_trainer_options(body)


def test_the_task_numbers_are_the_trainers_types():
    numbers = tasks.train.body.numbers
    for option in trainer_options():
        if option.number is not None:
            assert numbers[option.name] is option.number
    assert tasks.train.floats >= {"val_fraction", "test_fraction", "lr"} and "epochs" not in tasks.train.floats
    assert tasks.bench.body.numbers["steps"] is int


@pytest.mark.parametrize("task, module", [(tasks.evaluate, "evaluate"), (tasks.prepare, "prepare")],
                         ids=("evaluate", "prepare"))
def test_evaluate_and_prepare_state_no_default_of_their_trainer_command(task, module):
    """``python -m trainer evaluate`` and ``prepare`` have parsers of their own: invoke's task passes an option
    only when given (``--output`` of an evaluation, ``--image-size`` of a prepare: the trainer's defaults)."""
    import importlib
    import inspect

    parser = importlib.import_module("trainer." + module).parser()
    dests = {a.dest for a in parser._actions if a.option_strings} - {"help"}
    params = inspect.signature(task.body).parameters
    # --shard-images 0 is invoke prepare's word for "not given" (the trainer's size), refused below 0
    stated = {name: p.default for name, p in params.items() if name in dests and name != "shard_images"}
    assert stated and all(default is None for default in stated.values()), stated
