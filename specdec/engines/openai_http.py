"""HTTP for the served engine: one bounded request at a time to the URLs the user gave, nothing else.

Standard library only (the `openai` engine needs no extra). Every request has a timeout; the opener uses no
proxy and follows no redirect, so a request goes to exactly the host and port the user named and nowhere else
(a redirect to another host would be a URL the user did not give). Failures come back as `HttpFailure` with one
line saying what failed; the engine decides whether that is bad input (at `open`) or a server gone (mid-run).

The Prometheus part reads the text exposition format (`name{labels} value [timestamp]`) into sums per metric
name, so a counter split over label sets (vLLM labels each by engine and model) reads as one number.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass


class HttpFailure(Exception):
    """A request that did not give a usable answer: `status` is the HTTP code (None: no answer at all)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Refuse redirects: the engine contacts only the URLs it was given."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # urllib's hook
        raise urllib.error.HTTPError(req.full_url, code, f"redirect to {newurl} refused", headers, fp)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


@dataclass
class Reply:
    """An HTTP answer: status, content type and body text."""

    status: int
    content_type: str
    body: str

    def json(self, what: str):
        """The body as JSON; HttpFailure naming `what` and the content type when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            kind = self.content_type or "no content type"
            start = self.body.lstrip()[:40].replace("\n", " ")
            raise HttpFailure(f"{what} answered {kind}, not JSON ({start!r}...)", self.status) from None


def request(url: str, timeout: float, payload: dict | None = None) -> Reply:
    """GET `url` (POST `payload` as JSON when given), bounded by `timeout` seconds for connecting and for each
    read. HttpFailure on no answer (refused, reset, timed out, unreadable) or an HTTP error status."""
    method = "GET" if payload is None else "POST"
    what = f"{method} {url}"
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            body = resp.read().decode("utf-8", errors="replace")
            return Reply(resp.status, resp.headers.get_content_type(), body)
    except urllib.error.HTTPError as exc:
        detail = _error_detail(exc)
        raise HttpFailure(f"{what} answered HTTP {exc.code}{detail}", exc.code) from None
    except urllib.error.URLError as exc:
        raise HttpFailure(f"{what} failed: {_reason(exc.reason)}") from None
    except (socket.timeout, TimeoutError) as exc:
        raise HttpFailure(f"{what} timed out after {timeout:g} s ({exc})") from None
    except (http.client.HTTPException, ConnectionError, OSError) as exc:
        raise HttpFailure(f"{what} failed: {_reason(exc)}") from None


def _reason(reason) -> str:
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "timed out"
    return f"{type(reason).__name__}: {reason}" if isinstance(reason, BaseException) else str(reason)


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """The server's own error message, one line, short (OpenAI servers put it in error.message)."""
    try:
        text = exc.read().decode("utf-8", errors="replace")
    except Exception:  # the status alone still says what happened
        return f" ({exc.reason})" if exc.reason else ""
    try:
        doc = json.loads(text)
        err = doc.get("error", doc) if isinstance(doc, dict) else doc
        text = str(err.get("message", err) if isinstance(err, dict) else err)
    except ValueError:
        pass
    text = " ".join(text.split())[:200]
    return f": {text}" if text else ""


_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_POSITION = re.compile(r'position="(\d+)"')


def parse_prometheus(text: str) -> dict[str, float]:
    """Metric name -> its value summed over label sets. A sample with a `position` label (vLLM's per-position
    acceptance) is also kept under `name[position]`. Comments and unparsable lines are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if not m:
            continue
        name, labels, raw = m.groups()
        try:
            value = float(raw)
        except ValueError:
            continue
        out[name] = out.get(name, 0.0) + value
        pos = _POSITION.search(labels or "")
        if pos:
            key = f"{name}[{pos.group(1)}]"
            out[key] = out.get(key, 0.0) + value
    return out


def counter(metrics: dict[str, float], name: str) -> float | None:
    """A counter by its base name: exposition adds `_total` to counters (prometheus_client does; some servers
    write the bare name), so both spellings are read. `name[i]` reads the sample labelled position="i"."""
    base, bracket, pos = name.partition("[")
    for key in (f"{base}_total{bracket}{pos}", name):
        if key in metrics:
            return metrics[key]
    return None
