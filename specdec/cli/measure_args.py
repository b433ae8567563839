"""The arguments of the subcommands that measure speed and judge it: report, calibrate, compare, ab, bisect,
calibrate-work, asv-init, batch, overhead and load (one function per subcommand, named after it).

The options they share with other subcommands are in `options`; the list of subcommands is `parser.SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse

# Only names that import neither torch nor scipy: `--help` and a usage error in the arguments answer at once.
from specdec.cli.options import ab_pair, backend, checkpoint, counter_options, device, pair_options
from specdec.engines.registry import ENGINES
from specdec.measure.pairs import MIN_PAIRS


def report_args(p: argparse.ArgumentParser) -> None:
    backend(checkpoint(p), all_="one full report per backend and what moved")
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
    device(p)
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


def calibrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", help="a folder written by `specdec report --repeat N --out FOLDER`")
    p.add_argument("--no-record", action="store_true", help="print and write calibration.md only")


def compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="the baseline report.json")
    p.add_argument("b", help="the new report.json")
    p.add_argument("--min-effect", type=float, default=None, metavar="FRACTION", help="smallest relative "
                   "change worth a verdict on top of the test (default compare.MIN_EFFECT, 0: every significant "
                   "change)")


def ab_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", nargs="?", default=None, help="the baseline revision (anything git rev-parse takes)")
    p.add_argument("b", nargs="?", default=None, help="the revision judged against it")
    p.add_argument("--a-path", default=None, metavar="DIR", help="a source tree for A instead of a revision")
    p.add_argument("--b-path", default=None, metavar="DIR", help="a source tree for B instead of a revision")
    ab_pair(pair_options(p, "--drafts", "--draft", budget="for the whole run; each worker pair gets an equal "
                           "share"))
    backend(p)
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
    counter_options(p)
    p.add_argument("--count-batched", action="store_true", help="count the batched rows' work too (minutes "
                   "under callgrind; they are always timed)")
    p.add_argument("--count-all-ks", action="store_true", help="count every k's spec, round and verify rows "
                   "(default: the largest k; every k is timed)")
    p.add_argument("--json", action="store_true", help="the result as one JSON document on stdout")
    p.add_argument("--out", default="specdec-ab.json", metavar="FILE", help="where the result is kept as it is "
                   "measured: the timing's document as soon as the timing ends, then with the work rows "
                   "(default specdec-ab.json; what an interrupted run measured stays there)")


def bisect_args(p: argparse.ArgumentParser) -> None:
    """ab's options that choose what is compared and how; the rest keep ab's defaults (`bisect_cmd`)."""
    p.add_argument("good", help="a revision that was not slower (anything git rev-parse takes)")
    p.add_argument("bad", help="a later revision that is slower")
    pair_options(p, "--drafts", budget="of each step's ab timing run, where time is the criterion (no work "
                  "counter, or --no-work); a step by work counts the pass and drafts, untimed")
    counter_options(p)


def calibrate_work_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--drafts", "--draft", dest="drafts", nargs="+", action="extend", default=None,
                   help="the shipped drafts whose rows `specdec ab` will judge (default bigram ngram)")
    p.add_argument("--ks", nargs="+", type=int, default=None, help="k values, as given to ab (default 2 4)")
    backend(p)
    p.add_argument("--counter", choices=["auto", "perf", "callgrind"], default="auto",
                   help="the work counter (default auto: perf where the machine has a PMU, else callgrind)")
    p.add_argument("--aa", type=int, default=5, help="A/A trees: the checkout under other link names (default 5)")
    p.add_argument("--null", type=int, default=10, help="null-change trees: code the rows never run (default 10)")


def asv_init_args(p: argparse.ArgumentParser) -> None:
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


def overhead_args(p: argparse.ArgumentParser) -> None:
    backend(checkpoint(p), all_="the floor table and where the time goes for each backend in turn, on one "
             "measurement of the machine")
    p.add_argument("--threads", type=int, default=1, help="torch threads while measuring (recorded)")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds for the machine's figures and again for "
                   "the pass times (the profiled attribution takes its own few seconds)")
    p.add_argument("--out", default=None, help="also write overhead.json into this folder")


def batch_args(p: argparse.ArgumentParser) -> None:
    backend(checkpoint(p))
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
    device(p)


def load_args(p: argparse.ArgumentParser) -> None:
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

