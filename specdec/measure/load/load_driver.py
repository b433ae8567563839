"""One load window against one server: warm-up, measured and cool-down requests at a load level, each streamed,
each one's latencies on one clock, from its scheduled send.

The warm-up fills the server's slots (and its caches) before anything counts, the cool-down keeps them filled
while the last measured requests finish, so that the measured requests all ran at the level's load and none in
a ramp or a drain. Closed loop: `concurrency` client threads, each sending its next request when its last
finished (a request's scheduled time is then its send); its cool-down is C - 1 requests, one for each other
client. Open loop: `load_schedule.dispatch` launches each request at its scheduled time on a thread of its own;
after the measured requests the arrivals go on at the same rate, up to `cooldown` more, until every measured
request has finished (a server slower than the rate is still being offered the rate while its queue drains).

Every reply's length is checked against the `max_tokens` its request asked for: a reply with fewer tokens
(the server's context full, a stop it should not have made) is `short` in its record.

A request that fails (the stream refused, reset, timed out, cut) stops the window: no new request is sent,
those in flight finish or fail, and the window comes back with `failure` set; the caller decides that the
server is gone. Every loop is bounded: by the request count, and by `deadline` on the clock (no request is
sent after it; each has its own timeout).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from specdec.engines.openai_stream import StreamFailure, Streamed, stream_completion
from specdec.measure.load.load_schedule import Level, arrival_offsets, dispatch


@dataclass
class Record:
    """One request: when it was scheduled, sent, got its first token and finished (seconds on the run's clock),
    its tokens (and the max_tokens it asked for), the gaps between tokens, its text, the server's draft counts,
    and whether it is measured (counted in the window's figures) or a warm-up or cool-down."""

    index: int
    prompt: int
    measured: bool
    scheduled: float
    sent: float | None = None
    first: float | None = None
    done: float | None = None
    tokens: int = 0
    gaps: list[float] = field(default_factory=list)
    text: str = ""
    drafted: int | None = None
    accepted: int | None = None
    error: str | None = None
    asked: int | None = None  # the request's max_tokens (None: it set none)

    @property
    def ok(self) -> bool:
        return self.error is None and self.done is not None

    @property
    def short(self) -> bool:
        """A completed reply with fewer tokens than asked (its request sets min_tokens and ignore_eos, so it
        should have had them all)."""
        return self.ok and self.asked is not None and self.tokens < self.asked

    @property
    def ttft(self) -> float:
        return self.first - self.scheduled

    @property
    def e2el(self) -> float:
        return self.done - self.scheduled

    @property
    def tpot(self) -> float:
        """Time per output token after the first: (done - first) / (tokens - 1)."""
        return (self.done - self.first) / max(self.tokens - 1, 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["gaps"] = [round(g, 6) for g in self.gaps]
        for key in ("scheduled", "sent", "first", "done"):
            d[key] = None if d[key] is None else round(d[key], 6)
        d["short"] = self.short
        return d


@dataclass
class Window:
    """One window's requests, and the first failure that stopped it (None: it ran whole)."""

    records: list[Record]
    failure: str | None = None

    def measured_records(self) -> list[Record]:
        """The completed requests the window's figures count (warm-up and cool-down left out)."""
        return [r for r in self.records if r.measured and r.ok]


def gaps_of(streamed: Streamed, first: float) -> list[float]:
    """Inter-token latencies: the gap before each chunk after the first, and 0 for each further token a chunk
    carried (several tokens in one chunk arrived together)."""
    out, last = [], first
    for i, (t, n) in enumerate(streamed.arrivals):
        if i:
            out.append(t - last)
        out.extend([0.0] * (n - 1))
        last = t
    return out


def run_window(url: str, level: Level, payloads: list[dict], warmup: int, cooldown: int,
               now: Callable[[], float], sleep: Callable[[float], None] | None, timeout: float,
               deadline: float = math.inf, seed: int = 0, burstiness: float = 1.0,
               stream: Callable = stream_completion) -> Window:
    """Send every payload at `level` (module docstring); payloads[i] is request i (its prompt index in
    `payload['_prompt']`, not sent). `sleep` is the open loop's wait until the next send on the `now` clock
    (a test's fake clock hands its own); None waits on the window's own event, which a failure or the end of
    the cool-down cuts short."""
    total = len(payloads)
    first_cool = total - cooldown
    records = [Record(i, payloads[i].get("_prompt", i), warmup <= i < first_cool, math.nan,
                      asked=payloads[i].get("max_tokens")) for i in range(total)]
    measured_records = [r for r in records if r.measured]
    stop = threading.Event()  # a request failed: nothing more is sent
    halt = threading.Event()  # stop, or every measured request done: the open loop's wait ends at once
    failure: list[str] = []
    lock = threading.Lock()
    unfinished = [len(measured_records)]

    def send(i: int, scheduled: float) -> None:
        rec = records[i]
        rec.scheduled, rec.sent = scheduled, now()
        body = {k: v for k, v in payloads[i].items() if not k.startswith("_")}
        try:
            got = stream(url, body, timeout, now)
        except StreamFailure as exc:
            rec.error = str(exc)
            with lock:
                if not failure:
                    failure.append(str(exc))
            stop.set()
            halt.set()
            return
        rec.done = now()
        rec.first = got.arrivals[0][0] if got.arrivals else rec.done
        rec.tokens, rec.text, rec.gaps = got.tokens, got.text, gaps_of(got, rec.first)
        if "draft_n" in got.timings:
            rec.drafted, rec.accepted = int(got.timings["draft_n"]), int(got.timings.get("draft_n_accepted", 0))
        if rec.measured:
            with lock:
                unfinished[0] -= 1
                if not unfinished[0]:
                    halt.set()

    threads: list[threading.Thread] = []
    if level.kind == "concurrency":
        _closed(send, total, int(level.value), now, stop, deadline, threads)
    else:
        def launch(i: int, scheduled: float) -> bool:
            if stop.is_set():  # a failed request ends the window: nothing more is sent
                return False
            # a cool-down request goes out only while a measured one is still running at its scheduled time
            # (compared on the plan's time, so that a late launch does not add one)
            if i >= first_cool and all(r.done is not None and r.done <= scheduled for r in measured_records):
                return False
            t = threading.Thread(target=send, args=(i, scheduled), daemon=True, name=f"load-request-{i}")
            threads.append(t)
            t.start()
            return True

        offsets = arrival_offsets(total, level.value, burstiness, seed)
        start = now()
        dispatch(offsets, start, now, sleep or (lambda s: halt.wait(s) or None), launch, deadline=deadline)
    for t in threads:
        t.join(timeout + 5.0)  # each request has its own timeout; this only bounds a hung thread
    sent = [r for r in records if r.sent is not None]
    return Window(sent, failure[0] if failure else None)


def _closed(send, total: int, clients: int, now, stop: threading.Event, deadline: float,
            threads: list[threading.Thread]) -> None:
    """`clients` threads taking request indices in order, each sending its next when its last finished."""
    lock = threading.Lock()
    nxt = [0]

    def client() -> None:
        while not stop.is_set() and now() < deadline:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= total:
                return
            send(i, now())

    for c in range(min(clients, total)):
        t = threading.Thread(target=client, daemon=True, name=f"load-client-{c}")
        threads.append(t)
        t.start()
    for t in threads:
        t.join()
