"""The served engine against a real server: llama-cpp-python's, on the shipped target exported as GGUF, started
twice on 127.0.0.1 by this module (once with its prompt-lookup draft, once without) and killed at its end.

What llama-cpp-python's server (0.3.36) gives, read in its source (llama_cpp/server/app.py, types.py, model.py):
the `draft_model` setting is prompt lookup (`LlamaPromptLookupDecoding`, `draft_model_num_pred_tokens` tokens a
round); a completion reply carries text, finish_reason and usage but no draft counts and no token ids, and the
server serves no /metrics, /props or /version, so drafted/accepted are None ("none" in describe) and only the
text can be compared. It honours `min_tokens` and `seed`, ignores `cache_prompt` and `ignore_eos`.

Every loop is bounded: a fixed number of requests, each with a timeout, and a deadline for a server to start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from specdec.engines import registry
from specdec.engines.base import EngineOptions, Spec
from specdec.engines.openai_api import ServerGone

pytest.importorskip("llama_cpp.server")
pytest.importorskip("gguf")
export_gguf = pytest.importorskip("specdec.model.export_gguf")

K = 4  # the prompt-lookup server's tokens per round
START_DEADLINE = 90.0  # seconds for a server to load the model and answer /v1/models
REQUEST_TIMEOUT = 60.0
PROMPTS = ("ROMEO:\n", "JULIET:\nO Romeo, Romeo! wherefore art thou Romeo?\n", "the king, the king, the king, the ")
MAX_NEW = 48


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """`python -m llama_cpp.server` on 127.0.0.1, in its own process group, its log in `log`."""

    def __init__(self, model: str, log: str, draft: bool):
        self.url = f"http://127.0.0.1:{free_port()}"
        args = [sys.executable, "-m", "llama_cpp.server", "--model", model, "--host", "127.0.0.1",
                "--port", self.url.rsplit(":", 1)[1], "--n_ctx", "256", "--n_threads", "1", "--verbose", "False"]
        if draft:
            args += ["--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", str(K)]
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self) -> None:
        """Poll /v1/models until it answers, the process exits or the deadline passes (bounded either way)."""
        deadline = time.monotonic() + START_DEADLINE
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited {self.proc.returncode}: {open(self.log).read()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/v1/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"llama_cpp.server did not answer within {START_DEADLINE} s: {open(self.log).read()[-2000:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def gguf_target(tmp_path_factory) -> str:
    return str(export_gguf.export_gguf(tmp_path_factory.mktemp("gguf"))["target"])


@pytest.fixture(scope="module")
def servers(gguf_target, tmp_path_factory):
    """(speculative, baseline) servers, started together and killed at the module's end, whatever happened."""
    logs = tmp_path_factory.mktemp("logs")
    started = []
    try:
        for draft in (True, False):
            started.append(LlamaServer(gguf_target, str(logs / f"server-{draft}.log"), draft))
        for s in started:
            s.wait_ready()
        yield tuple(started)
    finally:
        for s in started:
            s.kill()


def open_engine(spec_url: str, base_url: str):
    eng = registry.engine_class("openai").open(EngineOptions(url=spec_url, baseline_url=base_url, log=lambda s: None),
                                               request_timeout=REQUEST_TIMEOUT)
    return eng


def test_greedy_equality_and_no_counts_from_llama_cpp_python(servers):
    spec_server, base_server = servers
    eng = open_engine(spec_server.url, base_server.url)
    d = eng.describe()
    assert d["counts"] == "none" and d["metrics"] is None
    assert d["models"]["speculative"].endswith("target.gguf") and d["models"]["baseline"] == d["models"]["speculative"]
    requests = 0
    for prompt in PROMPTS:
        for _ in range(2):  # the second time the prompt is in each server's cache: the answer must not change
            fast = eng.generate(prompt, MAX_NEW, 0, 0.0, spec=Spec("server", K))
            slow = eng.generate(prompt, MAX_NEW, 0, 0.0)
            requests += 2
            assert fast.text == slow.text, (prompt, fast.text, slow.text)
            assert len(fast.text) == MAX_NEW  # one character per token: the exported vocabulary is characters
            assert (fast.drafted, fast.accepted, fast.target_passes, fast.accepted_per_position) == (None,) * 4
            assert fast.tokens == slow.tokens == []
    assert requests == 2 * 2 * len(PROMPTS)
    assert eng.describe()["token_ids"] == "not returned"


def test_sampled_generation_is_exactly_max_new_long(servers):
    spec_server, base_server = servers
    eng = open_engine(spec_server.url, base_server.url)
    for seed in (1, 2):
        for spec in (Spec("server", K), None):
            assert len(eng.generate("ROMEO:\n", 20, seed, 1.0, spec=spec).text) == 20


def test_a_real_server_killed_mid_run_raises_server_gone(gguf_target, servers, tmp_path):
    _, base_server = servers
    doomed = LlamaServer(gguf_target, str(tmp_path / "doomed.log"), draft=True)
    try:
        doomed.wait_ready()
        eng = open_engine(doomed.url, base_server.url)
        eng.generate("ROMEO:\n", 8, 0, 0.0, spec=Spec("server", K))
        doomed.kill()
        with pytest.raises(ServerGone, match=f"speculative server {doomed.url}: POST .* failed"):
            eng.generate("ROMEO:\n", 8, 0, 0.0, spec=Spec("server", K))
        assert len(eng.generate("ROMEO:\n", 8, 0, 0.0).text) == 8  # the baseline still answers
    finally:
        doomed.kill()
