"""A fake OpenAI-compatible server on 127.0.0.1 for the served engine's tests: it records every request and
answers what a test sets (models, completions, /metrics, /props, or a non-OpenAI body), one thread each."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeServer:
    """One fake server, set by tests: `models`; `metrics` (a function of this server, with its `served`
    completions and `generated` tokens so far, returning Prometheus text; None: 404); `props`; `timings` (a
    function of the payload, or None); `tokens` (whether replies carry ids); `short` (tokens fewer than asked);
    `status` (an HTTP error for completions); `models_body` / `models_type` (a raw /v1/models answer);
    `redirect` (a URL /v1/models redirects to).
    `requests` records (method, path, payload)."""

    def __init__(self):
        self.models = ["fake-model"]
        self.models_body: str | None = None
        self.models_type = "application/json"
        self.redirect: str | None = None
        self.metrics = None
        self.props: dict | None = None
        self.timings = None
        self.tokens = True
        self.short = 0
        self.status = 200
        self.served = 0
        self.generated = 0
        self.requests: list[tuple[str, str, dict | None]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop answering: the port closes, so the next request is refused."""
        if self.thread.is_alive():
            self.httpd.shutdown()
            self.httpd.server_close()
            self.thread.join(timeout=5)

    def paths(self, path: str) -> list[dict | None]:
        return [p for _, q, p in self.requests if q == path]

    def completion(self, payload: dict) -> dict:
        n = payload["max_tokens"] - self.short
        ids = [(len(payload["prompt"]) + i) % 50 for i in range(n)]
        reply = {"id": "cmpl-1", "object": "text_completion", "model": payload.get("model"),
                 "choices": [{"index": 0, "text": "".join(chr(97 + i % 26) for i in ids),
                              "finish_reason": "length" if not self.short else "stop"}],
                 "usage": {"prompt_tokens": len(payload["prompt"]), "completion_tokens": n,
                           "total_tokens": len(payload["prompt"]) + n}}
        if self.tokens:
            reply["tokens"] = ids
        if self.timings is not None:
            reply["timings"] = self.timings(payload)
        return reply

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: str, ctype: str = "application/json"):
                raw = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self):
                with fake.lock:
                    fake.requests.append(("GET", self.path, None))
                if self.path == "/v1/models":
                    if fake.redirect:
                        self.send_response(302)
                        self.send_header("Location", fake.redirect + self.path)
                        self.send_header("Content-Length", "0")
                        return self.end_headers()
                    if fake.models_body is not None:
                        return self._send(200, fake.models_body, fake.models_type)
                    return self._send(200, json.dumps({"object": "list", "data": [{"id": m} for m in fake.models]}))
                if self.path == "/props" and fake.props is not None:
                    return self._send(200, json.dumps(fake.props))
                if self.path == "/metrics" and fake.metrics is not None:
                    return self._send(200, fake.metrics(fake), "text/plain")
                self._send(404, json.dumps({"error": {"message": f"{self.path} not found"}}))

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with fake.lock:
                    fake.requests.append(("POST", self.path, payload))
                if self.path != "/v1/completions":
                    return self._send(404, "{}")
                if fake.status != 200:
                    return self._send(fake.status, json.dumps({"error": {"message": "the fake refuses"}}))
                reply = fake.completion(payload)
                with fake.lock:
                    fake.served += 1
                    fake.generated += reply.get("usage", {}).get("completion_tokens", 0)
                self._send(200, json.dumps(reply))

        return Handler


def vllm_metrics(drafted: int, accepted: int, per_pos: list[int], drafts: int):
    """A /metrics function in vLLM's exposition: counters per engine label, `_total`, per-position labels;
    each completion served adds the given counts; the generated-token counter counts what was served."""
    def text(fake: FakeServer) -> str:
        served = fake.served
        lines = ["# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.",
                 "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
                 f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {float(drafted * served)}',
                 f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {float(accepted * served)}',
                 f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {float(drafts * served)}',
                 f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {float(fake.generated)}']
        lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{i}"}} '
                  f"{float(n * served)}" for i, n in enumerate(per_pos)]
        return "\n".join(lines) + "\n"
    return text
