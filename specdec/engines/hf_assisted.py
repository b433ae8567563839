"""transformers' own assisted generation as an engine: `generate(assistant_model=DRAFT)` and
`generate(prompt_lookup_num_tokens=K)` against plain `generate()`, as users deploy it.

What is pinned, and why:

- Generation settings. Each model's own `generation_config` (a checkpoint's `generation_config.json` may set
  top_p, a repetition penalty, sampling) is replaced at open by a neutral one that keeps only its bos/eos/pad
  ids, and every call passes `max_new_tokens = min_new_tokens = max_new` (an end-of-text is suppressed, so
  exactly max_new tokens come out), `do_sample=False` at temperature 0, else `do_sample=True` with the
  temperature, `top_k=0`, `top_p=1.0`. Target-only and speculative calls differ only in the assistant.
- The draft length. transformers (5.x) reads `num_assistant_tokens`, its schedule and
  `assistant_confidence_threshold` from the *assistant's* generation_config, not from `generate`'s arguments.
  Its "heuristic" schedule writes the adapted length back into that config at the end of a call, so it carries
  from one call to the next, and the confidence threshold (0.4 by default) stops a round's drafting early and
  adapts too. Before every call the assistant's config is set again to k, "constant" and threshold 0: every
  call drafts k per round (fewer only at the end), whatever ran before.
- The seed. transformers samples with `torch.multinomial` on torch's default generator, so
  `torch.manual_seed(seed)` before a call makes it reproducible (`transformers.set_seed` would also reset
  Python's and numpy's global generators, which other code in the process owns).

Counts come from the engine's own candidate generator. `_assisted_decoding` builds it with the model's
`_get_candidate_generator` and, each round, calls its `get_candidates(input_ids)` (the candidate sequence:
drafted = its length minus the input's) and then `update_candidate_strategy(input_ids, scores, num_matches)`
(the documented `CandidateGenerator` method that receives the accepted count). For the duration of one call
the target *instance* gets a `_get_candidate_generator` that wraps those two methods on the generator it
returns; the attribute is deleted afterwards, so nothing outside the call is changed. A forward hook on the
target counts its passes (prefill included). Each call checks its own counts: the tokens emitted must be
sum(accepted + 1) over the rounds, and the rounds must equal the target's passes; a transformers release that
reorganised the loop fails loudly there instead of reporting wrong counts. `_get_candidate_generator` is
private: `check_hook` looks for it and the documented signatures at open.

The first round's target pass also prefills the prompt (as in specdec's own loop), so target_passes = rounds;
a round with nothing drafted (the last token, or prompt lookup finding no match) is a pass but not a drafting
round, and is left out of accepted_per_position.

Greedy equality of assisted and target-only output is exact arithmetic only in float32: in float16/bfloat16 a
verify pass over k + 1 positions rounds differently from k + 1 single steps, so a near-tie can flip and the
outputs part (a property of the dtype, which the report's greedy check then shows, not of the engine).
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import shutil
import tempfile
from pathlib import Path

import torch
import transformers  # at import: a missing [hf] extra is the registry's one-line error naming the extra
from transformers import GenerationConfig

from specdec.decoding.generate import check_request
from specdec.engines.base import EngineOptions, EngineResult, Spec
from specdec.engines.hf_counts import RoundCounts, observe_rounds
from specdec.model.hf import HFTarget, check_dtype, check_same_vocabulary, load_hf
from specdec.util import versions
from specdec.util.errors import InputError

HF_PREFIX = "hf:"
PROMPT_LOOKUP = "prompt-lookup"
HOOK_VERSION = "5.24.0"  # the release whose assisted loop the hook was read against (== the [hf] floor)
# transformers' assisted loop calls the assistant's own `generate` with a generation_config beside length
# arguments and with its own min-new-tokens processor, then warns about that call: nothing the user can change
INTERNAL_WARNINGS = ("Passing `generation_config` together with", "A custom logits processor of type")


class _InternalWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(INTERNAL_WARNINGS)


@contextlib.contextmanager
def _without_internal_warnings():
    """Drop INTERNAL_WARNINGS from transformers' generation logger for one call; every other warning stays."""
    log, quiet = logging.getLogger("transformers.generation.utils"), _InternalWarnings()
    log.addFilter(quiet)
    try:
        yield
    finally:
        log.removeFilter(quiet)


def check_hook() -> None:
    """InputError (one line) when the installed transformers lacks what the counts are read through."""
    versions.require("transformers")
    from transformers.generation import candidate_generator as cg
    from transformers.generation.utils import GenerationMixin

    have = transformers.__version__
    needs = f"the transformers engine needs transformers>={HOOK_VERSION}"
    if not hasattr(GenerationMixin, "_get_candidate_generator"):
        raise InputError(f"transformers {have} has no GenerationMixin._get_candidate_generator; {needs}")
    for name, params in (("get_candidates", ["self", "input_ids"]),
                         ("update_candidate_strategy", ["self", "input_ids", "scores", "num_matches"])):
        method = getattr(cg.CandidateGenerator, name, None)
        got = list(inspect.signature(method).parameters)[: len(params)] if method else []
        if got != params:
            raise InputError(f"transformers {have}: CandidateGenerator.{name} is not ({', '.join(params[1:])}); {needs}")


def neutral_config(model, **pinned):
    """A GenerationConfig with only `model`'s special-token ids and `pinned`: its checkpoint's own defaults
    (sampling, penalties, lengths) must not change what either side of a pair computes."""
    old = model.generation_config
    ids = {key: getattr(old, key, None) for key in ("bos_token_id", "eos_token_id", "pad_token_id")}
    if ids["pad_token_id"] is None:  # a pad id stops generate's per-call warning; batch 1 never pads
        eos = ids["eos_token_id"]
        ids["pad_token_id"] = eos[0] if isinstance(eos, list) and eos else eos
    return GenerationConfig(**ids, **pinned)


def _load(path: str, options: EngineOptions) -> HFTarget:
    return load_hf(path, device=options.device, dtype=options.dtype)


class TransformersEngine:
    """transformers' `generate`, target-only and assisted (see the module docstring)."""

    name = "transformers"

    def __init__(self, target: HFTarget, target_path: str, assistants: dict[str, tuple[str, object | None]],
                 options: EngineOptions, export_dir: Path | None = None):
        self.target = target
        self.model = target.model
        self.target_path = target_path
        self.assistants = assistants  # draft name -> (path or "", assistant model; None for prompt lookup)
        self.options = options
        self.export_dir = export_dir
        self.units = "characters" if target.corpus_vocabulary else "tokens"
        self.model.generation_config = neutral_config(self.model)
        for _path, assistant in assistants.values():
            if assistant is not None:
                assistant.generation_config = neutral_config(assistant)

    @classmethod
    def open(cls, options: EngineOptions) -> TransformersEngine:
        """Load the target and drafts; every bad input is a one-line InputError before anything runs."""
        check_hook()
        check_dtype(options.dtype)  # before an export or a load: a bad name costs nothing
        if not isinstance(options.threads, int) or options.threads < 1:
            raise InputError(f"threads must be a whole number of at least 1, got {options.threads!r}")
        export_dir = None
        shipped: dict[str, str] = {}
        if options.target is None:
            from specdec.model.export_hf import export_hf

            export_dir = Path(tempfile.mkdtemp(prefix="specdec-hf-engine-"))
            folders = export_hf(export_dir)
            target_path = str(folders.pop("target"))
            shipped = {name: str(folder) for name, folder in folders.items()}
        elif options.target.startswith(HF_PREFIX) and options.target[len(HF_PREFIX):]:
            target_path = options.target[len(HF_PREFIX):]
        else:
            raise InputError(f"target {options.target!r}: the transformers engine takes hf:PATH (a transformers "
                             f"model folder) or no --target (the shipped pair, exported)")
        try:
            torch.set_num_threads(options.threads)
            target = _load(target_path, options)
            # by default: the drafts every engine runs on the shipped pair, or prompt lookup beside a user's target
            names = options.drafts or [*(n for n in ("small",) if n in shipped), PROMPT_LOOKUP]
            assistants = {name: _draft(name, target, shipped, options) for name in names}
        except BaseException:
            if export_dir is not None:
                shutil.rmtree(export_dir, ignore_errors=True)
            raise
        return cls(target, target_path, assistants, options, export_dir)

    def drafts(self) -> list[str]:
        return list(self.assistants)

    def describe(self) -> dict:
        return {
            "engine": self.name, "transformers": transformers.__version__, "torch": torch.__version__,
            "target": self.target_path if self.export_dir is None else "the shipped target, exported (export-hf)",
            "drafts": {name: path or "transformers' PromptLookupCandidateGenerator"
                       for name, (path, _a) in self.assistants.items()},
            "dtype": str(self.target.dtype).removeprefix("torch."), "device": str(self.target.device),
            "threads": torch.get_num_threads(), "units": self.units,
            "schedule": {"num_assistant_tokens": "k", "num_assistant_tokens_schedule": "constant",
                         "assistant_confidence_threshold": 0.0, "prompt_lookup_num_tokens": "k",
                         "max_matching_ngram_size": "2 (transformers' default for prompt lookup)",
                         "reset": "before every call"},
            "sampling": "greedy at temperature 0; else temperature t, top_k 0, top_p 1.0; the models' own "
                        "generation_config replaced by a neutral one; min_new_tokens = max_new_tokens",
            "counts": "per round from the candidate generator's get_candidates / update_candidate_strategy; "
                      "target passes from a forward hook",
        }

    def generate(self, prompt: str, max_new: int, seed: int, temperature: float,
                 spec: Spec | None = None) -> EngineResult:
        """Exactly `max_new` tokens after `prompt` through `model.generate` (see the module docstring)."""
        k = 0 if spec is None else spec.k
        if spec is not None:
            if spec.draft not in self.assistants:
                raise InputError(f"unknown draft {spec.draft!r} (allowed: {', '.join(self.assistants) or 'none opened'})")
            if k < 1:
                raise InputError(f"k must be at least 1, got {k}")
        ids = check_request(self.target, prompt, max_new, k=k, temperature=temperature)
        kwargs = self._settings(max_new, temperature, spec)
        counts = RoundCounts(k)
        inputs = torch.tensor([ids], dtype=torch.long, device=self.target.device)
        torch.manual_seed(seed)
        with torch.inference_mode(), _without_internal_warnings(), observe_rounds(self.model, counts, spec is not None):
            out = self.model.generate(input_ids=inputs, attention_mask=torch.ones_like(inputs), **kwargs)
        new = [int(t) for t in out[0, len(ids):].tolist()]
        result = EngineResult(text=self.target.detokenize(new), tokens=new, target_passes=counts.passes)
        if spec is None:
            result.drafted, result.accepted = 0, 0
        else:
            counts.check(len(new), spec)
            result.drafted, result.accepted = counts.drafted, counts.accepted
            result.accepted_per_position = list(counts.per_position)
        return result

    def _settings(self, max_new: int, temperature: float, spec: Spec | None) -> dict:
        """generate's arguments for one call; the assistant's draft-length settings set again (see above)."""
        kwargs: dict = {"max_new_tokens": max_new, "min_new_tokens": max_new}
        if temperature == 0:
            kwargs["do_sample"] = False
        else:
            kwargs.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0)
        if spec is not None:
            _path, assistant = self.assistants[spec.draft]
            if assistant is None:
                kwargs["prompt_lookup_num_tokens"] = spec.k
            else:
                assistant.generation_config = neutral_config(
                    assistant, num_assistant_tokens=spec.k, num_assistant_tokens_schedule="constant",
                    assistant_confidence_threshold=0.0)
                kwargs["assistant_model"] = assistant
        return kwargs

    def close(self) -> None:
        """Drop the models and the temporary export (if the shipped pair was exported)."""
        self.assistants = {}
        if self.export_dir is not None:
            shutil.rmtree(self.export_dir, ignore_errors=True)
            self.export_dir = None


def _draft(name: str, target: HFTarget, shipped: dict[str, str], options: EngineOptions):
    """(path, assistant model) for a draft name; (\"\", None) for prompt lookup."""
    if name == PROMPT_LOOKUP:
        return "", None
    if name.startswith(HF_PREFIX) and name[len(HF_PREFIX):]:
        path = name[len(HF_PREFIX):]
    elif name in shipped:
        path = shipped[name]
    else:
        allowed = [PROMPT_LOOKUP, "hf:PATH", *shipped]
        raise InputError(f"unknown draft {name!r} for the transformers engine (allowed: {', '.join(allowed)})")
    draft = _load(path, options)
    check_same_vocabulary(target, draft)
    return path, draft.model
