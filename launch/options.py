"""Where a run can go (``LAUNCHERS``, the one list of the names; ``SCHEDULED``), which launcher each ``invoke train``
/ ``invoke bench`` option applies to, and the trainer's own options.

An option given where it has no effect is an error, not silence: ``invoke train --render`` without
``--launcher slurm|k8s`` would otherwise start a full training run here, ``--network none`` without ``--stack``
would run on the host's network, and so on. ``check_applicable(launcher, stack, given, known)`` raises a
ChexstackError (exit 2) naming an unknown launcher first, then the first such option and where it applies.

``with_trainer_options`` gives a task every ``python -m trainer`` option it does not state itself as a parameter
(``invoke train``: all but the throughput mode's; ``invoke bench`` and ``invoke study``: ``SWEEP_OPTIONS``), taken
from the trainer's own parser (``trainer.cli.parser``: one declaration of the trainer's contract), each "not given"
by default so that the trainer's own default applies, its help the trainer's and its number type the trainer's;
``trainer_argv(fn, values)`` turns the given ones into the trainer's command line, and ``path_values(argv)`` finds
the paths in it (which launchers make absolute and reachable).
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
from typing import Callable

from chexstack.errors import ChexstackError
from launch import schedulers

#: The launchers that run from this machine and wait for the ranks: ``local`` (horovodrun here, or on ``--hosts``
#: over ssh; with ``--stack`` in the stack's image), ``mpirun`` (Horovod's MPI controller across ``--hosts``:
#: ``invoke bench``'s name for what ``invoke train`` writes ``--hosts H --controller mpi``).
HERE = ("local", "mpirun")
#: The launchers that go through a scheduler (a batch script or MPIJob rendered, submitted): the ones of the
#: scheduler table, ``launch.schedulers.SCHEDULERS`` (``slurm``: a batch script, ``k8s``: an MPIJob).
SCHEDULED = schedulers.launchers()
#: Where a run goes, the one list of the names.
LAUNCHERS = HERE + SCHEDULED
#: ``invoke train``'s launchers (its ``mpirun`` is ``--hosts`` with ``--controller mpi``).
TRAIN_LAUNCHERS = HERE[:1] + SCHEDULED

#: option -> the launchers it applies to.
LAUNCHERS_OF = {
    "render": SCHEDULED,
    "submit": SCHEDULED,
    "per_node": SCHEDULED,
    "results": SCHEDULED,
    "hybrid": ("slurm",),
    "container": ("slurm",),
    "nodes": SCHEDULED,
    "ntasks_per_node": SCHEDULED,
    "time": ("slurm",),
    "partition": ("slurm",),
    "account": ("slurm",),
    "detach": ("slurm",),
    "requeue": ("slurm",),
    "rdma": ("k8s",),
    "hosts": ("mpirun",),
    "runtime": ("local",),
    "network": ("local",),
    "as_root": ("local",),
}


def slurm_model(hybrid: bool, container: str | None, image: str | None) -> tuple[str | None, str | None]:
    """(Slurm model, image) of ``invoke train``'s ``--hybrid`` (``hybrid``, the SIF in ``image``) and ``--container
    BUNDLE`` (``oci``: Slurm's own OCI containers, the bundle as the image, srun's own option name); neither: the
    launcher's default model and ``image``. ChexstackError for both, or ``--container`` with ``--image``."""
    if container is None:
        return ("hybrid" if hybrid else None), image
    if hybrid:
        raise ChexstackError("--container runs Slurm's own OCI containers and --hybrid the hybrid model (singularity "
                             "exec): give one of them")
    if image:
        raise ChexstackError("--container %s names the image (an OCI bundle): leave out --image %s"
                             % (container, image))
    return "oci", container


#: options of a run here (``--launcher local``) that act on the stack's container, so they need ``--stack``.
NEEDS_STACK = ("runtime", "network", "image", "as_root")


def flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def given(fn: Callable, values: dict, options: tuple[str, ...] | list[str]) -> dict:
    """The ``options`` whose value in ``values`` differs from ``fn``'s default: the ones the user set."""
    params = inspect.signature(fn).parameters
    return {name: values[name] for name in options if values[name] != params[name].default}


def check_launcher(launcher: str, known: tuple[str, ...]) -> None:
    """Raise ChexstackError unless ``launcher`` is one of ``known``."""
    if launcher not in known:
        raise ChexstackError("unknown launcher %r: expected %s or %s" % (launcher, ", ".join(known[:-1]), known[-1]))


def check_applicable(launcher: str, stack: str | None, options: dict, known: tuple[str, ...]) -> None:
    """Raise ChexstackError when ``launcher`` is not one of ``known`` (before any other rule: an option "applies
    to slurm only" would hide the typo), else for the first of ``options`` (name -> value, only those set) that has
    no effect with ``launcher`` (and ``stack``)."""
    check_launcher(launcher, known)
    for option in options:
        launchers = LAUNCHERS_OF.get(option)
        if launchers and launcher not in launchers:
            raise ChexstackError("%s applies to --launcher %s only (this is --launcher %s)"
                                 % (flag(option), " or ".join(launchers), launcher))
        if option in NEEDS_STACK and launcher == "local" and not stack:
            raise ChexstackError("%s applies to a run in a stack's image: add --stack S (e.g. --stack cpu)"
                                 % flag(option))


#: The trainer's throughput mode is ``invoke bench``'s: ``invoke train`` does not offer these options.
THROUGHPUT_OPTIONS = ("throughput", "steps", "warmup_steps", "amp")
#: The trainer's options of a throughput sweep (``invoke bench``, ``invoke study``: ``bench.sweep.SweepRequest``),
#: by ``dest``; the sweep runs the throughput mode itself.
SWEEP_OPTIONS = ("data", "model", "batch_size", "image_size", "steps", "warmup_steps", "amp", "horovod_timeline")
#: A sweep's names for them where they differ: ``--timeline`` (horovodrun, not the trainer, would take a trainer
#: ``--timeline`` for an abbreviation of its own ``--timeline-filename``).
SWEEP_NAMES = {"horovod_timeline": "timeline"}
#: A sweep's values where the trainer has no default: it needs data, and times synthetic images unless told.
SWEEP_DEFAULTS = {"data": "synthetic"}


@dataclasses.dataclass(frozen=True)
class TrainerOption:
    """One ``python -m trainer`` option: its parameter name (argparse ``dest``, or a task's own name for it:
    ``with_trainer_options``' ``names``), flag, whether it takes no value, its help, its default in the trainer,
    the words it takes that are not paths when its value is a path (metavar ``FILE``, ``DIR`` or ``none|PATH``:
    words ``("none",)``), else None, whether that path is a folder (metavar ``DIR``), whether the switch turns its
    ``dest`` off (argparse ``store_false``: ``--no-hflip``, dest ``hflip``), and its number type (argparse
    ``type``: ``int``, ``float``; None for words)."""

    name: str
    flag: str
    is_switch: bool
    help: str
    default: object
    path_words: tuple[str, ...] | None = None
    is_folder: bool = False
    turns_off: bool = False
    number: type | None = None

    @property
    def not_given(self) -> object:
        """The task parameter's default, "not given": None for a value, False for a switch, True for a switch
        that turns its ``dest`` off (invoke then offers ``--no-<dest>``, the trainer's own flag)."""
        return self.turns_off if self.is_switch else None

    def is_path(self, value: str) -> bool:
        """Whether ``value`` of this option names a file or folder (which a launcher must make reachable)."""
        return self.path_words is not None and value not in self.path_words


def _path_words(metavar: str | None) -> tuple[str, ...] | None:
    words = (metavar or "").split("|")
    if not any(w in ("FILE", "DIR", "PATH") for w in words):
        return None
    return tuple(w for w in words if w not in ("FILE", "DIR", "PATH"))


def _help(action: argparse.Action) -> str:
    """The trainer's help of ``action`` as ``python -m trainer --help`` shows it, and its default said once: a help
    that states it (argparse's ``%(default)s``, expanded as argparse expands it) keeps its own words; another gets
    " (trainer default X)" when there is a default (not for a switch or a None default, whose help says what
    happens without it)."""
    text = action.help or action.dest
    if "%(" in text:
        return text % dict(vars(action), prog="python -m trainer")
    switch = isinstance(action, (argparse._StoreFalseAction, argparse._StoreTrueAction))
    return text if switch or action.default is None else "%s (trainer default %s)" % (text, action.default)


def trainer_options(stated: tuple[str, ...] | frozenset[str] = (), only: tuple[str, ...] | None = None,
                    names: dict[str, str] | None = None) -> list[TrainerOption]:
    """The trainer's options (``trainer.cli.parser()``), in its order: ``only`` these (by ``dest``), else all but
    the throughput mode's; each named as ``names`` says (``dest`` -> a task's name for it); then without the
    names in ``stated``."""
    names = names or {}
    chosen = [o for o in _all_trainer_options() if (o.name in only if only is not None else
                                                    o.name not in THROUGHPUT_OPTIONS)]
    chosen = [dataclasses.replace(o, name=names.get(o.name, o.name)) for o in chosen]
    return [o for o in chosen if o.name not in stated]


@functools.lru_cache(maxsize=None)
def _all_trainer_options() -> tuple[TrainerOption, ...]:
    """Every trainer option, read once from the trainer's parser."""
    from trainer import preflight
    found = []
    for action in preflight.parser()._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        turns_off = isinstance(action, argparse._StoreFalseAction)
        switch = turns_off or isinstance(action, argparse._StoreTrueAction)
        flag_ = max(action.option_strings, key=len)
        found.append(TrainerOption(action.dest, flag_, switch, "python -m trainer %s: %s" % (flag_, _help(action)),
                                   action.default, _path_words(action.metavar),
                                   "DIR" in (action.metavar or "").split("|"), turns_off,
                                   action.type if action.type in (int, float) else None))
    return tuple(found)


def with_trainer_options(fn=None, *, only: tuple[str, ...] | None = None, names: dict[str, str] | None = None):
    """Decorator for a task body ``fn(c, ..., **trainer)`` (``@with_trainer_options``, or with ``only``/``names``
    as ``trainer_options`` takes them: ``invoke bench`` takes the throughput mode's): its signature (what invoke
    reads to make options) gets one keyword per trainer option it does not state itself as a parameter, its
    default "not given" (``TrainerOption.not_given``), so the trainer's own default applies; a parameter it states
    for a trainer option must default to "not given" too (ValueError otherwise: an invoke default would override
    the trainer's). ``fn.trainer_options``: the trainer options the task takes, under its names (what
    ``trainer_argv`` writes); ``fn.numbers``: name -> int or float for those that take numbers (checked while
    invoke parses, ``chexstack.cli.Task``). Their help texts are ``trainer_help(only, names)``."""
    if fn is None:
        return functools.partial(with_trainer_options, only=only, names=names)
    options = trainer_options(only=only, names=names)
    sig = inspect.signature(fn)
    stated = frozenset(sig.parameters)
    for o in options:
        if o.name in stated and sig.parameters[o.name].default != o.not_given:
            raise ValueError("%s: parameter %s defaults to %r; a trainer option defaults to %r (not given), so that "
                             "the trainer's default applies" % (fn.__name__, o.name, sig.parameters[o.name].default,
                                                                 o.not_given))
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    params += [inspect.Parameter(o.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                 default=o.not_given) for o in options if o.name not in stated]
    fn.__signature__ = sig.replace(parameters=params)
    fn.trainer_options = tuple(options)
    fn.numbers = {o.name: o.number for o in options if o.number is not None and not o.is_switch}
    return fn


def trainer_help(only: tuple[str, ...] | None = None, names: dict[str, str] | None = None) -> dict[str, str]:
    """Every trainer option's help (``only``, ``names``: as ``trainer_options``), as a task's ``help`` wants it
    (``python -m trainer --lr: ...``); a task adds to it for the options it says more about."""
    return {o.name.replace("_", "-"): o.help for o in trainer_options(only=only, names=names)}


def sweep_help() -> dict[str, str]:
    """The help of a sweep's trainer options (``SWEEP_OPTIONS`` under ``SWEEP_NAMES``): the trainer's, and the
    sweep's default where the trainer has none (``SWEEP_DEFAULTS``)."""
    found = trainer_help(SWEEP_OPTIONS, SWEEP_NAMES)
    for name, value in SWEEP_DEFAULTS.items():
        found[name] += " (a sweep's default: %s)" % value
    return found


def trainer_argv(fn: Callable, values: dict) -> tuple[str, ...]:
    """The trainer's command line of a task body ``fn`` decorated by ``with_trainer_options``, from its
    ``values`` (name -> value): ``--flag value`` (or ``--flag`` for a switch) for every trainer option given (not
    its ``TrainerOption.not_given``, not None), in ``fn``'s signature's order (the ones it states, then the others
    in the trainer's parser's order). The trainer's parser judges the values (``launch.request.TrainRequest.check``)."""
    by_name = {o.name: o for o in fn.trainer_options}
    argv: list[str] = []
    for name in [name for name in inspect.signature(fn).parameters if name in by_name]:
        o, value = by_name[name], values.get(name)
        if value is None or value == o.not_given:
            continue
        argv += [o.flag] if o.is_switch else [o.flag, str(value)]
    return tuple(argv)


def path_values(argv: tuple[str, ...] | list[str]) -> list[int]:
    """Indexes in a trainer command line (``flag value`` pairs and switches) of the values that are paths."""
    by_flag = {o.flag: o for o in _all_trainer_options()}
    found = []
    for i, word in enumerate(argv[:-1]):
        option = by_flag.get(word)
        if option is not None and not option.is_switch and option.is_path(argv[i + 1]):
            found.append(i + 1)
    return found
