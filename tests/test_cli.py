"""The command line, run as a user runs it: in a subprocess."""

import json
import os
import subprocess
import sys

import pytest

CLI = [sys.executable, "-m", "specdec.cli"]


def run(*args, check=True):
    proc = subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_generate_prints_text_and_passes_and_is_reproducible():
    a = run("generate", "--prompt", "ROMEO:", "--chars", "200", "--seed", "0")
    assert a.stdout.startswith("ROMEO:") and "target passes 200" in a.stdout
    assert run("generate", "--prompt", "ROMEO:", "--chars", "200", "--seed", "0").stdout == a.stdout


def test_generate_json_speculative():
    out = json.loads(run("generate", "--draft", "int4", "-k", "4", "--chars", "50", "--json").stdout)
    assert len(out["text"]) == 50 and out["k"] == 4
    assert out["acceptance"] == out["accepted"] / out["drafted"]
    assert sum(out["accepted_per_position"]) == out["draft_calls"]


def test_info_json_has_the_documented_keys():
    info = json.loads(run("info", "--json").stdout)
    for key in ("params", "weight_bytes_float32", "vocab_size", "context", "val_loss", "checkpoint_sha256",
                "torch_version", "threads"):
        assert key in info
    assert info["params"] == 645_888 and info["weight_bytes_float32"] == 4 * 645_888
    assert info["vocab_size"] == 84 and info["context"] == 256 and info["val_loss"] <= 1.75


def test_verify_json_rows():
    rows = json.loads(run("verify", "--draft", "bigram", "--draft", "int4", "-k", "2", "--samples", "3000",
                          "--json").stdout)
    assert [r["draft"] for r in rows] == ["bigram", "int4"]
    for r in rows:
        assert set(r) >= {"draft", "k", "samples", "tv", "baseline_tv", "p_value"}
        assert r["k"] == 2 and r["samples"] == 3000


@pytest.mark.parametrize("args,message", [
    (["generate", "--prompt", "ROMEO: é"], "'é' is not in the vocabulary"),
    (["generate", "--chars", "0"], "chars must be at least 1"),
    (["generate", "--chars", "300"], "exceeds the context of 256"),
    (["generate", "--prompt", ""], "prompt is empty"),
    (["generate", "--temperature", "-1"], "temperature must be >= 0"),
    (["generate", "--draft", "int3"], "unknown draft 'int3' (available: bigram, int8, int4"),
    (["generate", "--draft", "bigram", "-k", "0"], "-k must be at least 1"),
    (["generate", "--draft", "bigram", "-k", "300"], "k=300 overflows the context"),
    (["generate", "-k", "3"], "-k needs --draft"),
    (["generate", "--checkpoint", "/nonexistent/x.pt"], "not found; retrain it with `specdec train"),
    (["verify", "--draft", "nope"], "unknown draft 'nope'"),
    (["verify", "-k", "0"], "-k must be at least 1"),
    (["report", "--ks", "0"], "k must be at least 1"),
    (["report", "--threads", "0"], "--threads must be at least 1"),
    (["report", "--drafts", "bigramm"], "unknown draft 'bigramm'"),
    (["train", "--steps", "0"], "--steps must be at least 1"),
    (["compare", "/nonexistent/a.json", "/nonexistent/b.json"], "no such report.json"),
])
def test_bad_input_is_one_line_and_exit_code_2(args, message):
    proc = run(*args, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_corrupt_checkpoint_is_one_line(tmp_path):
    bad = tmp_path / "corrupt.pt"
    bad.write_bytes(b"\x80\x02garbage")
    proc = run("info", "--checkpoint", str(bad), check=False)
    assert proc.returncode == 2 and "is corrupt" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_train_writes_a_checkpoint(tmp_path):
    out = tmp_path / "t.pt"
    proc = run("train", "--steps", "3", "--batch", "2", "--out", str(out))
    assert out.is_file() and "wrote" in proc.stdout and "step 3/3" in proc.stderr
