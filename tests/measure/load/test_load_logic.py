"""The load driver's pure parts, without a server: levels, open-loop send times on a fake clock (latency from the
scheduled send), inter-token gaps, percentiles, pairing, verdicts, the window's counts (the crossover: test_crossover.py)."""

import json
import math

import numpy as np
import pytest

from specdec.engines.openai_stream import Streamed, _chunk
from specdec.measure.load import load, load_conclude, load_stats
from specdec.measure.load.load_driver import Record, Window, gaps_of, run_window
from specdec.measure.load.load_schedule import Level, arrival_offsets, dispatch, doubling, parse_levels
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
    doc = load_conclude.conclude(sweep, windows)
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


# --- the open loop against a fake server on a fake clock ---------------------------------------------------


class ServedClock:
    """The dispatcher's fake clock, which wakes `late` seconds after each time it was asked to (a loaded
    machine's sleep), and each request thread's own reading of it: a fake server sets, in the thread that waits
    for its reply, the time the reply ends. Before the dispatcher's time moves on, every request launched so
    far has had its reply (its thread is joined), so what the server saw is fixed, not the threads' order."""

    def __init__(self, t: float, late: float):
        import threading

        self.t, self.late, self.local = t, late, threading.local()

    def __call__(self):
        return getattr(self.local, "t", self.t)

    def sleep(self, s):
        import threading

        for thread in threading.enumerate():
            if thread.name.startswith("load-request-"):
                thread.join(5.0)
        self.t += s + self.late


def fifo_server(clock: ServedClock, service: float, tokens: int = 5):
    """One slot, first come first served: a request starts when it arrives (the dispatcher's time when it is
    sent) or when the one before it ends, and its tokens come evenly over `service` seconds."""
    free_at = [-math.inf]

    def stream(url, body, timeout, now):
        start = max(now(), free_at[0])
        free_at[0] = clock.local.t = start + service
        return Streamed(text="x" * tokens, arrivals=[(start + service * (k + 1) / tokens, 1) for k in range(tokens)])

    return stream


# Rate 2/s (a send every 0.5 s from t = 100), each send 0.25 s late (ServedClock), 1 warm-up, 4 measured, up to 4
# cool-down requests. Measured requests 1-4 are scheduled at 100.5, 101, 101.5, 102 and sent 0.25 s later.
# - service 1 s (slower than the rate): request i runs from 100 + i to 101 + i, a queue that grows by 0.5 s a
#   request: E2EL 1.5, 2, 2.5, 3; the first token 0.2 s into each; the last measured ends at 105, after every
#   cool-down's schedule (102.5 ... 104): all 4 sent.
# - service 0.2 s (faster): no queue, each E2EL = 0.25 late + 0.2; the last measured ends at 102.45, before the
#   first cool-down's 102.5: none sent.
# - service 0.75 s: request i ends at 100.75 + 0.75 i: E2EL 1, 1.25, 1.5, 1.75; the last measured ends at
#   103.75: the cool-downs scheduled at 102.5, 103, 103.5 go, the one at 104 does not.
# p50 and p99 of four values (numpy's linear rule): the mean of the middle two, and x3 + 0.97 (x4 - x3).
@pytest.mark.parametrize("service,e2el,ttft,cooldowns,p50,p99", [
    (1.0, [1.5, 2.0, 2.5, 3.0], [0.7, 1.2, 1.7, 2.2], 4, 2.25, 2.985),
    (0.2, [0.45] * 4, [0.29] * 4, 0, 0.45, 0.45),
    (0.75, [1.0, 1.25, 1.5, 1.75], [0.4, 0.65, 0.9, 1.15], 3, 1.375, 1.7425),
])
def test_an_open_loop_times_every_request_from_its_schedule_and_a_slow_server_queues(
        monkeypatch, service, e2el, ttft, cooldowns, p50, p99):
    from specdec.measure.load import load_driver

    monkeypatch.setattr(load_driver, "arrival_offsets", lambda n, rate, burstiness, seed: np.arange(n) / rate)
    clock = ServedClock(100.0, late=0.25)
    payloads = [{"prompt": "a", "max_tokens": 5}] * (1 + 4 + 4)
    win = run_window("http://x", Level("rate", 2.0), payloads, 1, 4, clock, clock.sleep, 5.0,
                     stream=fifo_server(clock, service))
    assert win.failure is None and len(win.records) == 1 + 4 + cooldowns
    measured = win.measured_records()
    assert [r.index for r in measured] == [1, 2, 3, 4]
    assert [r.scheduled for r in measured] == [100.5, 101.0, 101.5, 102.0]
    assert [r.sent for r in measured] == [100.75, 101.25, 101.75, 102.25]  # late: the latency counts it
    assert [r.e2el for r in measured] == pytest.approx(e2el)
    assert [r.ttft for r in measured] == pytest.approx(ttft)
    assert [r.tpot for r in measured] == pytest.approx([service / 5] * 4)
    assert not any(r.short for r in win.records)
    summary = load_stats.arm_summary([measured], {})
    assert (summary["e2el"]["p50"]["estimate"], summary["e2el"]["p99"]["estimate"]) == pytest.approx((p50, p99))


def test_a_window_asks_for_a_cool_down_at_every_kind_of_level():
    sweep = load.Sweep(urls={}, levels=[], prompts=["A"], warmup=2, requests=5)
    assert (load.cooldown(sweep, Level("concurrency", 4)), load.cooldown(sweep, Level("rate", 3.0))) == (3, 5)
    assert len(load.payloads(sweep, Level("rate", 3.0))) == 2 + 5 + 5


def test_a_failed_open_loop_request_ends_the_sends():
    from specdec.engines.openai_stream import StreamFailure

    clock = ServedClock(0.0, late=0.0)

    def stream(url, body, timeout, now):
        if body["seed"] == 1:
            raise StreamFailure("connection reset")
        clock.local.t = now() + 0.1
        return Streamed(text="a", arrivals=[(now(), 1)])

    payloads = [{"prompt": "a", "seed": i} for i in range(6)]
    win = run_window("http://x", Level("rate", 1.0), payloads, 0, 0, clock, clock.sleep, 5.0, stream=stream)
    assert win.failure == "connection reset" and [r.index for r in win.records] == [0, 1]


# --- what a reply, a level and the table say ---------------------------------------------------------------


def test_a_reply_shorter_than_asked_is_marked():
    clock = Clock()

    def stream(url, body, timeout, now):
        n = 3 if body["seed"] == 2 else 5
        return Streamed(text="x" * n, arrivals=[(now(), 1)] * n)

    payloads = [{"prompt": "a", "max_tokens": 5, "seed": i} for i in range(4)]
    win = run_window("http://x", Level("concurrency", 1), payloads, 0, 0, clock, clock.sleep, 5.0, stream=stream)
    assert [r.short for r in win.records] == [False, False, True, False]
    assert [r.to_dict()["short"] for r in win.records] == [False, False, True, False]
    assert Record(0, 0, True, 0.0, tokens=3).short is False  # nothing asked, nothing to fall short of


def _asked(records, asked=10):
    for r in records:
        r.asked = asked
    return records


def test_a_level_counts_its_short_replies_and_says_when_counts_were_not_read():
    # one level, 2 visits of 4 measured requests per arm; one spec-on reply has 7 of the 10 tokens asked; no
    # window's counters were read
    windows = {}
    for v in range(2):
        for arm in load.ARMS:
            recs = _asked([_rec(i, i, i + 0.1, i + 1.0 + 0.01 * v) for i in range(4)])
            if (v, arm) == (1, "on"):
                recs[2].tokens = 7
            windows[(0, v, arm)] = {"window": Window(recs), "counts": load.window_counts(None, None, recs)}
    sweep = load.Sweep(urls={}, levels=[Level("concurrency", 1)], prompts=["a"], visits=2, requests=4,
                       max_tokens=10, temperature=1.0)
    doc = load_conclude.conclude(sweep, windows)
    (lv,) = doc["levels"]
    assert lv["short_replies"] == {"off": {"short": 0, "measured": 8}, "on": {"short": 1, "measured": 8},
                                   "off2": {"short": 0, "measured": 8}}
    assert lv["acceptance"]["counts_add_up"] is None  # not read: never "True"
    from specdec.report.engines.load_render import render

    text = render(doc)
    assert "**SHORT REPLIES** at c=1: replies with fewer tokens than the 10 asked" in text
    row = next(line for line in text.splitlines() if line.startswith("| c=1 "))
    assert [cell.strip() for cell in row.split("|")[-5:-1]] == ["not read", "- / -", "-", "1 of 24"]


@pytest.mark.parametrize("checks,added_up", [([], None), ([None], None), ([True, None], None), ([True, True], True),
                                             ([True, False], False), ([None, False], False)])
def test_counts_add_up_only_when_every_window_was_read_and_did(checks, added_up):
    assert load_conclude._add_up(checks) is added_up


# --- a slot's context ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("prompts,max_tokens,n_max,ctx", [
    (["ROMEO:\n", "JULIET:\nO Romeo, "], 24, 4, 17 + 2 + 24 + 4 + 1),  # the longest prompt's 17 bytes
    (["x" * 47], 128, 4, 47 + 2 + 128 + 4 + 1),  # docs/load.md's command: 182 per slot, not 128
    (["caf\u00e9"], 10, 1, 5 + 2 + 10 + 1 + 1),  # a character of 2 bytes counts 2 (a byte-level vocabulary)
])
def test_a_slots_context_holds_the_longest_prompt_and_the_tokens_asked(prompts, max_tokens, n_max, ctx):
    from specdec.engines.llama_server import ServerSpec, slot_context

    assert slot_context(prompts, max_tokens, n_max) == ctx
    argv = ServerSpec("t.gguf", 4, ctx=ctx).argv("llama-server", 8080)
    assert argv[argv.index("-c") + 1] == str(4 * ctx)  # -c is the total over the 4 slots


def test_the_load_command_sizes_every_servers_context_from_its_prompts(tmp_path, monkeypatch):
    import argparse
    import contextlib

    from specdec.cli import server_cmd
    from specdec.engines import llama_server
    from specdec.measure.workload import load_workload

    started = []

    class Server:
        def __init__(self, binary, spec, port):
            self.spec, self.argv = spec, spec.argv(binary, 0)
            started.append(spec)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(llama_server, "LlamaServer", Server)
    args = argparse.Namespace(model="t.gguf", draft_model="d.gguf", spec_type="draft-simple", slots=8, n_max=4,
                              max_tokens=128, server="llama-server", port=None)
    prompts = [item.prompt for item in load_workload(server_cmd.WORKLOAD, chars=128, max_k=4).items]
    assert max(len(p) for p in prompts) == 47  # the shipped workload's longest prompt, all ASCII
    with contextlib.ExitStack() as stack:
        server_cmd._start_servers(args, tmp_path, stack, prompts)
    assert [s.ctx for s in started] == [47 + 2 + 128 + 4 + 1] * 3


# --- the budget is a decision: it reads the clock seam ----------------------------------------------------


def _fake_windows(monkeypatch, sending_clock_reads=None, decide=None):
    """load.run's windows without a server: each returns two measured requests at once, and moves the fake
    decision clock by 10 s; no /metrics."""
    seen = []

    def window(url, level, payloads, warmup, cooldown, now, sleep, timeout, deadline, seed, burstiness):
        seen.append(deadline)
        if decide is not None:
            decide[0] += 10.0
        return Window([_rec(i, 0.0, 0.1, 1.0) for i in range(2)])

    monkeypatch.setattr(load, "run_window", window)
    monkeypatch.setattr(load, "read_metrics", lambda url: None)
    return seen


def test_the_load_budget_is_decided_on_the_decision_clock(monkeypatch):
    """The sending clock stands at 50 s; the decision clock moves 10 s per window: a budget of 25 s runs three
    windows (25, 15 and 5 s left before them) and stops before the fourth (-5 s). Each window's last send is
    bounded by the budget's end on the sending clock, plus a request's timeout (30 s)."""
    from specdec.measure import clock

    decide = [0.0]
    seen = _fake_windows(monkeypatch, decide=decide)
    sweep = load.Sweep(urls={"on": "u", "off": "v"}, levels=[Level("concurrency", 1)], prompts=["a"], visits=2,
                       budget=25.0, request_timeout=30.0)
    with clock.using(lambda: decide[0]):
        got = load.run(sweep, now=lambda: 50.0)
    assert list(got.windows) == [(0, 0, "off"), (0, 0, "on"), (0, 0, "off2")]
    assert got.incomplete == "the budget of 25 s ran out before c=1 visit 2"
    assert seen == [50.0 + 25 + 30, 50.0 + 15 + 30, 50.0 + 5 + 30]


def test_the_load_budget_on_an_endlessly_slow_machine_is_spent_at_once(monkeypatch):
    """The guard SPECDEC_TIME_SCALE reaches the load budget: at a huge scale no window starts."""
    from specdec.measure import clock

    seen = _fake_windows(monkeypatch)
    monkeypatch.setattr(clock, "SCALE", 1e12)
    sweep = load.Sweep(urls={"on": "u", "off": "v"}, levels=[Level("concurrency", 1)], prompts=["a"], budget=1e-3)
    got = load.run(sweep)
    assert got.windows == {} and seen == [] and got.incomplete.startswith("the budget of 0.001 s ran out")


# --- what was measured is on disk before anything is concluded ---------------------------------------------


def _load_command(tmp_path, monkeypatch, capsys):
    """`specdec load --url ... --baseline-url ...` against a fake transport (every reply at once, 3 tokens): one
    level, 2 visits, so 6 windows of 1 warm-up and 2 measured requests."""
    from specdec.cli import main
    from specdec.engines import openai_api

    real = load.run_window
    reply = lambda url, body, timeout, now: Streamed(text="abc", arrivals=[(now(), 1)] * 3)
    monkeypatch.setattr(load, "run_window", lambda *a, **kw: real(*a, **kw, stream=reply))
    monkeypatch.setattr(load, "read_metrics", lambda url: None)
    monkeypatch.setattr(load, "n_max_probe", lambda url, prompt: {"honoured": None})
    monkeypatch.setattr(openai_api, "probe", lambda flag, url: {})
    out = tmp_path / "out"
    rc = main(["load", "--url", "http://127.0.0.1:9", "--baseline-url", "http://127.0.0.1:10", "--concurrency",
               "1", "--visits", "2", "--requests", "2", "--warmup", "1", "--max-tokens", "3", "--out", str(out)])
    return rc, out, capsys.readouterr()


def test_a_conclusion_that_fails_leaves_every_window_on_disk_and_exits_1_in_one_line(tmp_path, monkeypatch, capsys):
    def fails(sweep, windows):
        raise RuntimeError("no crossover")

    monkeypatch.setattr(load_conclude, "conclude", fails)
    rc, out, printed = _load_command(tmp_path, monkeypatch, capsys)
    raw = tmp_path / "out-incomplete" / "windows.json"
    assert rc == 1 and not out.exists() and printed.out == ""
    last = printed.err.splitlines()[-1]
    assert last == (f"specdec load: drawing the conclusion failed (RuntimeError: no crossover); every window "
                    f"measured is in {raw} (the traceback in {raw.parent / 'conclusion-error.txt'})")
    doc = json.loads(raw.read_text())
    assert [(w["level"], w["visit"], w["arm"]) for w in doc["windows"]] == [
        ("c=1", 0, "off"), ("c=1", 0, "on"), ("c=1", 0, "off2"), ("c=1", 1, "on"), ("c=1", 1, "off2"), ("c=1", 1, "off")]
    assert all([r["measured"] for r in w["requests"]] == [False, True, True] for w in doc["windows"])
    assert all(r["tokens"] == 3 and r["short"] is False for w in doc["windows"] for r in w["requests"])
    assert doc["servers"] == {"on": {"url": "http://127.0.0.1:9"}, "off": {"url": "http://127.0.0.1:10"}}
    assert "RuntimeError: no crossover" in (raw.parent / "conclusion-error.txt").read_text()


def test_a_concluded_sweep_is_written_whole_to_out_and_its_unconcluded_copy_goes(tmp_path, monkeypatch, capsys):
    rc, out, printed = _load_command(tmp_path, monkeypatch, capsys)
    assert rc == 0 and not (tmp_path / "out-incomplete").exists()
    doc = json.loads((out / "load.json").read_text())
    assert [lv["name"] for lv in doc["levels"]] == ["c=1"] and len(doc["levels"][0]["windows"]) == 6
    assert printed.out.startswith("# Speculative decoding under load")
