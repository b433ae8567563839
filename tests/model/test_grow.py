"""`model.grow`: the shipped target widened (the same function) and deepened (a user-sized target whose
truncated draft is the shipped target), and `export_grown`'s checkpoint and GGUF."""

import pytest
import torch

import specdec
from specdec.model import corpus, grow
from specdec.model.train import load_checkpoint, shipped_path


@pytest.fixture(scope="module")
def shipped():
    model, _ = load_checkpoint(shipped_path("target"))
    return model.eval()


def _logits(model, ids):
    with torch.inference_mode():
        return model(torch.tensor([ids]), None)[0]


VAL = corpus.encode(corpus.split_text("val")[:200])


@pytest.mark.parametrize("r", [1, 2, 4])
def test_widening_keeps_the_function(shipped, r):
    wide = grow.widen(shipped, r)
    assert wide.config.n_embd == 128 * r and wide.config.n_head == shipped.config.n_head
    ours, theirs = _logits(wide, VAL), _logits(shipped, VAL)
    assert (ours - theirs).abs().max() < 1e-3  # float rounding only: logits span about ±20
    assert torch.equal(ours.argmax(-1), theirs.argmax(-1))


def test_widened_greedy_generation_through_the_cache_is_the_shipped_text(shipped):
    wide = grow.widen(shipped, 2)
    for prompt in ["ROMEO:", "First Citizen:\n"]:
        a = specdec.generate(wide, prompt, 60, seed=0, temperature=0)
        b = specdec.generate(shipped, prompt, 60, seed=0, temperature=0)
        assert a.ids == b.ids, prompt


def test_added_blocks_at_mix_zero_add_nothing_and_otherwise_change_the_distribution(shipped):
    same = grow.deepen(shipped, 5, mix=0.0)
    assert same.config.n_layer == 5
    assert torch.equal(_logits(same, VAL), _logits(shipped, VAL))  # x + 0 is x, bit for bit
    moved = grow.deepen(shipped, 5, mix=4.0)
    assert (_logits(moved, VAL) - _logits(shipped, VAL)).abs().max() > 0.1


def test_the_added_blocks_follow_the_seed(shipped):
    a, b, c = (grow.deepen(shipped, 4, seed=s) for s in (0, 0, 1))
    key = "blocks.3.mlp.fc.weight"
    assert torch.equal(a.state_dict()[key], b.state_dict()[key])
    assert not torch.equal(a.state_dict()[key], c.state_dict()[key])
    for i in range(3):  # the shipped blocks are kept as they are
        assert torch.equal(a.state_dict()[f"blocks.{i}.mlp.fc.weight"], shipped.state_dict()[f"blocks.{i}.mlp.fc.weight"])


def test_the_default_recipe_has_the_parameters_counted_by_hand(shipped):
    grown, recipe = grow.grow(shipped)
    d, v, ctx = 512, 84, 256
    block = 12 * d * d + 4 * d  # qkv 3d², proj d², fc 4d², mlp proj 4d²; two LayerNorms' weight and bias
    assert recipe["parameters"] == 8 * block + v * d + ctx * d + 2 * d + v * d == 25_400_320
    assert recipe == {"grown_from": "shipped target", "widen": 4, "n_layer": 8, "mix": 4.0, "seed": 0,
                      "parameters": 25_400_320}
    assert not grown.training


@pytest.mark.parametrize("call, message", [
    (lambda m: grow.widen(m, 0), "widen factor 0 must be a positive integer"),
    (lambda m: grow.deepen(m, 2), "n_layer 2 is fewer than the model's 3 blocks"),
])
def test_bad_shapes_are_refused(shipped, call, message):
    with pytest.raises(ValueError, match=message):
        call(shipped)


def test_export_grown_writes_a_checkpoint_specdec_loads_and_a_gguf_of_that_shape(tmp_path):
    gguf = pytest.importorskip("gguf")
    from specdec.model.export_gguf import export_grown

    paths = export_grown(tmp_path, 2, 4, mix=4.0)
    model, meta = load_checkpoint(paths["checkpoint"])
    assert meta["grow"] == {"grown_from": "shipped target", "widen": 2, "n_layer": 4, "mix": 4.0, "seed": 0,
                            "parameters": sum(p.numel() for p in model.parameters())}
    again, _ = grow.grow(load_checkpoint(shipped_path("target"))[0], 2, 4, mix=4.0)
    assert torch.equal(_logits(model, VAL), _logits(again, VAL))  # the recipe rebuilds the file's model
    fields = gguf.GGUFReader(str(paths["gguf"])).fields
    value = lambda key: int(fields[key].parts[fields[key].data[0]][0])  # noqa: E731
    assert (value("gpt2.block_count"), value("gpt2.embedding_length")) == (4, 256)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grown.gguf", "grown.pt"]


def test_the_shipped_draft_is_the_shipped_target_whatever_the_target(shipped):
    grown, _ = grow.grow(shipped, 2, 4)
    draft = specdec.make_draft("shipped", grown)
    assert draft.name == "shipped"
    assert torch.equal(_logits(draft.model, VAL), _logits(shipped, VAL))  # not a copy of the grown target


def test_the_shipped_target_drafting_for_itself_is_accepted_whole_at_temperature_zero(shipped):
    out = specdec.speculative_generate(shipped, specdec.make_draft("shipped", shipped), "ROMEO:", 80, k=4, seed=0,
                                       temperature=0)
    assert out.stats.drafted > 0 and out.stats.accepted == out.stats.drafted
