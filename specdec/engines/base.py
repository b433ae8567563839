"""The engine seam: target-only and speculative generation run by an engine, as the report times them.

specdec's own loop (`decoding.generate`) is one engine; transformers' assisted generation, llama.cpp and an
OpenAI-compatible server are others. The report never looks inside an engine: it calls `generate` for the same
prompt, seed and length with `spec=None` (target-only) and with a `Spec` (speculative), alternated in pairs,
and reads the counts each result carries. An engine reports the counts it can see and leaves the rest None;
the report says "not reported by this engine" for those.

An engine is opened by `registry.open_engine` from an `EngineOptions`; every check of what the user gave it
(a missing extra, a path that is not a model, a draft with another vocabulary, a server that does not answer)
happens in `open`, raising `InputError`, before anything is timed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, Protocol, runtime_checkable


class EngineError(RuntimeError):
    """An engine failed while the report ran (a server that stopped answering, a reply of the wrong length):
    not bad input, which `open` finds first. The report stops, keeps what it measured, marked incomplete."""


@dataclass(frozen=True)
class Spec:
    """One speculative configuration: the draft as the user named it ("prompt-lookup", "hf:PATH",
    "gguf:PATH", a shipped draft's name, "server" for a served engine's own) and the tokens it drafts per
    round (for an engine whose draft length is set by its server, the k the user says it was started with)."""

    draft: str
    k: int


@dataclass
class EngineResult:
    """One generation through an engine. Counts are None where the engine does not expose them."""

    text: str  # the generated text (the prompt not included)
    tokens: list[int]  # the generated ids in the engine's vocabulary: greedy equality is checked on these
    drafted: int | None = None  # tokens the draft proposed
    accepted: int | None = None  # proposed tokens the target kept
    target_passes: int | None = None  # target forward passes (prefill included)
    accepted_per_position: list[int] | None = None  # rounds by accepted count 0..k

    COUNTS = ("drafted", "accepted", "target_passes", "accepted_per_position")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EngineOptions:
    """What the command line gives an engine to open with."""

    target: str | None = None  # --target: None for the shipped model (each engine says how it loads it)
    drafts: list[str] = field(default_factory=list)  # --drafts, as named
    device: str = "cpu"
    dtype: str | None = None
    threads: int = 1
    url: str | None = None  # served engines: the endpoint with speculation
    baseline_url: str | None = None  # ... and the one without
    log: Callable[[str], None] = print


@runtime_checkable
class Engine(Protocol):
    """An engine that generates with and without speculation (see the module docstring)."""

    name: str  # the registry's name: "specdec", "transformers", "llama-cpp", "openai"
    units: str  # what one generated position is: "characters" or "tokens"

    def describe(self) -> dict:
        """Who ran: engine and library versions, target and drafts as loaded, settings pinned (report.json)."""

    def drafts(self) -> list[str]:
        """The drafts it was opened with, as named; each is a valid `Spec.draft`."""

    def generate(self, prompt: str, max_new: int, seed: int, temperature: float,
                 spec: Spec | None = None) -> EngineResult:
        """Exactly `max_new` new tokens after `prompt` (fewer only at an end-of-text the engine cannot
        suppress), sampled with `seed` at `temperature` (0: greedy); speculative when `spec` is given."""

    def close(self) -> None:
        """Release models, processes and connections (a served engine leaves its servers running)."""
