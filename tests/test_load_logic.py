"""The load driver's pure parts, without a server: levels, open-loop send times on a fake clock (latency from the
scheduled send), inter-token gaps, percentiles, pairing, verdicts, the crossover, the window's counts."""

import math

import numpy as np
import pytest

from specdec.engines.openai_stream import Streamed, _chunk
from specdec.measure import load, load_stats
from specdec.measure.load_driver import Record, Window, gaps_of, run_window
from specdec.measure.load_schedule import Level, arrival_offsets, dispatch, doubling, parse_levels
from specdec.util.errors import InputError


class Clock:
    """A clock that moves only when slept on (or set by hand)."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_doubling_levels_end_at_n():
    assert doubling(1) == [1] and doubling(8) == [1, 2, 4, 8] and doubling(6) == [1, 2, 4, 6]


@pytest.mark.parametrize("text,kind", [("0", "concurrency"), ("1,-2", "concurrency"), ("1.5", "concurrency"),
                                       ("x", "rate"), ("0", "rate"), ("-1", "rate"), ("inf", "rate"), ("", "rate")])
def test_a_level_that_is_not_positive_is_one_line_naming_it(text, kind):
    with pytest.raises(InputError, match="allowed") as err:
        parse_levels("--rates", text, kind)
    assert "\n" not in str(err.value)


def test_levels_parse_sorted_and_named():
    assert [lv.name for lv in parse_levels("--concurrency", "4,1,2", "concurrency")] == ["c=1", "c=2", "c=4"]
    assert [lv.name for lv in parse_levels("--rates", "2,0.5", "rate")] == ["0.5/s", "2/s"]


def test_poisson_and_gamma_gaps_have_the_rate_as_mean():
    for burst in (1.0, 0.25, 4.0):
        off = arrival_offsets(4001, rate=2.0, burstiness=burst, seed=1)
        assert off[0] == 0 and np.all(np.diff(off) >= 0)
        assert abs(np.mean(np.diff(off)) - 0.5) < 0.05
    cv = lambda b: np.std(np.diff(arrival_offsets(4001, 2.0, b, 1))) / 0.5
    assert cv(0.25) > cv(1.0) > cv(4.0)  # burstier below 1, more regular above
    with pytest.raises(InputError, match="positive"):
        arrival_offsets(3, rate=0.0)


def test_dispatch_keeps_the_schedule_when_a_launch_runs_late():
    clock = Clock()
    launched = []

    def slow_launch(i, scheduled):  # each launch costs 0.7 s of the clock: later sends run late
        launched.append((i, scheduled, clock()))
        clock.t += 0.7

    n = dispatch([0.0, 0.5, 1.0, 3.0], start=10.0, now=clock, sleep=clock.sleep, launch=slow_launch)
    assert n == 4
    assert [s for _, s, _ in launched] == [10.0, 10.5, 11.0, 13.0]  # the plan, not the late sends
    assert [round(t, 6) for _, _, t in launched] == [10.0, 10.7, 11.4, 13.0]


def test_dispatch_stops_at_the_deadline():
    clock = Clock()
    got = []
    assert dispatch([0, 1, 2, 3], 0.0, clock, clock.sleep, lambda i, s: got.append(i), deadline=1.5) == 2
    assert got == [0, 1]


def test_latency_is_timed_from_the_scheduled_send_not_the_late_one():
    """A fake server answering 0.1 s after the send; the client sends 2 s after the schedule."""
    clock = Clock()

    def stream(url, body, timeout, now):
        clock.t += 0.1
        return Streamed(text="ab", arrivals=[(clock.t - 0.05, 1), (clock.t, 1)])

    win = run_window("http://x", Level("concurrency", 1), [{"prompt": "a"}] * 3, 1, 0, clock, clock.sleep, 5.0,
                     stream=stream)
    assert [r.measured for r in win.records] == [False, True, True] and win.failure is None
    r = win.records[1]
    r.scheduled -= 2.0  # as if it had been due 2 s before the client sent it
    assert r.e2el == pytest.approx(2.1) and r.ttft == pytest.approx(2.05) and r.tpot == pytest.approx(0.05)


def test_a_failed_request_stops_the_window_and_says_why():
    from specdec.engines.openai_stream import StreamFailure

    calls = []

    def stream(url, body, timeout, now):
        calls.append(1)
        if len(calls) == 2:
            raise StreamFailure("connection refused")
        return Streamed(text="a", arrivals=[(now(), 1)])

    clock = Clock()
    win = run_window("http://x", Level("concurrency", 1), [{"prompt": "a"}] * 6, 0, 0, clock, clock.sleep, 5.0,
                     stream=stream)
    assert win.failure == "connection refused" and len(calls) == 2 and len(win.measured_records()) == 1


def test_gaps_count_the_tokens_a_chunk_carried_together():
    s = Streamed(arrivals=[(1.0, 1), (1.5, 3), (1.6, 1)])
    assert gaps_of(s, 1.0) == pytest.approx([0.5, 0.0, 0.0, 0.1])


def test_a_chunk_is_counted_by_its_ids_else_by_its_text():
    s = Streamed()
    _chunk(s, {"choices": [{"text": "ab", "tokens": [3, 4]}]}, 1.0)
    _chunk(s, {"choices": [{"text": "c"}]}, 2.0)
    _chunk(s, {"choices": [{"text": "", "finish_reason": "length"}], "timings": {"draft_n": 4}}, 3.0)
    assert s.arrivals == [(1.0, 2), (2.0, 1)] and s.text == "abc" and s.tokens == 3
    assert s.timings == {"draft_n": 4} and s.finish_reason == "length"


def test_percentile_interval_contains_the_estimate():
    x = np.random.default_rng(0).exponential(1.0, 200)
    p = load_stats.percentile(x, 90)
    assert p["ci_low"] <= p["estimate"] <= p["ci_high"] and p["estimate"] == pytest.approx(np.percentile(x, 90))
    assert load_stats.percentile([], 50) is None


def _rec(i, scheduled, first, done, tokens=10):
    return Record(i, 0, True, scheduled, scheduled, first, done, tokens, text="x")


def test_paired_speedup_and_aa_from_windows():
    off = [[_rec(0, 0, 0.1, 2.0)], [_rec(0, 0, 0.1, 2.2)], [_rec(0, 0, 0.1, 1.8)]]
    on = [[_rec(0, 0, 0.1, 1.0)], [_rec(0, 0, 0.1, 1.1)], [_rec(0, 0, 0.1, 0.9)]]
    s = load_stats.paired(off, on, load_stats.per_token_time)
    assert s["estimate"] == pytest.approx(2.0) and s["n"] == 3
    aa = load_stats.paired(off, off, load_stats.per_token_time)
    assert aa["estimate"] == pytest.approx(1.0)
    assert load_stats.verdict(s, aa) == "pays"
    assert load_stats.verdict(load_stats.paired(on, off, load_stats.per_token_time), aa) == "costs"


def test_goodput_counts_the_requests_meeting_every_slo():
    recs = [_rec(0, 0, 0.1, 1.0), _rec(1, 0, 0.6, 1.0), _rec(2, 0, 0.1, 3.0)]
    g = load_stats.arm_summary([recs], {"ttft": 0.5, "e2el": 2.0})["goodput"]
    assert g["requests_meeting"] == 1 and g["fraction"] == pytest.approx(1 / 3)


def _row(value, est, lo, hi, verdict):
    return {"value": value, "speedup": {"estimate": est, "ci_low": lo, "ci_high": hi}, "verdict": verdict}


def test_crossover_is_interpolated_with_its_interval():
    rows = [_row(1, 1.6, 1.4, 1.8, "pays"), _row(2, 1.3, 1.1, 1.5, "pays"), _row(4, 0.9, 0.7, 1.1, "not distinguishable"),
            _row(8, 0.7, 0.6, 0.8, "costs")]
    c = load_stats.crossover(rows)
    assert c["answer"] == "crossover" and c["level"] == 4
    assert 2 < c["estimate"] < 4 and c["ci_low"] <= c["estimate"] <= c["ci_high"]
    assert 4 < c["ci_high"] < 8  # the upper bound's curve crosses 1 between 4 and 8
    assert math.isclose(c["estimate"], math.exp(math.log(2) + math.log(2) * 0.3 / 0.4))


def test_crossover_pays_everywhere_or_never():
    assert load_stats.crossover([_row(1, 2, 1.5, 2.5, "pays"), _row(2, 1.5, 1.2, 1.8, "pays")])["answer"] == \
        "pays at every level tried"
    assert load_stats.crossover([_row(1, 0.9, 0.8, 1.0, "costs")])["answer"] == "never pays here"
    c = load_stats.crossover([_row(1, 1.5, 1.2, 1.8, "pays"), _row(2, 1.2, 1.05, 1.4, "pays"),
                              _row(4, 1.1, 0.95, 1.3, "not distinguishable")])
    assert c["level"] == 4 and c["estimate"] is None and c["ci_high"] is None  # beyond the levels tried


def test_crossover_looks_only_past_the_first_paying_level():
    # 2/s does not pay (its lower bound below 1), 6/s pays, 16/s does not: it stops at 16, and the bounds'
    # crossings are searched from 6/s on, not at 2/s where it never paid
    rows = [_row(2, 1.13, 0.98, 1.28, "not distinguishable"), _row(6, 1.32, 1.29, 1.35, "pays"),
            _row(16, 1.29, 1.10, 1.47, "not distinguishable")]
    c = load_stats.crossover(rows)
    assert (c["level"], c["verdict"]) == (16, "not distinguishable")
    assert c["estimate"] is None and c["ci_low"] is None and c["ci_high"] is None


def test_the_crossover_line_says_beyond_where_the_estimate_does_not_cross():
    from specdec.report.load_render import crossover_line

    c = {"answer": "crossover", "level": 2, "verdict": "not distinguishable", "estimate": None, "ci_low": 7.36,
         "ci_high": None}
    assert crossover_line("concurrency", {**c, "ci_low": None}).endswith(
        "95 % interval beyond the levels tried to beyond the levels tried.")  # the lower bound stays above 1 too
    assert crossover_line("concurrency", c) == (
        "**concurrency**: speculation stops paying at 2 clients (the first level tried after a paying one that does "
        "not pay: not distinguishable); its speedup's estimate crosses 1 beyond the levels tried, 95 % interval "
        "7.36 to beyond the levels tried.")


def _window(records):
    return {"window": Window(records), "counts": {"drafted": 0, "accepted": 0}, "payloads": []}


def test_a_rate_level_is_judged_on_tpot_and_a_concurrency_level_on_throughput():
    # the same requests at both levels: spec-on's tokens come twice as fast after the first (TPOT halves), but
    # the window's span is the schedule's (the last request's send plus a little), so throughput barely moves
    def arm(tpot, jitter):
        return [_rec(i, i * 1.0, i * 1.0 + 0.1, i * 1.0 + 0.1 + 9 * tpot * (1 + jitter * (i % 2))) for i in range(4)]

    windows = {}
    for li in range(2):
        for v in range(3):
            j = 0.01 * v
            windows[(li, v, "off")] = _window(arm(0.02, j))
            windows[(li, v, "off2")] = _window(arm(0.02, -j))
            windows[(li, v, "on")] = _window(arm(0.01, j))
    sweep = load.Sweep(urls={}, levels=[Level("concurrency", 1), Level("rate", 1.0)], prompts=["a"], visits=3,
                       temperature=1.0)
    doc = load.conclude(sweep, windows)
    conc, rate = doc["levels"]
    assert (conc["judged_on"], rate["judged_on"]) == ("throughput", "tpot")
    assert rate["speedup_tpot"]["estimate"] == pytest.approx(2.0, rel=0.02)
    assert rate["speedup"]["estimate"] < 1.05  # 3.28 s against 3.19 s of span: the schedule, not the server
    assert rate["verdict"] == "pays" == load_stats.verdict(rate["speedup_tpot"], rate["aa_tpot"])
    assert conc["verdict"] == load_stats.verdict(conc["speedup"], conc["aa"])
    assert doc["crossover"]["rate"]["answer"] == "pays at every level tried"


def test_every_visit_runs_every_arm_in_a_rotated_order():
    order = load.schedule([Level("concurrency", 1), Level("rate", 2.0)], 3)
    assert len(order) == 2 * 3 * 3
    firsts = [arm for li, v, arm in order[::3]]
    assert firsts[:3] == ["off", "on", "off2"]  # each arm first once per level
    unpaired = load.schedule([Level("concurrency", 1), Level("concurrency", 2)], 2, "unpaired")
    assert [a for _, _, a in unpaired] == ["off"] * 4 + ["on"] * 4 + ["off2"] * 4


def test_window_counts_add_up_and_busy_slots_come_from_the_running_mean():
    before = {"llamacpp:spec_decode_num_draft_tokens_total": 10.0, "llamacpp:spec_decode_num_accepted_tokens_total": 4.0,
              "llamacpp:n_decode_total": 100.0, "llamacpp:n_busy_slots_per_decode": 1.0,
              "llamacpp:tokens_predicted_total": 50.0}
    after = {"llamacpp:spec_decode_num_draft_tokens_total": 30.0, "llamacpp:spec_decode_num_accepted_tokens_total": 12.0,
             "llamacpp:n_decode_total": 200.0, "llamacpp:n_busy_slots_per_decode": 2.0,
             "llamacpp:tokens_predicted_total": 90.0}
    recs = [_rec(0, 0, 0.1, 1), _rec(1, 0, 0.1, 1)]
    recs[0].drafted, recs[0].accepted, recs[1].drafted, recs[1].accepted = 12, 5, 8, 3
    c = load.window_counts(before, after, recs)
    assert (c["drafted"], c["accepted"], c["counts_add_up"]) == (20, 8, True)
    assert c["busy_slots_per_decode"] == pytest.approx(3.0)  # (2*200 - 1*100) / 100
    recs[1].accepted = 2
    assert load.window_counts(before, after, recs)["counts_add_up"] is False


def test_payloads_are_the_same_for_every_arm_and_exact_in_length():
    sweep = load.Sweep(urls={}, levels=[], prompts=["A", "B"], warmup=1, requests=3, max_tokens=5)
    p = load.payloads(sweep, Level("concurrency", 2))
    assert len(p) == 1 + 3 + 1 and [x["prompt"] for x in p] == ["A", "B", "A", "B", "A"]
    assert all(x["max_tokens"] == x["min_tokens"] == 5 and x["ignore_eos"] and not x["cache_prompt"] for x in p)


def _sse_server(events: list[str], status: int = 200):
    """A one-shot local HTTP server answering POST /v1/completions with these SSE lines."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for e in events:
                self.wfile.write(f"data: {e}\n\n".encode())
                self.wfile.flush()

        def log_message(self, *a):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.handle_request, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}"


def test_a_stream_is_read_chunk_by_chunk_with_the_last_timings():
    import json
    import time

    from specdec.engines.openai_stream import stream_completion

    events = [json.dumps({"choices": [{"text": c}]}) for c in "abc"]
    events += [json.dumps({"choices": [{"text": "", "finish_reason": "length"}], "timings": {"draft_n": 6,
                           "draft_n_accepted": 2}, "usage": {"completion_tokens": 3}}), "[DONE]"]
    srv, url = _sse_server(events)
    got = stream_completion(url, {"prompt": "x"}, 5.0, time.monotonic)
    srv.server_close()
    assert got.text == "abc" and got.tokens == 3 and len(got.arrivals) == 3
    assert got.timings["draft_n"] == 6 and got.finish_reason == "length"


@pytest.mark.parametrize("events,status,says", [([], 500, "HTTP 500"), (['{"choices": [{"text": "a"}]}'], 200,
                                                                           "without \\[DONE\\]")])
def test_a_stream_that_fails_or_is_cut_is_one_line(events, status, says):
    import time

    from specdec.engines.openai_stream import StreamFailure, stream_completion

    srv, url = _sse_server(events, status)
    with pytest.raises(StreamFailure, match=says):
        stream_completion(url, {"prompt": "x"}, 5.0, time.monotonic)
    srv.server_close()


def test_window_counts_read_vllms_counters_too():
    before = {"vllm:spec_decode_num_draft_tokens_total": 0.0, "vllm:spec_decode_num_accepted_tokens_total": 0.0,
              "vllm:spec_decode_num_drafts_total": 0.0, "vllm:spec_decode_num_accepted_tokens_per_pos_total[0]": 0.0}
    after = {"vllm:spec_decode_num_draft_tokens_total": 4.0, "vllm:spec_decode_num_accepted_tokens_total": 3.0,
             "vllm:spec_decode_num_drafts_total": 4.0, "vllm:spec_decode_num_accepted_tokens_per_pos_total[0]": 3.0}
    c = load.window_counts(before, after, [_rec(0, 0, 0.1, 1)])
    assert (c["counters"], c["drafted"], c["accepted"]) == ("vllm", 4, 3)  # k=1: 4 rounds, 3 accepted
    assert c["rounds_by_accepted"] == [1, 3] and "busy_slots_per_decode" not in c and "counts_add_up" not in c


def test_a_row_is_read_by_the_speedup_it_was_judged_on_and_old_rows_by_throughput():
    row = {"kind": "rate", "speedup": "thr", "aa": "thr-aa", "speedup_tpot": "tpot", "aa_tpot": "tpot-aa"}
    assert load_stats.judged({**row, "judged_on": "tpot"}) == ("tpot", "tpot", "tpot-aa")
    assert load_stats.judged({**row, "judged_on": "throughput"}) == ("throughput", "thr", "thr-aa")
    assert load_stats.judged(row) == ("throughput", "thr", "thr-aa")  # a load.json from before judged_on
