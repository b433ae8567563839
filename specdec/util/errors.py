"""The one exception base for bad input, so that the command line can tell input from a bug.

Every error the package raises because of what a user gave it (an unknown draft, a checkpoint that is not
one, a prompt too long for the context, a report.json this version cannot read, an unsupported version of
an optional library) derives from `InputError`. `specdec`'s `main` turns exactly these into one line and
exit code 2; anything else, a ValueError deep inside numpy or torch included, is a bug and surfaces as one
(a traceback, exit 1), never as a usage line.

InputError is a ValueError, so library callers that catch ValueError around a bad argument keep working.

A step the package runs that fails on its own (a compiler that stops, a server that exits before it answers) is
neither: the user's input was fine and the package is not at fault. It is a `Failure`, which `main` turns into
its one-line summary, the last lines of the step's log and the log's path, and exit code 1.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input (an argument, a file, an installed version): a one-line message naming the bad value and
    what is allowed."""


class Failure(RuntimeError):
    """A step that failed (not bad input, not a bug): `str()` is the one-line summary; `tail` the last lines of
    the step's log and `log` where the whole of it is (None when there is no file), for the reader to act on."""

    def __init__(self, summary: str, tail: list[str] | tuple[str, ...] = (), log=None):
        super().__init__(summary)
        self.tail, self.log = list(tail), log


def tail_of(path, lines: int = 10) -> list[str]:
    """The last `lines` non-blank lines of the text file `path` (each cut to 300 characters); [] when it cannot
    be read: what a Failure shows of a log."""
    from pathlib import Path

    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    return [line.rstrip()[:300] for line in text.splitlines() if line.strip()][-lines:]
