"""`specdec load` against real llama-server processes on 127.0.0.1 (the binary `specdec build-server` cached;
.ci/run builds it before the tests): the metric names the server really exports, concurrency 1 and 4, greedy
equality of spec-on and spec-off at each level, counts that add up, the crossover as the rows give it, decodes
shared by requests held in flight together, a slot's context sized to its prompts (and a short reply marked
where it is not), a killed server, a port in use, and whether a per-request speculative.n_max is honoured.

Every request loop is bounded in count (a few requests of a few tokens per window) and in time (each request's
timeout, the sweep's budget). The shipped pair is tiny, so a window takes a fraction of a second; what the
tests assert never depends on the machine's speed, only on counts and on what the server reports.
"""

from http.client import HTTPConnection
import json
import os
import signal
import socket
import time

import pytest

from specdec.cli import main
from specdec.engines import openai_http as http
from specdec.engines import server_build
from specdec.engines.llama_server import LlamaServer, ServerSpec, ServerStartError, slot_context
from specdec.measure.load import load, load_conclude, load_stats
from specdec.measure.load.load_driver import run_window
from specdec.measure.load.load_schedule import Level

BINARY = server_build.find_binary()
pytestmark = pytest.mark.skipif(BINARY is None, reason="no cached llama-server: run `specdec build-server` once "
                                "(.ci/run does, before the tests)")
PROMPTS = ["ROMEO:\n", "JULIET:\nO Romeo, ", "First Citizen:\n"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    pytest.importorskip("gguf")
    from specdec.model.export_gguf import export_gguf

    paths = export_gguf(tmp_path_factory.mktemp("gguf"))
    return str(paths["target"]), str(paths["small"])


@pytest.fixture(scope="module")
def servers(pair):
    """A spec-on (small draft, k=4) and a spec-off server, 4 slots each, for the module's tests."""
    target, small = pair
    on = LlamaServer(BINARY, ServerSpec(target, 4, "draft-simple", small, 4)).start()
    off = LlamaServer(BINARY, ServerSpec(target, 4)).start()
    yield {"on": on, "off": off}
    on.stop()
    off.stop()


def _sweep(servers, levels, **kw):
    kw = {"visits": 2, "requests": 4, "warmup": 1, "max_tokens": 24, "budget": 60.0, "request_timeout": 30.0, **kw}
    return load.Sweep(urls={k: s.url for k, s in servers.items()}, levels=levels, prompts=PROMPTS, **kw)


def test_the_metric_names_are_what_the_running_server_exports(servers):
    """The speculative counters the served engine and the load driver read, by name, after 4 concurrent
    requests; and the per-reply draft counts."""
    sweep = _sweep(servers, [Level("concurrency", 4)], visits=1)
    win = run_window(servers["on"].url, Level("concurrency", 4), load.payloads(sweep, Level("concurrency", 4)),
                     0, 0, time.monotonic, None, 30.0)
    assert win.failure is None and all(r.drafted is not None and r.drafted > 0 for r in win.records)
    m = http.parse_prometheus(http.request(f"{servers['on'].url}/metrics", 5.0).body)
    for name in ("llamacpp:spec_decode_num_draft_tokens_total", "llamacpp:spec_decode_num_accepted_tokens_total",
                 "llamacpp:spec_decode_num_drafts_total", "llamacpp:spec_decode_num_accepted_tokens_per_pos_total[0]",
                 "llamacpp:n_busy_slots_per_decode", "llamacpp:n_decode_total", "llamacpp:tokens_predicted_total"):
        assert name in m, name
    assert not any(k.startswith("llamacpp:n_drafted") for k in m)  # the names the engine used to guess


def _crossover_from_rows(doc: dict, kind: str) -> dict:
    """The crossover the function gives on the document's own rows of one kind (what it was drawn from)."""
    return load_stats.crossover([{"value": lv["value"], "speedup": load_stats.judged(lv)[1], "verdict": lv["verdict"]}
                                 for lv in doc["levels"] if lv["kind"] == kind])


def test_concurrency_1_and_4_batch_agree_greedily_and_add_up(servers):
    sweep = _sweep(servers, [Level("concurrency", 1), Level("concurrency", 4)])
    doc = load_conclude.concluded(sweep, load.run(sweep))
    assert "incomplete" not in doc
    c1, c4 = doc["levels"]
    for lv in (c1, c4):
        assert lv["greedy_equality"]["equal"] is True and lv["greedy_equality"]["compared"] >= 2 * 5
        assert lv["acceptance"]["counts_add_up"] is True and lv["acceptance"]["drafted"] > 0
        assert all(lv["arms"][arm]["requests"] == 2 * 4 for arm in load.ARMS)
        assert lv["speedup"]["n"] == 2 and lv["aa"]["n"] == 2
        assert all(lv["short_replies"][arm] == {"short": 0, "measured": 8} for arm in load.ARMS)
    # one client: never a second slot busy in a decode (the next request goes when the last one's reply ended)
    assert c1["busy_slots_per_decode"]["off"] == pytest.approx(1.0, abs=0.05)
    on = [w for w in c4["windows"] if w["arm"] == "on"]
    assert sum(len(w["requests"]) for w in on) == 2 * (1 + 4 + 3)  # warm-up, measured, cool-down
    assert all(r["first"] is not None and len(r["gaps"]) == r["tokens"] - 1 for w in on for r in w["requests"])
    assert doc["crossover"]["concurrency"] == _crossover_from_rows(doc, "concurrency")


def test_requests_held_in_flight_together_share_the_servers_decodes(servers):
    """Four requests reach the spec-off server while it is stopped (SIGSTOP: the kernel accepts and buffers
    them) and it is then let go, so all four wait for it together, whatever the machine's speed: its decodes
    then serve more than one slot, and the busy slots over the decodes (llamacpp:n_busy_slots_per_decode, a
    running mean, differenced over the window) exceed one. Its listen backlog (128) holds the four."""
    off = servers["off"]
    body = {"max_tokens": 48, "min_tokens": 48, "ignore_eos": True, "temperature": 0.0, "cache_prompt": False,
            "stream": False}
    before = load.read_metrics(off.url)
    conns = []
    os.kill(off.proc.pid, signal.SIGSTOP)
    try:
        for i in range(4):
            conn = HTTPConnection("127.0.0.1", off.port, timeout=60)
            conn.request("POST", "/v1/completions", json.dumps({**body, "prompt": PROMPTS[i % 3], "seed": i}),
                         {"Content-Type": "application/json"})
            conns.append(conn)
    finally:
        os.kill(off.proc.pid, signal.SIGCONT)
    replies = []
    for conn in conns:
        resp = conn.getresponse()
        replies.append((resp.status, json.loads(resp.read())))
        conn.close()
    assert [status for status, _ in replies] == [200] * 4
    assert [r["usage"]["completion_tokens"] for _, r in replies] == [48] * 4
    counts = load.window_counts(before, load._settled(off.url, before, 4 * 48), [])
    assert counts["tokens_predicted"] == 4 * 48
    assert counts["busy_slots_per_decode"] > 1.0


@pytest.mark.parametrize("max_tokens", [128, 256])
def test_a_slot_sized_to_its_prompts_gives_every_token_asked_and_a_short_reply_is_marked(pair, max_tokens):
    """docs/load.md's sizes: the shipped workload's longest prompt (47 characters) and 128 tokens, in a slot of
    slot_context's 47 + 2 + 128 + 4 + 1 = 182 positions: every reply has all 128. 256 tokens after it cannot fit
    the model's 256 positions (the server caps a slot at the model's training context): the replies stop
    early, and are marked short."""
    from specdec.measure.workload import load_workload

    target, _ = pair
    longest = max((item.prompt for item in load_workload("shakespeare24", chars=128, max_k=4).items), key=len)
    assert len(longest) == 47 and slot_context([longest], 128, 4) == 182
    payloads = [{"prompt": longest, "max_tokens": max_tokens, "min_tokens": max_tokens, "ignore_eos": True,
                 "temperature": 0.0, "seed": i, "cache_prompt": False} for i in range(2)]
    with LlamaServer(BINARY, ServerSpec(target, 1, ctx=slot_context([longest], max_tokens, 4))) as server:
        win = run_window(server.url, Level("concurrency", 1), payloads, 0, 0, time.monotonic, None, 60.0)
    assert win.failure is None and len(win.records) == 2
    if max_tokens == 128:
        assert [(r.tokens, r.short) for r in win.records] == [(128, False)] * 2
    else:
        assert all(47 + r.tokens <= 256 and r.short for r in win.records)


def test_per_request_n_max_is_measured(servers):
    probe = load.n_max_probe(servers["on"].url, PROMPTS[0], max_tokens=16)
    assert probe["honoured"] in (True, False) and probe["drafted"]["default"] > 0
    # this server's build compiles the per-request speculative fields out (server-schema.cpp: #if 0)
    assert probe["honoured"] is False


def test_a_killed_server_keeps_what_was_measured_and_marks_it_incomplete(pair, tmp_path, monkeypatch, capsys):
    """`specdec load --url ... --baseline-url ...` on a pair whose spec server dies (SIGKILL, as a crash) after
    the second window: exit 1, what was measured written to OUT-incomplete and marked INCOMPLETE."""
    target, small = pair
    windows = []
    real = load.run_window

    def window_then_kill(*args, **kw):
        if len(windows) == 2:
            on.kill()
        windows.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(load, "run_window", window_then_kill)
    with LlamaServer(BINARY, ServerSpec(target, 2, "draft-simple", small, 4)) as on, \
            LlamaServer(BINARY, ServerSpec(target, 2)) as off:
        rc = main(["load", "--url", on.url, "--baseline-url", off.url, "--concurrency", "2", "--visits", "2",
                   "--requests", "4", "--warmup", "1", "--max-tokens", "16", "--out", str(tmp_path / "out")])
    assert rc == 1 and not (tmp_path / "out").exists()
    doc = json.loads((tmp_path / "out-incomplete" / "load.json").read_text())
    assert "failed" in doc["incomplete"] and len(windows) == 4  # off, on, off2 whole; the next on fails
    assert doc["levels"][0]["arms"]["off"]["requests"] == 4  # the windows before the kill are kept
    assert doc["levels"][0]["arms"]["on"]["requests"] == 4
    assert "INCOMPLETE" in (tmp_path / "out-incomplete" / "load.md").read_text()
    assert doc["servers"] == {"on": {"url": on.url}, "off": {"url": off.url}}


def test_a_port_in_use_is_one_line_and_exit_2_before_any_load(capsys):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(SystemExit) as done:
            main(["load", "--port", str(port), "--concurrency", "1"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and f"port {port} on 127.0.0.1 is in use" in err and err.count("\n") == 1


def test_a_server_that_will_not_start_is_one_line(tmp_path):
    bad = tmp_path / "not.gguf"
    bad.write_bytes(b"not a gguf")
    with pytest.raises(ServerStartError, match="exited"):
        LlamaServer(BINARY, ServerSpec(str(bad), 1), start_timeout=30.0).start()


def test_the_command_end_to_end(tmp_path, capsys):
    out = tmp_path / "load"
    rc = main(["load", "--slots", "2", "--concurrency", "2", "--rates", "20", "--visits", "2", "--requests", "3",
               "--warmup", "1", "--max-tokens", "12", "--slo", "ttft=5000", "--out", str(out)])
    assert rc == 0 and not (tmp_path / "load-incomplete").exists()  # the unconcluded copy went
    doc = json.loads((out / "load.json").read_text())
    assert [lv["name"] for lv in doc["levels"]] == ["c=2", "20/s"]
    assert doc["servers"]["on"]["argv"][0].endswith("llama-server") and "--spec-type" in doc["servers"]["on"]["argv"]
    assert "--spec-type" not in doc["servers"]["off2"]["argv"]  # the A/A's own spec-off server
    for arm in ("on", "off", "off2"):  # 2 slots of the longest shipped prompt (47) + 2 + 12 tokens + 4 + 1
        argv = doc["servers"][arm]["argv"]
        assert argv[argv.index("-c") + 1] == str(2 * (47 + 2 + 12 + 4 + 1))
    assert all(lv["short_replies"][arm]["short"] == 0 for lv in doc["levels"] for arm in load.ARMS)
    for kind in ("concurrency", "rate"):
        assert doc["crossover"][kind] == _crossover_from_rows(doc, kind)
    assert (out / "load.md").read_text().startswith("# Speculative decoding under load")
    assert "Crossover" in capsys.readouterr().out


def test_the_served_engine_reads_this_servers_counts(servers):
    """`--engine openai` against the real server pair: per-reply draft counts, the same greedy text."""
    from specdec.engines.base import EngineOptions, Spec
    from specdec.engines.registry import open_engine

    eng = open_engine("openai", EngineOptions(url=servers["on"].url, baseline_url=servers["off"].url,
                                              drafts=["server"]))
    spec = eng.generate("ROMEO:\n", 24, 0, 0.0, spec=Spec("server", 4))
    plain = eng.generate("ROMEO:\n", 24, 0, 0.0)
    assert spec.drafted > 0 and 0 <= spec.accepted <= spec.drafted and spec.text == plain.text
    assert eng.describe()["counts"] == "per-request" and eng.describe()["metrics"] == "llama.cpp"
