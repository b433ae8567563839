"""The one exception base for bad input, so that the command line can tell input from a bug.

Every error the package raises because of what a user gave it (an unknown draft, a checkpoint that is not
one, a prompt too long for the context, a report.json this version cannot read, an unsupported version of
an optional library) derives from `InputError`. `specdec`'s `main` turns exactly these into one line and
exit code 2; anything else, a ValueError deep inside numpy or torch included, is a bug and surfaces as one
(a traceback, exit 1), never as a usage line.

InputError is a ValueError, so library callers that catch ValueError around a bad argument keep working.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input (an argument, a file, an installed version): a one-line message naming the bad value and
    what is allowed."""
