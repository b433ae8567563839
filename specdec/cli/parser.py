"""The `specdec` command's arguments: one function per subcommand, and the options several of them share.

Only the arguments live here; what each subcommand does with them is `commands`, which dispatches on
`args.command`.
"""

from __future__ import annotations

import argparse

from specdec.cli.checks import Parser
# Only names that import neither torch nor scipy: `--help` and a usage error in the arguments answer at once.
from specdec.decoding.names import ON_REQUEST, SHIPPED_DRAFTS
from specdec.engines.registry import ENGINES
from specdec.measure.pairs import MIN_PAIRS
from specdec.model.names import BACKEND_NAMES as KNOWN
from specdec.model.names import DTYPE_NAMES

AB_BUDGET = 180.0  # `specdec ab`'s default seconds
AB_PAIRS = 18  # ... and worker pairs
GENERATE_K = 4  # `specdec generate --draft D`'s k when -k is not given
VERIFY_SAMPLES = 20_000  # `specdec verify`'s first-character draws (--joint: exactness.JOINT_SAMPLES generations)



def _checkpoint(p: argparse.ArgumentParser, own: str = "") -> argparse.ArgumentParser:
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


def _backend(p: argparse.ArgumentParser, all_: str | None = None) -> argparse.ArgumentParser:
    """--backend; `all_`, when given, is what `--backend all` does for this command (the choice is offered)."""
    p.add_argument("--backend", choices=KNOWN + ("auto",) + (("all",) if all_ else ()), default="auto",
                   help="how the target's forward runs: eager (the plain modules), fused (hand-fused, "
                   "preallocated), numpy (numpy calls on folded weights), onnx (ONNX Runtime, needs the onnx "
                   "extra); auto (default): the fastest installed on the device (onnx, else numpy, on a CPU)"
                   + (f"; all: {all_}" if all_ else "")
                   + ". Drafts copied from the target run the same")
    return p


def _device(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")


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
    _checkpoint(p)
    p.add_argument("--json", action="store_true", help="one JSON object")


def _generate_args(p: argparse.ArgumentParser) -> None:
    _checkpoint(p)
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
    _device(p)
    _backend(p)
    p.add_argument("--json", action="store_true", help="the text and the statistics as one JSON object on stdout "
                   "(without it: the prompt and the text on stdout, the statistics on stderr)")
    p.add_argument("--tree", default=None, metavar="SHAPE", help="draft a token tree: widths per depth (4x2x2x1) "
                   "or a node budget (32) shaped by the dynamic program; bigram or ngram")


def _verify_args(p: argparse.ArgumentParser) -> None:
    _checkpoint(p)
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
    _device(p)
    _backend(p)
    p.add_argument("--json", action="store_true", help="a JSON list of rows")
    p.add_argument("--tree", default=None, metavar="SHAPE", help="verify tree rounds of this shape (4x2x2x1, or a "
                   "node budget like 32) for bigram and ngram (with --joint: the first three characters too)")


def _report_args(p: argparse.ArgumentParser) -> None:
    _backend(_checkpoint(p), all_="one full report per backend and what moved")
    p.add_argument("--quick", action="store_true", help="a one-minute look: budget 60 s, fewer draws")
    p.add_argument("--budget", type=float, default=None, help="seconds the whole report may take (default 300, "
                   "quick 60); pairs go to the rows whose intervals are widest until it is spent")
    p.add_argument("--repeat", type=int, default=1, help="measure N reports back to back and check that each "
                   "one's intervals contain the other's medians (calibration; exit 1 if not)")
    p.add_argument("--between-run", choices=["auto", "off"], default="auto", help="auto: add this machine's "
                   "recorded between-run spread (from earlier --repeat / calibrate runs) to the speedup intervals; "
                   "off: leave it out")
    p.add_argument("--cpu", default=None, help="pin the process to these CPUs (e.g. 1 or 0,1; recorded)")
    p.add_argument("--out", default="specdec-report", help="folder for report.md, report.json, speedup.png")
    p.add_argument("--batched", action="store_true", help="add the batch section: the paired speedup at batch sizes "
                   "B = 1..32 per draft at its best k, and the crossover (alone: `specdec batch`)")
    p.add_argument("--no-work", dest="work", action="store_false", help="leave out the cost table's work columns "
                   "(instructions per pass and per drafted token, counted after the timed sections, outside the "
                   "budget; on by default where a counter runs: docs/work.md)")
    p.add_argument("--counter", choices=["auto", "perf", "callgrind"], default="auto", help="the work counter: "
                   "perf (hardware), callgrind (simulated) or auto (perf where the kernel has a PMU, else callgrind)")
    p.add_argument("--threads", type=int, default=1, help="torch threads while timing (recorded)")
    _device(p)
    p.add_argument("--drafts", "--draft", dest="drafts", nargs="+", action="extend", default=None,
                   help="drafts to measure: names, prompt-lookup, hf:PATH; repeat or list several (default every "
                   "draft the target can have)")
    p.add_argument("--ks", nargs="+", type=int, default=None, help="k values (default 1 2 4 8)")
    p.add_argument("--pairs", type=int, default=None, help="alternated pairs every speedup row gets at least "
                   f"(default {MIN_PAIRS}, --quick too)")
    p.add_argument("--chars", type=int, default=200, help="characters to generate (tokens for a target whose "
                   "tokenizer is not the shipped characters)")
    p.add_argument("--workload", default=None, help="a shipped workload (default shakespeare24) or a prompts file "
                   "(.txt: one prompt a line; .json)")
    p.add_argument("--prompt", default=None, help="one prompt instead of a workload (the write-up's: ROMEO:)")
    p.add_argument("--seed", type=int, default=None, help="with --prompt its seed (default 0); with a workload, "
                   "one seed for every prompt")
    p.add_argument("--engine", nargs="+", choices=list(ENGINES), default=None, metavar="NAME",
                   help=f"run generation through these engines ({', '.join(ENGINES)}); several: side by side on "
                   "the same pair (default specdec: specdec's own loop and every section)")
    p.add_argument("--url", default=None, help="--engine openai: the OpenAI-compatible server with speculation")
    p.add_argument("--baseline-url", default=None, help="--engine openai: the same model served without speculation")
    p.add_argument("--temperature", type=float, default=None, help="an engine report's sampling temperature (default "
                   "1; 0 is greedy); specdec's own report samples at 1 and times greedy in a section of its own")
    p.add_argument("--trees", nargs="*", default=None, help="tree configurations for each table draft: shapes "
                   "like 4x2x2x1 and node budgets like 32 (shape from measured child acceptance); default "
                   "4x2x2x1 32; give --trees alone for none")


def _calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", help="a folder written by `specdec report --repeat N --out FOLDER`")
    p.add_argument("--no-record", action="store_true", help="print and write calibration.md only")


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="the baseline report.json")
    p.add_argument("b", help="the new report.json")
    p.add_argument("--min-effect", type=float, default=None, metavar="FRACTION", help="smallest relative "
                   "change worth a verdict on top of the test (default compare.MIN_EFFECT, 0: every significant "
                   "change)")


def _ab_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", nargs="?", default=None, help="the baseline revision (anything git rev-parse takes)")
    p.add_argument("b", nargs="?", default=None, help="the revision judged against it")
    p.add_argument("--a-path", default=None, metavar="DIR", help="a source tree for A instead of a revision")
    p.add_argument("--b-path", default=None, metavar="DIR", help="a source tree for B instead of a revision")
    _ab_pair(_pair_options(p, "--drafts", "--draft", budget="for the whole run; each worker pair gets an equal "
                           "share"))
    _backend(p)
    p.add_argument("--chars", type=int, default=80, help="characters (tokens) per generation row (default 80)")
    p.add_argument("--prompt", default="ROMEO:")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--temperature", type=float, default=1.0, help="0 is greedy")
    p.add_argument("--threads", type=int, default=1, help="torch and BLAS threads in the workers (recorded)")
    p.add_argument("--engine", choices=[n for n in ENGINES if n != "specdec"], default=None, metavar="NAME",
                   help="generate through this engine (target-only and spec rows only): "
                   f"{', '.join(n for n in ENGINES if n != 'specdec')}")
    p.add_argument("--url", default=None, help="--engine openai: the server with speculation")
    p.add_argument("--baseline-url", default=None, help="--engine openai: the same model without")
    _counter_options(p)
    p.add_argument("--count-batched", action="store_true", help="count the batched rows' work too (minutes "
                   "under callgrind; they are always timed)")
    p.add_argument("--count-all-ks", action="store_true", help="count every k's spec, round and verify rows "
                   "(default: the largest k; every k is timed)")
    p.add_argument("--json", action="store_true", help="the result as one JSON document on stdout")
    p.add_argument("--out", default="specdec-ab.json", metavar="FILE", help="where the result is kept as it is "
                   "measured: the timing's document as soon as the timing ends, then with the work rows "
                   "(default specdec-ab.json; what an interrupted run measured stays there)")


def _bisect_args(p: argparse.ArgumentParser) -> None:
    """ab's options that choose what is compared and how; the rest keep ab's defaults (`bisect_cmd`)."""
    p.add_argument("good", help="a revision that was not slower (anything git rev-parse takes)")
    p.add_argument("bad", help="a later revision that is slower")
    _pair_options(p, "--drafts", budget="of each step's ab timing run, where time is the criterion (no work "
                  "counter, or --no-work); a step by work counts the pass and drafts, untimed")
    _counter_options(p)


def _calibrate_work_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--drafts", "--draft", dest="drafts", nargs="+", action="extend", default=None,
                   help="the shipped drafts whose rows `specdec ab` will judge (default bigram ngram)")
    p.add_argument("--ks", nargs="+", type=int, default=None, help="k values, as given to ab (default 2 4)")
    _backend(p)
    p.add_argument("--counter", choices=["auto", "perf", "callgrind"], default="auto",
                   help="the work counter (default auto: perf where the machine has a PMU, else callgrind)")
    p.add_argument("--aa", type=int, default=5, help="A/A trees: the checkout under other link names (default 5)")
    p.add_argument("--null", type=int, default=10, help="null-change trees: code the rows never run (default 10)")


def _asv_init_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", default=".", metavar="PATH", help="the git repository to write into (default .)")
    p.add_argument("--drafts", "--draft", dest="drafts", nargs="+", action="extend", required=True,
                   metavar="MODULE:CALLABLE", help="your drafts (a callable of the target returning a Draft), or "
                   "shipped drafts' names")
    p.add_argument("--target", dest="entry_target", default=None, metavar="MODULE:CALLABLE", help="your target (a "
                   "callable of no arguments returning a Target; default specdec's shipped one)")
    p.add_argument("--ks", nargs="+", type=int, default=None, help="k values of the speedup rows (default 4; a "
                   "draft's cost is taken at the largest)")
    p.add_argument("--chars", type=int, default=200, help="characters (tokens) per generation (default 200)")
    p.add_argument("--force", action="store_true", help="overwrite asv.conf.json and benchmarks/bench_specdec.py")


def _pair_options(p: argparse.ArgumentParser, *drafts: str, budget: str) -> argparse.ArgumentParser:
    """What ab and bisect share: the repository, the pair and the budget (`drafts`: the options naming them;
    `budget`: what --budget's seconds pay for)."""
    p.add_argument("--repo", default=".", metavar="PATH", help="the git repository A and B are revisions of "
                   "(default ., the current one; any repository: give --target/--drafts as MODULE:CALLABLE)")
    _checkpoint(p, own=", or MODULE:CALLABLE (yours: a callable of no arguments returning a Target, imported "
                "from each revision)")
    p.add_argument(*drafts, dest="drafts", nargs="+", action="extend", default=None,
                   help="drafts: shipped names, hf:PATH, or MODULE:CALLABLE (yours: a callable of the target "
                   "returning a Draft, imported from each revision); default bigram ngram (prompt-lookup for an "
                   "hf: or MODULE:CALLABLE target)")
    p.add_argument("--budget", type=float, default=AB_BUDGET, help=f"seconds {budget} (default {AB_BUDGET:g})")
    return p


def _ab_pair(p: argparse.ArgumentParser) -> None:
    """ab's own: the k values, the worker pairs and the CPU (bisect keeps ab's defaults)."""
    p.add_argument("--ks", nargs="+", type=int, default=None, help="k values (default 2 4)")
    p.add_argument("--pairs", type=int, default=AB_PAIRS, help=f"fresh worker pairs (default {AB_PAIRS}): the "
                   "independent units the intervals count")
    p.add_argument("--cpu", default=None, help="the one CPU both workers of a pair are pinned to (default the "
                   "highest-numbered one allowed)")


def _counter_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-work", dest="work", action="store_false", help="leave out the work rows (instructions "
                   "per call, counted after the timing; on by default where a counter runs: docs/work.md)")
    p.add_argument("--counter", choices=["auto", "perf", "callgrind"], default="auto",
                   help="the work counter: the hardware counter (perf), callgrind's simulation, or auto (perf "
                   "where the kernel has a PMU, else callgrind)")


def _overhead_args(p: argparse.ArgumentParser) -> None:
    _backend(_checkpoint(p), all_="the floor table and where the time goes for each backend in turn, on one "
             "measurement of the machine")
    p.add_argument("--threads", type=int, default=1, help="torch threads while measuring (recorded)")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds for the machine's figures and again for "
                   "the pass times (the profiled attribution takes its own few seconds)")
    p.add_argument("--out", default=None, help="also write overhead.json into this folder")


def _batch_args(p: argparse.ArgumentParser) -> None:
    _backend(_checkpoint(p))
    p.add_argument("--budget", type=float, default=120.0, help="seconds the whole command may take (default 120); "
                   "the largest batch sizes are left out when their pairs would not fit")
    p.add_argument("--quick", action="store_true", help="the quick report's pairs and precision")
    p.add_argument("--drafts", "--draft", dest="drafts", nargs="+", action="extend", default=None,
                   help="drafts to measure (default every shipped draft that runs on the device)")
    p.add_argument("-k", type=int, default=4, help="drafts per round (default 4; a report with --batched uses each "
                   "draft's best measured k)")
    p.add_argument("--draft-k", nargs="+", default=[], metavar="NAME=K", help="a draft's own k (e.g. ngram=4 "
                   "bigram=2: each at its best k from a report), for the drafts named; -k for the rest")
    p.add_argument("--batches", nargs="+", type=int, default=[1, 2, 4, 8, 16, 32],
                   help="batch sizes B (default 1 2 4 8 16 32)")
    p.add_argument("--chars", type=int, default=100, help="characters per sequence (default 100)")
    p.add_argument("--pairs", type=int, default=None, help="alternated pairs every row gets at least (default "
                   f"{MIN_PAIRS}, --quick too)")
    p.add_argument("--threads", type=int, default=1, help="torch threads while timing (recorded)")
    p.add_argument("--workload", default=None, help="the prompts the batches cycle through (default shakespeare24)")
    p.add_argument("--out", default="specdec-batch", help="folder for batch.md, batch.json, batch.png")
    _device(p)


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


def _load_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default=None, metavar="PATH", help="the llama-server binary (default: the one "
                   "`specdec build-server` cached)")
    p.add_argument("--model", default=None, metavar="GGUF", help="the target (default: the shipped target, "
                   "exported as by export-gguf)")
    p.add_argument("--draft-model", default=None, metavar="GGUF", help="the draft for --spec-type draft-simple "
                   "(default: the shipped small draft, exported)")
    p.add_argument("--spec-type", default="draft-simple", help="the spec-on server's speculation: draft-simple "
                   "(the draft model) or one of the server's n-gram kinds: ngram-simple, ngram-map-k, ngram-mod, "
                   "ngram-cache (default draft-simple)")
    p.add_argument("--n-max", type=int, default=4, help="tokens drafted per round, --spec-draft-n-max (default 4)")
    p.add_argument("--slots", type=int, default=4, help="parallel slots of each server, -np (default 4)")
    p.add_argument("--port", type=int, default=None, help="the spec-on server's port (the spec-off ones' are the "
                   "next two); default: free ports")
    p.add_argument("--url", default=None, help="a running server with speculation, instead of starting one")
    p.add_argument("--baseline-url", default=None, help="... and the same model served without")
    p.add_argument("--concurrency", default=None, metavar="C,C,...", help="closed-loop client counts (default "
                   "1, 2, 4, ... --slots; 'none' for rates only)")
    p.add_argument("--rates", default=None, metavar="R,R,...", help="open-loop request rates per second")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of the open-loop gaps (1: Poisson)")
    p.add_argument("--visits", type=int, default=3, help="visits per level: spec-on, spec-off and A/A windows "
                   "each (default 3)")
    p.add_argument("--requests", type=int, default=8, help="measured requests per window (default 8)")
    p.add_argument("--warmup", type=int, default=2, help="requests before each window's measured ones (default 2)")
    p.add_argument("--max-tokens", type=int, default=64, help="tokens per request (default 64)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 (default) is greedy: outputs checked equal")
    p.add_argument("--slo", nargs="+", default=None, metavar="KIND=MS", help="goodput's SLOs: ttft=, tpot=, "
                   "e2el= milliseconds")
    p.add_argument("--order", choices=["paired", "unpaired"], default="paired", help="paired (default): the arms "
                   "alternated at each level; unpaired: every level spec-off, then spec-on (vllm bench style)")
    p.add_argument("--budget", type=float, default=None, help="seconds after which no window starts (default: "
                   "none; the request counts bound the run)")
    p.add_argument("--out", default="specdec-load", help="folder for load.json, load.md, load.png")


# (name, one-line help, the function adding its arguments), in the order `specdec --help` lists them
SUBCOMMANDS = [
    ("train", "train the target (or the small draft) deterministically", _train_args),
    ("train-draft", "train a draft that reads the target (medusa, eagle) for it, the target frozen, "
     "deterministically", _train_draft_args),
    ("info", "the target: parameters, bytes, validation loss, checkpoint", _info_args),
    ("generate", "generate text, target-only or speculative", _generate_args),
    ("verify", "exactness: chi-square of speculative draws, with a verdict", _verify_args),
    ("report", "measure everything here; tables, report.json, figure", _report_args),
    ("calibrate", "coverage of a `report --repeat N` folder's reports, and record this machine's between-run "
     "spread from them; exit 1 if calibration does not hold", _calibrate_args),
    ("compare", "compare two report.json files; exit 1 if anything got worse", _compare_args),
    ("ab", "did revision B make anything slower than A? both timed in one alternated run; exit 1 if worse",
     _ab_args),
    ("bisect", "the first commit after GOOD up to BAD that made the code slower (work where a counter runs, else "
     "time), the running specdec the harness at every step; commits without the module are skipped", _bisect_args),
    ("calibrate-work", "count A/A and null-change copies of this specdec as `ab` counts a revision, and keep "
     "the work rows' calibration for this machine and configuration (ab, bisect and compare judge by it)",
     _calibrate_work_args),
    ("asv-init", "write asv.conf.json and benchmarks/ into your repository: asv over your commits, your pair by "
     "entry point, the installed specdec the fixed harness", _asv_init_args),
    ("batch", "speedup against batch size B in specdec's own loop: paired at B = 1..32, the cost model at B, the "
     "crossover per draft", _batch_args),
    ("overhead", "the target pass against its roofline floor, and where the time goes", _overhead_args),
    ("export-hf", "write the shipped target and small draft as transformers (GPT-2, safetensors) folders",
     _export_hf_args),
    ("export-gguf", "write the shipped target and small draft as GGUF files llama.cpp loads", _export_gguf_args),
    ("build-server", "build llama.cpp's llama-server from the llama-cpp-python sdist once, cached; its path on "
     "stdout", _build_server_args),
    ("load", "spec-on against spec-off on llama-server under load: paired speedup per concurrency and rate, "
     "and the crossover", _load_args),
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
