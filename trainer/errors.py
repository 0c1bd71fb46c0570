"""The trainer's user-facing error (the in-image twin of ``chexstack.errors.ChexstackError``).

A ``TrainerError`` is bad input or an unmet precondition: its message names the file, row or option and what was
expected. ``python -m trainer`` prints it on one line (``trainer: error: ...``) and exits with status 2.
"""


class TrainerError(Exception):
    """Bad input or unmet precondition; ``str(err)`` is the whole message.

    ``quiet``: a rank that stops only because another rank found the problem (and printed it) exits 2 without
    repeating it.
    """

    exit_code = 2

    def __init__(self, message, quiet=False):
        super(TrainerError, self).__init__(message)
        self.quiet = quiet
