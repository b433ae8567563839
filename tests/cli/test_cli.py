"""The command line, run as a user runs it: in a subprocess."""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from specdec import cli

from tests.report.compare.test_compare import _doc

CLI = [sys.executable, "-m", "specdec.cli"]


def run(*args, check=True):
    proc = subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_generate_writes_only_the_text_to_stdout_and_its_statistics_to_stderr(tmp_path):
    """`specdec generate > out.txt` keeps exactly the prompt and the text; the same seed gives the same text."""
    args = ["generate", "--prompt", "ROMEO:", "--chars", "200", "--seed", "0"]
    with open(tmp_path / "out.txt", "w") as f:
        proc = subprocess.run(CLI + args, stdout=f, stderr=subprocess.PIPE, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    text = json.loads(run(*args, "--json").stdout)["text"]
    assert len(text) == 200 and (tmp_path / "out.txt").read_text() == "ROMEO:" + text + "\n"
    assert proc.stderr == "chars 200  target passes 200  chars per pass 1.00\n"  # target-only: a pass a character


def test_generate_json_is_the_only_output():
    proc = run("generate", "--draft", "ngram", "-k", "4", "--chars", "50", "--seed", "1", "--json")
    out = json.loads(proc.stdout)  # the whole of stdout is one JSON object
    assert proc.stdout.count("\n") == 1 and proc.stderr == ""
    assert (out["prompt"], len(out["text"]), out["draft"], out["k"]) == ("ROMEO:", 50, "ngram", 4)


def test_generate_speculative_statistics_go_to_stderr():
    args = ["generate", "--draft", "ngram", "-k", "4", "--chars", "50", "--seed", "1"]
    proc, out = run(*args), json.loads(run(*args, "--json").stdout)
    assert proc.stdout == "ROMEO:" + out["text"] + "\n"
    assert proc.stderr == (f"chars 50  target passes {out['target_passes']}  chars per pass "
                           f"{50 / out['target_passes']:.2f}  draft ngram k 4  acceptance {out['acceptance']:.3f}  "
                           f"drafted {out['drafted']}  accepted {out['accepted']}  draft calls {out['draft_calls']}  "
                           f"accepted per round (0..k) {out['accepted_per_position']}\n")


def _env_without_kineto_level() -> dict:
    """This environment less KINETO_LOG_LEVEL (an in-process `cli.main` elsewhere in the session sets it)."""
    return {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}


PROFILE = ("import torch\nfrom torch.profiler import profile, ProfilerActivity\n{quiet}"
           "with profile(activities=[ProfilerActivity.CPU]):\n    torch.ones(3) + 1\n")


@pytest.mark.parametrize("quiet,lines", [("", 2), ("from specdec.measure.anatomy.profiler_split import quiet_profiler\n"
                                                    "quiet_profiler()\n", 0)])
def test_the_profilers_start_and_stop_lines_are_silenced_where_profiles_start(quiet, lines):
    """Negative control and fix: a torch.profiler profile logs `profiler_start` and `profiler_stop` on stderr
    unless `profiler_split.quiet_profiler` (which every profile of the attribution calls first) ran."""
    proc = subprocess.run([sys.executable, "-c", PROFILE.format(quiet=quiet)], capture_output=True, text=True,
                          timeout=600, env=_env_without_kineto_level())
    assert proc.returncode == 0, proc.stderr
    assert sum("SyncActivityProfilerHandler" in line for line in proc.stderr.splitlines()) == lines, proc.stderr


def test_overhead_prints_no_runtime_log_lines():
    """The profiled attribution (torch.profiler around ONNX Runtime's own profiler) leaves stderr empty."""
    pytest.importorskip("onnxruntime")
    proc = subprocess.run(CLI + ["overhead", "--seconds", "0.1", "--backend", "onnx"], capture_output=True,
                          text=True, timeout=600, env=_env_without_kineto_level())
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "where the time goes" in proc.stdout


def test_generate_json_speculative():
    out = json.loads(run("generate", "--draft", "int4", "-k", "4", "--chars", "50", "--json").stdout)
    assert len(out["text"]) == 50 and out["k"] == 4
    assert out["acceptance"] == out["accepted"] / out["drafted"]
    assert sum(out["accepted_per_position"]) == out["draft_calls"]


def test_generate_and_verify_on_the_fused_backend_match_eager():
    args = ["generate", "--draft", "int8", "--chars", "60", "--seed", "3", "--json"]
    assert json.loads(run(*args, "--backend", "fused").stdout) == json.loads(run(*args).stdout)
    rows = json.loads(run("verify", "--backend", "fused", "--draft", "int8", "--samples", "1000", "--json").stdout)
    assert [r["verdict"] for r in rows] == ["exact"]


def test_info_json_describes_the_checkpoint_it_loaded(target):
    info = json.loads(run("info", "--json").stdout)
    for key in ("params", "weight_bytes_float32", "vocab_size", "context", "val_loss", "checkpoint_sha256",
                "torch_version", "threads"):
        assert key in info
    assert (info["params"], info["checkpoint_sha256"], info["val_loss"]) == (
        target.num_params(), target.meta["sha256"], target.meta["val_loss"])
    assert (info["vocab_size"], info["context"]) == (target.config.vocab_size, target.config.context)


def test_verify_json_rows():
    rows = json.loads(run("verify", "--draft", "bigram", "--draft", "int4", "-k", "2", "--samples", "3000",
                          "--json").stdout)
    assert [r["draft"] for r in rows] == ["bigram", "int4"]
    for r in rows:
        assert set(r) >= {"draft", "k", "samples", "tv", "baseline_tv", "baseline_tv_max", "p_value", "verdict"}
        assert r["k"] == 2 and r["samples"] == 3000
        assert r["p_threshold"] == 0.001 / 2 and r["verdict"] == ("exact" if r["p_value"] > 0.0005 else "CHECK")


def test_verify_joint_json_rows():
    rows = json.loads(run("verify", "--joint", "--adaptive", "--draft", "ngram", "-k", "1", "--samples", "100",
                          "--temperature", "0.7", "--json").stdout)
    (r,) = rows
    assert (r["draft"], r["k"], r["adaptive"], r["temperature"], r["samples"], r["chars"]) == ("ngram", 1, True, 0.7,
                                                                                           100, 3)
    # ngram is exact: at this seed its p-value clears the threshold (a broken rule or test fails here)
    assert r["p_threshold"] == 0.001 and r["p_value"] > r["p_threshold"] and r["verdict"] == "exact"


# Every option of every command with at least one bad value: (args, what the one line must say). {dir} is a
# folder holding `a-file` (a plain file), `a-folder` (empty) and four JSON files: not JSON, not a report, a
# report with a NaN cost and one without a draft's c. Each case runs in its own empty working directory, which must stay empty.
BAD = [
    (["train", "--steps", "0"], "--steps must be at least 1, got 0"),
    (["train", "--steps", "x"], "argument --steps: invalid int value: 'x'"),
    (["train", "--seed", "-1"], "--seed must be at least 0, got -1"),
    (["train", "--batch", "0"], "--batch must be at least 1, got 0"),
    (["train", "--threads", "0"], "--threads must be at least 1, got 0"),
    (["train", "--out", "{dir}/a-folder"], "a-folder: is a directory, not a file path"),
    (["train", "--out", "{dir}/a-file/t.pt"], "a-file is not a directory"),
    (["train", "--draft", "tiny"], "argument --draft: invalid choice: 'tiny'"),
    (["train", "--teacher", "{dir}/t.pt"], "--teacher needs --draft small"),
    (["train", "--draft", "small", "--teacher", "{dir}/t.pt", "--out", "s.pt"], "t.pt' not found; retrain it"),
    (["train-draft", "bogus"], "argument NAME: invalid choice: 'bogus' (choose from"),
    (["train-draft", "eagle", "--steps", "0"], "--steps must be at least 1, got 0"),
    (["train-draft", "eagle", "--seed", "-1"], "--seed must be at least 0, got -1"),
    (["train-draft", "medusa", "--threads", "0"], "--threads must be at least 1, got 0"),
    (["train-draft", "eagle", "--out", "{dir}/a-file/e.pt"], "a-file is not a directory"),
    (["info", "--checkpoint", "{dir}/t.pt"], "t.pt' not found; retrain it with `specdec train"),
    (["info", "--json=yes"], "argument --json: ignored explicit argument 'yes'"),
    (["generate", "--prompt", "ROMEO: é"], "'é' is not in the vocabulary"),
    (["generate", "--prompt", ""], "prompt is empty"),
    (["generate", "--chars", "0"], "chars must be at least 1"),
    (["generate", "--chars", "300"], "exceeds the context of 256"),
    (["generate", "--seed", "-1"], "--seed must be at least 0, got -1"),
    (["generate", "--temperature", "-1"], "--temperature must be 0 or a finite number >= 1e-30, got -1.0"),
    (["generate", "--draft", "ngram", "-k", "4", "--temperature", "nan"],
     "--temperature must be 0 or a finite number >= 1e-30, got nan"),
    (["generate", "--temperature", "inf"], "--temperature must be 0 or a finite number >= 1e-30, got inf"),
    (["generate", "--temperature", "1e-320"], "--temperature must be 0 or a finite number >= 1e-30, got 1e-320"),
    (["generate", "--temperature", "warm"], "argument --temperature: invalid float value: 'warm'"),
    (["generate", "--draft", "int3"], "unknown draft 'int3' (available: bigram, int8, int4"),
    (["generate", "--draft", "bigram", "-k", "0"], "-k must be at least 1, got 0"),
    (["generate", "--draft", "bigram", "-k", "300"], "k=300 overflows the context"),
    (["generate", "-k", "3"], "-k needs --draft"),
    (["generate", "--adaptive"], "--adaptive needs --draft"),
    (["generate", "--threads", "0"], "--threads must be at least 1, got 0"),
    (["generate", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["generate", "--json=1"], "argument --json: ignored explicit argument '1'"),
    (["generate", "--checkpoint", "{dir}/t.pt"], "not found; retrain it with `specdec train"),
    (["verify", "--draft", "nope"], "unknown draft 'nope'"),
    (["verify", "-k", "0"], "-k must be at least 1, got 0"),
    (["verify", "-k", "300"], "k=300 overflows the context"),
    (["verify", "--samples", "99"], "--samples must be at least 100, got 99"),
    (["verify", "--seed", "-1"], "--seed must be at least 0, got -1"),
    (["verify", "--temperature", "nan"], "--temperature must be 0 or a finite number >= 1e-30, got nan"),
    (["verify", "--joint=1"], "argument --joint: ignored explicit argument '1'"),
    (["verify", "--adaptive"], "--adaptive needs --joint"),
    (["verify", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["verify", "--json=1"], "argument --json: ignored explicit argument '1'"),
    (["verify", "--checkpoint", "{dir}/t.pt"], "not found; retrain it with `specdec train"),
    (["generate", "--backend", "nope"], "argument --backend: invalid choice: 'nope' (choose from"),
    (["verify", "--backend", "jit"], "argument --backend: invalid choice: 'jit' (choose from"),
    (["report", "--backend", "compiled"], "argument --backend: invalid choice: 'compiled' (choose from"),
    (["overhead", "--backend", "tpu"], "argument --backend: invalid choice: 'tpu' (choose from"),
    (["overhead", "--checkpoint", "{dir}/t.pt"], "not found; retrain it with `specdec train"),
    (["report", "--backend", "all", "--repeat", "2"], "--backend all measures one report per backend; give --repeat"),
    (["report", "--quick=1"], "argument --quick: ignored explicit argument '1'"),
    (["report", "--out", "{dir}/a-file"], "--out {dir}/a-file: {dir}/a-file is not a directory"),
    (["report", "--out", "{dir}/a-file/sub"], "{dir}/a-file is not a directory"),
    (["report", "--out", "/proc/specdec-report"], "--out /proc/specdec-report: cannot write in /proc"),
    (["report", "--threads", "0"], "--threads must be at least 1, got 0"),
    (["report", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["report", "--drafts", "bigramm"], "unknown draft 'bigramm'"),
    (["report", "--ks", "0"], "k must be at least 1, got 0"),
    (["report", "--ks", "2", "300"], "k=300 overflows the context"),
    (["report", "--pairs", "0"], "--pairs must be at least 1, got 0"),
    (["report", "--chars", "0"], "chars must be at least 1"),
    (["report", "--chars", "300"], "exceeds the context of 256"),
    (["report", "--seed", "-1"], "--seed must be at least 0, got -1"),
    (["report", "--checkpoint", "{dir}/t.pt"], "not found; retrain it with `specdec train"),
    (["compare", "{dir}/t.json", "{dir}/not-json.json"], "t.json: no such report.json"),
    (["compare", "{dir}/not-json.json", "{dir}/not-json.json"], "not-json.json: not valid JSON"),
    (["compare", "{dir}/not-report.json", "{dir}/not-report.json"], "not a specdec report (missing keys"),
    (["compare", "{dir}/nan-report.json", "{dir}/nan-report.json"], "costs.drafts.bigram.c is nan, not a finite number"),
    (["compare", "{dir}/old-report.json", "{dir}/old-report.json"], "lacks settings.prompt (made by an older specdec"),
    (["generate", "--draft", "ngram", "--tree", "0"], "--tree: a tree budget must be between 1 and 255 nodes, got '0'"),
    (["verify", "--tree", "0x2"], "bad tree shape '0x2'"),
    (["report", "--trees", "0x2"], "--trees: bad tree shape '0x2'"),
    (["report", "--prompt", "ROMEO: é"], "character 'é' is not in the vocabulary"),
    (["report", "--cpu", "4096"], "CPU 4096 is not available"),
    (["report", "--repeat", "0"], "--repeat must be at least 1, got 0"),
    (["report", "--between-run", "0.1"], "argument --between-run: invalid choice: '0.1' (choose from 'auto', 'off')"),
    (["calibrate", "{dir}"], "needs report.json and repeat-2/report.json"),
    (["calibrate", "{dir}/nowhere", "--no-record"], "needs report.json and repeat-2/report.json"),
    (["report", "--budget", "nan"], "--budget must be a positive number of seconds, got nan"),
    (["report", "--workload", "hamlet99"], "unknown workload 'hamlet99'"),
    (["report", "--engine", "vllm"], "argument --engine: invalid choice: 'vllm' (choose from"),
    (["ab", "HEAD", "HEAD", "--engine", "specdec"], "argument --engine: invalid choice: 'specdec' (choose from"),
    (["ab", "HEAD", "HEAD", "--url", "http://127.0.0.1:9"], "--url and --baseline-url are for --engine openai"),
    (["ab", "HEAD", "HEAD", "--baseline-url", "http://127.0.0.1:9"], "--url and --baseline-url are for --engine openai"),
    (["ab", "HEAD", "HEAD", "--engine", "openai"], "--engine openai needs --url and --baseline-url"),
    (["ab", "HEAD", "HEAD", "--engine", "transformers", "--backend", "numpy"], "--backend is for specdec's own loop"),
    (["report", "--engine", "openai"], "--engine openai needs --url (the server with speculation) and --baseline-url"),
    (["report", "--engine", "specdec", "openai", "--url", "http://127.0.0.1:9"], "missing --baseline-url"),
    (["report", "--url", "http://127.0.0.1:9"], "--url is for an engine report (--engine transformers llama-cpp openai)"),
    (["report", "--baseline-url", "http://127.0.0.1:9"], "--baseline-url is for an engine report"),
    (["report", "--engine", "specdec", "specdec", "--url", "http://127.0.0.1:9"], "--url and --baseline-url are for "
     "--engine openai"),
    (["report", "--temperature", "0.5"], "--temperature is for an engine report"),
    (["report", "--engine", "specdec", "specdec", "--temperature", "-1"], "temperature must be 0 or a finite number"),
    (["report", "--engine", "specdec", "specdec", "--trees", "4x2"], "--trees is for specdec's own report, not for "
     "--engine specdec specdec"),
    (["report", "--no-work", "--counter", "callgrind"], "--counter callgrind names the work columns' counter and "
     "--no-work leaves them out"),
    (["report", "--counter", "cycles"], "argument --counter: invalid choice: 'cycles'"),
    (["report", "--engine", "specdec", "specdec", "--no-work"], "--no-work is for specdec's own report, not for "),
    (["report", "--engine", "specdec", "specdec", "--batched"], "--batched is for specdec's own report, not for "
     "--engine specdec specdec"),
    (["overhead", "--threads", "0"], "--threads must be at least 1, got 0"),
    (["overhead", "--threads", "two"], "argument --threads: invalid int value: 'two'"),
    (["overhead", "--seconds", "0"], "--seconds must be a number of seconds in (0, 600], got 0.0"),
    (["overhead", "--seconds", "nan"], "--seconds must be a number of seconds in (0, 600], got nan"),
    (["overhead", "--seconds", "601"], "--seconds must be a number of seconds in (0, 600], got 601.0"),
    (["overhead", "--out", "{dir}/a-file"], "--out {dir}/a-file: {dir}/a-file is not a directory"),
    # the target by spec (issue 26): the HF-specific cases with real models are in tests/cli/test_cli_hf.py
    (["info", "--target", "hf:{dir}/nowhere"], "no model folder '{dir}/nowhere' here and no model id"),
    (["info", "--dtype", "float8"], "argument --dtype: invalid choice: 'float8'"),
    (["info", "--allow-download"], "--allow-download is for Hugging Face model ids"),
    (["generate", "--target", "{dir}/t.pt"], "t.pt' not found; retrain it"),
    (["generate", "--target", "{dir}/t.pt", "--checkpoint", "{dir}/t.pt"], "give --target or --checkpoint, not both"),
    (["generate", "--dtype", "float16"], "--dtype float16 is for Hugging Face models (--target hf:PATH or --draft"),
    (["generate", "--allow-download=1"], "argument --allow-download: ignored explicit argument '1'"),
    (["generate", "--draft", "hf:"], "--draft hf:: name the model after the prefix (hf:FOLDER or hf:MODEL-ID)"),
    (["verify", "--target", "hf:{dir}/a-folder"], "a-folder' is not a Hugging Face model folder: it has no config.json"),
    (["verify", "--dtype", "bfloat16"], "--dtype bfloat16 is for Hugging Face models"),
    (["verify", "--allow-download"], "--allow-download is for Hugging Face model ids"),
    (["verify", "--draft", "hf:{dir}/nowhere"], "no model folder '{dir}/nowhere' here"),
    (["report", "--target", "hf:"], "--target hf:: name the model after the prefix"),
    (["report", "--target", "hf:{dir}/a-file", "--backend", "numpy"], "--backend numpy is for the shipped model; "
     "a Hugging Face target runs as transformers runs it (allowed with --target hf:{dir}/a-file: auto, eager)"),
    (["report", "--dtype", "half"], "argument --dtype: invalid choice: 'half'"),
    (["report", "--allow-download"], "--allow-download is for Hugging Face model ids"),
    (["overhead", "--target", "hf:{dir}/a-file"], "a-file' is a file, not a model folder"),
    (["overhead", "--dtype", "float16"], "--dtype float16 is for Hugging Face models"),
    (["overhead", "--allow-download=yes"], "argument --allow-download: ignored explicit argument 'yes'"),
    (["export-hf", "{dir}/a-file"], "export-hf {dir}/a-file: {dir}/a-file is a file, not a folder"),
    (["export-hf", "{dir}/a-file/sub"], "{dir}/a-file is not a directory"),
    (["export-gguf", "{dir}/a-file"], "export-gguf {dir}/a-file: {dir}/a-file is a file, not a folder"),
    (["export-gguf", "{dir}/a-file/sub"], "{dir}/a-file is not a directory"),
    (["export-gguf", "{dir}/out", "--mix", "3"], "export-gguf: --mix shapes the grown target; give it with --grow"),
    (["export-gguf", "{dir}/out", "--grow", "--layers", "2"], "export-gguf --layers 2: give an integer from 3 (the "
     "shipped blocks) to 64"),
    (["export-gguf", "{dir}/out", "--grow", "--widen", "0"], "export-gguf --widen 0: give an integer from 1 to 16"),
    (["export-gguf", "{dir}/out", "--grow", "--mix", "nan"], "export-gguf --mix nan: give a finite number >= 0"),
    (["compare", "{dir}/t.json", "{dir}/t.json", "--min-effect", "-0.01"],
     "--min-effect must be a fraction >= 0 and finite (0.05 is 5 %), got -0.01"),
    (["compare", "{dir}/t.json", "{dir}/t.json", "--min-effect", "nan"], "--min-effect must be a fraction >= 0 and "
     "finite (0.05 is 5 %), got nan"),
    (["compare", "{dir}/t.json", "{dir}/t.json", "--min-effect", "inf"], "got inf"),
    (["compare", "{dir}/t.json", "{dir}/t.json", "--min-effect", "five"], "argument --min-effect: invalid float value"),
    ([], "the following arguments are required: command"),
    (["ab", "HEAD", "HEAD"], "is not inside a git checkout: run specdec ab in one, or name one with --repo PATH "
     "(or give two source trees: --a-path DIR --b-path DIR)"),
    (["ab", "HEAD", "HEAD", "--repo", "{dir}/no-such-repo"], "no-such-repo: no such folder (a git repository: the "
     "current one by default)"),
    (["bisect", "HEAD", "HEAD"], "is not inside a git checkout: run specdec bisect in one, or name one with --repo "
     "PATH"),  # not ab's advice: bisect takes no folders
    (["bisect", "HEAD", "HEAD", "--repo", "{dir}/no-such-repo"], "no-such-repo: no such folder (a git repository"),
    (["bisect", "HEAD", "HEAD", "--checkpoint", "{dir}/t.pt"], "not found; retrain it with `specdec train"),
    (["bisect", "HEAD", "HEAD", "--target", "hf:{dir}/nowhere"], "no such folder (specdec bisect loads a local"),
    (["bisect", "HEAD", "HEAD", "--dtype", "float8"], "argument --dtype: invalid choice: 'float8'"),
    (["bisect", "HEAD", "HEAD", "--allow-download"], "--allow-download is for Hugging Face model ids"),
    (["bisect", "HEAD", "HEAD", "--drafts", "nope"], "unknown draft 'nope'"),
    (["bisect", "HEAD", "HEAD", "--budget", "-1"], "--budget must be seconds in (0, 3600], got -1.0"),
    (["bisect", "HEAD", "HEAD", "--no-work", "--counter", "perf"], "--counter perf names the work rows' counter and "
     "--no-work leaves them out"),
    (["bisect", "HEAD", "HEAD", "--counter", "cycles"], "argument --counter: invalid choice: 'cycles' (choose from"),
    (["asv-init", "--drafts", "mydraft:make"], "is not inside a git checkout: run specdec asv-init in one, or name "
     "one with --repo PATH"),
    (["asv-init", "--drafts", "mydraft:make", "--force"], "is not inside a git checkout"),  # --force writes no more
    (["asv-init", "--drafts", "mydraft:make", "--repo", "{dir}/no-such-repo"], "no-such-repo: no such folder"),
    (["asv-init", "--drafts", "nope"], "unknown draft 'nope'"),
    (["asv-init", "--drafts", "my-draft:make"], "--drafts 'my-draft:make': not MODULE:CALLABLE"),
    (["asv-init", "--drafts", "mydraft:make", "--target", "bigram"], "--target 'bigram': not MODULE:CALLABLE"),
    (["asv-init", "--drafts", "mydraft:make", "--ks", "0"], "k must be at least 1, got 0"),
    (["asv-init", "--drafts", "mydraft:make", "--chars", "1"], "--chars must be at least 2, got 1"),
    (["ab", "--a-path", "{dir}", "--b-path", "{dir}"], "--a-path {dir}: not a specdec source tree"),
    (["ab", "HEAD", "--b-path", "{dir}/a-folder"], "--b-path {dir}/a-folder: not a specdec source tree"),
    (["ab", "HEAD", "HEAD", "--checkpoint", "{dir}/t.pt"], "not found; retrain it with `specdec train"),
    (["ab", "HEAD", "HEAD", "--target", "hf:{dir}/nowhere"], "no such folder (specdec ab loads a local"),
    (["ab", "HEAD", "HEAD", "--dtype", "float8"], "argument --dtype: invalid choice: 'float8'"),
    (["ab", "HEAD", "HEAD", "--allow-download"], "--allow-download is for Hugging Face model ids"),
    (["ab", "HEAD", "HEAD", "--backend", "tpu"], "argument --backend: invalid choice: 'tpu' (choose from"),
    (["ab", "HEAD", "HEAD", "--drafts", "nope"], "unknown draft 'nope'"),
    (["ab", "HEAD", "HEAD", "--ks", "0"], "k must be at least 1, got 0"),
    (["ab", "HEAD", "HEAD", "--budget", "0"], "--budget must be seconds in (0, 3600], got 0.0"),
    (["ab", "HEAD", "HEAD", "--pairs", "1"], "--pairs must be at least 2, got 1"),
    (["ab", "HEAD", "HEAD", "--cpu", "4096"], "--cpu '4096': one CPU this process may use"),
    (["ab", "HEAD", "HEAD", "--chars", "300"], "exceeds the context of 256"),
    (["ab", "HEAD", "HEAD", "--prompt", "ROMEO: é"], "'é' is not in the vocabulary"),
    (["ab", "HEAD", "HEAD", "--seed", "-1"], "--seed must be at least 0, got -1"),
    (["ab", "HEAD", "HEAD", "--temperature", "nan"], "--temperature must be 0 or a finite number >= 1e-30"),
    (["ab", "HEAD", "HEAD", "--threads", "0"], "--threads must be at least 1, got 0"),
    (["ab", "HEAD", "HEAD", "--json=1"], "argument --json: ignored explicit argument '1'"),
    (["ab", "HEAD", "HEAD", "--no-work", "--counter", "callgrind"], "--counter callgrind names the work rows' counter "
     "and --no-work leaves them out"),
    (["ab", "HEAD", "HEAD", "--no-work", "--count-batched"], "--count-batched counts more work rows and --no-work "
     "leaves them out"),
    (["ab", "HEAD", "HEAD", "--no-work", "--count-all-ks"], "--count-all-ks counts more work rows and --no-work "
     "leaves them out"),
    (["ab", "HEAD", "HEAD", "--counter", "cycles"], "argument --counter: invalid choice: 'cycles' (choose from"),
    (["ab", "HEAD", "HEAD", "--out", "{dir}"], ": a folder; give a file name (default specdec-ab.json)"),
    (["calibrate-work", "--aa", "0"], "--aa must be at least 1, got 0"),
    (["calibrate-work", "--null", "0"], "--null must be at least 1, got 0"),
    (["calibrate-work", "--drafts", "nope"], "unknown draft 'nope'"),
    (["calibrate-work", "--ks", "0"], "k must be at least 1, got 0"),
    (["calibrate-work", "--backend", "tpu"], "argument --backend: invalid choice: 'tpu' (choose from"),
    (["calibrate-work", "--counter", "cycles"], "argument --counter: invalid choice: 'cycles' (choose from"),
    (["batch", "--batches", "1", "0"], "--batches: 0 is not a batch size (allowed: 1 to 256)"),
    (["batch", "--budget", "0"], "--budget must be a positive number of seconds, got 0.0"),
    (["batch", "-k", "0"], "-k must be at least 1, got 0"),
    (["batch", "--drafts", "nope"], "unknown draft 'nope'"),
    (["batch", "--chars", "300"], "exceeds the context of 256"),
    (["batch", "--draft-k", "ngram"], "--draft-k: 'ngram' is not NAME=K (e.g. ngram=4)"),
    (["batch", "--drafts", "bigram", "--draft-k", "ngram=4"], "--draft-k: 'ngram' is not among --drafts"),
    (["batch", "--checkpoint", "{dir}/t.pt"], "not found; retrain it with `specdec train"),
    (["batch", "--target", "hf:{dir}/a-file", "--backend", "numpy"], "--backend numpy is for the shipped model; "),
    (["batch", "--dtype", "half"], "argument --dtype: invalid choice: 'half'"),
    (["batch", "--allow-download"], "--allow-download is for Hugging Face model ids"),
    (["batch", "--backend", "tpu"], "argument --backend: invalid choice: 'tpu' (choose from"),
    (["batch", "--quick=1"], "argument --quick: ignored explicit argument '1'"),
    (["batch", "--pairs", "0"], "--pairs must be at least 1, got 0"),
    (["batch", "--threads", "0"], "--threads must be at least 1, got 0"),
    (["batch", "--workload", "hamlet99"], "unknown workload 'hamlet99'"),
    (["batch", "--out", "{dir}/a-file"], "--out {dir}/a-file: {dir}/a-file is not a directory"),
    (["batch", "--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    (["build-server", "--version", "latest"], "--version 'latest' is not a llama-cpp-python release"),
    (["build-server", "--jobs", "0"], "--jobs must be at least 1, got 0"),
    (["load", "--server", "{dir}/a-file"], "--server {dir}/a-file is not an executable file"),
    (["load", "--model", "{dir}/nowhere.gguf"], "--model {dir}/nowhere.gguf does not exist"),
    (["load", "--draft-model", "{dir}/nowhere.gguf"], "--draft-model {dir}/nowhere.gguf does not exist"),
    (["load", "--spec-type", "eagle"], "--spec-type 'eagle' is not one of the server's kinds (allowed: draft-simple"),
    (["load", "--n-max", "0"], "--n-max must be at least 1, got 0"),
    (["load", "--slots", "0"], "--slots must be at least 1, got 0"),
    (["load", "--port", "70000"], "--port 70000 is not a port (allowed: 1-65535)"),
    (["load", "--url", "ftp://127.0.0.1:1", "--baseline-url", "http://127.0.0.1:1"], "is not a server URL"),
    (["load", "--baseline-url", "http://127.0.0.1:1"], "give both --url"),
    (["load", "--concurrency", "0"], "--concurrency '0': 0 is not allowed (allowed: whole numbers of clients"),
    (["load", "--concurrency", "8"], "--concurrency c=8 is more clients than --slots 4"),
    (["load", "--rates", "-1"], "--rates '-1': -1 is not allowed (allowed: positive requests per second"),
    (["load", "--burstiness", "0"], "--burstiness must be a positive number (1 is Poisson), got 0.0"),
    (["load", "--visits", "1"], "--visits must be at least 2, got 1"),
    (["load", "--requests", "1"], "--requests must be at least 2, got 1"),
    (["load", "--warmup", "-1"], "--warmup must be at least 0, got -1"),
    (["load", "--max-tokens", "300"], "with 300 generated and k up to 4 it must be at most"),
    (["load", "--temperature", "nan"], "--temperature must be 0 or a finite number >= 1e-30"),
    (["load", "--slo", "ttft=-5"], "--slo 'ttft=-5' is not allowed (allowed: ttft, tpot, e2el=MILLISECONDS"),
    (["load", "--order", "random"], "argument --order: invalid choice: 'random'"),
    (["load", "--budget", "0"], "--budget must be a positive number of seconds, got 0.0"),
    (["load", "--out", "{dir}/a-file/sub"], "{dir}/a-file is not a directory"),
]
if not torch.cuda.is_available():
    BAD += [(["generate", "--device", "cuda"], "--device cuda: no CUDA device is available here"),
            (["verify", "--device", "cuda"], "--device cuda: no CUDA device is available here"),
            (["report", "--device", "cuda"], "--device cuda: no CUDA device is available here")]


@pytest.fixture(scope="module")
def bad_runs(tmp_path_factory):
    """Every BAD case through `python -m specdec.cli`, each in a fresh empty folder (see tests/cli_runs.py:
    one process imports specdec, each case is a forked child)."""
    fixtures = tmp_path_factory.mktemp("fixtures")
    (fixtures / "a-file").write_text("x")
    (fixtures / "a-folder").mkdir()
    (fixtures / "not-json.json").write_text("{")
    (fixtures / "not-report.json").write_text('{"a": 1}')
    doc = {"machine": {}, "settings": {}, "costs": {"target_pass_us": 400.0, "drafts": {"bigram": {"c": float("nan")}}},
           "acceptance": [], "speedup": []}
    (fixtures / "nan-report.json").write_text(json.dumps(doc))
    doc["costs"]["drafts"]["bigram"] = {"char_us": 7.0}
    (fixtures / "old-report.json").write_text(json.dumps(doc))
    before = sorted(p.name for p in fixtures.rglob("*"))
    cwds = [tmp_path_factory.mktemp(f"bad{i}") for i in range(len(BAD))]
    cases = [[[a.replace("{dir}", str(fixtures)) for a in args], str(cwd)] for (args, _), cwd in zip(BAD, cwds)]
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("cli_runs.py"))], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=600, check=True)
    results = json.loads(proc.stdout)
    assert sorted(p.name for p in fixtures.rglob("*")) == before  # nothing written beside the fixtures
    return str(fixtures), [(r, sorted(p.name for p in cwd.iterdir())) for r, cwd in zip(results, cwds)]


@pytest.mark.parametrize("i", range(len(BAD)), ids=[" ".join(args) or "(none)" for args, _ in BAD])
def test_bad_input_is_one_line_exit_code_2_and_writes_nothing(bad_runs, i):
    fixtures, results = bad_runs
    ((code, stdout, stderr), written), message = results[i], BAD[i][1].replace("{dir}", fixtures)
    assert code == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], stderr
    assert "Traceback" not in stderr and stdout == ""
    assert written == []


@pytest.mark.parametrize("args,message", [
    (["generate", "--threads", "0"], "specdec generate: error: --threads must be at least 1, got 0"),
    (["generate", "--draft", "ngram", "-k", "4", "--temperature", "nan"], "--temperature must be 0 or a finite number >= 1e-30"),
    (["report", "--out", "report.md", "--quick"], "--out report.md: "),
])
def test_the_installed_command_fails_the_same_way(tmp_path, args, message):
    """The console script users run, in a plain subprocess, on the cases the issue names."""
    (tmp_path / "report.md").write_text("mine")
    proc = subprocess.run([str(Path(sys.executable).with_name("specdec")), *args], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["report.md"] and (tmp_path / "report.md").read_text() == "mine"


def test_every_option_of_every_command_has_a_bad_value_tried():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, p in sub.choices.items():
        tried = [args for args, _ in BAD if args[:1] == [command]]
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            names = action.option_strings or [action.dest]
            hit = any(any(a == n or a.startswith(n + "=") for n in names for a in args) for args in tried)
            if not action.option_strings:  # a positional: some case gives a bad value for it
                hit = len(tried) > 0
            assert hit, f"specdec {command} {names[0]}: no bad value tried"


def test_corrupt_checkpoint_is_one_line(tmp_path):
    bad = tmp_path / "corrupt.pt"
    bad.write_bytes(b"\x80\x02garbage")
    proc = run("info", "--checkpoint", str(bad), check=False)
    assert proc.returncode == 2 and "is corrupt" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_train_writes_a_checkpoint(tmp_path):
    out = tmp_path / "t.pt"
    proc = run("train", "--steps", "3", "--batch", "2", "--out", str(out))
    assert out.is_file() and "wrote" in proc.stdout and "step 3/3" in proc.stderr


@pytest.mark.parametrize("argv,code", [([], 1), (["--min-effect", "0"], 1), (["--min-effect", "0.1"], 0)])
def test_compare_min_effect_sets_the_smallest_change_worth_a_verdict(tmp_path, capsys, argv, code):
    """bigram's c 6 % dearer in B, 60 samples a side: significant, so named WORSE by default (no floor) and with
    --min-effect 0; with --min-effect 0.1 it is below the smallest change worth a verdict (exit 0)."""
    a, b = _doc(1, n=60), _doc(2, n=60)
    b["costs"]["drafts"]["bigram"]["c_samples"] = [x * 1.06 for x in b["costs"]["drafts"]["bigram"]["c_samples"]]
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    assert cli.main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), *argv]) == code
    worse = [line for line in capsys.readouterr().out.splitlines() if line.startswith("WORSE")]
    assert [w.split(", t-test")[0] for w in worse] == (
        [] if code == 0 else ["WORSE: bigram c: median 0.0199 -> 0.0211 (+6.1%)"])


def test_report_takes_drafts_repeated_or_listed():
    """`--draft A --draft B` (as verify takes them) and `--drafts A B` both measure every draft named."""
    args = cli.build_parser().parse_args(["report", "--draft", "hf:x", "--draft", "prompt-lookup", "--drafts", "a", "b"])
    assert args.drafts == ["hf:x", "prompt-lookup", "a", "b"]
    assert cli.build_parser().parse_args(["report"]).drafts is None


# --- the command lines against --help ------------------------------------------------------------------------


def _subcommands(parser) -> dict:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_specdec_help_names_every_subcommand():
    parser = cli.build_parser()
    names = list(_subcommands(parser))
    assert parser.description == f"The `specdec` command: {', '.join(names)}."
    assert "batch" in names and "load" in names  # the ones an older description left out
    text = parser.format_help()
    assert all(name in text for name in names)


@pytest.mark.parametrize("argv", [["--draft", "bigram", "int4"], ["--draft", "bigram", "--draft", "int4"],
                                  ["--drafts", "bigram", "int4"], ["--draft", "bigram", "--drafts", "int4"]])
def test_verify_takes_several_drafts_listed_or_repeated(argv):
    """README's `verify --draft a b` as users type it, and the repeated option, name the same drafts."""
    assert cli.build_parser().parse_args(["verify", *argv]).draft == ["bigram", "int4"]
    assert cli.build_parser().parse_args(["verify"]).draft is None


def test_verify_with_two_drafts_listed_runs_both(capsys):
    assert cli.main(["verify", "--draft", "bigram", "int4", "-k", "2", "--samples", "200", "--json"]) == 0
    assert [r["draft"] for r in json.loads(capsys.readouterr().out)] == ["bigram", "int4"]


def test_overhead_help_says_what_backend_all_does_there():
    helps = {c: next(a.help for a in p._actions if a.dest == "backend")
             for c, p in _subcommands(cli.build_parser()).items() if c in ("report", "overhead")}
    assert "all: one full report per backend" in helps["report"]
    assert "all: the floor table and where the time goes for each backend" in helps["overhead"]
    assert "report" not in helps["overhead"]


def _code_defaults() -> dict:
    """(command, option dest) -> what the code does when the option is not given (its parser default is None), as
    the help states it: each from the constant the code reads."""
    from specdec.cli import ab_cmd, asv_cmd, parser
    from specdec.measure import exactness
    from specdec.measure import workload as wl
    from specdec.measure.pairs import MIN_PAIRS
    from specdec.model import grow
    from specdec.report import build

    assert build.FULL["min_pairs"] == build.QUICK["min_pairs"] == MIN_PAIRS  # the help's one number for both
    return {
        ("generate", "k"): [str(parser.GENERATE_K)],
        ("verify", "samples"): [str(parser.VERIFY_SAMPLES), str(exactness.JOINT_SAMPLES)],
        ("report", "budget"): [f"{build.FULL['budget']:g}", f"{build.QUICK['budget']:g}"],
        ("report", "ks"): [" ".join(map(str, build.DEFAULT_KS))],
        ("report", "pairs"): [str(MIN_PAIRS)],
        ("batch", "pairs"): [str(MIN_PAIRS)],
        ("report", "workload"): [wl.DEFAULT_WORKLOAD],
        ("batch", "workload"): [wl.DEFAULT_WORKLOAD],
        ("ab", "ks"): [" ".join(map(str, ab_cmd.DEFAULT_KS))],
        ("ab", "drafts"): [" ".join(ab_cmd.DEFAULT_DRAFTS)],
        ("calibrate-work", "ks"): [" ".join(map(str, ab_cmd.DEFAULT_KS))],
        ("calibrate-work", "drafts"): [" ".join(ab_cmd.DEFAULT_DRAFTS)],
        ("asv-init", "ks"): [" ".join(map(str, asv_cmd.DEFAULT_KS))],
        ("export-gguf", "widen"): [str(grow.DEFAULT_WIDEN)],
        ("export-gguf", "layers"): [str(grow.DEFAULT_LAYERS)],
        ("export-gguf", "mix"): [f"{grow.DEFAULT_MIX:g}"],
    }


# Numbers a help states for an option whose default is resolved in code without a constant to compare against
# (a literal where it is used): named here, so that a new one must be classified.
UNCHECKED = {("report", "seed"): "0: workload.single's seed for --prompt",
             ("report", "temperature"): "1: an engine report's temperature (engine_cmd)",
             ("load", "concurrency"): "1, 2, 4, ... --slots: load_schedule.doubling (test_load_logic)"}


def _stated(help_: str) -> list[str]:
    """The defaults a help text states: `(default X` and `quick X`, in order."""
    import re

    return re.findall(r"\(default ([^);,:]+)", help_) + re.findall(r"[ (]quick (\d[\d.]*)", help_)


def _shown(value) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(_shown, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def test_no_help_states_a_default_the_code_does_not_use():
    """Every `(default X)` in every subcommand's help against the parser's default, or, where that is None, the
    constant the code reads instead (`batch --pairs` once said quick 3 while the code gave 5)."""
    code = _code_defaults()
    wrong, unknown = [], []
    for command, p in _subcommands(cli.build_parser()).items():
        for action in p._actions:
            stated = _stated(action.help or "")
            key = (command, action.dest)
            if not stated or isinstance(action.default, bool):
                continue
            if action.default is not None:
                expected = [_shown(action.default)]
            elif key in code:
                expected = code[key]
            elif key in UNCHECKED or not any(s[0].isdigit() for s in stated):
                continue  # words ("every draft the target can have"), or a literal named in UNCHECKED
            else:
                unknown.append(key)
                continue
            if stated != expected:
                wrong.append((command, action.option_strings or action.dest, stated, expected))
    assert wrong == [] and unknown == []
    assert set(code) <= {(c, a.dest) for c, p in _subcommands(cli.build_parser()).items() for a in p._actions}
