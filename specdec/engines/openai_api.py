"""The served engine: two OpenAI-compatible endpoints, one started with speculation and one without.

vLLM, SGLang and llama.cpp's server cannot switch speculation per request, so a comparison needs two servers of
the same model: `--url` (with speculation) and `--baseline-url` (without). Target-only generation is a request to
the baseline, speculative generation the same request to the other; the report alternates them in pairs like
any engine. The payloads are identical, field for field, so that the only difference is the server.

What a request pins, and why:
- `temperature` and `seed` as given (0: greedy); `repeat_penalty` 1.0, because llama.cpp servers default to
  other values and a penalty is no part of the speculative comparison.
- exactly `max_new` tokens: `max_tokens`, plus `min_tokens` (vLLM, llama-cpp-python) and `ignore_eos` (vLLM,
  llama.cpp) so that neither side stops early at an end of text; a completion of another length raises
  `ShortCompletion`, since a pair of unequal lengths is not a paired time.
- `cache_prompt: false` (llama.cpp): a prompt repeated across pairs would otherwise be served from the cache.
  llama-cpp-python's server ignores it (it reuses the longest cached prefix; both servers alike).
- `return_tokens` (llama.cpp) and `return_token_ids` (vLLM): the generated ids where the server returns them,
  for the greedy-equality check; [] otherwise (then only the text can be compared).
Fields a server does not know are ignored by all of these servers (vLLM logs a warning).

Counts: per request where the reply carries them (llama.cpp's `timings.draft_n` / `timings.draft_n_accepted`);
else from the speculative server's Prometheus `/metrics` read before and after the request (vLLM's
`vllm:spec_decode_num_draft_tokens` / `..._accepted_tokens`, names from vllm/v1/spec_decode/metrics.py; llama.cpp's
`llamacpp:spec_decode_num_draft_tokens_total` / `..._accepted_tokens_total` / `..._drafts_total`, from
tools/server/server-task.cpp of the llama.cpp that llama-cpp-python 0.3.36 vendors, and read from a running
server by tests/measure/load/test_load_server.py); both also export the rounds by accepted count
(`..._accepted_tokens_per_pos{position="i"}`: rounds that accepted at least i+1); None when neither exists
(llama-cpp-python's server has neither: its replies carry no draft counts and it serves no /metrics). When
metrics are read, the baseline's /metrics is read the same number of times, so that both sides of a pair pay
the same HTTP overhead; and the servers must serve this run alone, or another client's tokens land in the deltas.

A server that stops answering mid-run raises `ServerGone` (one line: which URL, what failed); the report stops
there and marks what it measured incomplete.
"""

from __future__ import annotations

import time
import urllib.parse

from specdec.engines import openai_http as http
from specdec.engines.base import EngineError, EngineOptions, EngineResult, Spec
from specdec.util.errors import InputError

PROBE_TIMEOUT = 5.0  # seconds for /v1/models, /props, /version, /metrics: a server that answers at all answers fast
REQUEST_TIMEOUT = 300.0  # seconds for one completion: a slow model on a loaded machine, not forever
DRAFT = "server"  # the one speculative configuration: the one the server was started with
METRICS = {  # server -> (drafted, accepted, generated tokens) counter base names, as exported (`_total` added)
    "vllm": ("vllm:spec_decode_num_draft_tokens", "vllm:spec_decode_num_accepted_tokens", "vllm:generation_tokens"),
    "llama.cpp": ("llamacpp:spec_decode_num_draft_tokens", "llamacpp:spec_decode_num_accepted_tokens",
                  "llamacpp:tokens_predicted"),
}
ROUNDS = {  # server -> (rounds, rounds that accepted at least position+1) counter base names
    "vllm": ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_accepted_tokens_per_pos"),
    "llama.cpp": ("llamacpp:spec_decode_num_drafts", "llamacpp:spec_decode_num_accepted_tokens_per_pos"),
}
SETTLE_READS = 5  # at most this many extra /metrics reads while a counter catches up with the reply


class ServerError(EngineError):
    """A server failed mid-run (one line naming the URL); the run stops with what it measured. Raised as is for
    a request the server refused (HTTP 4xx: its message says why); subclasses below for the rest."""


class ServerGone(ServerError):
    """The server stopped answering: refused, reset, timed out, a 5xx, or a reply that is not a completion."""


class ShortCompletion(ServerError):
    """The server returned another number of tokens than asked (it stopped at an end of text it would not
    suppress): the pair would compare unequal work."""


def check_url(flag: str, url: str | None) -> str:
    """`url` without a trailing slash or `/v1` (the API root); InputError naming the value unless http(s)."""
    if not url:
        raise InputError(f"--engine openai needs {flag} URL (--url: the server with speculation, "
                         "--baseline-url: the same model served without)")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{flag} {url!r} is not a server URL (allowed: http:// or https:// URLs)")
    if parts.query or parts.fragment:
        raise InputError(f"{flag} {url!r} has a query or fragment (allowed: http:// or https:// URLs of the API "
                         "root, such as http://127.0.0.1:8000 or http://host:8000/v1)")
    root = url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


class OpenAIEngine:
    """Speculative and target-only generation as two OpenAI-compatible servers do it (module docstring)."""

    name = "openai"
    units = "tokens"

    def __init__(self, url: str, baseline_url: str, models: dict[str, str], servers: dict[str, dict],
                 request_timeout: float = REQUEST_TIMEOUT):
        self.urls = {"speculative": url, "baseline": baseline_url}
        self.models, self.servers, self.request_timeout = models, servers, request_timeout
        self.metrics = _metrics_kind(servers["speculative"].get("metrics"))  # "vllm", "llama.cpp" or None
        self.counts = "metrics" if self.metrics else "none"  # "per-request" once a reply carries them
        self.token_ids: bool | None = None  # whether replies carry ids (known after the first)

    @classmethod
    def open(cls, options: EngineOptions, request_timeout: float = REQUEST_TIMEOUT) -> "OpenAIEngine":
        """Both URLs checked and both servers asked what they serve, before anything is timed (InputError)."""
        url, base = check_url("--url", options.url), check_url("--baseline-url", options.baseline_url)
        if url == base:
            raise InputError(f"--url and --baseline-url are the same server ({url}): serve the model twice, "
                             "one with speculation and one without")
        bad = [d for d in options.drafts if d != DRAFT]
        if bad:
            raise InputError(f"--engine openai drafts with the server's own draft only: {bad[0]!r} "
                             f"(allowed: {DRAFT})")
        servers = {"speculative": probe("--url", url), "baseline": probe("--baseline-url", base)}
        models = {side: options.target or s["models"][0] for side, s in servers.items()}
        if options.target is None and models["speculative"] != models["baseline"]:
            options.log(f"openai: the servers name their models differently ({models['speculative']} and "
                        f"{models['baseline']}); make sure they serve the same weights")
        return cls(url, base, models, servers, request_timeout)

    def describe(self) -> dict:
        """Who served (URLs, model ids, what each server says about itself), where counts come from, whether
        replies carry token ids, and the fixed request fields: what a reader needs to trust the pairs."""
        return {
            "engine": self.name, "units": self.units, "urls": dict(self.urls), "models": dict(self.models),
            "servers": {side: {k: v for k, v in s.items() if k != "metrics"} for side, s in self.servers.items()},
            "counts": self.counts, "metrics": self.metrics,
            "token_ids": {None: "unknown until the first reply", True: "returned", False: "not returned"}[self.token_ids],
            "payload": {k: v for k, v in self._payload("PROMPT", 0, 0, 0.0, "MODEL").items()
                        if k not in ("prompt", "max_tokens", "min_tokens", "seed", "temperature", "model")},
            "request_timeout_s": self.request_timeout,
        }

    def drafts(self) -> list[str]:
        """The one speculative configuration: the server's, as it was started (the user says its k)."""
        return [DRAFT]

    def generate(self, prompt: str, max_new: int, seed: int, temperature: float,
                 spec: Spec | None = None) -> EngineResult:
        """One completion from the speculative server (`spec` given) or the baseline; ServerError mid-run."""
        if spec is not None and spec.draft != DRAFT:
            raise InputError(f"the openai engine has one draft, {DRAFT!r}, not {spec.draft!r}")
        side = "baseline" if spec is None else "speculative"
        url = self.urls[side]
        before = self._read_metrics(side) if self.metrics and self.counts != "per-request" else None
        try:
            reply = http.request(f"{url}/v1/completions", self.request_timeout,
                                 self._payload(prompt, max_new, seed, temperature, self.models[side])).json(
                "POST /v1/completions")
        except http.HttpFailure as exc:
            kind = ServerError if exc.status is not None and 400 <= exc.status < 500 else ServerGone  # refused
            raise kind(f"{side} server {url}: {exc}") from None
        text, tokens, done = _completion(reply, url, max_new)
        self.token_ids = bool(tokens) or bool(self.token_ids)
        result = EngineResult(text=text, tokens=tokens)
        timings = reply.get("timings") if isinstance(reply.get("timings"), dict) else {}
        if "draft_n" in timings:
            self.counts = "per-request"
            if spec is not None:
                result.drafted, result.accepted = int(timings["draft_n"]), int(timings.get("draft_n_accepted", 0))
        if before is not None:
            after = self._read_metrics(side, settle=(before, done))
            if spec is not None and self.counts == "metrics":
                self._metric_counts(result, before, after)
        return result

    def close(self) -> None:
        """Nothing to release: the servers are the user's and keep running."""

    @staticmethod
    def _payload(prompt: str, max_new: int, seed: int, temperature: float, model: str) -> dict:
        return {"model": model, "prompt": prompt, "max_tokens": max_new, "min_tokens": max_new,
                "temperature": temperature, "seed": seed, "stream": False, "ignore_eos": True,
                "cache_prompt": False, "repeat_penalty": 1.0, "return_tokens": True, "return_token_ids": True}

    def _read_metrics(self, side: str, settle: tuple[dict, int] | None = None) -> dict[str, float]:
        """`side`'s /metrics (a ServerGone if it stops answering). With `settle` (the reading before and the
        tokens the reply generated), read again, a bounded number of times, until the generation counter has
        moved by the reply's tokens: a server may update its counters just after it answers (vLLM does)."""
        url = self.urls[side]
        for attempt in range(1 + (SETTLE_READS if settle else 0)):
            try:
                now = http.parse_prometheus(http.request(f"{url}/metrics", PROBE_TIMEOUT).body)
            except http.HttpFailure as exc:
                raise ServerGone(f"{side} server {url}: {exc}") from None
            if settle is None:
                return now
            before, done = settle
            generated = METRICS[self.metrics][2]
            moved = [http.counter(now, generated), http.counter(before, generated)]
            if None in moved or moved[0] - moved[1] >= done:
                return now
            time.sleep(0.01 * (attempt + 1))
        return now

    def _metric_counts(self, result: EngineResult, before: dict, after: dict) -> None:
        """Drafted and accepted from the counters' deltas, and the rounds by accepted count (`rounds_by_accepted`)."""
        drafted_name, accepted_name, _ = METRICS[self.metrics]
        delta = lambda name: int(round((http.counter(after, name) or 0.0) - (http.counter(before, name) or 0.0)))
        result.drafted, result.accepted = delta(drafted_name), delta(accepted_name)
        per_round = rounds_by_accepted(before, after, self.metrics)
        if per_round is not None:
            result.accepted_per_position = per_round


def probe(flag: str, url: str) -> dict:
    """What the server at `url` serves (`GET /v1/models`, required) and says about itself (`/props`, `/version`,
    `/metrics`: best effort). InputError when it does not answer or is not OpenAI-compatible."""
    try:
        doc = http.request(f"{url}/v1/models", PROBE_TIMEOUT).json("GET /v1/models")
    except http.HttpFailure as exc:
        if exc.status is None:
            raise InputError(f"{flag} {url} does not answer ({exc}); start the server or correct the URL") from None
        raise InputError(f"{flag} {url} is not OpenAI-compatible ({exc})") from None
    data = doc.get("data") if isinstance(doc, dict) else None
    ids = [m.get("id") for m in data if isinstance(m, dict)] if isinstance(data, list) else []
    if not ids or not all(isinstance(i, str) and i for i in ids):
        raise InputError(f"{flag} {url} is not OpenAI-compatible (GET /v1/models has no data[].id: "
                         f"{str(doc)[:80]!r})")
    info: dict = {"models": ids}
    for path, key in (("/props", "props"), ("/version", "version")):
        try:
            found = http.request(f"{url}{path}", PROBE_TIMEOUT).json(path)
        except http.HttpFailure:
            continue
        if isinstance(found, dict):  # scalars only: llama.cpp's /props carries a whole chat template
            info[key] = {k: (v[:200] if isinstance(v, str) else v) for k, v in found.items()
                         if isinstance(v, (str, int, float, bool)) or v is None}
    try:
        info["metrics"] = http.parse_prometheus(http.request(f"{url}/metrics", PROBE_TIMEOUT).body)
    except http.HttpFailure:
        info["metrics"] = None
    return info


def rounds_by_accepted(before: dict, after: dict, kind: str) -> list[int] | None:
    """Rounds that accepted 0..k drafts between two /metrics readings, from the rounds counter and the
    per-position counters (position i: rounds that accepted at least i+1); None where they are not exported."""
    rounds, per_pos = ROUNDS[kind]
    delta = lambda name: int(round((http.counter(after, name) or 0.0) - (http.counter(before, name) or 0.0)))
    k = 0
    while http.counter(after, f"{per_pos}[{k}]") is not None:
        k += 1
    if not k or http.counter(after, rounds) is None:
        return None
    at_least = [delta(rounds)] + [delta(f"{per_pos}[{i}]") for i in range(k)] + [0]
    return [at_least[j] - at_least[j + 1] for j in range(k + 1)]


def _metrics_kind(metrics: dict[str, float] | None) -> str | None:
    """Which server's speculative counters `metrics` holds, or None."""
    for kind, (drafted, accepted, _) in METRICS.items():
        if metrics and http.counter(metrics, drafted) is not None and http.counter(metrics, accepted) is not None:
            return kind
    return None


def _completion(reply, url: str, max_new: int) -> tuple[str, list[int], int]:
    """(text, token ids or [], tokens generated) of a completion reply; ServerGone when it is not one,
    ShortCompletion when the server generated another number of tokens than `max_new`."""
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict) \
            or not isinstance(choices[0].get("text"), str):
        raise ServerGone(f"server {url}: POST /v1/completions answered no choices[0].text: {str(reply)[:120]!r}")
    choice = choices[0]
    tokens = next((t for t in (choice.get("token_ids"), choice.get("tokens"), reply.get("tokens"))
                   if isinstance(t, list) and t and all(isinstance(i, int) for i in t)), [])
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
    done = usage.get("completion_tokens", len(tokens) or max_new)
    if done != max_new:
        raise ShortCompletion(f"server {url} generated {done} tokens, not {max_new} (finish_reason "
                              f"{choice.get('finish_reason')!r}): it stopped at an end of text despite "
                              "min_tokens/ignore_eos; a pair of unequal lengths is not timed")
    return choice["text"], tokens, done
