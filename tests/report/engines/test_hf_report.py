"""The measurement and report layers on the user's own models: the shipped pair exported as GPT-2 (characters)
and a tiny random Llama with its own BPE (tokens), through `specdec.report.measure` end to end (quick, 20 s;
no timing is asserted), plus the pieces by hand: pass FLOPs and bytes from an HF config, text prompts checked
by the target's tokenizer, a draft that proposes nothing."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub: no test may reach the network

import json

import numpy as np
import pytest

pytest.importorskip("transformers")

import specdec
from specdec.decoding.prompt_lookup import PromptLookupDraft
from specdec.measure import exactness
from specdec.measure.anatomy import roofline
from specdec.measure.acceptance import acceptance_over
from specdec.measure.workload import WorkloadError, load_workload, single
from specdec.model import sampling
from specdec.report import figures, render
from specdec.report.anatomy import overhead_text

from tests.conftest import REPORT_TICK, FakeClock

QUIET = dict(quick=True, budget=20, chars=60, ks=[1, 2], threads=1, log=lambda s: None)


def _fixed(**kw) -> dict:
    """A plan that is the same on any machine, at any load, in any test order: the schedule on a fake clock
    (REPORT_TICK a reading, as the shared report's) and the sizing off (its own tests set the costs)."""
    return dict(QUIET, clock=FakeClock(tick=REPORT_TICK), sizing_costs=False, **kw)
NOT_SHIPPED = {"write-up table", "backends", "quantized drafts"}


@pytest.fixture(scope="module")
def gpt2(hf_exported):
    return specdec.load_hf(hf_exported["target"])


@pytest.fixture(scope="module")
def llama(tiny_llama_dir):
    return specdec.load_hf(tiny_llama_dir)


@pytest.fixture(scope="module")
def llama_doc(llama):
    """A Draft object (prompt lookup), a name (bigram) and a shipped-only name (int8, skipped)."""
    return specdec.report.measure(llama, drafts=["bigram", PromptLookupDraft(llama.vocab_size), "int8"],
                                  **_fixed(trees=["4x2x2x1"]))


@pytest.fixture(scope="module")
def gpt2_doc(gpt2):
    return specdec.report.measure(gpt2, drafts=["bigram", "small"], **_fixed(trees=[]))


# --- the reports end to end -----------------------------------------------------------------------------


def test_a_llama_report_is_in_tokens_and_names_what_it_cannot_have(llama_doc, llama, tiny_llama_dir):
    s = llama_doc["settings"]
    assert s["units"] == "tokens" and s["drafts"] == ["bigram", "prompt-lookup"]
    assert s["target"] == {"name": str(tiny_llama_dir), "architecture": "llama", "vocab_size": 320,
                           "context": 256, "tokenizer": type(llama.tokenizer).__name__, "units": "tokens"}
    assert set(llama_doc["unavailable"]) == NOT_SHIPPED  # a Llama's FLOPs are counted: no "overhead floor"
    assert llama_doc["skipped"] == {"int8": "is a quantized copy of the shipped GPT, not of a HFTarget target"}
    assert "acceptance_writeup" not in llama_doc
    assert llama_doc["machine"]["backend"] == "transformers"


def test_a_gpt2_export_report_is_in_characters(gpt2_doc, hf_exported):
    s = gpt2_doc["settings"]
    assert s["units"] == "characters" and s["drafts"] == ["bigram", "small"]
    assert (s["target"]["architecture"], s["target"]["name"]) == ("gpt2", str(hf_exported["target"]))
    assert set(gpt2_doc["unavailable"]) == NOT_SHIPPED
    assert "skipped" not in gpt2_doc


def _configs(rows):
    return {(r["draft"], (r.get("tree") or {}).get("shape")) for r in rows}


@pytest.mark.parametrize("which", ["llama_doc", "gpt2_doc"])
def test_every_configuration_has_exactness_verdicts_and_they_pass(which, request):
    doc = request.getfixturevalue(which)
    ex = [r for r in doc["exactness"] if r["draft"] != "target"]
    assert _configs(ex) == _configs(doc["speedup"])
    assert [r["verdict"] for r in ex] == ["exact"] * len(ex)


def test_the_llama_rows_count_what_prompt_lookup_drafted(llama_doc):
    """prompt lookup proposes fewer than k, or nothing, where nothing repeats: the pooled counts still add up."""
    for r in [r for r in llama_doc["acceptance"] if r["draft"] == "prompt-lookup"]:
        hist = r["accepted_per_position"]
        assert sum(hist) <= r["target_passes"] and r["drafted"] <= r["k"] * sum(hist)
        assert round(r["acceptance"] * r["drafted"]) == sum(i * n for i, n in enumerate(hist))


def test_the_llama_report_renders_tokens_and_its_unavailable_sections(llama_doc, tmp_path):
    md = render.tables(llama_doc)
    assert "tokens per target pass" in md and "chars per target pass" not in md and "chars per pass" not in md
    assert "3 run(s) of 60 tokens" in md and "first generated token" in md
    lines = md.splitlines()
    for section, why in llama_doc["unavailable"].items():
        assert f"- {section}: {why}" in lines
    assert figures.speedup_figure(llama_doc).axes[0].get_xlabel() == "k (tokens drafted per round)"
    written = specdec.report.write(llama_doc, tmp_path, md)
    assert {p.name for p in written} >= {"report.md", "report.json", "speedup.png"}
    back = json.loads((tmp_path / "report.json").read_text())
    assert back["settings"]["units"] == "tokens" and back["headline"]["run"]["units"] == "tokens"
    assert (tmp_path / "report.md").read_text() == md


def test_the_gpt2_report_keeps_characters(gpt2_doc):
    md = render.tables(gpt2_doc)
    assert "chars per target pass" in md and "tokens per target pass" not in md
    assert figures.speedup_figure(gpt2_doc).axes[0].get_xlabel() == "k (characters drafted per round)"


# --- FLOPs and bytes per pass from the model's config ----------------------------------------------------


def test_gpt2_pass_flops_and_bytes_by_hand(gpt2, gpt2_doc):
    cfg = roofline.model_config(gpt2)
    # C = 128, 3 layers, V = 84: the shipped shapes. T = 1 after 100 cached positions:
    # Linear 2·12·128² = 393,216 per layer, x3 = 1,179,648; attention 2·2·1·101·128 = 51,712, x3 = 155,136;
    # lm_head 2·128·84 = 21,504 -> 1,356,288
    assert roofline.pass_flops(cfg, 1, 100) == 1_179_648 + 155_136 + 21_504 == 1_356_288
    # floats: Linear 3·12·128² = 589,824 and GPT-2's Conv1D biases 3·(3C + C + 4C + C) = 3,456; lm_head 10,752;
    # wte and wpe rows 256; LayerNorms 7·256 = 1,792; KV 2·3·101·128 = 77,568 -> 683,648 floats
    assert roofline.pass_bytes(cfg, 1, 100) == (589_824 + 3_456 + 10_752 + 256 + 1_792 + 77_568) * 4 == 2_734_592
    # the report's overhead rows carry the same counts
    row = next(r for r in gpt2_doc["overhead"] if r["positions"] == 1)
    assert (row["flops"], row["bytes"]) == (1_356_288, 2_734_592)


def test_llama_pass_flops_and_bytes_by_hand(llama, llama_doc):
    cfg = roofline.model_config(llama)
    # C = 32, I = 64, 2 layers, 4 heads of 8, 2 key/value heads (width 16), V = 320, untied head.
    # per layer: q 32·32 + k, v 2·32·16 + o 32·32 + gate, up, down 3·32·64 = 9,216 weights
    # T = 1, S = 101: per layer 2·9,216 + 2·2·101·32 = 31,360, x2 = 62,720; lm_head 2·32·320 = 20,480
    assert roofline.pass_flops(cfg, 1, 100) == 62_720 + 20_480 == 83_200
    # floats: 2·9,216 + lm_head 10,240 + one wte row 32 (rotary: no position table) + RMSNorms 5·32 = 160
    # + KV 2·2·101·16 = 6,464 -> 35,328
    assert roofline.pass_bytes(cfg, 1, 100) == (18_432 + 10_240 + 32 + 160 + 6_464) * 4 == 141_312
    row = next(r for r in llama_doc["overhead"] if r["positions"] == 1)
    assert (row["flops"], row["bytes"]) == (83_200, 141_312)


def test_an_unknown_architecture_reads_unknown_never_a_guess(llama):
    from transformers import GPTNeoXConfig

    cfg = GPTNeoXConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                        vocab_size=320)
    assert roofline.pass_shape(cfg) is None
    assert roofline.pass_flops(cfg, 1, 100) is None and roofline.pass_bytes(cfg, 1, 100) is None
    doc = {"overhead_setup": {"machine": {"threads": 1, "matmul_gflops": 10.0, "cache_gbps": 20.0,
                                          "memory_gbps": 5.0}, "context_pos": 100, "totals": {}},
           "overhead": [{"backend": "transformers", "positions": 1, "measured_us": 500.0, "floor_us": None,
                         "share": None, "flops": None, "bytes": None}], "attribution": {}}
    lines = "\n".join(overhead_text.overhead_tables(doc)).splitlines()
    assert "| 1         |       500.0 |  unknown |                               unknown | unknown | unknown |" in lines


# --- the pieces ------------------------------------------------------------------------------------------


def test_workload_prompts_are_text_checked_by_the_targets_tokenizer(llama, tmp_path):
    long = "ROMEO: " * 30
    f = tmp_path / "w.txt"
    f.write_text("caf\u00e9 au lait\n" + long + "\n")
    n = len(llama.tokenize(long))
    with pytest.raises(WorkloadError, match=rf"prompt 'p2' is {n} tokens; with 200 generated and k up to 8 it must "
                                            rf"be at most 47 \(context 256\)"):
        load_workload(f, target=llama)
    f.write_text("caf\u00e9 au lait\n")  # not in the corpus's characters, but the byte-level BPE reads it
    assert load_workload(f, target=llama).items[0].prompt == "caf\u00e9 au lait"
    with pytest.raises(WorkloadError, match="has the character '\u00e9'"):
        load_workload(f)


def test_a_draft_that_proposes_nothing_leaves_the_first_character_to_the_target(target):
    """'ROMEO:' repeats no character before its last one: prompt lookup proposes nothing, and every draw is
    the target's own sample, drawn from the same generator in the same order."""
    lookup = PromptLookupDraft(target.vocab_size)
    assert lookup.propose(target.tokenize("ROMEO:"), 4, np.random.default_rng(0), 1.0)[0] == []
    counts, p = exactness.first_char_counts(target, lookup, "ROMEO:", k=4, samples=500, seed=3)
    rng = np.random.default_rng(3)
    want = np.bincount([sampling.sample(p, rng) for _ in range(500)], minlength=len(p))
    assert counts.tolist() == want.tolist()


def test_acceptance_counts_a_draft_that_proposes_fewer_than_k(target):
    out = acceptance_over(target, PromptLookupDraft(target.vocab_size), 4, single("ROMEO:"), chars=80)
    t = out["totals"]
    assert sum(out["accepted_per_position"]) < t["target_passes"]  # some rounds drafted nothing
    assert out["position_reached"][0] == sum(out["accepted_per_position"])  # rounds that drafted any
    assert t["accepted"] == sum(i * n for i, n in enumerate(out["accepted_per_position"]))


def test_generate_and_verify_on_the_llama_in_tokens(llama):
    out = specdec.generate(llama, "ROMEO:", 12, seed=0)
    assert out.stats.chars == 12 == out.stats.target_passes
    lookup = PromptLookupDraft(llama.vocab_size)
    (row,) = exactness.verify(llama, {"prompt-lookup": lookup}, k=4, samples=2_000, prompt="ROMEO:")
    assert row["samples"] == 2_000 and row["verdict"] == "exact"
