"""``python -m trainer``: parse options, run training or the throughput measurement, map TrainerError to exit 2."""
import sys

from trainer.cli import main

if __name__ == "__main__":
    sys.exit(main())
