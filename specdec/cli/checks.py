"""Checking what the user typed: every bad value becomes one line on stderr and exit code 2, found before
any training or measuring starts.

argparse itself checks types and choices (its errors made one line by `Parser`); the rest is here: counts
with a minimum, temperatures that must be 0 or finite numbers >= sampling.MIN_TEMPERATURE, output locations
that must be writable directories (probed without leaving anything behind), a device that must exist,
fractions that must be finite and >= 0, the optional extra a Hugging Face model needs, and the work counter
`report` and `ab` share (--no-work, --counter).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import tempfile
from pathlib import Path

from specdec.util.errors import InputError


class UsageError(InputError):
    """Bad input from the user on the command line: printed as one line, exit code 2 (as is every
    `InputError` the library raises)."""


class Parser(argparse.ArgumentParser):
    """argparse with its errors on one line (it would print the usage block above them)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def at_least(option: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise UsageError(f"{option} must be at least {minimum}, got {value}")


def temperature_arg(value: float) -> float:
    from specdec.model.sampling import check_temperature  # here: sampling imports torch, --help need not

    try:
        return check_temperature(value)
    except InputError as exc:
        raise UsageError(f"--{exc}") from None


def writable_dir(option: str, path: str) -> None:
    """Refuse an output folder that is not, and cannot become, a writable directory. Writes nothing."""
    existing = Path(path).absolute()
    while not existing.exists():  # the folder will be created inside the nearest existing one
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} {path}: {existing} is not a directory")
    try:
        with tempfile.TemporaryFile(dir=existing):  # the only sure test: root passes any permission check
            pass
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write in {existing} ({exc.strerror})") from None


def writable_file(option: str, path: str | Path) -> None:
    if Path(path).is_dir():
        raise UsageError(f"{option} {path}: is a directory, not a file path")
    writable_dir(option, str(Path(path).absolute().parent))


def device_arg(name: str) -> str:
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available here (allowed: cpu)")
    return name


def fraction_arg(option: str, value: float) -> float:
    if not 0 <= value < math.inf:  # NaN fails every comparison
        raise UsageError(f"{option} must be a fraction >= 0 and finite (0.05 is 5 %), got {value}")
    return value


def hf_extra(what: str) -> None:
    """Hugging Face models need transformers (the optional hf extra): say so instead of an ImportError."""
    if importlib.util.find_spec("transformers") is None:
        raise UsageError(f"{what}: Hugging Face models need the hf extra (pip install 'specdec-bench[hf]')")
    from specdec.util import versions  # here: it imports transformers, which only these commands need

    if reason := versions.too_old("transformers"):
        raise UsageError(f"{what}: {reason}")


def work_switches(args: argparse.Namespace, what: str) -> None:
    """--counter names a counter and --no-work leaves the work out: both at once is a contradiction, refused
    before anything loads. `what` is what the command's work is ("work columns", "work rows")."""
    if not args.work and args.counter != "auto":
        raise UsageError(f"--counter {args.counter} names the {what}' counter and --no-work leaves them out: "
                         "give one or the other")
    for flag in ("count_batched", "count_all_ks"):
        if not args.work and getattr(args, flag, False):
            raise UsageError(f"--{flag.replace('_', '-')} counts more {what} and --no-work leaves them out: give "
                             "one or the other")


def work_plan(args: argparse.Namespace, config: dict, not_here: str = "") -> tuple[str | None, str]:
    """The counter a command's work uses, or None and why not: --no-work, `not_here` (a reason the command
    knows already, as a report off the CPU), none here, or an engine in a server (`ab_work.plan`). The one
    place that decides, for `report` and `ab` alike. A counter asked for by name that cannot run is bad input,
    said before anything is measured; auto finding none is a reason, not an error (the timing stands)."""
    from specdec.measure.ab import ab_work  # here: --help and the other commands need no measuring code

    if not args.work:
        return None, "left out (--no-work)"
    if not_here:
        return None, not_here
    kind, reason = ab_work.plan(config, args.counter)
    if kind is None and args.counter != "auto":
        raise UsageError(f"--counter {args.counter}: {reason}")
    return kind, reason
