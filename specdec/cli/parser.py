"""The `specdec` command's parser: every subcommand in the order `--help` lists them (`SUBCOMMANDS`), and the
arguments of those that train, run, check and export the model (train, train-draft, info, generate, verify,
export-hf, export-gguf, build-server).

The measuring subcommands' arguments are `measure_args`, the options several subcommands share `options`. Only
the arguments live here; what each subcommand does with them is `commands`, which dispatches on `args.command`.
"""

from __future__ import annotations

import argparse

# Only names that import neither torch nor scipy: `--help` and a usage error in the arguments answer at once.
from specdec.cli import measure_args as m
from specdec.cli.checks import Parser
from specdec.cli.options import backend, checkpoint, device
from specdec.decoding.names import ON_REQUEST, SHIPPED_DRAFTS

GENERATE_K = 4  # `specdec generate --draft D`'s k when -k is not given
VERIFY_SAMPLES = 20_000  # `specdec verify`'s first-character draws (--joint: exactness.JOINT_SAMPLES generations)


def _train_args(p: argparse.ArgumentParser) -> None:
    # None: train.TrainConfig's own default (read there, so the parser needs no torch)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default=None, help="checkpoint path (default: specdec-train/target.pt, or small.pt "
                   "with --draft small; the shipped checkpoints are never overwritten unasked)")
    p.add_argument("--draft", choices=["small"], default=None, help="train a draft instead of the target")
    p.add_argument("--teacher", default=None, help="target checkpoint to distil the draft from")


TRAINED_DRAFTS = ("medusa", "eagle")  # `specdec train-draft NAME`: the drafts that read the target, trained for it


def _train_draft_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", choices=TRAINED_DRAFTS, help=f"the draft: {', '.join(TRAINED_DRAFTS)}")
    p.add_argument("--steps", type=int, default=None, help="optimiser steps (default: the shipped draft's recipe)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1); the weights are "
                   "deterministic given the seed and the thread count")
    p.add_argument("--out", default=None, help="weights path (default: specdec-train/NAME.pt; the shipped "
                   "specdec/data/NAME.pt is never overwritten unasked)")


def _info_args(p: argparse.ArgumentParser) -> None:
    checkpoint(p)
    p.add_argument("--json", action="store_true", help="one JSON object")


def _generate_args(p: argparse.ArgumentParser) -> None:
    checkpoint(p)
    p.add_argument("--prompt", default="ROMEO:")
    p.add_argument("--chars", type=int, default=200, help="characters to generate (tokens for a target whose "
                   "tokenizer is not the shipped characters)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=1.0, help="0 is greedy")
    p.add_argument("--draft", default=None, help="speculative decoding with this draft: "
                   f"{', '.join(SHIPPED_DRAFTS + ON_REQUEST)}, a registered or installed draft's name, or hf:PATH (a "
                   "Hugging Face model sharing the target's vocabulary)")
    p.add_argument("-k", type=int, default=None, help=f"characters (tokens) drafted per round (default {GENERATE_K})")
    p.add_argument("--adaptive", action="store_true", help="adapt k: +2 after a fully accepted round, -1 after "
                   "a rejection (from -k, at most 16)")
    p.add_argument("--threads", type=int, default=1)
    device(p)
    backend(p)
    p.add_argument("--json", action="store_true", help="the text and the statistics as one JSON object on stdout "
                   "(without it: the prompt and the text on stdout, the statistics on stderr)")
    p.add_argument("--tree", default=None, metavar="SHAPE", help="draft a token tree: widths per depth (4x2x2x1) "
                   "or a node budget (32) shaped by the dynamic program; bigram or ngram")


def _verify_args(p: argparse.ArgumentParser) -> None:
    checkpoint(p)
    p.add_argument("--draft", "--drafts", dest="draft", nargs="+", action="extend", default=None, metavar="DRAFT",
                   help="drafts: names, prompt-lookup or hf:PATH; list several (--draft a b) or repeat the option "
                   "(default every shipped draft the target can have)")
    p.add_argument("-k", type=int, default=4)
    p.add_argument("--samples", type=int, default=None,
                   help=f"draws (default {VERIFY_SAMPLES}), or generations per side with --joint (default 2000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--joint", action="store_true", help="the first 3 characters of whole generations against "
                   "target-only generation (positions 2..k, the bonus, the rollback)")
    p.add_argument("--adaptive", action="store_true", help="with --joint: adaptive k from -k")
    device(p)
    backend(p)
    p.add_argument("--json", action="store_true", help="a JSON list of rows")
    p.add_argument("--tree", default=None, metavar="SHAPE", help="verify tree rounds of this shape (4x2x2x1, or a "
                   "node budget like 32) for bigram and ngram (with --joint: the first three characters too)")


def _export_hf_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="folder to write OUT/target and OUT/small into (replaced if there)")


def _export_gguf_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="folder to write OUT/target.gguf and OUT/small.gguf into (replaced if there)")
    p.add_argument("--grow", action="store_true", help="also a user-sized target grown from the shipped one "
                   "(OUT/grown.gguf and the checkpoint OUT/grown.pt); the shipped target is its truncated draft")
    p.add_argument("--widen", type=int, default=None, metavar="R", help="with --grow: width x R (default 4: "
                   "128 -> 512)")
    p.add_argument("--layers", type=int, default=None, metavar="L", help="with --grow: blocks in all, the "
                   "shipped 3 and L - 3 added (default 8)")
    p.add_argument("--mix", type=float, default=None, metavar="M", help="with --grow: the added blocks' "
                   "output projections at M x GPT-2's init; larger M, lower acceptance (default 4)")


def _build_server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--version", default=None, metavar="X.Y.Z", help="the llama-cpp-python release whose vendored "
                   "llama.cpp is built (default: the installed one)")
    p.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")


# (name, one-line help, the function adding its arguments), in the order `specdec --help` lists them
SUBCOMMANDS = [
    ("train", "train the target (or the small draft) deterministically", _train_args),
    ("train-draft", "train a draft that reads the target (medusa, eagle) for it, the target frozen, "
     "deterministically", _train_draft_args),
    ("info", "the target: parameters, bytes, validation loss, checkpoint", _info_args),
    ("generate", "generate text, target-only or speculative", _generate_args),
    ("verify", "exactness: chi-square of speculative draws, with a verdict", _verify_args),
    ("report", "measure everything here; tables, report.json, figure", m.report_args),
    ("calibrate", "coverage of a `report --repeat N` folder's reports, and record this machine's between-run "
     "spread from them; exit 1 if calibration does not hold", m.calibrate_args),
    ("compare", "compare two report.json files; exit 1 if anything got worse", m.compare_args),
    ("ab", "did revision B make anything slower than A? both timed in one alternated run; exit 1 if worse",
     m.ab_args),
    ("bisect", "the first commit after GOOD up to BAD that made the code slower (work where a counter runs, else "
     "time), the running specdec the harness at every step; commits without the module are skipped", m.bisect_args),
    ("calibrate-work", "count A/A and null-change copies of this specdec as `ab` counts a revision, and keep "
     "the work rows' calibration for this machine and configuration (ab, bisect and compare judge by it)",
     m.calibrate_work_args),
    ("asv-init", "write asv.conf.json and benchmarks/ into your repository: asv over your commits, your pair by "
     "entry point, the installed specdec the fixed harness", m.asv_init_args),
    ("batch", "speedup against batch size B in specdec's own loop: paired at B = 1..32, the cost model at B, the "
     "crossover per draft", m.batch_args),
    ("overhead", "the target pass against its roofline floor, and where the time goes", m.overhead_args),
    ("export-hf", "write the shipped target and small draft as transformers (GPT-2, safetensors) folders",
     _export_hf_args),
    ("export-gguf", "write the shipped target and small draft as GGUF files llama.cpp loads", _export_gguf_args),
    ("build-server", "build llama.cpp's llama-server from the llama-cpp-python sdist once, cached; its path on "
     "stdout", _build_server_args),
    ("load", "spec-on against spec-off on llama-server under load: paired speedup per concurrency and rate, "
     "and the crossover", m.load_args),
]


def description() -> str:
    """`specdec --help`'s first line: every subcommand, from the list that builds them (none can be left out)."""
    return f"The `specdec` command: {', '.join(name for name, _, _ in SUBCOMMANDS)}."


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand's arguments; the chosen one's name is `args.command`."""
    parser = Parser(prog="specdec", description=description())
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_, add in SUBCOMMANDS:
        add(sub.add_parser(name, help=help_))
    return parser
