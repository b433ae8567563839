"""The options several `specdec` subcommands share: which target and how it loads, the backend, the device;
and what `ab` and `bisect` share (the repository, the pair, the budget; the work counter).

Each function adds its options to a subcommand's parser and returns it; `parser` and `measure_args` call them.
"""

from __future__ import annotations

import argparse

# Only names that import neither torch nor scipy: `--help` and a usage error in the arguments answer at once.
from specdec.model.names import BACKEND_NAMES as KNOWN
from specdec.model.names import DTYPE_NAMES

AB_BUDGET = 180.0  # `specdec ab`'s default seconds
AB_PAIRS = 18  # ... and worker pairs


def checkpoint(p: argparse.ArgumentParser, own: str = "") -> argparse.ArgumentParser:
    """The target's options: which model (--checkpoint, or the general --target) and how a Hugging Face model
    loads (--dtype, --allow-download; they apply to hf: drafts too). `own`: what --target's help adds where a
    user's MODULE:CALLABLE is taken too."""
    p.add_argument("--checkpoint", default=None, help="target checkpoint (default: the shipped one)")
    p.add_argument("--target", default=None, metavar="SPEC", help="the target: a checkpoint path, or hf:PATH (a "
                   "Hugging Face causal LM: a local folder, or a model id already in the local cache)" + own +
                   "; not with --checkpoint")
    p.add_argument("--dtype", choices=list(DTYPE_NAMES), default=None, help="weights of the hf: target and hf: drafts "
                   "(default float32; the shipped model computes in float32 only)")
    p.add_argument("--allow-download", action="store_true", help="let an hf: model id missing from the local "
                   "cache be downloaded (without it nothing is fetched)")
    return p


def backend(p: argparse.ArgumentParser, all_: str | None = None) -> argparse.ArgumentParser:
    """--backend; `all_`, when given, is what `--backend all` does for this command (the choice is offered)."""
    p.add_argument("--backend", choices=KNOWN + ("auto",) + (("all",) if all_ else ()), default="auto",
                   help="how the target's forward runs: eager (the plain modules), fused (hand-fused, "
                   "preallocated), numpy (numpy calls on folded weights), onnx (ONNX Runtime, needs the onnx "
                   "extra); auto (default): the fastest installed on the device (onnx, else numpy, on a CPU)"
                   + (f"; all: {all_}" if all_ else "")
                   + ". Drafts copied from the target run the same")
    return p


def device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")


def pair_options(p: argparse.ArgumentParser, *drafts: str, budget: str) -> argparse.ArgumentParser:
    """What ab and bisect share: the repository, the pair and the budget (`drafts`: the options naming them;
    `budget`: what --budget's seconds pay for)."""
    p.add_argument("--repo", default=".", metavar="PATH", help="the git repository A and B are revisions of "
                   "(default ., the current one; any repository: give --target/--drafts as MODULE:CALLABLE)")
    checkpoint(p, own=", or MODULE:CALLABLE (yours: a callable of no arguments returning a Target, imported "
                "from each revision)")
    p.add_argument(*drafts, dest="drafts", nargs="+", action="extend", default=None,
                   help="drafts: shipped names, hf:PATH, or MODULE:CALLABLE (yours: a callable of the target "
                   "returning a Draft, imported from each revision); default bigram ngram (prompt-lookup for an "
                   "hf: or MODULE:CALLABLE target)")
    p.add_argument("--budget", type=float, default=AB_BUDGET, help=f"seconds {budget} (default {AB_BUDGET:g})")
    return p


def ab_pair(p: argparse.ArgumentParser) -> None:
    """ab's own: the k values, the worker pairs and the CPU (bisect keeps ab's defaults)."""
    p.add_argument("--ks", nargs="+", type=int, default=None, help="k values (default 2 4)")
    p.add_argument("--pairs", type=int, default=AB_PAIRS, help=f"fresh worker pairs (default {AB_PAIRS}): the "
                   "independent units the intervals count")
    p.add_argument("--cpu", default=None, help="the one CPU both workers of a pair are pinned to (default the "
                   "highest-numbered one allowed)")


def counter_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-work", dest="work", action="store_false", help="leave out the work rows (instructions "
                   "per call, counted after the timing; on by default where a counter runs: docs/work.md)")
    p.add_argument("--counter", choices=["auto", "perf", "callgrind"], default="auto",
                   help="the work counter: the hardware counter (perf), callgrind's simulation, or auto (perf "
                   "where the kernel has a PMU, else callgrind)")
