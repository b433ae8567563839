"""The rows a revision runs, built from its public API: target-only generation, a target pass, a verify pass, a
draft's proposal, speculative generation and the round without its draft, a batch of sequences, or an engine's
rows. `ab_worker.py` (the worker process: timing, counting, the protocol) loads this file by path beside it,
so that every revision's rows are built by the running specdec's method; like it, this file imports only the
standard library at import, and numpy, torch and the revision's `specdec` inside its functions."""

from __future__ import annotations

import hashlib

# The text the cost rows run at, written here once: this script imports nothing of the package (it runs at every
# revision), so the package reads it from here (`timing.COST_PROMPT`) and the benchmarks' harness loads it by path.
COST_TEXT = "KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up"


def _threads(n: int) -> dict:
    """torch's intra-op threads and numpy's BLAS threads both set to n (recorded in the answer)."""
    import torch

    torch.set_num_threads(n)
    blas = None
    try:
        from threadpoolctl import threadpool_info, threadpool_limits

        threadpool_limits(limits=n, user_api="blas")
        counts = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        blas = max(counts) if counts else None
    except ImportError:  # a revision's environment without threadpoolctl: recorded as unknown
        pass
    return {"torch": torch.get_num_threads(), "blas": blas}


def _encode(target, specdec, text: str) -> list[int]:
    return list(target.tokenize(text)) if hasattr(target, "tokenize") else list(specdec.encode(text))


class _Replay:
    """A draft that hands back, in order, what a real draft proposed in one generation, and puts the shared
    generator where the real draft left it: the round without its draft (the same rounds, the same rule's
    draws, the draft's own work gone). `record` wraps a draft and keeps its proposals."""

    cpu_only = False

    def __init__(self, draft):
        self.inner, self.name = draft, f"replay:{getattr(draft, 'name', 'draft')}"
        self.kept: list[tuple] = []
        self.i = 0
        self.recording = True
        if getattr(draft, "take_features", None) is not None:  # the loop then forms and hands the features, as
            self.take_features = self._take_features  # it does for the draft itself: the round pays the hand-off
            self.feature_layers = getattr(draft, "feature_layers", None)  # the same states (EAGLE-3: its layers)

    def _take_features(self, features, pos, row=0):
        if self.recording:
            self.inner.take_features(features, pos, row)

    def reset(self) -> None:
        self.i = 0
        if self.recording:
            self.kept.clear()
            self.inner.reset()

    def rollback(self, n_valid: int) -> None:
        if self.recording:
            self.inner.rollback(n_valid)

    def propose(self, tokens, k, rng, temperature):
        if self.recording:
            ids, q = self.inner.propose(tokens, k, rng, temperature)
            self.kept.append((ids, q, rng.bit_generator.state))
            return ids, q
        ids, q, state = self.kept[self.i]
        self.i += 1
        rng.bit_generator.state = state
        return ids, q

    def weight_bytes(self) -> int:
        return 0


def _entry():
    """The entry-point loader of the running specdec (`measure.entry`), in a worker of a user's repository only
    (cfg["harness"]): a specdec revision's worker imports nothing of the running package."""
    from specdec.measure import entry

    return entry


def _target(specdec, cfg: dict):
    import inspect

    if cfg.get("harness") and _entry().is_entry(cfg.get("target")):  # the user's own target, from the revision
        target = _entry().make_target(cfg["target"])
        target.setup_cache(1)
        return target
    options = {}
    if "backend" in inspect.signature(specdec.load_target).parameters and cfg.get("backend"):
        options["backend"] = cfg["backend"]
    if cfg.get("dtype"):
        options["dtype"] = cfg["dtype"]
    target = specdec.load_target(cfg.get("target"), **options)
    target.setup_cache(1)
    return target


def _facts(out) -> dict:
    """What a generation decides exactly given the seed: compared across revisions as behaviour, not timing."""
    st = out.stats
    text = out.text if isinstance(out.text, str) else str(out.text)
    return {"target_passes": int(st.target_passes), "drafted": int(getattr(st, "drafted", 0)),
            "accepted": int(getattr(st, "accepted", 0)),
            "text_sha256": hashlib.sha256(text.encode()).hexdigest()[:16]}


def _pass_call(target, ctx: list[int], n: int):
    """The target's plain forward over n new positions at the cost context's end. Its cache is filled with the
    context before every sample (`prepare`, untimed): a target whose cache must hold exactly `pos` tokens (a
    Hugging Face model's) then finds them there whatever row ran before, and each call drops what the last
    one added."""
    import torch

    pos = len(ctx) - n
    x, whole = target.ids(ctx[pos:]), target.ids(ctx)

    def prepare():
        with torch.inference_mode():
            target.setup_cache(1)
            target(whole, 0)

    def call():
        with torch.inference_mode():
            target(x, pos)

    call.prepare = prepare
    call.again = lambda: target.rollback(pos)  # between calls of this row alone: drop what the last one added
    return call


def prefill_states(target, draft, ctx: list[int]):
    """For a draft that reads the target (`take_features`; None for any other): the states a prefill of the
    context forms, positions 0..len(ctx) - 2 (the last token is still pending), as the loop hands them; the
    draft's layers where it reads several (`feature_layers`, EAGLE-3), else the final states. Public Target
    members only, so the asv harness times a proposal after the same hand-off (it loads this file by path)."""
    if getattr(draft, "take_features", None) is None:
        return None
    before = target.want_features
    layers = getattr(draft, "feature_layers", None)
    target.want_features, _ = (tuple(layers) if layers else True), target.setup_cache(1)
    try:
        target(target.ids(ctx[:-1]), 0)
        return target.features[0].clone()
    finally:
        target.want_features, target.features = before, None


def _draft_call(draft, ctx: list[int], k: int, temperature: float, target=None):
    """A draft's proposal as a round pays for it: step back one token, propose k after the context. A draft that
    reads the target is handed the states a prefill of the context forms (its round's hand-off, after the verify
    pass, is the round row's), again before every sample (`prepare`, untimed): the generation rows share the draft
    and leave it holding their own states."""
    import numpy as np

    rng = np.random.default_rng(0)
    draft.reset()
    states = prefill_states(target, draft, ctx) if target is not None else None
    if states is not None:
        draft.take_features(states, 0)
    draft.propose(ctx, 1, rng, temperature)
    state = rng.bit_generator.state

    def call():
        draft.rollback(len(ctx) - 1)
        draft.propose(ctx, k, rng, temperature)

    def prepare():  # the same draws again: a counted call does the same work each time (a sample barely notices)
        if states is not None:  # the states again, and the proposal that primed them, with draws of their own
            draft.reset()
            draft.take_features(states, 0)
            draft.propose(ctx, 1, np.random.default_rng(0), temperature)
        rng.bit_generator.state = state

    call.prepare = prepare
    return call


KINDS = ("target-only", "pass", "verify", "draft", "spec", "round", "batch")


def _rows(specdec, cfg: dict) -> dict:
    """name -> (call, facts) for every row the config asks for; (None, reason) where this revision cannot.
    cfg["only"] (optional) names the kinds of row to build (of KINDS; default all but "batch" where cfg["count"]
    is set, else all): a report's work section counts the cost table's calls without building generations.
    cfg["count"]: a counting process's rows, without their facts (the timing workers check those; under the
    counter every generation run for a fact costs seconds). cfg["draft_k"] (optional): the k a "draft" row
    proposes (default the largest of cfg["ks"])."""
    target = _target(specdec, cfg)
    prompt, chars, seed, temp = cfg["prompt"], cfg["chars"], cfg["seed"], cfg["temperature"]
    counting = bool(cfg.get("count"))
    only = set(cfg.get("only") or (KINDS[:-1] if counting else KINDS))
    ctx = _encode(target, specdec, COST_TEXT)
    rows: dict = {}

    def plain():
        return specdec.generate(target, prompt, chars, seed=seed, temperature=temp)

    if "target-only" in only:
        rows["target-only"] = (plain, {} if counting else _facts(plain()))
    if "pass" in only:
        rows["pass 1"] = (_pass_call(target, ctx, 1), {})
    for k in cfg["ks"] if "verify" in only else ():
        rows[f"verify {k + 1}"] = (_pass_call(target, ctx, k + 1), {})
    generations = bool(only & {"spec", "round"})
    greedy = (specdec.generate(target, prompt, chars, seed=seed, temperature=0.0).text
              if generations and not counting else None)
    for name in cfg["drafts"]:
        try:
            draft = (_entry().make_draft(name, target) if cfg.get("harness") and _entry().is_entry(name)
                     else specdec.make_draft(name, target))
        except Exception as exc:  # noqa: BLE001 -- a revision without the draft: its rows are unavailable
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            for row in _draft_rows(name, cfg["ks"]):
                rows[row] = (None, reason)
            continue
        if "draft" in only:
            rows[f"draft {name}"] = (_draft_call(draft, ctx, cfg.get("draft_k") or max(cfg["ks"]), temp, target), {})
        for k in cfg["ks"] if generations else ():
            rows.update(_speculative_rows(specdec, target, draft, name, k, cfg, greedy, counting))
        if "batch" in only:  # a batched generation of 8 sequences: seconds natively, minutes under callgrind
            rows.update(_batch_row(specdec, target, draft, name, max(cfg["ks"]), cfg))
    return rows


# sequences of the batched row: the prompt 8 times, seeds seed..seed+7; written once, here: the benchmarks'
# harness (bench_batch) loads it by path, as it loads this method, since neither may import the package
BATCH = 8


def _batch_row(specdec, target, draft, name: str, k: int, cfg: dict) -> dict:
    """`spec-batch8 D k=K`: speculative generation of BATCH sequences at once through the public API
    (`speculative_generate(..., batch=8)`); `ok: false` with the reason on a revision without batching."""
    import inspect

    row = f"spec-batch{BATCH} {name} k={k}"
    if "batch" not in inspect.signature(specdec.speculative_generate).parameters:
        return {row: (None, "this revision has no batched generation (speculative_generate takes no batch)")}
    prompt, chars, seed, temp = cfg["prompt"], cfg["chars"], cfg["seed"], cfg["temperature"]

    def spec():
        return specdec.speculative_generate(target, draft, prompt, chars, k=k, seed=seed, temperature=temp,
                                            batch=BATCH)

    try:
        out = spec()
    except Exception as exc:  # noqa: BLE001 -- a draft or target this revision cannot batch: unavailable, why
        return {row: (None, f"{type(exc).__name__}: {exc}".splitlines()[0][:200])}
    texts = "\x00".join(g.text for g in out)
    return {row: (spec, {"target_passes": int(out.passes), "drafted": sum(int(g.stats.drafted) for g in out),
                         "accepted": sum(int(g.stats.accepted) for g in out),
                         "text_sha256": hashlib.sha256(texts.encode()).hexdigest()[:16]})}


def _engine_rows(cfg: dict) -> dict:
    """An engine's rows (`specdec report --engine`'s seam): target-only and `spec D k=K` generated *by the
    engine*, with the counts it reports as facts. The rows that cut into a generation (a pass, a draft call, a
    round) need specdec's own loop and are not asked for."""
    global ENGINE
    try:
        from specdec.engines.base import EngineOptions, Spec
        from specdec.engines.registry import open_engine
    except ImportError as exc:  # a revision from before the engine seam: every row unavailable, with why
        reason = f"this revision has no engines ({exc})"
        return {row: (None, reason) for row in ["target-only"] + [f"spec {d} k={k}" for d in cfg["drafts"]
                                                                   for k in cfg["ks"]]}
    ENGINE = open_engine(cfg["engine"], EngineOptions(target=cfg.get("target"), drafts=list(cfg["drafts"]),
                                                      threads=cfg["threads"], url=cfg.get("url"),
                                                      baseline_url=cfg.get("baseline_url"), log=lambda s: None))
    prompt, chars, seed, temp = cfg["prompt"], cfg["chars"], cfg["seed"], cfg["temperature"]

    def facts(res) -> dict:
        return {"target_passes": res.target_passes, "drafted": res.drafted, "accepted": res.accepted,
                "text_sha256": hashlib.sha256(res.text.encode()).hexdigest()[:16]}

    def plain():
        return ENGINE.generate(prompt, chars, seed, temp)

    rows = {"target-only": (plain, facts(plain()))}
    greedy = ENGINE.generate(prompt, chars, seed, 0.0)
    for name in cfg["drafts"]:
        for k in cfg["ks"]:
            spec = Spec(name, k)
            call = (lambda spec=spec: ENGINE.generate(prompt, chars, seed, temp, spec))
            g = ENGINE.generate(prompt, chars, seed, 0.0, spec)
            rows[f"spec {name} k={k}"] = (call, {**facts(call()), "greedy_equal": (g.tokens, g.text) == (
                greedy.tokens, greedy.text)})
    return rows


ENGINE = None  # the engine a worker opened (closed at exit: it may hold temporary exports)


def _draft_rows(name: str, ks: list[int]) -> list[str]:
    return ([f"draft {name}"] + [f"{kind} {name} k={k}" for k in ks for kind in ("spec", "round")]
            + [f"spec-batch{BATCH} {name} k={max(ks)}"])


def _speculative_rows(specdec, target, draft, name: str, k: int, cfg: dict, greedy: str | None,
                      counting: bool = False) -> dict:
    """End-to-end speculative generation at k, and the same rounds with the draft's work replayed (a counting
    process skips the facts, not the replay's check: the round row must be the same generation)."""
    prompt, chars, seed, temp = cfg["prompt"], cfg["chars"], cfg["seed"], cfg["temperature"]

    def spec():
        return specdec.speculative_generate(target, draft, prompt, chars, k=k, seed=seed, temperature=temp)

    sampled = _facts(spec())
    facts = {} if counting else {**sampled, "greedy_equal": specdec.speculative_generate(
        target, draft, prompt, chars, k=k, seed=seed, temperature=0.0).text == greedy}
    replay = _Replay(draft)

    def rounds():
        return specdec.speculative_generate(target, replay, prompt, chars, k=k, seed=seed, temperature=temp)

    recorded = rounds()
    replay.recording = False
    again = rounds()
    out = {f"spec {name} k={k}": (spec, facts)}
    if again.text == recorded.text and _facts(again) == sampled:
        out[f"round {name} k={k}"] = (rounds, {"rounds": len(replay.kept)})
    else:  # the replay must be the same generation, or it times something else
        out[f"round {name} k={k}"] = (None, "replaying the draft's proposals did not reproduce the generation")
    return out
