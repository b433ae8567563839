"""EAGLE-3 heads in the speculators format (`decoding/eagle3.py`) over a Hugging Face target: a tiny checkpoint of
that format built here (config.json with transformer_layer_config, draft_vocab_size and the aux layer ids;
model.safetensors under the speculators names, a reduced draft vocabulary mapped back by d2t) for conftest's
2-layer Llama; greedy output equal to target-only; the first draft's distribution recomputed here from the
weights without any cache; q zero outside the draft vocabulary; bad folders refused in one line."""

import json

import numpy as np
import pytest
import torch

import specdec
from specdec.util.errors import InputError

torch_nn = pytest.importorskip("transformers")
DRAFT_VOCAB = 64
LAYERS = [0, 1, 2]  # the target's embeddings, its first layer's output, its last layer's output


def _layer_config(vocab: int) -> dict:
    return {"model_type": "llama", "vocab_size": vocab, "hidden_size": 32, "intermediate_size": 48,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "num_hidden_layers": 1,
            "rms_norm_eps": 1e-6, "max_position_embeddings": 256, "rope_theta": 10000.0, "hidden_act": "silu"}


def _weights(vocab: int, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g) * 0.3  # noqa: E731
    ids = torch.sort(torch.randperm(vocab, generator=g)[:DRAFT_VOCAB]).values  # the draft vocabulary, in target ids
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[ids] = True
    w = {"embed_tokens.weight": r(vocab, 32), "fc.weight": r(32, 3 * 32), "norm.weight": 1 + r(32),
         "lm_head.weight": r(DRAFT_VOCAB, 32), "d2t": ids - torch.arange(DRAFT_VOCAB), "t2d": t2d}
    p = "layers.0."
    w.update({p + "input_layernorm.weight": 1 + r(32), p + "hidden_norm.weight": 1 + r(32),
              p + "post_attention_layernorm.weight": 1 + r(32),
              p + "self_attn.q_proj.weight": r(32, 64), p + "self_attn.k_proj.weight": r(16, 64),
              p + "self_attn.v_proj.weight": r(16, 64), p + "self_attn.o_proj.weight": r(32, 32),
              p + "mlp.gate_proj.weight": r(48, 32), p + "mlp.up_proj.weight": r(48, 32),
              p + "mlp.down_proj.weight": r(32, 48)})
    return w


def _checkpoint(folder, vocab: int, **config) -> dict:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
           "transformer_layer_config": _layer_config(vocab), "draft_vocab_size": DRAFT_VOCAB,
           "norm_before_residual": False, "target_hidden_size": 32, "eagle_aux_hidden_state_layer_ids": LAYERS,
           "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                  "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}],
                                  "verifier": {"name_or_path": "tiny-llama", "architectures": ["LlamaForCausalLM"]}},
           **config}
    (folder / "config.json").write_text(json.dumps(cfg))
    w = _weights(vocab)
    save_file(w, str(folder / "model.safetensors"))
    return w


@pytest.fixture(scope="module")
def pair(tiny_llama_dir, tmp_path_factory):
    target = specdec.load_hf(tiny_llama_dir)
    folder = tmp_path_factory.mktemp("eagle3") / "head"
    w = _checkpoint(folder, target.vocab_size)
    return target, folder, w


def test_greedy_speculation_with_the_head_is_target_only_greedy(pair):
    target, folder, _ = pair
    draft = specdec.make_draft(f"eagle3:{folder}", target)
    assert draft.feature_layers == tuple(LAYERS)
    plain = specdec.generate(target, "ROMEO:", 24, seed=0, temperature=0.0)
    for k in (1, 3):
        out = specdec.speculative_generate(target, draft, "ROMEO:", 24, k=k, seed=0, temperature=0.0)
        assert out.text == plain.text and out.stats.target_passes < 24 + 1


def test_sampling_is_deterministic_given_the_seed(pair):
    target, folder, _ = pair
    runs = [specdec.speculative_generate(target, specdec.make_draft(f"eagle3:{folder}", target), "ROMEO:", 20, k=3,
                                         seed=5) for _ in range(2)]
    assert runs[0].text == runs[1].text and runs[0].stats.accepted_per_position == runs[1].stats.accepted_per_position


def _oracle_first(w: dict, feats: torch.Tensor, tokens: list[int], vocab: int) -> np.ndarray:
    """The first draft's distribution at temperature 1, recomputed from the weights over the whole sequence at once
    (no cache): position t reads [e(tokens[t + 1]); fc(the target's layers at t)], causal attention with rotary
    positions, the last position's output through the final norm and lm_head, mapped to target ids by d2t."""
    def rms(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g

    p = "layers.0."
    T = feats.shape[0]
    e = rms(w["embed_tokens.weight"][torch.tensor(tokens[1 : T + 1])], w[p + "input_layernorm.weight"])
    hid = feats @ w["fc.weight"].T
    x = torch.cat([e, rms(hid, w[p + "hidden_norm.weight"])], -1)
    q = (x @ w[p + "self_attn.q_proj.weight"].T).view(T, 4, 8)
    k = (x @ w[p + "self_attn.k_proj.weight"].T).view(T, 2, 8).repeat_interleave(2, dim=1)
    v = (x @ w[p + "self_attn.v_proj.weight"].T).view(T, 2, 8).repeat_interleave(2, dim=1)
    inv = 1.0 / 10000.0 ** (torch.arange(0, 8, 2).float() / 8)
    ang = torch.arange(T).float()[:, None] * inv[None]
    cos, sin = torch.cat([ang, ang], -1).cos()[:, None], torch.cat([ang, ang], -1).sin()[:, None]
    rot = lambda z: z * cos + torch.cat([-z[..., 4:], z[..., :4]], -1) * sin  # noqa: E731
    q, k = rot(q), rot(k)
    att = torch.einsum("thd,shd->hts", q, k) / 8 ** 0.5
    att = att.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf")).softmax(-1)
    o = torch.einsum("hts,shd->thd", att, v).reshape(T, 32) @ w[p + "self_attn.o_proj.weight"].T
    h = hid + o
    m = rms(h, w[p + "post_attention_layernorm.weight"])
    h = h + (torch.nn.functional.silu(m @ w[p + "mlp.gate_proj.weight"].T) * (m @ w[p + "mlp.up_proj.weight"].T)) \
        @ w[p + "mlp.down_proj.weight"].T
    logits = rms(h[-1], w["norm.weight"]) @ w["lm_head.weight"].T
    full = torch.full((vocab,), float("-inf"))
    full[torch.arange(DRAFT_VOCAB) + w["d2t"]] = logits
    return full.softmax(-1).double().numpy()


def test_the_first_draft_is_the_heads_distribution_mapped_to_target_ids(pair):
    target, folder, w = pair
    draft = specdec.make_draft(f"eagle3:{folder}", target)
    tokens = list(target.tokenize("ROMEO: what light"))
    target.setup_cache(1)
    target.want_features = tuple(LAYERS)
    try:
        target(target.ids(tokens[:-1]), 0)
        feats = target.features[0].clone()
    finally:
        target.want_features, target.features = False, None
    draft.take_features(feats, 0)
    drafted, q = draft.propose(tokens, 3, np.random.default_rng(0), 1.0)
    np.testing.assert_allclose(q[0], _oracle_first(w, feats, tokens, target.vocab_size), rtol=1e-4, atol=1e-7)
    outside = ~w["t2d"].numpy()
    assert q.shape == (3, target.vocab_size) and not q[:, outside].any()  # nothing outside the draft vocabulary
    assert all(w["t2d"][t] for t in drafted)
    assert draft.cached == len(tokens) - 1 and draft.cache[0].shape[2] == len(tokens) - 1  # drafted positions gone


@pytest.mark.parametrize("change, words", [
    ({"speculators_model_type": "eagle"}, "speculators_model_type 'eagle'"),
    ({"norm_output": True}, "norm_output set"),
    ({"transformer_layer_config": {**_layer_config(320), "num_hidden_layers": 2}}, "one Llama layer"),
    ({"target_hidden_size": 64}, "width 64"),
    ({"eagle_aux_hidden_state_layer_ids": None}, "layers [2, 1, -1] are not all among the target's 0..2"),
])
def test_a_head_that_does_not_fit_is_one_line_naming_what(pair, tmp_path, change, words):
    target, _, _ = pair
    folder = tmp_path / "bad"
    _checkpoint(folder, target.vocab_size, **change)
    with pytest.raises(InputError) as e:
        specdec.make_draft(f"eagle3:{folder}", target)
    assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_the_shipped_target_cannot_hand_layers(pair):
    _, folder, _ = pair
    with pytest.raises(InputError, match="hands no layer states"):
        specdec.make_draft(f"eagle3:{folder}", specdec.load_target())


def test_verify_through_the_cli_checks_the_head_exact(pair, capsys):
    from specdec.cli.commands import main

    target, folder, _ = pair
    code = main(["verify", "--target", f"hf:{target.name}", "--draft", f"eagle3:{folder}", "--samples", "2000"])
    out = capsys.readouterr().out
    assert code == 0 and "exact" in out, out


def test_the_head_runs_through_abs_rows(pair, capsys):
    """`specdec ab` of this tree against itself with the head as the draft: its proposal, generation and round rows
    timed on both sides (each round hands it the target's layers), nothing changed."""
    from pathlib import Path

    from specdec.cli.commands import main

    target, folder, _ = pair
    tree = str(Path(specdec.__file__).resolve().parents[1])
    name = f"eagle3:{folder}"
    main(["ab", "--a-path", tree, "--b-path", tree, "--target", f"hf:{target.name}", "--drafts", name, "--ks", "2",
          "--chars", "12", "--budget", "1", "--pairs", "2", "--json", "--no-work"])
    doc = json.loads(capsys.readouterr().out)
    assert {f"draft {name}", f"spec {name} k=2", f"round {name} k=2"} <= set(doc["rows"])
    assert doc["behaviour_changed"] == []
