"""``python -m trainer``: parse options, run training or the throughput measurement (``python -m trainer
evaluate``: ``trainer.evaluate``; ``python -m trainer prepare``: ``trainer.prepare``), map TrainerError to exit 2.
The one module that starts the runs: ``trainer.cli`` (the options) imports none of them."""
import sys

from trainer import cli
from trainer.usage import reporting_errors


def _run(argv):
    options = cli.check(cli.parse(argv))
    if options.throughput:
        from trainer import throughput
        return throughput.run(options)
    from trainer import train
    return train.run(options)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["evaluate"]:
        from trainer import evaluate
        return evaluate.main(argv[1:])
    if argv[:1] == ["prepare"]:
        from trainer import prepare
        return prepare.main(argv[1:])
    return reporting_errors(lambda: _run(argv))


if __name__ == "__main__":
    sys.exit(main())
