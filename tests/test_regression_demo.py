"""The asv regression demonstration: its four commits apply to today's code and run, its verdicts read asv's
output as documented, and --size sets every slowdown. The demonstration itself (per-commit environments, timed
for tens of minutes) is run by hand: `python tools/regression_demo.py` (docs/asv.md)."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent


def _demo():
    spec = importlib.util.spec_from_file_location("regression_demo", ROOT / "tools" / "regression_demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["regression_demo"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_injected_regressions_apply_and_run(tmp_path):
    """Every anchor is still where the demo edits (else it would fail 20 minutes in), and the slowed code runs."""
    demo = _demo()
    shutil.copytree(ROOT / "specdec", tmp_path / "specdec")
    for key, case in demo.CASES.items():
        path = tmp_path / case.path
        edited = demo._apply(path.read_text(), case.edits)
        compile(edited, str(path), "exec")
        if key != "d":
            path.write_text(edited)  # a, b and c touch different files: all three at once below
    code = ("import specdec, specdec.decoding.generate as d, specdec.decoding.drafts as r, specdec.model.gpt as m\n"
            "assert all(hasattr(x, '_demo_spin') for x in (d, r, m)), 'a regression was not injected'\n"
            "t = specdec.load_target()\n"
            "out = specdec.speculative_generate(t, specdec.make_draft('bigram', t), 'ROMEO:', 30, k=4, seed=0)\n"
            "assert len(out.text) == 30 and len(specdec.generate(t, 'ROMEO:', 30, seed=0).text) == 30\n"
            "print(specdec.__file__)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().startswith(str(tmp_path))


def test_verdicts_read_asv_tables():
    demo = _demo()
    table = ("| +        | 1.2±0.01 | 1.5±0.02 |  1.26 | "
             "bench_drafts.DraftCharacter.track_relative_time(1, 'eager', 'bigram') |\n"
             "| -        | 0.9 | 0.8 |  0.89 | bench_drafts.DraftCost.track_c(1, 'int8') |\n")
    plus = table.splitlines()[0]
    assert demo.verdict("a", demo.CASES["a"], plus)[0]  # the bigram's row flagged, nothing else
    assert not demo.verdict("a", demo.CASES["a"], table)[0]  # a '-' elsewhere is a false alarm too (int8 untouched)
    assert not demo.verdict("a", demo.CASES["a"], plus.replace("| +", "| -"))[0]  # the right row, the wrong way
    assert not demo.verdict("d", demo.CASES["d"], table)[0]  # any mark at all is one for the no-op
    assert demo.verdict("d", demo.CASES["d"], "BENCHMARKS NOT SIGNIFICANTLY CHANGED.")[0]
    assert not demo.verdict("a", demo.CASES["a"], table.replace("'bigram'", "'int4'"))[0]


def test_verdicts_read_the_backend_parameter():
    """(b) needs half of the 18 eager speedup rows; (c) the eager single pass (the demo slows GPT.forward)."""
    demo = _demo()
    row = "| +        | 0.9 | 1.0 |  1.11 | bench_speedup.Speedup.track_time_ratio(1, '{b}', 'bigram', {k}) |"
    eager = "\n".join(row.format(b="eager", k=k) for k in range(9))
    fused = "\n".join(row.format(b="fused", k=k) for k in range(9))
    assert demo.verdict("b", demo.CASES["b"], eager)[0]
    assert demo.verdict("b", demo.CASES["b"], eager + "\n" + fused)[0]  # the other backend's slow too: expected
    assert not demo.verdict("b", demo.CASES["b"], fused)[0]  # nine rows, but none of them eager
    passes = "| +        | 0.9 | 1.0 |  1.11 | bench_target.TargetPass.track_relative_time(1, '{b}', 1) |"
    assert demo.verdict("c", demo.CASES["c"], passes.format(b="eager"))[0]
    assert not demo.verdict("c", demo.CASES["c"], passes.format(b="fused"))[0]


def test_size_sets_every_slowdown_and_its_label():
    demo = _demo()
    small = demo.cases({"a": 0.05, "b": 0.05, "c": 0.05})
    assert [c.label.split()[0] for c in small.values()][:1] == ["+5%"] and "5% slower" in small["b"].label
    src = (ROOT / small["b"].path).read_text()
    edited = demo._apply(src, small["b"].edits)
    assert edited.count("_demo_spin(0.05, demo_since)") == 2 and "_demo_spin(0.15" not in edited
    assert demo.CASES["a"].label.startswith("+20%")  # the defaults stay as documented
