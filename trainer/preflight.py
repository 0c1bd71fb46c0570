"""The trainer's door for the host: everything a launcher checks or names before it starts ranks, decided by the
trainer's own rules (Python 3.5 syntax, no TensorFlow import), so a request the trainer would refuse is refused on
the host first, with the same words, and no host module reaches into the trainer's other modules.

What the host uses (``launch/``, ``bench/``), each a function of the trainer's own command line ``argv`` (a list
of ``python -m trainer`` arguments):

- options: ``parser()`` (the one declaration of ``python -m trainer``'s options), ``parse_options(argv)`` (the
  values ``argv`` gives, defaults filled in: what the host reads its views from), ``check_options(argv)`` (parse
  and check as the trainer does), ``REQUIRE_GPU_ENV``, ``SIF_SHA256_ENV``, ``OCI_ENV``, ``SYNTHETIC``;
- the inputs and output on this machine: ``check_here(argv)`` (data, images, labels, output folder);
- the output folder: ``acquire(folder, command)`` (the run's exclusive lock), ``check_free(folder)`` (no other run
  holds it; creates nothing) and ``TOKEN_ENV``;
  ``check_resume(argv, output)`` (``--resume``'s rules and the checkpoint's identity), ``load_state(output)``,
  ``checkpoint_folder(output)``, ``recorded_step(output, epochs)`` (what ``--resume`` would do: ``TRAIN``, ``FINISH``
  a run stopped after its last epoch, or ``DONE``); ``SKIPPED_IMAGES``;
- an evaluation: ``check_evaluate(argv)`` (``python -m trainer evaluate``'s options, its input files and output
  folder: ``trainer.evaluate.check``), ``check_evaluate_output(output, model, label_file, list_file)`` (not a
  training run's folder, nor another evaluation's);
- a prepared copy: ``check_prepare(argv)`` (``python -m trainer prepare``'s options and inputs), ``PREPARE_LOG``;
- results: ``CLASSES`` (the 14 pathologies, in the model's output order), ``parse_event(line)`` (rank 0's
  ``@chexstack`` progress events).

Errors are ``trainer.errors.TrainerError`` (the host turns them into its own ``ChexstackError``).
"""
import os

from trainer import checkpoint, cli, evaluate, events, labels, outputs, prepare, prepared, runlock, sources
from trainer.errors import TrainerError

SYNTHETIC = sources.SYNTHETIC
CLASSES = labels.CLASSES
REQUIRE_GPU_ENV = cli.REQUIRE_GPU_ENV
SIF_SHA256_ENV = cli.SIF_SHA256_ENV
OCI_ENV = cli.OCI_ENV
TOKEN_ENV = runlock.TOKEN_ENV
SKIPPED_IMAGES = outputs.SKIPPED_IMAGES

parser = cli.parser
acquire = runlock.acquire
check_free = runlock.check_free
load_state = checkpoint.load_state
checkpoint_folder = checkpoint.folder
recorded_step = checkpoint.recorded_step
TRAIN, FINISH, DONE = checkpoint.TRAIN, checkpoint.FINISH, checkpoint.DONE
parse_event = events.parse
check_evaluate_output = evaluate.check_output
PREPARE_LOG = prepare.LOG


def check_prepare(argv):
    """The options of ``python -m trainer prepare ARGV`` (``argv`` without the word ``prepare``) checked as the
    trainer checks them, plus its inputs here (the data folder's one label file, the images folder, the label
    file) and its output folder (not one holding other files, not in use: ``prepare.check_output``); returns the
    argparse namespace. Raises TrainerError."""
    options = prepare.parse(argv)
    check_here(["--image-size", str(options.image_size)] + [
        word for flag in ("--data", "--images", "--labels", "--output") if getattr(options, flag[2:]) is not None
        for word in (flag, getattr(options, flag[2:]))])
    prepare.check_output(options.output)
    return options


def check_evaluate(argv):
    """The options of ``python -m trainer evaluate ARGV`` (``argv`` without the word ``evaluate``) checked as the
    trainer checks them before it starts (``trainer.evaluate.check``: the numbers, the model, label and list files,
    the images folder, the output folder); returns the argparse namespace. Raises TrainerError."""
    return evaluate.check(evaluate.parse(argv))


def parse_options(argv):
    """The values of ``argv`` with the trainer's defaults for the options it does not give (an argparse namespace:
    ``.output``, ``.data``, ``.resume``, ...), not yet checked together. Raises TrainerError for an unknown option or
    a value of the wrong type."""
    return cli.parse(list(argv))


def check_options(argv):
    """The options ``argv`` parsed and checked exactly as the trainer does (``trainer.cli.parse`` +
    ``trainer.cli.check``); returns the argparse namespace. Raises TrainerError (an unknown option, a bad value or
    combination)."""
    return cli.check(parse_options(argv))


def check_here(argv):
    """Raise TrainerError unless the data of ``argv`` exist on this machine as its options say (a ``--data``
    folder with one label file, a prepared copy there at ``--image-size``, an ``--images`` folder and a
    ``--labels`` file) and its ``--output`` folder exists or can be created, and can be written; ``--resume``
    into a folder that does not exist is refused before it is made. Relative paths are this process's."""
    options = parse_options(argv)
    if options.data and options.data != SYNTHETIC:
        sources.find_label_file(options.data)
        if prepared.is_prepared(options.data):
            prepared.check_size(options.data, options.image_size)
    if options.images is not None:
        sources.check_folder(options.images, "--images")
    if options.labels is not None and not os.path.isfile(options.labels):
        why = ("a directory; expected the label file (Data_Entry_2017*.csv or .csv.gz)"
               if os.path.isdir(options.labels) else "no such file")
        raise TrainerError("--labels %s: %s" % (options.labels, why))
    runlock.check_output_folder(options.output)
    if not os.path.exists(options.output):
        checkpoint.committed_state(options.output, options.resume)


def check_resume(argv, output=None):
    """Raise TrainerError when ``--resume`` finds no checkpoint in ``output`` (default: ``argv``'s ``--output``),
    or a run without it finds one (``trainer.checkpoint.committed_state``), or the checkpoint was made with
    another model, image size or label file (``trainer.checkpoint.check_identity``): the identity fields ``argv``
    fixes without loading the data, the label file's SHA-256 None for synthetic data, as the trainer records it."""
    options = parse_options(argv)
    output = options.output if output is None else output
    state = checkpoint.committed_state(output, options.resume)
    if state is None:
        return
    identity = {"model": options.model, "image_size": options.image_size}
    if options.data == SYNTHETIC:
        identity["label_sha256"] = None
    else:
        path = options.labels or (options.data and sources.find_label_file(options.data))
        if path:
            identity["label_sha256"] = labels.read_text(path)[1]
    checkpoint.check_identity(state, identity, output)
