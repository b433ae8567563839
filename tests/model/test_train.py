import torch

from specdec.model import train
from specdec.model.gpt import GPTConfig

TINY = GPTConfig(n_layer=1, n_head=2, n_embd=32, context=32)


def test_training_is_deterministic_and_lowers_the_loss():
    tc = train.TrainConfig(steps=30, batch=8, eval_batches=2, threads=1, warmup=5)
    a, meta_a = train.train(TINY, tc, log=lambda s: None)
    b, meta_b = train.train(TINY, tc, log=lambda s: None)
    for (n, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), n
    assert meta_a["val_loss"] == meta_b["val_loss"] < 4.2  # below uniform over 84 characters (ln 84 = 4.43)
    assert meta_a["steps"] == 30 and meta_a["seed"] == 0


def test_checkpoint_round_trip_and_atomic_write(tmp_path):
    model, meta = train.train(TINY, train.TrainConfig(steps=2, batch=2, eval_batches=1, threads=1), log=lambda s: None)
    path = tmp_path / "sub" / "tiny.pt"
    sha = train.save_checkpoint(model, meta, path)
    assert [p.name for p in path.parent.iterdir()] == ["tiny.pt"]  # no temp file left behind
    loaded, meta2 = train.load_checkpoint(path)
    assert meta2["sha256"] == sha and meta2["val_loss"] == meta["val_loss"]
    for (n, x), (_, y) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(x, y), n


def test_checkpoint_is_loaded_with_weights_only(tmp_path, monkeypatch):
    seen = {}
    real = torch.load

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    train.load_checkpoint(train.shipped_path("target"))
    assert seen["weights_only"] is True


def test_missing_and_corrupt_checkpoints_say_how_to_retrain(tmp_path):
    for path, what in [(tmp_path / "nope.pt", "not found"), (tmp_path / "bad.pt", "is corrupt")]:
        if what == "is corrupt":
            path.write_bytes(b"definitely not a checkpoint")
        try:
            train.load_checkpoint(path)
        except train.CheckpointError as exc:
            msg = str(exc)
        else:
            raise AssertionError("no error")
        assert what in msg and "specdec train" in msg and "\n" not in msg


def test_shipped_target_meets_the_validation_bar(target):
    assert target.meta["val_loss"] <= 1.75
    assert train.evaluate(target, batches=4, batch=8) < 1.8  # re-measured, not just read from the file
    assert target.config == GPTConfig()


def test_shipped_small_draft_is_one_block_64_wide():
    small, meta = train.load_checkpoint(train.shipped_path("small"))
    assert small.config == train.SMALL_CONFIG and meta["distilled"] is True
    # 12·64² (one block) + 84·64 + 256·64 (embeddings) + 64·84 (head) + 3 layer norms of 2·64 = 76,672: 1/8.4
    assert small.num_params() == 12 * 64 * 64 + 84 * 64 + 256 * 64 + 64 * 84 + 3 * 2 * 64 == 76_672
