"""Start and stop a real `llama-server` (the binary `server_build` caches) on 127.0.0.1, with parallel slots.

A `ServerSpec` says what one server runs: the target GGUF, `-np` slots, and the speculation, if any:
`--spec-type draft-simple` with the draft GGUF as `-md` and `--spec-draft-n-max K`, or one of the server's own
n-gram kinds (`ngram-simple`, `ngram-map-k`, `ngram-mod`, `ngram-cache`) that need no second model. Speculation
is off unless `--spec-type` names a kind. Flags are this build's (`llama-server --help`): older llama.cpp
spelled the draft length `--draft-max`.

Every server gets `--metrics` (the counters the load driver reads), `-t 1` per server unless told (two servers
of a pair share the machine), a context of `ctx` positions per slot (`-c` is the total, split over the slots;
`slot_context` sizes it from the prompts and the tokens asked for; this build rounds a slot up to a multiple
of 256 positions and caps it at the model's training context, and a reply that still runs out of room comes
back short, which the load driver marks), no prompt cache reuse across requests (`--cache-reuse 0`; the requests
also send `cache_prompt: false`), no warm-up run and no web UI. Its output goes to a log file, never a pipe that
could fill and stall it.

A port that is already taken, a binary or a model that is not there, is bad input (an InputError: one line)
before the process starts; a server that exits before its `/health` answers, or does not answer within
`start_timeout`, is a `ServerStartError` (a Failure: the command's exit 1) with the last lines of its log and the
log's path, the log kept for reading. `stop` asks with SIGTERM, then kills after a grace period;
`with LlamaServer(...) as s:` always stops.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from specdec.engines import openai_http as http
from specdec.util.errors import Failure, InputError, tail_of

HOST = "127.0.0.1"
SPEC_TYPES = ("draft-simple", "ngram-simple", "ngram-map-k", "ngram-mod", "ngram-cache")
START_TIMEOUT = 60.0  # seconds for a small GGUF to load and /health to answer
SPECIAL_TOKENS = 2  # what a tokenizer may add to a prompt beyond its text: BOS, SentencePiece's space prefix
STOP_GRACE = 10.0  # seconds between SIGTERM and SIGKILL


class ServerStartError(Failure):
    """The server, its inputs checked, would not start: it exited before /health answered, or did not answer in
    time. Not the user's input (that is an InputError before the process starts): the command's exit 1."""


@dataclass
class ServerSpec:
    """One server's command line (module docstring). `spec_type` None: no speculation."""

    model: str
    slots: int = 1
    spec_type: str | None = None
    draft_model: str | None = None
    n_max: int = 4
    threads: int = 1
    ctx: int = 256  # positions per slot (the shipped model's whole context); `slot_context` sizes it to a load
    extra: list[str] = field(default_factory=list)

    def check(self) -> None:
        """InputError naming the bad value before any process starts."""
        if self.slots < 1:
            raise InputError(f"slots must be at least 1, got {self.slots}")
        if self.threads < 1:
            raise InputError(f"server threads must be at least 1, got {self.threads}")
        if self.ctx < 1:
            raise InputError(f"a slot's context must be at least 1 position, got {self.ctx}")
        if self.n_max < 1:
            raise InputError(f"--n-max must be at least 1, got {self.n_max}")
        if not Path(self.model).is_file():
            raise InputError(f"target GGUF {self.model} does not exist (make one with `specdec export-gguf OUT`)")
        if self.spec_type is not None and self.spec_type not in SPEC_TYPES:
            raise InputError(f"--spec-type {self.spec_type!r} is not one of this server's kinds "
                             f"(allowed: {', '.join(SPEC_TYPES)})")
        if self.spec_type == "draft-simple" and not (self.draft_model and Path(self.draft_model).is_file()):
            raise InputError(f"--spec-type draft-simple needs the draft GGUF; {self.draft_model!r} does not exist")

    def argv(self, binary: str, port: int) -> list[str]:
        """The full command line."""
        cmd = [binary, "-m", self.model, "--host", HOST, "--port", str(port), "-np", str(self.slots),
               "-c", str(self.ctx * self.slots), "-t", str(self.threads), "--metrics", "--no-warmup",
               "--no-webui", "--cache-reuse", "0"]
        if self.spec_type is not None:
            cmd += ["--spec-type", self.spec_type, "--spec-draft-n-max", str(self.n_max)]
            if self.spec_type == "draft-simple":
                cmd += ["-md", str(self.draft_model), "--spec-draft-threads", str(self.threads)]
        return cmd + list(self.extra)

    def label(self) -> str:
        return "off" if self.spec_type is None else f"{self.spec_type} n_max={self.n_max}"


def slot_context(prompts: list[str], max_tokens: int, n_max: int) -> int:
    """Positions one slot needs for the longest prompt and `max_tokens` after it, with a round of n_max drafts
    plus one still fitting at the end (as the workload check keeps: the spec server never drafts less near the
    end for want of room, so both servers generate alike).

    The prompt's tokens are bounded from its text before any server runs: at most one per UTF-8 byte (byte-level
    and byte-fallback vocabularies make no more, and the shipped model's one-character tokens make one per
    character), plus SPECIAL_TOKENS a tokenizer may add."""
    longest = max(len(p.encode("utf-8")) for p in prompts) + SPECIAL_TOKENS
    return longest + max_tokens + n_max + 1


def free_port() -> int:
    """A port the OS says is free now on 127.0.0.1 (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def check_port(port: int) -> None:
    """InputError when `port` on 127.0.0.1 is taken or not a port (the user's to change, before any start)."""
    if not 1 <= port <= 65535:
        raise InputError(f"--port {port} is not a port (allowed: 1-65535)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
        except OSError as exc:
            raise InputError(f"port {port} on {HOST} is in use ({exc.strerror}); give another --port "
                                   "or stop what holds it") from None


class LlamaServer:
    """One llama-server process on 127.0.0.1 (module docstring)."""

    def __init__(self, binary: str | os.PathLike, spec: ServerSpec, port: int | None = None,
                 start_timeout: float = START_TIMEOUT):
        spec.check()
        if not (Path(binary).is_file() and os.access(binary, os.X_OK)):
            raise InputError(f"llama-server binary {binary} is missing (build it: specdec build-server)")
        if port is not None:
            check_port(port)
        self.binary, self.spec, self.start_timeout = str(binary), spec, start_timeout
        self.port = port or free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.proc: subprocess.Popen | None = None
        self._dir = tempfile.TemporaryDirectory(prefix="specdec-llama-server-")
        self.log_path = Path(self._dir.name) / "server.log"

    @property
    def argv(self) -> list[str]:
        return self.spec.argv(self.binary, self.port)

    def start(self) -> "LlamaServer":
        """Start the process and wait for /health to answer 200; ServerStartError if it does not."""
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)  # its own group: a Ctrl-C reaches us, not it
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise self._failed(f"llama-server exited with {self.proc.returncode} before /health answered "
                                   f"(command: {' '.join(self.argv)})")
            try:
                if http.request(f"{self.url}/health", 2.0).status == 200:
                    return self
            except http.HttpFailure:
                pass  # loading (503) or not listening yet
            time.sleep(0.1)
        self.stop()
        raise self._failed(f"llama-server did not answer /health within {self.start_timeout:g} s "
                           f"(command: {' '.join(self.argv)})")

    def _failed(self, summary: str) -> ServerStartError:
        """The start's failure with its log's last lines and a copy of the log in a file of its own, which stays
        for the reader (the server's folder goes when this object does)."""
        fd, kept = tempfile.mkstemp(prefix="specdec-llama-server-", suffix=".log")
        os.close(fd)
        try:
            shutil.copyfile(self.log_path, kept)
        except OSError:  # no log was written: the summary is all there is
            os.unlink(kept)
            return ServerStartError(summary)
        return ServerStartError(summary, tail_of(kept), Path(kept))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash would end it (the tests' killed server)."""
        if self.alive():
            self.proc.kill()
            self.proc.wait(STOP_GRACE)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_GRACE seconds; safe to call twice."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_GRACE)

    def last_line(self) -> str:
        lines = tail_of(self.log_path, 1)
        return lines[0].strip()[:200] if lines else "no output"

    def describe(self) -> dict:
        return {"url": self.url, "argv": self.argv, "speculation": self.spec.label(), "slots": self.spec.slots}

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self._dir.cleanup()
