"""The shipped EAGLE-style draft: a network on the target's states that feeds its own predictions back, exact like
every draft, trained deterministically, loaded safely, refused in one line where it cannot serve; and
`specdec train-draft`, the command that trains it."""

import copy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import specdec
from specdec.decoding import eagle, head_weights, medusa
from specdec.decoding.generate import generate, speculative_generate
from specdec.model.backends import to_backend
from specdec.model.train import CheckpointError
from tests.model.test_protocol import Counter5

PROMPT = "ROMEO:\nWhat light through yonder window breaks?"


def test_the_shipped_network_loads_with_torch_alone_and_names_its_target(target):
    net, meta = eagle.load_net(head_weights.shipped("eagle"))
    assert eagle.config_of(net) == {"width": target.config.n_embd, "hidden": eagle.HIDDEN}
    assert meta["target_sha256"] == target.meta["sha256"] and meta["unroll"] == eagle.UNROLL
    # the shipped file is the documented recipe's: `specdec train-draft eagle --seed 0` at its defaults, one thread
    assert (meta["steps"], meta["windows"], meta["batch"], meta["crop"], meta["lr"], meta["seed"], meta["threads"]) == (
        eagle.STEPS, eagle.WINDOWS, eagle.BATCH, eagle.CROP, 3e-3, 0, 1) == (2000, 2048, 32, 64, 3e-3, 0, 1)
    draft = specdec.make_draft("eagle", target)
    assert isinstance(draft, eagle.EagleDraft)
    assert draft.weight_bytes() == 4 * eagle.parameters(net) == 4 * 165_248
    assert "eagle" in specdec.draft_names() and "eagle" not in specdec.DRAFTS  # on request, not by default


@pytest.mark.parametrize("backend", ["eager", "numpy", "onnx"])
def test_greedy_eagle_output_is_the_targets(target, backend):
    m = copy.deepcopy(target) if backend == "eager" else to_backend(target, backend)
    out = speculative_generate(m, specdec.make_draft("eagle", m), PROMPT, 80, k=4, seed=0, temperature=0)
    assert out.text == generate(m, PROMPT, 80, temperature=0).text
    assert out.stats.accepted > 0


def test_eagle_is_deterministic_given_the_seed_and_batches_as_alone(target):
    runs = [speculative_generate(target, specdec.make_draft("eagle", target), PROMPT, 80, k=3, seed=5)
            for _ in range(2)]
    assert runs[0].text == runs[1].text and runs[0].stats == runs[1].stats
    prompts = [PROMPT, "JULIET:\nO Romeo"]
    batch = speculative_generate(target, specdec.make_draft("eagle", target), prompts, 40, k=3, seed=5)
    for i, p in enumerate(prompts):
        alone = speculative_generate(target, specdec.make_draft("eagle", target), p, 40, k=3, seed=5 + i)
        assert batch[i].text == alone.text and batch[i].stats == alone.stats


def test_a_draft_feeds_its_own_states_back_and_q_is_what_it_drew_from(target):
    """Draft 1 comes from the target's state and the pending token, drafts 2..k from the network's own predicted
    states and its own drafts, never a target pass: recomputed by hand here."""
    draft = specdec.make_draft("eagle", target)
    ids = target.tokenize(PROMPT)
    with torch.no_grad():
        target.want_features = True
        try:
            logits = target(target.ids(ids))
            states = target.features[0].clone()  # positions 0..len-1: the last predicted the pending token
        finally:
            target.want_features, target.features = False, None
    draft.take_features(states, 0)
    pending = int(logits[0, -1].argmax())
    drafted, q = draft.propose(ids + [pending], 3, np.random.default_rng(0), 1.0)
    assert len(drafted) == 3 and q.shape == (3, target.config.vocab_size)
    state, tok = states[-1], pending
    with torch.no_grad():
        for i in range(3):
            state = draft.net(state, target.wte.weight[tok])
            want = torch.softmax(state @ target.lm_head.weight.T, -1).double().numpy()
            np.testing.assert_allclose(q[i], want, rtol=1e-5, atol=1e-8)
            tok = drafted[i]
    with pytest.raises(RuntimeError, match="holds the state at position"):  # a state for another position
        draft.propose(ids, 2, np.random.default_rng(0), 1.0)


def test_training_is_deterministic_given_its_seed_and_saves_and_loads(target, tmp_path):
    torch.set_num_threads(1)
    kw = dict(steps=2, batch=2, windows=3, crop=16, hidden=32, seed=3)
    a, meta = eagle.train_eagle(target, **kw)
    b, _ = eagle.train_eagle(target, **kw)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    c, _ = eagle.train_eagle(target, **{**kw, "seed": 4})
    assert not torch.equal(a.fc1.weight, c.fc1.weight)
    assert meta["steps"] == 2 and meta["target_sha256"] == target.meta["sha256"] and len(meta["final_kl"]) == 4
    assert target.want_features is False and target.features is None  # the target's flag is left as it was
    for name in ("e.safetensors", "e.pt"):  # what train-draft writes, and a torch file as heads were written before
        eagle.save_net(a, meta, tmp_path / name)
        back, back_meta = eagle.load_net(tmp_path / name)
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), back.state_dict().values()))
        assert back_meta == meta
    assert (tmp_path / "e.safetensors").read_bytes()[8:9] == b"{"  # safetensors: a length, then its JSON header
    draft = specdec.make_draft("eagle", target, checkpoint=tmp_path / "e.safetensors")  # any hidden width serves
    out = speculative_generate(target, draft, PROMPT, 30, k=4, seed=0, temperature=0)
    assert out.text == generate(target, PROMPT, 30, temperature=0).text


def test_a_corrupt_or_missing_file_is_one_line(tmp_path):
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "bad.safetensors").write_bytes(b"not a checkpoint")
    for path, words in ((tmp_path / "bad.pt", "is corrupt"), (tmp_path / "bad.safetensors", "is corrupt"),
                        (tmp_path / "none.safetensors", "not found")):
        with pytest.raises(CheckpointError) as info:
            eagle.load_net(path)
        assert words in str(info.value) and "\n" not in str(info.value) and "train-draft eagle" in str(info.value)


def test_eagle_is_refused_for_a_target_it_cannot_read(target):
    with pytest.raises(specdec.UnknownDraftError, match="^draft 'eagle' reads the shipped GPT's states; a "
                                                        "Counter5 target needs a network"):
        specdec.make_draft("eagle", Counter5())
    other = copy.deepcopy(target)
    other.meta = {**target.meta, "sha256": "0" * 64}
    with pytest.raises(specdec.UnknownDraftError, match=f"trained for target {target.meta['sha256'][:12]}") as info:
        specdec.make_draft("eagle", other)
    assert "\n" not in str(info.value)


def test_acceptance_per_position_is_recorded_like_any_drafts(target):
    out = speculative_generate(target, specdec.make_draft("eagle", target), PROMPT, 120, k=4, seed=1)
    hist = out.stats.accepted_per_position
    assert sum(hist) == out.stats.draft_calls and len(hist) == 5
    assert np.dot(hist, range(5)) == out.stats.accepted
    assert out.stats.drafted <= 4 * out.stats.draft_calls


def test_the_acceptance_tool_counts_rounds_as_the_engines_define_them(target):
    """tools/eagle_acceptance.py (the figures docs/model.md gives): seeded validation windows of the asked length,
    the same figures on a rerun, vLLM's per-position rates from the summed histogram, the conditional ones from
    the round log, each the ratio of its counts."""
    import importlib.util
    from pathlib import Path

    from specdec.model import corpus

    path = Path(__file__).resolve().parents[2] / "tools" / "eagle_acceptance.py"
    spec = importlib.util.spec_from_file_location("eagle_acceptance_tool", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    ps = tool.prompts(3, 32, seed=7)
    assert ps == tool.prompts(3, 32, seed=7) and [len(p) for p in ps] == [32] * 3
    assert all(p in corpus.split_text("val") for p in ps)
    draft = specdec.make_draft("eagle", target)
    got = tool.measure(target, draft, k=4, n=2, chars=40, seed=7)
    assert got == tool.measure(target, draft, k=4, n=2, chars=40, seed=7)
    h = got["histogram"]
    assert got["rounds"] == sum(h) and len(h) == 5
    assert got["unconditional"] == [sum(h[i:]) / sum(h) for i in range(1, 5)]
    reached = got["conditional_reached"]
    assert reached[0] == got["rounds"] and all(a >= b for a, b in zip(reached, reached[1:]))
    assert got["conditional"][0] == got["unconditional"][0]  # draft 1: every round reaches it


def test_the_cost_tool_times_every_proposal_against_single_position_target_passes(target, monkeypatch):
    """tools/eagle_cost.py (c as docs/definitions.md defines it): every propose of a generation timed, as many target
    passes after a prefill, k * c the ratio of the medians."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "tools" / "eagle_cost.py"
    monkeypatch.syspath_prepend(str(path.parent))  # as when run as a script: it takes the acceptance tool's prompts
    spec = importlib.util.spec_from_file_location("eagle_cost_tool", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    out = tool.measure(target, ["eagle"], k=4, reps=2, chars=20, seed=0)
    got = out["drafts"]["eagle"]
    assert out["target_passes"] == 2 * 10 and got["proposals"] > 0 and out["target_pass_s"] > 0
    assert got["round_cost"] == got["propose_s"] / out["target_pass_s"] and got["c"] == got["round_cost"] / 4


def _specdec(*args, cwd):
    return subprocess.run([sys.executable, "-m", "specdec.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_train_draft_refuses_an_unknown_name_in_one_line_before_any_work(tmp_path):
    proc = _specdec("train-draft", "bogus", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "invalid choice: 'bogus' (choose from 'medusa', 'eagle')" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_train_draft_writes_the_weights_make_draft_reads(target, tmp_path):
    proc = _specdec("train-draft", "medusa", "--steps", "1", "--seed", "2", cwd=tmp_path)
    out = Path("specdec-train") / "medusa.safetensors"  # without --out: beside the shipped name, never over it
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out} (sha256 ") and "131,584 parameters" in proc.stdout
    assert "step 0:" in proc.stderr  # progress on stderr
    assert str(head_weights.shipped("medusa")) in proc.stderr  # how to ship it, said
    assert sorted(p.name for p in (tmp_path / "specdec-train").iterdir()) == ["medusa.safetensors"]  # no temporary
    out = tmp_path / out
    heads, meta = medusa.load_heads(out)
    assert meta["steps"] == 1 and meta["seed"] == 2
    assert isinstance(specdec.make_draft("medusa", target, checkpoint=out), medusa.MedusaDraft)
