"""The served engine against fake OpenAI-compatible servers on 127.0.0.1: payloads, counts, bad input, a
server that dies. The real server (llama-cpp-python's) is in test_engine_openai_llamacpp.py."""

from __future__ import annotations

import socket

import pytest

from specdec.engines import openai_api, registry
from specdec.engines.base import EngineOptions, Spec
from specdec.engines.openai_api import OpenAIEngine, ServerError, ServerGone, ShortCompletion
from specdec.util.errors import InputError
from tests.fake_openai import FakeServer, vllm_metrics

SPEC = Spec(draft="server", k=4)


@pytest.fixture
def fakes():
    """A factory of fake servers, every one stopped at the end of the test."""
    made = []

    def make():
        made.append(FakeServer())
        return made[-1]

    yield make
    for f in made:
        f.stop()


@pytest.fixture
def pair(fakes):
    spec, base = fakes(), fakes()
    return spec, base


def open_pair(spec, base, **kw) -> OpenAIEngine:
    return registry.open_engine("openai", EngineOptions(url=spec.url, baseline_url=base.url, log=lambda s: None, **kw))


def test_identical_payloads_to_both_servers_with_cache_off_and_exact_length(pair):
    spec, base = pair
    eng = open_pair(spec, base)
    for prompt, seed in (("ROMEO:", 0), ("JULIET:\n", 7)):
        eng.generate(prompt, 12, seed, 0.0, spec=SPEC)
        eng.generate(prompt, 12, seed, 0.0)
    sent_spec, sent_base = spec.paths("/v1/completions"), base.paths("/v1/completions")
    assert sent_spec == sent_base and len(sent_spec) == 2
    for p in sent_spec:
        assert p["max_tokens"] == p["min_tokens"] == 12 and p["temperature"] == 0.0
        assert p["cache_prompt"] is False and p["ignore_eos"] is True and p["stream"] is False
        assert p["model"] == "fake-model"
    assert [p["prompt"] for p in sent_spec] == ["ROMEO:", "JULIET:\n"] and [p["seed"] for p in sent_spec] == [0, 7]


def test_only_the_given_urls_are_contacted(pair):
    spec, base = pair
    eng = open_pair(spec, base)
    eng.generate("x", 3, 0, 0.0, spec=SPEC)
    paths = {q for _, q, _ in spec.requests + base.requests}
    assert paths <= {"/v1/models", "/props", "/version", "/metrics", "/v1/completions"}


def test_per_request_counts_from_llamacpp_timings(pair):
    spec, base = pair
    spec.timings = lambda p: {"predicted_n": p["max_tokens"], "draft_n": 12, "draft_n_accepted": 9}
    base.props = {"build_info": "b9999", "total_slots": 1, "chat_template": "x" * 5000, "nested": {"a": 1}}
    eng = open_pair(spec, base)
    fast = eng.generate("ROMEO:", 10, 0, 0.0, spec=SPEC)
    slow = eng.generate("ROMEO:", 10, 0, 0.0)
    assert (fast.drafted, fast.accepted) == (12, 9) and (slow.drafted, slow.accepted) == (None, None)
    assert fast.tokens == slow.tokens and len(fast.tokens) == 10 and fast.text == slow.text
    d = eng.describe()
    assert d["counts"] == "per-request" and d["token_ids"] == "returned"
    assert d["servers"]["baseline"]["props"]["build_info"] == "b9999"
    assert len(d["servers"]["baseline"]["props"]["chat_template"]) == 200 and "nested" not in d["servers"]["baseline"]["props"]
    assert d["urls"] == {"speculative": spec.url, "baseline": base.url}


def test_metric_deltas_from_vllm_counters_and_symmetric_reads(pair):
    spec, base = pair
    spec.metrics = vllm_metrics(drafted=20, accepted=13, per_pos=[5, 4, 3, 1], drafts=5)
    base.metrics = lambda fake: f"vllm:generation_tokens_total {float(fake.generated)}\n"
    eng = open_pair(spec, base)
    assert eng.describe()["counts"] == "metrics" and eng.describe()["metrics"] == "vllm"
    for _ in range(3):
        r = eng.generate("ROMEO:", 8, 0, 0.0, spec=SPEC)
        assert (r.drafted, r.accepted) == (20, 13)
        assert r.accepted_per_position == [0, 1, 1, 2, 1] and sum(r.accepted_per_position) == 5
        b = eng.generate("ROMEO:", 8, 0, 0.0)
        assert (b.drafted, b.accepted, b.accepted_per_position) == (None, None, None)
    # the same /metrics reads on both sides: a pair pays the same HTTP overhead
    assert len(spec.paths("/metrics")) == len(base.paths("/metrics")) == 1 + 3 * 2


def test_metric_deltas_from_llamacpp_counters(pair):
    spec, base = pair
    spec.tokens = False
    # the names (and the per-position labels) as llama-server 0.3.36's /metrics writes them
    spec.metrics = lambda f: (f"llamacpp:spec_decode_num_draft_tokens_total {7 * f.served}\n"
                              f"llamacpp:spec_decode_num_accepted_tokens_total {5 * f.served}\n"
                              f"llamacpp:spec_decode_num_drafts_total {3 * f.served}\nllamacpp:n_decode_total 3\n"
                              f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="0"}} {2 * f.served}\n'
                              f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="1"}} {2 * f.served}\n'
                              f'llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position="2"}} {1 * f.served}\n')
    eng = open_pair(spec, base)
    r = eng.generate("ROMEO:", 6, 0, 0.0, spec=SPEC)
    assert (r.drafted, r.accepted, r.tokens) == (7, 5, [])
    # 3 rounds: one accepted none, one accepted 2, one accepted 3 (2 + 3 = 5 accepted)
    assert r.accepted_per_position == [1, 0, 1, 1] and sum(r.accepted_per_position) == 3
    assert eng.describe()["metrics"] == "llama.cpp" and eng.describe()["token_ids"] == "not returned"


def test_no_counts_anywhere_is_none(pair):
    spec, base = pair
    eng = open_pair(spec, base)
    r = eng.generate("ROMEO:", 5, 0, 0.0, spec=SPEC)
    assert (r.drafted, r.accepted, r.target_passes, r.accepted_per_position) == (None, None, None, None)
    assert eng.describe()["counts"] == "none" and not spec.paths("/metrics")[1:]


def test_model_from_target_and_base_url_with_v1(pair):
    spec, base = pair
    eng = registry.open_engine("openai", EngineOptions(url=spec.url + "/v1/", baseline_url=base.url, target="mine"))
    eng.generate("a", 2, 0, 0.0, spec=SPEC)
    assert spec.paths("/v1/completions")[0]["model"] == "mine" and eng.drafts() == ["server"]


@pytest.mark.parametrize("bad", ["ftp://127.0.0.1:8000", "127.0.0.1:8000", "file:///etc/passwd", "http://"])
def test_a_url_that_is_not_http_is_refused_naming_it(fakes, bad):
    base = fakes()
    with pytest.raises(InputError, match=r"allowed: http:// or https:// URLs") as err:
        registry.open_engine("openai", EngineOptions(url=bad, baseline_url=base.url))
    assert repr(bad) in str(err.value) and "\n" not in str(err.value)
    assert not base.requests  # refused before any server is asked


def test_missing_or_identical_urls_and_foreign_drafts(fakes):
    s = fakes()
    with pytest.raises(InputError, match="--baseline-url URL"):
        registry.open_engine("openai", EngineOptions(url=s.url))
    with pytest.raises(InputError, match="same server"):
        registry.open_engine("openai", EngineOptions(url=s.url, baseline_url=s.url + "/"))
    with pytest.raises(InputError, match="'ngram'.*allowed: server"):
        registry.open_engine("openai", EngineOptions(url=s.url, baseline_url=fakes().url, drafts=["ngram"]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_port_nothing_listens_on_does_not_answer(fakes):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(InputError, match=r"--baseline-url http://127\.0\.0\.1:\d+ does not answer"):
        registry.open_engine("openai", EngineOptions(url=fakes().url, baseline_url=url))


def test_a_server_that_accepts_but_never_answers_is_bounded(fakes, monkeypatch):
    monkeypatch.setattr(openai_api, "PROBE_TIMEOUT", 0.3)
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(4)
        url = f"http://127.0.0.1:{mute.getsockname()[1]}"
        with pytest.raises(InputError, match="does not answer.*timed out"):
            registry.open_engine("openai", EngineOptions(url=url, baseline_url=fakes().url))


@pytest.mark.parametrize("body, ctype, says", [
    ('{"models": ["x"]}', "application/json", "no data\\[\\].id"),
    ('{"data": []}', "application/json", "no data\\[\\].id"),
    ("<html><body>Welcome to nginx</body></html>", "text/html", "text/html, not JSON"),
    ("[1, 2]", "application/json", "no data\\[\\].id"),
])
def test_a_server_that_is_not_openai_compatible(fakes, body, ctype, says):
    bad = fakes()
    bad.models_body, bad.models_type = body, ctype
    with pytest.raises(InputError, match=f"--url {bad.url} is not OpenAI-compatible .*{says}"):
        registry.open_engine("openai", EngineOptions(url=bad.url, baseline_url=fakes().url))


def test_a_server_that_dies_between_requests_raises_server_gone(pair):
    spec, base = pair
    eng = open_pair(spec, base)
    eng.generate("ROMEO:", 4, 0, 0.0, spec=SPEC)
    eng.generate("ROMEO:", 4, 0, 0.0)
    spec.stop()
    with pytest.raises(ServerGone, match=f"speculative server {spec.url}: POST {spec.url}/v1/completions failed") as err:
        eng.generate("ROMEO:", 4, 0, 0.0, spec=SPEC)
    assert "\n" not in str(err.value) and isinstance(err.value, RuntimeError)
    eng.generate("ROMEO:", 4, 0, 0.0)  # the other server still answers


def test_a_server_that_dies_while_metrics_are_read_raises_server_gone(pair):
    spec, base = pair
    spec.metrics = vllm_metrics(drafted=4, accepted=2, per_pos=[2, 0], drafts=2)
    eng = open_pair(spec, base)
    spec.stop()
    with pytest.raises(ServerGone, match=f"{spec.url}/metrics failed"):
        eng.generate("ROMEO:", 4, 0, 0.0, spec=SPEC)


def test_http_errors_mid_run(pair):
    spec, base = pair
    eng = open_pair(spec, base)
    spec.status = 500
    with pytest.raises(ServerGone, match="HTTP 500: the fake refuses"):
        eng.generate("ROMEO:", 4, 0, 0.0, spec=SPEC)
    spec.status = 400
    with pytest.raises(ServerError, match="HTTP 400") as err:
        eng.generate("ROMEO:", 4, 0, 0.0, spec=SPEC)
    assert not isinstance(err.value, ServerGone)


def test_a_short_completion_is_an_error_not_a_pair(pair):
    spec, base = pair
    eng = open_pair(spec, base)
    base.short = 3
    with pytest.raises(ShortCompletion, match=f"{base.url} generated 7 tokens, not 10 .*'stop'"):
        eng.generate("ROMEO:", 10, 0, 0.0)


def test_counters_that_lag_the_reply_are_read_again_a_bounded_number_of_times(pair):
    spec, base = pair
    shown = {"n": 0, "lag": False}

    def lagging(fake):  # the first read after a completion still shows the counters from before it
        if fake.served > shown["n"] and not shown["lag"]:
            shown["lag"] = True
        else:
            shown["n"], shown["lag"] = fake.served, False
        n = shown["n"]
        return (f"vllm:spec_decode_num_draft_tokens_total {4 * n}\nvllm:spec_decode_num_accepted_tokens_total {3 * n}\n"
                f"vllm:generation_tokens_total {8 * n}\n")

    spec.metrics = lagging
    eng = open_pair(spec, base)
    r = eng.generate("ROMEO:", 8, 0, 0.0, spec=SPEC)
    assert (r.drafted, r.accepted) == (4, 3) and len(spec.paths("/metrics")) == 1 + 1 + 2
    spec.metrics = lambda fake: ("vllm:spec_decode_num_draft_tokens_total 0\nvllm:spec_decode_num_accepted_tokens_total 0\n"
                                 "vllm:generation_tokens_total 0\n")  # never moves: read again at most SETTLE_READS times
    before = len(spec.paths("/metrics"))
    eng.generate("ROMEO:", 8, 0, 0.0, spec=SPEC)
    assert len(spec.paths("/metrics")) - before == 1 + 1 + openai_api.SETTLE_READS


def test_a_url_with_a_query_is_refused(fakes):
    with pytest.raises(InputError, match=r"'http://127.0.0.1:1/\?key=x' has a query"):
        registry.open_engine("openai", EngineOptions(url="http://127.0.0.1:1/?key=x", baseline_url=fakes().url))


def test_a_reply_that_is_not_a_completion_is_a_server_gone(pair):
    spec, base = pair
    eng = open_pair(spec, base)
    spec.completion = lambda payload: {"choices": ["not a dict"]}
    with pytest.raises(ServerGone, match="answered no choices\\[0\\].text"):
        eng.generate("ROMEO:", 4, 0, 0.0, spec=SPEC)


def test_per_request_counts_stop_the_metrics_reads(pair):
    spec, base = pair
    spec.timings = lambda p: {"draft_n": 6, "draft_n_accepted": 2}
    spec.metrics = lambda f: (f"llamacpp:spec_decode_num_draft_tokens_total {6 * f.served}\n"
                              f"llamacpp:spec_decode_num_accepted_tokens_total {2 * f.served}\n")
    eng = open_pair(spec, base)
    for _ in range(3):
        r = eng.generate("ROMEO:", 4, 0, 0.0, spec=SPEC)
        assert (r.drafted, r.accepted) == (6, 2)
        eng.generate("ROMEO:", 4, 0, 0.0)
    assert eng.describe()["counts"] == "per-request"
    assert len(spec.paths("/metrics")) == 1 + 2 and len(base.paths("/metrics")) == 1  # open's probe, then none


def test_a_redirect_elsewhere_is_not_followed(fakes):
    mover, elsewhere = fakes(), fakes()
    mover.redirect = elsewhere.url
    with pytest.raises(InputError, match=f"--url {mover.url} is not OpenAI-compatible .*HTTP 302"):
        registry.open_engine("openai", EngineOptions(url=mover.url, baseline_url=fakes().url))
    assert not elsewhere.requests  # only the URLs given are contacted
