"""``python -m chexstack ...`` = the ``chexstack`` console command (``tasks.main``): the entry point, the one module
that imports ``tasks``."""
import sys

from tasks import main

main(["chexstack"] + sys.argv[1:])
