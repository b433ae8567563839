"""The command line on the user's own models (issue 26): `export-hf`, then `--target hf:PATH` and `--draft
hf:PATH` through `generate`, `verify`, `info` and `report`, and the bad input each one line, exit 2, nothing
written. The exported pair is the shipped pair, so every figure is the shipped model's own; the tiny random
Llama (conftest's `tiny_llama_dir`) is a second architecture, counted in tokens."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub: no test may reach the network

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import specdec
from specdec import cli
from specdec.decoding import rule
from specdec.model import hf


def _main(argv: list[str]) -> tuple[int, str, str]:
    """`specdec ARGV` in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`specdec export-hf OUT` once: (OUT, its stdout)."""
    out = tmp_path_factory.mktemp("cli-export") / "pair"
    code, stdout, stderr = _main(["export-hf", str(out)])
    assert code == 0, stderr
    return out, stdout


@pytest.fixture(scope="module")
def T(exported):
    return f"hf:{exported[0] / 'target'}"


@pytest.fixture(scope="module")
def SMALL(exported):
    return f"hf:{exported[0] / 'small'}"


def test_export_hf_prints_the_two_folders_it_wrote(exported):
    out, stdout = exported
    assert stdout == f"{out / 'target'}\n{out / 'small'}\n"
    for name in ("target", "small"):
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in (out / name).iterdir()}
        assert json.loads((out / name / "config.json").read_text())["model_type"] == "gpt2"


@pytest.mark.parametrize("args", [["--temperature", "0"], ["--seed", "3"], ["--draft", "ngram", "--seed", "1"]])
def test_generate_on_the_exported_target_equals_the_shipped_model(T, args):
    base = ["generate", "--chars", "80", *args]
    want = _main(base)
    assert want[0] == 0 and len(want[1]) == len("ROMEO:") + 80 + 1
    assert _main(base + ["--target", T]) == want  # the same text, the same "chars 80 ..." line


def test_generate_with_the_exported_small_model_as_draft_equals_the_shipped_small(T, SMALL):
    code, out, err = _main(["generate", "--target", T, "--draft", SMALL, "--chars", "60", "--seed", "2", "--json"])
    want = json.loads(_main(["generate", "--draft", "small", "--chars", "60", "--seed", "2", "--json"])[1])
    got = json.loads(out)
    assert code == 0 and err == "" and got.pop("draft") == SMALL and want.pop("draft") == "small"
    assert got == want


def test_verify_on_the_exported_target_is_exact_and_draws_what_the_shipped_model_draws(T, SMALL):
    """Every draft that fits the exported target; the same seed gives the shipped model's draws, so each row's
    TV is the shipped row's (the exported small model's is the shipped small draft's)."""
    args = ["verify", "--samples", "4000", "--json"]
    code, out, _ = _main(args + ["--target", T] + [a for d in ("bigram", "ngram", SMALL, "prompt-lookup")
                                                   for a in ("--draft", d)])
    rows = json.loads(out)
    assert code == 0 and [r["draft"] for r in rows] == ["bigram", "ngram", SMALL, "prompt-lookup"]
    assert [r["verdict"] for r in rows] == ["exact"] * 4
    native = json.loads(_main(args + [a for d in ("bigram", "ngram", "small", "prompt-lookup")
                                      for a in ("--draft", d)])[1])
    for r, n in zip(rows, native):
        assert r["tv"] == pytest.approx(n["tv"], abs=1e-6) and r["samples"] == n["samples"] == 4000


def test_verify_through_the_cli_catches_a_broken_rule_on_an_hf_target(T, monkeypatch):
    """Negative control: a rule that accepts every draft is a CHECK through the same command."""
    monkeypatch.setattr(rule, "accept_reject", lambda p, q, drafted, rng: (len(drafted), 0))
    code, out, _ = _main(["verify", "--target", T, "--draft", "bigram", "--samples", "20000", "--json"])
    (row,) = json.loads(out)
    assert code == 0 and row["verdict"] == "CHECK"


def test_trees_on_the_exported_target_equal_the_shipped_models(T):
    gen = ["generate", "--draft", "bigram", "--tree", "4x2x1", "--chars", "60", "--seed", "3"]
    want = _main(gen)
    assert want[0] == 0 and "tree 4x2x1" in want[2]
    assert _main(gen + ["--target", T]) == want
    ver = ["verify", "--tree", "4x2", "--draft", "ngram", "--samples", "1000", "--json"]
    (row,) = json.loads(_main(ver + ["--target", T])[1])
    (native,) = json.loads(_main(ver)[1])
    assert (row["tree"], row["samples"]) == ("4x2", 1000) and row["tv"] == pytest.approx(native["tv"], abs=1e-6)


def test_trees_on_a_model_without_a_4d_mask_are_one_line(T, monkeypatch, tmp_path):
    monkeypatch.setattr(hf, "TREE_ATTENTION", ("eager",))  # as if sdpa, which the model runs, took no 4-D mask
    code, out, err = _main(["generate", "--target", T, "--draft", "bigram", "--tree", "4x2"])
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err == (f"specdec generate: error: --tree: token trees need a model that accepts a 4-D attention mask "
                   f"(attention eager); {T[len('hf:'):]!r} runs 'sdpa' attention\n")
    code, out, err = _main(["report", "--target", T, "--trees", "4x2", "--out", str(tmp_path / "rep")])
    assert (code, out, err.count("\n")) == (2, "", 1) and err.startswith("specdec report: error: --trees: token trees "
                                                                       "need a model that accepts a 4-D attention mask")
    assert list(tmp_path.iterdir()) == []


def test_info_describes_an_hf_target(T, exported, target):
    code, out, _ = _main(["info", "--target", T, "--json"])
    info = json.loads(out)
    # GPT-2's Conv1D layers carry biases (zero here) the shipped Linears lack: q|k|v 3C, attention out C, MLP
    # in 4C and out C, 9C a layer
    params = target.num_params() + target.config.n_layer * 9 * target.config.n_embd
    assert code == 0
    assert {k: info[k] for k in ("name", "architecture", "vocab_size", "context", "units", "dtype", "params",
                                 "weight_bytes")} == {
        "name": str(exported[0] / "target"), "architecture": "gpt2", "vocab_size": 84, "context": 256,
        "units": "characters", "dtype": "float32", "params": params, "weight_bytes": 4 * params}
    half = json.loads(_main(["info", "--target", T, "--dtype", "bfloat16", "--json"])[1])
    assert (half["dtype"], half["weight_bytes"]) == ("bfloat16", 2 * params)


# --- a second architecture, in tokens ------------------------------------------------------------------------


def test_a_tiny_llama_generates_through_the_cli_in_tokens(tiny_llama_dir):
    target = specdec.load_hf(tiny_llama_dir)
    want = specdec.generate(target, "ROMEO:", 20, seed=0)
    code, out, err = _main(["generate", "--target", f"hf:{tiny_llama_dir}", "--chars", "20"])
    assert code == 0 and out == "ROMEO:" + want.text + "\n"
    assert err == "tokens 20  target passes 20  tokens per pass 1.00\n"
    code, out, err = _main(["generate", "--target", f"hf:{tiny_llama_dir}", "--draft", "prompt-lookup", "--chars",
                            "20", "--temperature", "0"])
    assert code == 0 and out == "ROMEO:" + specdec.generate(target, "ROMEO:", 20, temperature=0).text + "\n"
    assert err.startswith("tokens 20  target passes ") and "  draft prompt-lookup k 4  " in err


def test_a_tiny_llama_verifies_exact_through_the_cli(tiny_llama_dir):
    code, out, err = _main(["verify", "--target", f"hf:{tiny_llama_dir}", "--draft", "bigram", "--draft",
                            "prompt-lookup", "--samples", "4000"])
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert lines[0].startswith("exactness of the first token, temperature 1.0")
    assert [line.split()[0] for line in lines[2:]] == ["bigram", "prompt-lookup"]
    assert [line.split()[-1] for line in lines[2:]] == ["exact", "exact"]


def test_a_tiny_llamas_default_drafts_are_those_it_can_have(tiny_llama_dir):
    """Not the shipped GPT's quantized copies, nor the small model (it reads characters): the table drafts
    counted in the Llama's tokens and the prompt lookup."""
    code, out, err = _main(["verify", "--target", f"hf:{tiny_llama_dir}", "--samples", "100", "--json"])
    assert code == 0 and err == "" and [r["draft"] for r in json.loads(out)] == ["bigram", "ngram", "prompt-lookup"]


# --- a report end to end -----------------------------------------------------------------------------------


def test_report_on_the_exported_target(T, tmp_path):
    out = tmp_path / "rep"
    code, stdout, err = _main(["report", "--quick", "--budget", "10", "--target", T, "--drafts", "bigram",
                               "--ks", "2", "--trees", "--no-work", "--out", str(out)])
    assert code == 0, err
    doc = json.loads((out / "report.json").read_text())
    assert doc["settings"]["drafts"] == ["bigram"] and {r["draft"] for r in doc["speedup"]} == {"bigram"}
    assert doc["settings"]["ks"] == [2] and doc["settings"]["trees"] == []
    assert (doc["settings"]["target"]["architecture"], doc["settings"]["target"]["name"]) == ("gpt2", T[len("hf:"):])
    assert (out / "report.md").read_text().startswith(stdout.strip().splitlines()[0])


# --- bad input: one line, exit 2, nothing written ----------------------------------------------------------


@pytest.fixture(scope="module")
def bad_runs(exported, tiny_llama_dir, tmp_path_factory):
    """Each case as a user runs it (`python -m specdec.cli`, forked from one process by tests/cli_runs.py), in
    an empty working directory that must stay empty; `{out}` is a report folder that must never be created."""
    fixtures = tmp_path_factory.mktemp("hf-fixtures")
    (fixtures / "empty").mkdir()
    (fixtures / "notes").mkdir()
    (fixtures / "notes" / "README.txt").write_text("not a model")
    subs = {"{T}": str(exported[0] / "target"), "{SMALL}": str(exported[0] / "small"), "{LLAMA}": str(tiny_llama_dir),
            "{dir}": str(fixtures), "{out}": str(fixtures / "never")}
    before = sorted(str(p) for p in fixtures.rglob("*"))
    cwds = [tmp_path_factory.mktemp(f"hf-bad{i}") for i in range(len(BAD))]

    def fill(a: str) -> str:
        for key, value in subs.items():
            a = a.replace(key, value)
        return a

    cases = [[[fill(a) for a in args], str(cwd)] for (args, _), cwd in zip(BAD, cwds)]
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("cli_runs.py"))], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=600, check=True,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert sorted(str(p) for p in fixtures.rglob("*")) == before  # no report folder, nothing beside the fixtures
    return fill, [(r, sorted(p.name for p in cwd.iterdir())) for r, cwd in zip(json.loads(proc.stdout), cwds)]


BAD = [
    (["generate", "--target", "hf:{dir}/nowhere"], "no model folder '{dir}/nowhere' here and no model id "
     "'{dir}/nowhere' in the local Hugging Face cache"),
    (["verify", "--target", "hf:{dir}/empty"], "'{dir}/empty' is not a Hugging Face model folder: it has no "
     "config.json"),
    (["generate", "--target", "hf:{dir}/notes"], "'{dir}/notes' is not a Hugging Face model folder: it has no "
     "config.json"),
    (["info", "--target", "hf:{dir}/notes/README.txt"], "is a file, not a model folder"),
    (["generate", "--target", "hf:specdec-test/not-a-cached-model"], "no model id 'specdec-test/not-a-cached-model' "
     "in the local Hugging Face cache"),
    (["verify", "--draft", "hf:specdec-test/not-a-cached-model"], "pass --allow-download"),
    (["report", "--quick", "--target", "hf:specdec-test/not-a-cached-model", "--out", "{out}"],
     "no model id 'specdec-test/not-a-cached-model' in the local Hugging Face cache"),
    (["generate", "--target", "hf:{LLAMA}", "--draft", "hf:{SMALL}"],
     "the draft's tokenizer (TokenizersBackend of '{SMALL}', 84 tokens, 84 logits) differs from the target's "
     "(TokenizersBackend of '{LLAMA}', 320 tokens, 320 logits); a draft model must share the target's vocabulary"),
    (["report", "--quick", "--target", "hf:{LLAMA}", "--drafts", "bigram", "hf:{SMALL}", "--out", "{out}"],
     "84 tokens, 84 logits) differs from the target's (TokenizersBackend of '{LLAMA}', 320 tokens"),
    (["verify", "--target", "hf:{T}", "--draft", "int8"], "draft 'int8' is a quantized copy of the shipped GPT and "
     "cannot be built from a HFTarget target (available for it: bigram, ngram, prompt-lookup"),
    (["report", "--quick", "--target", "hf:{LLAMA}", "--drafts", "small", "--out", "{out}"],
     "draft 'small' reads the corpus's characters; the HFTarget target's vocabulary is another"),
    (["generate", "--target", "hf:{T}", "--backend", "fused"], "--backend fused is for the shipped model"),
    (["overhead", "--target", "hf:{T}", "--backend", "all"], "--backend all is for the shipped model"),
    (["report", "--target", "hf:{T}", "--trees", "4x2", "--dtype", "float64"], "argument --dtype: invalid choice"),
    (["generate", "--target", "hf:{T}", "--draft", "bigramm"], "unknown draft 'bigramm' (available: bigram, int8, "
     "int4, ngram, small, int8-dynamic, prompt-lookup, shipped, medusa, eagle, hf:PATH, eagle3:PATH, MODULE:CALLABLE)"),
    (["export-hf", "{T}/config.json"], "config.json is a file, not a folder"),
]


@pytest.mark.parametrize("i", range(len(BAD)), ids=[" ".join(args) for args, _ in BAD])
def test_bad_hf_input_is_one_line_exit_2_and_writes_nothing(bad_runs, i):
    fill, results = bad_runs
    ((code, stdout, stderr), written), message = results[i], fill(BAD[i][1])
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0], stderr
    assert lines[0].startswith(f"specdec {BAD[i][0][0]}: error: ") and stdout == "" and written == []
