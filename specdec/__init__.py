"""specdec: does speculative decoding make generation faster on this machine, by how much, and why?

    import specdec
    target = specdec.load_target()
    draft = specdec.make_draft("bigram", target)
    out = specdec.speculative_generate(target, draft, prompt="ROMEO:", chars=200, k=4, seed=0)
    out.text, out.stats.acceptance, out.stats.chars_per_pass
"""

import time as _time

_IMPORTED = _time.perf_counter()  # before torch is imported: `specdec report`'s budget counts from here

from specdec.model.backends import BACKENDS, UnknownBackendError
from specdec.model.corpus import VocabularyError, encode, vocabulary
from specdec.decoding.generate import Generation, GenerationStats, generate, speculative_generate
from specdec.decoding.registry import DRAFTS, WRITEUP_DRAFTS, draft_names, make_draft, register_draft
from specdec.decoding.drafts import Draft, UnknownDraftError
from specdec.measure.exactness import verify
from specdec.model.gpt import GPT, ContextOverflowError, GPTConfig
from specdec.model.protocol import Target, TargetConfig
# The Hugging Face adapter and export import transformers (the optional [hf] extra) only when called.
from specdec.model.hf import HFModelError, HFTarget, load_hf
from specdec.model.export_hf import export_hf
from specdec.measure.attribution import attribution
from specdec.measure.roofline import measure_machine, overhead_table, pass_bytes, pass_flops
from specdec.decoding.rule import accept_reject
from specdec.measure.stats import expected_length, optimal_k, predicted_speedup, refined_speedup, summarize
from specdec.model.train import CheckpointError, load_checkpoint, load_target, save_checkpoint
from specdec.decoding.trees import TreeSpec
from specdec.measure.workload import WORKLOADS, Workload, WorkloadError, load_workload

__version__ = "0.1.0"

__all__ = [
    "BACKENDS",
    "CheckpointError",
    "ContextOverflowError",
    "DRAFTS",
    "Draft",
    "GPT",
    "GPTConfig",
    "Generation",
    "GenerationStats",
    "HFModelError",
    "HFTarget",
    "Target",
    "TargetConfig",
    "TreeSpec",
    "UnknownBackendError",
    "UnknownDraftError",
    "VocabularyError",
    "WORKLOADS",
    "WRITEUP_DRAFTS",
    "Workload",
    "WorkloadError",
    "accept_reject",
    "attribution",
    "draft_names",
    "encode",
    "expected_length",
    "export_hf",
    "generate",
    "load_checkpoint",
    "load_hf",
    "load_target",
    "load_workload",
    "make_draft",
    "measure_machine",
    "optimal_k",
    "overhead_table",
    "pass_bytes",
    "pass_flops",
    "predicted_speedup",
    "refined_speedup",
    "register_draft",
    "save_checkpoint",
    "speculative_generate",
    "summarize",
    "verify",
    "vocabulary",
]
