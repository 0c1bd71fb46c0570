"""``python -m chexstack ...`` = the ``chexstack`` console command (``chexstack.cli``)."""
import sys

from chexstack.cli import main

main(["chexstack"] + sys.argv[1:])
