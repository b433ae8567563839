"""`specdec generate --tree` and `specdec verify --tree`: one run as a user runs it, the rest in-process."""

import json
import subprocess
import sys

import pytest

from specdec import cli

CLI = [sys.executable, "-m", "specdec.cli"]


def run(*args):
    return subprocess.run(CLI + list(args), capture_output=True, text=True, timeout=600)


def test_generate_tree_json_in_a_subprocess():
    a = run("generate", "--draft", "ngram", "--tree", "4x2x2x1", "--chars", "80", "--json")
    assert a.returncode == 0, a.stderr
    out = json.loads(a.stdout)
    assert len(out["text"]) == 80 and out["tree"] == "4x2x2x1" and out["k"] == 4
    assert out["accepted"] + out["target_passes"] == 80 and len(out["depth_acceptance"]) == 4


def test_generate_tree_budget_uses_the_dynamic_program(capsys):
    assert cli.main(["generate", "--draft", "bigram", "--tree", "16", "--chars", "40", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tree"] == "budget 16" and out["drafted"] <= 16 * out["draft_calls"]


def test_verify_tree_rows(capsys):
    assert cli.main(["verify", "--tree", "4x2", "--draft", "ngram", "--samples", "1000", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["draft"] == "ngram" and row["tree"] == "4x2" and 0 <= row["p_value"] <= 1


@pytest.mark.parametrize("args,message", [
    (["generate", "--draft", "ngram", "--tree", "4x0"], "bad tree shape '4x0'"),
    (["generate", "--draft", "int8", "--tree", "4x2"], "needs a table draft"),
    (["generate", "--tree", "4x2"], "--tree needs --draft"),
    (["generate", "--draft", "ngram", "--tree", "4x2", "-k", "3"], "takes no -k"),
    (["generate", "--draft", "ngram", "--tree", "0"], "between 1 and 255 nodes"),
    (["generate", "--draft", "ngram", "--tree", "16x16"], "at most 255 fit"),
    (["verify", "--tree", "2x", "--draft", "ngram"], "bad tree shape"),
    (["verify", "--tree", "4", "--adaptive"], "--adaptive needs --joint"),
    (["verify", "--tree", "1000x1000x1000"], "has 1001001000 nodes; at most 4096"),
])
def test_bad_tree_arguments_are_one_line_exit_2(capsys, args, message):
    with pytest.raises(SystemExit) as info:  # reported before the target is loaded
        cli.main(args)
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and err.count("\n") == 1
