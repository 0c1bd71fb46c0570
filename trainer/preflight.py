"""The trainer's door for the host: everything a launcher checks or names before it starts ranks, decided by the
trainer's own rules (Python 3.5 syntax, no TensorFlow import), so a request the trainer would refuse is refused on
the host first, with the same words, and no host module reaches into the trainer's other modules.

What the host uses (``launch/``, ``bench/``):

- options: ``parser()`` (the one declaration of ``python -m trainer``'s options), ``check_options(argv)`` (parse
  and check as the trainer does; ``TrainerError``), ``REQUIRE_GPU_ENV``, ``SIF_SHA256_ENV``;
- inputs: ``SYNTHETIC``, ``find_label_file(data_dir)``, ``check_folder(path, option)``, ``label_sha256(path)``;
- the output folder: ``check_output_folder(folder)``, ``acquire(folder, command)`` (the run's exclusive lock) and
  ``TOKEN_ENV``; ``committed_state(output, resume)``, ``load_state(output)``, ``check_identity(state, identity,
  output)``, ``checkpoint_folder(output)`` (``--resume``); ``SKIPPED_IMAGES``;
- results: ``CLASSES`` (the 14 pathologies, in the model's output order), ``parse_event(line)`` (rank 0's
  ``@chexstack`` progress events).

Errors are ``trainer.errors.TrainerError`` (the host turns them into its own ``ChexstackError``).
"""
from trainer import checkpoint, cli, events, labels, outputs, runlock, sources
from trainer.errors import TrainerError  # noqa: F401 (part of the door)

SYNTHETIC = sources.SYNTHETIC
CLASSES = labels.CLASSES
REQUIRE_GPU_ENV = cli.REQUIRE_GPU_ENV
SIF_SHA256_ENV = cli.SIF_SHA256_ENV
TOKEN_ENV = runlock.TOKEN_ENV
SKIPPED_IMAGES = outputs.SKIPPED_IMAGES

parser = cli.parser
find_label_file = sources.find_label_file
check_folder = sources.check_folder
check_output_folder = runlock.check_output_folder
acquire = runlock.acquire
committed_state = checkpoint.committed_state
load_state = checkpoint.load_state
check_identity = checkpoint.check_identity
checkpoint_folder = checkpoint.folder
parse_event = events.parse


def check_options(argv):
    """The options ``argv`` (a list of ``python -m trainer`` arguments) parsed and checked exactly as the trainer
    does (``trainer.cli.parse`` + ``trainer.cli.check``); returns the argparse namespace. Raises TrainerError (an
    unknown option, a bad value or combination)."""
    return cli.check(cli.parse(argv))


def label_sha256(path):
    """SHA-256 (hex) of the label file's content (after gunzip): what ``metrics.json`` and checkpoints record."""
    return labels.read_text(path)[1]
