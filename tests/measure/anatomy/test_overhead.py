"""Overhead: the counted work of a pass, the machine's figures, the floor table and the profiler's attribution."""

import dataclasses
import functools
import json
import math

import pytest
import torch

import specdec
from specdec import cli
from specdec.measure.anatomy import attribution as attribution_mod
from specdec.measure.anatomy import profiler_split, roofline
from specdec.report.anatomy import overhead_text
from specdec.model.gpt import GPTConfig
from specdec.measure.anatomy.profiler_split import CATEGORIES, RESIDUAL
from specdec.measure.anatomy.roofline import Machine
from specdec.model import backends

CFG = GPTConfig()  # the shipped target's: C = 128, 3 layers, V = 84, context 256


def test_shipped_target_has_the_default_config(target):
    assert target.config == CFG


def test_pass_flops_one_position_at_zero():
    # Linear layers per layer 2·T·12·C² = 24·16384 = 393,216; x3 layers = 1,179,648
    # attention 2·2·T·(0+1)·C = 512 per layer; x3 = 1,536
    # lm_head 2·T·C·V = 2·128·84 = 21,504
    assert pass_flops_total(1, 0) == 1_179_648 + 1_536 + 21_504 == 1_202_688


def test_pass_flops_five_positions_at_100():
    # Linear 5 · 1,179,648 = 5,898,240; attention 4·5·105·128 = 268,800 per layer, x3 = 806,400;
    # lm_head 5 · 21,504 = 107,520
    assert pass_flops_total(5, 100) == 5_898_240 + 806_400 + 107_520 == 6_812_160


def pass_flops_total(T, pos):
    return specdec.pass_flops(CFG, T, pos)


def test_pass_bytes_one_position_at_zero():
    # floats: Linear 3·12·16384 = 589,824 + lm_head 128·84 = 10,752 -> 600,576; embedding rows 2·1·128 = 256;
    # LayerNorms 7·2·128 = 1,792; KV 2·3·(0+1)·128 = 768; total 603,392 floats · 4 bytes
    assert specdec.pass_bytes(CFG, 1, 0) == 603_392 * 4 == 2_413_568


def test_pass_bytes_five_positions_at_100():
    # 600,576 weights + 2·5·128 = 1,280 rows + 1,792 norms + 2·3·105·128 = 80,640 KV = 684,288 floats
    assert specdec.pass_bytes(CFG, 5, 100) == 684_288 * 4 == 2_737_152
    assert specdec.pass_bytes(CFG, 5, 100, dtype_bytes=2) == 684_288 * 2


def test_pass_bytes_weights_are_the_models_parameters_but_the_unread_embedding_rows(target):
    C, L = CFG.n_embd, CFG.n_layer
    for T in (1, 7):
        unread = (CFG.vocab_size + CFG.context - 2 * T) * C  # whole wte and wpe, less the rows looked up
        kv = 2 * L * T * C
        assert specdec.pass_bytes(CFG, T, 0, dtype_bytes=1) == target.num_params() - unread + kv


def test_floor_is_the_larger_of_compute_and_bandwidth_time():
    m = Machine(matmul_gflops=10.0, cache_gbps=2.0, memory_gbps=1.0, threads=1)
    assert roofline.floor_us(1_000_000, 1_000_000, m) == pytest.approx(500.0)  # 1e6 B / 2 GB/s = 500 µs
    assert roofline.floor_us(100_000_000, 1_000, m) == pytest.approx(10_000.0)  # 1e8 FLOP / 10 GFLOP/s


def test_measure_machine_gives_finite_positive_figures_and_restores_threads():
    before = torch.get_num_threads()
    m = specdec.measure_machine(seconds=0.2, threads=2)
    assert isinstance(m, Machine) and m.threads == 2 and torch.get_num_threads() == before
    for name in ("matmul_gflops", "cache_gbps", "memory_gbps"):
        value = getattr(m, name)
        assert isinstance(value, float) and math.isfinite(value) and value > 0, name
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.threads = 3
    assert set(m.to_dict()) == {"matmul_gflops", "cache_gbps", "memory_gbps", "threads"}


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan"), float("inf")])
def test_measure_machine_refuses_a_bad_budget(seconds):
    with pytest.raises(ValueError, match="seconds must be a positive number"):
        specdec.measure_machine(seconds=seconds)


def test_overhead_table_rows(target):
    m = Machine(matmul_gflops=50.0, cache_gbps=20.0, memory_gbps=5.0, threads=1)
    rows = specdec.overhead_table(target, m, positions=(1, 3), context_pos=50, seconds=0.3)
    assert [r["positions"] for r in rows] == [1, 3]
    for r in rows:
        assert set(r) == {"backend", "positions", "measured_us", "floor_us", "share", "flops", "bytes"}
        assert r["backend"] == "eager" and r["measured_us"] > 0
        assert r["flops"] == specdec.pass_flops(CFG, r["positions"], 50)
        assert r["bytes"] == specdec.pass_bytes(CFG, r["positions"], 50)
        assert r["floor_us"] == roofline.floor_us(r["flops"], r["bytes"], m)
        assert r["share"] == 1 - r["floor_us"] / r["measured_us"]


def test_overhead_table_names_the_targets_backend(target):
    m = Machine(matmul_gflops=50.0, cache_gbps=20.0, memory_gbps=5.0, threads=1)
    fused = backends.to_backend(target, "fused")
    rows = specdec.overhead_table(fused, m, positions=(1,), context_pos=10, seconds=0.05)
    assert [r["backend"] for r in rows] == ["fused"]
    scope = {"categories": dict.fromkeys(CATEGORIES, 0.0), "profiled_us": 0.0, "measured_us": 0.0, "profiler_us": 0.0,
             "accounted_us": 0.0, "accounted_ratio": 1.0, "stretch": 1.0}
    text = overhead_text.render(m, rows, {"step": scope, "round": scope})
    assert text.splitlines()[2].startswith("fused target pass")


def _fake_scope(cats, measured, ratio):
    return {"categories": cats, "profiled_us": 2 * measured, "measured_us": measured, "profiler_us": 0.0,
            "accounted_us": sum(cats.values()), "accounted_ratio": ratio, "stretch": 1.5}


def test_the_text_puts_the_step_and_the_round_side_by_side():
    m = Machine(matmul_gflops=50.0, cache_gbps=20.0, memory_gbps=5.0, threads=1)
    rows = [{"backend": "eager", "positions": 1, "measured_us": 10.0, "floor_us": 1.0, "share": 0.9, "flops": 1,
             "bytes": 1}]
    step = dict.fromkeys(CATEGORIES, 1.0)
    rnd = {name: 10.0 * (i + 1) for i, name in enumerate(CATEGORIES)}  # 10, 20, ..., 80: sums to 360
    attr = {"step": _fake_scope(step, 8.0, 1.01), "round": _fake_scope(rnd, 350.0, 1.03),
            "round (old)": _fake_scope(rnd, 400.0, 1.05)}  # an older report's scope: not shown
    lines = overhead_text.render(m, rows, attr).splitlines()
    head = lines.index(next(x for x in lines if x.startswith("category")))
    assert lines[head].split() == ["category", "step", "round"]
    table = {x[:32].strip(): x[32:].split() for x in lines[head + 1:]}
    assert table["matmul"] == ["1.0", "10.0"]
    assert table["draft"] == ["1.0", "70.0"]
    assert table["accounted (sum of the above)"] == ["8.0", "360.0"]
    assert table["measured untimed"] == ["8.0", "350.0"]
    assert table["accounted / untimed (pairs)"] == ["1.010", "1.030"]


def test_overhead_table_refuses_widths_past_the_context(target):
    m = Machine(matmul_gflops=50.0, cache_gbps=20.0, memory_gbps=5.0, threads=1)
    with pytest.raises(ValueError, match="fit the context of 256"):
        specdec.overhead_table(target, m, positions=(1, 9), context_pos=250, seconds=0.1)


@pytest.mark.parametrize("name,expected", [
    ("aten::mm", "matmul"), ("aten::linear", "matmul"), ("aten::addmm", "matmul"), ("aten::bmm", "matmul"),
    ("aten::scaled_dot_product_attention", "attention"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", "attention"),
    ("aten::empty", "tensor creation"), ("aten::copy_", "tensor creation"), ("aten::view", "tensor creation"),
    ("aten::embedding", "tensor creation"), ("aten::cat", "tensor creation"),
    ("aten::add", "elementwise"), ("aten::gelu", "elementwise"), ("aten::layer_norm", "elementwise"),
    ("aten::softmax", "elementwise"),
])
def test_category_of_an_op(name, expected):
    assert profiler_split.category(name) == expected


def _only(fn, n=20):
    def run(labelled):
        for _ in range(n):
            fn(labelled)
        return n
    return run


def _check_sums(scope):
    cats = scope["categories"]
    assert tuple(cats) == CATEGORIES
    assert all(us >= 0 for name, us in cats.items() if name != RESIDUAL)
    # the categories share out the timed blocks' wall time: the labels' spans and the profiler-split rest
    assert math.isclose(sum(cats.values()), scope["accounted_us"], rel_tol=1e-6)
    assert scope["profiler_us"] >= 0 and scope["events_per_unit"] > 0 and scope["measured_us"] > 0
    assert scope["stretch"] > 0 and scope["profiled_us"] > 0 and scope["accounted_ratio"] > 0


def test_a_function_that_only_multiplies_matrices_is_all_matmul():
    a = torch.randn(64, 64)
    scope = profiler_split.attribute(_only(lambda labelled: torch.mm(a, a)), repeats=1)
    _check_sums(scope)
    cats = scope["categories"]
    assert cats["matmul"] > 0
    assert all(cats[name] == 0 for name in CATEGORIES if name not in ("matmul", RESIDUAL))


def test_a_function_that_only_allocates_is_all_tensor_creation():
    scope = profiler_split.attribute(_only(lambda labelled: torch.zeros(64, 64)), repeats=1)
    cats = scope["categories"]
    assert cats["tensor creation"] > 0
    assert all(cats[name] == 0 for name in CATEGORIES if name not in ("tensor creation", RESIDUAL))


def test_a_label_takes_all_the_ops_inside_it():
    a = torch.randn(64, 64)

    def fn(labelled):
        with profiler_split.label(labelled, "the rule"):
            torch.mm(a, a)

    cats = profiler_split.attribute(_only(fn), repeats=1)["categories"]
    assert cats["the rule"] > 0 and cats["matmul"] == 0


def test_attribution_of_a_step_and_a_round(target, draft_factory):
    out = specdec.attribution(target, draft_factory("bigram"), k=2, chars=6, repeats=1)
    assert set(out) == {"step", "round"}
    for scope in out.values():
        _check_sums(scope)
        assert scope["categories"]["matmul"] > 0 and scope["categories"]["attention"] > 0
    step = out["step"]["categories"]
    assert step["the rule"] == 0 and step["draft"] == 0 and step["logits to sample"] > 0
    rnd = out["round"]["categories"]
    assert rnd["the rule"] > 0 and rnd["draft"] > 0 and rnd["logits to sample"] > 0
    assert out["step"]["units_per_block"] == 6 and 2 <= out["round"]["units_per_block"] <= 6


def test_the_round_blocks_run_the_same_rounds_in_every_mode(target, draft_factory, monkeypatch):
    """Same seed, same state: bare, timed and profiled blocks settle the same rounds into the same tokens, with
    the draft's own propose."""
    from specdec.decoding import generate as decode
    from specdec.decoding import rounds
    from specdec.measure import timing

    draft = draft_factory("bigram")
    calls, settled = [], []
    real = draft.propose
    monkeypatch.setattr(draft, "propose", lambda *a: calls.append(1) or real(*a))
    real_settle = rounds.settle_round

    def settle(*a):
        out = real_settle(*a)
        settled[-1].append(tuple(a[2]))  # the tokens once the round has emitted
        return out

    monkeypatch.setattr(decode, "settle_round", settle)
    prompt = decode.check_request(target, timing.COST_PROMPT, 12, k=3)
    run = attribution_mod._rounds(target, draft, prompt, 12, 3, 0)
    for mode in (False, "time", True):
        calls.clear()
        settled.append([])
        n = run(mode)
        assert n == len(settled[-1]) and calls, mode
    assert len(settled[0][-1]) == len(prompt) + 12
    assert all(s == settled[0] for s in settled)  # every block: the same rounds, the same tokens


def test_alternated_runs_interleave_their_bare_and_timed_blocks():
    """One discarded bare block each; then per repeat every run's bare block and every run's timed block, the
    timed ones first in odd repeats, the runs in their order each time; the profiled blocks run by run."""
    order = []

    def run(name):
        def block(mode):
            order.append((name, mode))
            torch.zeros(4)
            return 1
        return block

    out = profiler_split.attribute_alternated({"lean": run("lean"), "old": run("old")}, repeats=2, per_event_us=0.0)
    assert order == [("lean", False), ("old", False),  # discarded
                     ("lean", False), ("old", False), ("lean", "time"), ("old", "time"),  # repeat 0
                     ("lean", "time"), ("old", "time"), ("lean", False), ("old", False),  # repeat 1
                     ("lean", True), ("lean", True), ("old", True), ("old", True)]  # profiled
    assert list(out) == ["lean", "old"]
    for scope in out.values():
        _check_sums(scope)
        assert scope["units_per_block"] == 1


def test_cli_prints_the_tables_and_writes_overhead_json(tmp_path, monkeypatch, capsys):
    quick = functools.partial(attribution_mod.attribution, chars=4, repeats=1)
    monkeypatch.setattr(attribution_mod, "attribution", quick)
    before = torch.get_num_threads()
    assert cli.main(["overhead", "--seconds", "0.2", "--out", str(tmp_path / "o")]) == 0
    torch.set_num_threads(before)
    out = capsys.readouterr().out
    assert out.startswith("machine (1 thread): GEMM 256x256")
    assert "positions" in out and RESIDUAL in out and "measured untimed" in out
    doc = json.loads((tmp_path / "o" / "overhead.json").read_text())
    assert [r["positions"] for r in doc["floor"]] == [1, 2, 3, 5, 9]
    auto = "onnx" if "onnx" in specdec.BACKENDS else "numpy"  # auto: the fastest installed on the CPU
    assert {r["backend"] for r in doc["floor"]} == {auto}
    assert set(doc["attribution"][auto]) == {"step", "round"} and doc["draft"] == "bigram"
    assert doc["k"] == 4
    head = next(x for x in out.splitlines() if x.startswith("category"))
    assert head.split() == ["category", "step", "round"]
    a = doc["attribution"][auto]
    cells = next(x for x in out.splitlines() if x.startswith("draft ")).split()
    assert cells == ["draft", f"{a['step']['categories']['draft']:.1f}", f"{a['round']['categories']['draft']:.1f}"]
    # no temporary file left
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["attribution.png", "overhead.json"]
    assert cli.main(["overhead", "--seconds", "0.2", "--backend", "all", "--out", str(tmp_path / "o")]) == 0
    torch.set_num_threads(before)
    doc = json.loads((tmp_path / "o" / "overhead.json").read_text())
    assert [(r["backend"], r["positions"]) for r in doc["floor"]] == [
        (b, n) for b in specdec.BACKENDS for n in (1, 2, 3, 5, 9)]
    assert list(doc["attribution"]) == list(specdec.BACKENDS)
    assert capsys.readouterr().out.count("measured untimed") == len(specdec.BACKENDS)


def test_the_profilers_cost_per_event_is_its_extra_time_over_its_events():
    """The arithmetic, from times set here (the measured loops' times depend on the machine and its load)."""
    assert profiler_split.per_event_us(0.002, 0.003, 500) == pytest.approx(2.0)
    assert profiler_split.per_event_us(0.003, 0.002, 500) == 0.0  # a preempted plain run: no negative cost
    assert profiler_split.per_event_us(0.002, 0.003, 0) == pytest.approx(1000.0)  # no event: over one


def test_the_profilers_cost_per_event_is_taken_out_of_every_event():
    per_event = 2.0  # µs, as profiler_cost_us measures it (a figure of the machine: fixed here)
    a = torch.randn(8, 8)
    scope = profiler_split.attribute(_only(lambda labelled: torch.mm(a, a)), repeats=1, per_event_us=per_event)
    assert scope["profiler_us"] == pytest.approx(scope["events_per_unit"] * per_event)  # every event is outside


def test_labels_are_timed_directly_and_the_profiler_only_splits_the_rest(monkeypatch):
    """A fake clock: each span of "the rule" lasts 5 units, the block 20 per unit of work; the profiled rest,
    all matmul and 2x stretched, is scaled onto the 15 units left."""
    a = torch.randn(32, 32)
    clock = iter(range(0, 10**9, 5))
    monkeypatch.setattr(profiler_split, "measured", lambda: next(clock) * 1e-6)  # what the labels measure

    def fn(mode):
        with profiler_split.label(mode, "the rule"):
            pass
        torch.mm(a, a)

    scope = profiler_split.attribute(_only(fn, n=1), repeats=1, per_event_us=0.0)
    cats = scope["categories"]
    assert cats["the rule"] == pytest.approx(5.0)  # one span: enter at t, exit at t + 5
    assert scope["accounted_us"] == pytest.approx(15.0)  # the timed block: start, span (2 reads), end
    assert cats["matmul"] + cats[RESIDUAL] == pytest.approx(10.0)  # the rest, split as the profiler saw it
    assert sum(cats.values()) == pytest.approx(scope["accounted_us"])


def test_the_attribution_figure_stacks_every_backends_step_and_rounds(tmp_path):
    from specdec.report import figures as overhead_plot

    cats = {name: float(i + 1) for i, name in enumerate(CATEGORIES)}
    cats[RESIDUAL] = -3.0  # a negative residual (the profiler's cost overestimated) draws no bar, and no error
    attr = {"eager": {"step": cats, "round (old)": cats, "round": cats}, "numpy": {"step": cats, "round": cats}}
    path = tmp_path / "a.png"
    assert overhead_plot.write_attribution(attr, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and [p.name for p in tmp_path.iterdir()] == ["a.png"]
    assert not overhead_plot.write_attribution({}, tmp_path / "none.png") and not (tmp_path / "none.png").exists()


def test_an_onnx_run_is_split_by_onnx_runtimes_profiler(target, draft_factory):
    pytest.importorskip("onnxruntime")
    onnx_target = backends.to_backend(target, "onnx")
    out = specdec.attribution(onnx_target, draft_factory("bigram"), k=2, chars=6, repeats=1)
    for scope in out.values():
        _check_sums(scope)
        cats = scope["categories"]
        assert cats["matmul"] > 0 and cats["attention"] > 0 and cats["elementwise"] > 0
    assert out["step"]["categories"]["logits to sample"] > 0  # the sampling tail's kernels
    assert out["round"]["categories"]["the rule"] > 0 and out["round"]["categories"]["draft"] > 0
