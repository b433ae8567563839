"""One streamed completion (server-sent events) from an OpenAI-compatible server, with the arrival time of every
chunk: what TTFT and the inter-token latencies are read from.

`POST /v1/completions` with `stream: true`; the reply is `data: {json}` lines ending in `data: [DONE]`. Each
chunk's arrival is read on the caller's clock (`now`, the load driver's), so that every latency of a run is on
one clock and can be taken from the request's *scheduled* send, not from when a busy client got round to it.
A chunk carries one token on llama.cpp's server (a speculative round's accepted tokens arrive as a burst of
chunks) and may carry several on vLLM and SGLang; its tokens are counted from `tokens` / `token_ids` where the
server returns them, else as one per chunk with text. The last chunk's `timings` (llama.cpp: `draft_n`,
`draft_n_accepted`) and `usage` are kept.

Standard library only, bounded by a timeout per read, no proxy, 127.0.0.1 or the URL given and nothing else.
A connection refused or reset, a timeout, an HTTP error or a stream that ends without `[DONE]` is
`StreamFailure` (one line): the load driver treats it as the server gone.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field


class StreamFailure(Exception):
    """A streamed request that did not complete (one line: what failed)."""


@dataclass
class Streamed:
    """A completed stream: `arrivals` holds (time, tokens in that chunk) for every chunk that carried any."""

    text: str = ""
    arrivals: list[tuple[float, int]] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    usage: dict = field(default_factory=dict)
    finish_reason: str | None = None

    @property
    def tokens(self) -> int:
        return int(self.usage.get("completion_tokens") or sum(n for _, n in self.arrivals))


def stream_completion(url: str, payload: dict, timeout: float, now: Callable[[], float]) -> Streamed:
    """POST `payload` (stream forced on) to `url`/v1/completions and read the whole stream."""
    parts = urllib.parse.urlsplit(url)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=timeout)
    body = json.dumps({**payload, "stream": True}).encode()
    out = Streamed()
    try:
        conn.request("POST", f"{parts.path.rstrip('/')}/v1/completions", body=body,
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise StreamFailure(f"POST {url}/v1/completions answered HTTP {resp.status}: "
                                f"{resp.read(200).decode(errors='replace').strip()}")
        done = False
        for raw in resp:
            line = raw.decode("utf-8", errors="replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            _chunk(out, json.loads(data), now())
        if not done:
            raise StreamFailure(f"POST {url}/v1/completions: the stream ended without [DONE]")
    except (OSError, socket.timeout, http.client.HTTPException, ValueError) as exc:
        raise StreamFailure(f"POST {url}/v1/completions failed: {type(exc).__name__}: {exc}") from None
    finally:
        conn.close()
    return out


def _chunk(out: Streamed, doc: dict, t: float) -> None:
    """Fold one event into `out`: its text, tokens and arrival; the last one's timings and usage."""
    if not isinstance(doc, dict):
        return
    if isinstance(doc.get("timings"), dict):
        out.timings = doc["timings"]
    if isinstance(doc.get("usage"), dict):
        out.usage = doc["usage"]
    choices = doc.get("choices") if isinstance(doc.get("choices"), list) else []
    if not choices or not isinstance(choices[0], dict):
        return
    choice = choices[0]
    text = choice.get("text") or ""
    ids = next((v for v in (choice.get("token_ids"), choice.get("tokens"), doc.get("tokens"))
                if isinstance(v, list) and all(isinstance(i, int) for i in v)), None)
    n = len(ids) if ids else (1 if text else 0)
    if ids:
        out.token_ids.extend(ids)
    if n:
        out.text += text
        out.arrivals.append((t, n))
    if choice.get("finish_reason"):
        out.finish_reason = choice["finish_reason"]
