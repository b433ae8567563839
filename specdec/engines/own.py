"""specdec's own loop as an engine: `decoding.generate` behind the `Engine` protocol.

`specdec report` measures this loop with its full set of sections; as an engine it runs beside another
engine on the same pair (`--engine specdec transformers`), so that the two loops' speedups, acceptance and
tokens per pass come from the same alternated pairs and workload.
"""

from __future__ import annotations

from specdec.decoding.drafts import Draft
from specdec.decoding.generate import Generation, generate, speculative_generate
from specdec.decoding.registry import make_draft
from specdec.engines.base import EngineOptions, EngineResult, Spec
from specdec.model import protocol
from specdec.model.train import HF_PREFIX, load_target
from specdec.util.errors import InputError

# The drafts every engine can run on the shipped pair (llama.cpp and transformers get `small` as an exported
# model of its own, prompt lookup as their built-in), so the engines' rows line up by name.
SHIPPED_PAIR_DRAFTS = ("small", "prompt-lookup")


class OwnEngine:
    """specdec's generation loop (see the module docstring)."""

    name = "specdec"

    def __init__(self, target, drafts: dict[str, Draft], target_spec: str | None):
        self.target = target
        self._drafts = drafts
        self.target_spec = target_spec
        self.units = protocol.units(target)

    @classmethod
    def open(cls, options: EngineOptions) -> OwnEngine:
        """The target as `specdec report` loads it (the shipped checkpoint on the fastest backend of the device,
        or hf:PATH through transformers) and each draft built for it; a draft it cannot have is an InputError."""
        from specdec.model.backends import fastest

        spec = options.target
        if spec is not None and spec.startswith(HF_PREFIX):
            target = load_target(spec, device=options.device, dtype=options.dtype)
        else:
            target = load_target(spec, backend=fastest(options.device), device=options.device)
        names = list(options.drafts) or ([*SHIPPED_PAIR_DRAFTS] if getattr(target, "corpus_vocabulary", True)
                                         else ["prompt-lookup"])
        extra = {"dtype": options.dtype} if options.dtype else {}
        drafts = {n: make_draft(n, target, **(extra if n.startswith(HF_PREFIX) else {})) for n in names}
        return cls(target, drafts, spec)

    def describe(self) -> dict:
        import specdec
        from specdec.model.backends import backend_of
        from specdec.model.gpt import GPT

        backend = backend_of(self.target) if isinstance(self.target, GPT) else "transformers"
        return {"engine": self.name, "version": specdec.__version__, "target": protocol.describe(self.target),
                "backend": backend, "drafts": list(self._drafts)}

    def drafts(self) -> list[str]:
        return list(self._drafts)

    def generate(self, prompt: str, max_new: int, seed: int, temperature: float,
                 spec: Spec | None = None) -> EngineResult:
        if spec is None:
            return _result(generate(self.target, prompt, max_new, seed, temperature))
        if spec.draft not in self._drafts:
            raise InputError(f"draft {spec.draft!r} was not opened (opened: {', '.join(self._drafts)})")
        return _result(speculative_generate(self.target, self._drafts[spec.draft], prompt, max_new, spec.k, seed,
                                            temperature))

    def close(self) -> None:
        self._drafts.clear()


def _result(g: Generation) -> EngineResult:
    s = g.stats
    spec = s.k > 0
    return EngineResult(g.text, list(g.ids), s.drafted if spec else 0, s.accepted if spec else 0,
                        s.target_passes, list(s.accepted_per_position) if spec else None)
