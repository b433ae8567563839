"""specdec: does speculative decoding make generation faster on this machine, by how much, and why?

    import specdec
    target = specdec.load_target()
    draft = specdec.make_draft("bigram", target)
    out = specdec.speculative_generate(target, draft, prompt="ROMEO:", chars=200, k=4, seed=0)
    out.text, out.stats.acceptance, out.stats.chars_per_pass
"""

# before torch is imported, on the decision clock: `specdec report`'s budget counts from here (read as the clock
# loads, not by calling `now()`, which raises under a bad SPECDEC_TIME_SCALE: `main` says so in one line instead)
from specdec.measure.clock import IMPORTED as _IMPORTED  # noqa: F401 -- read by `cli.commands.main`

# The public API, imported on first use (PEP 562): `import specdec` and `specdec --help` import neither torch nor
# scipy; `specdec.load_target` and every other name below import their module when first read.
_MODULES = {
    "specdec.model.backends": "BACKENDS UnknownBackendError",
    "specdec.model.corpus": "VocabularyError encode vocabulary",
    "specdec.decoding.generate": "Generation GenerationStats generate speculative_generate",
    "specdec.decoding.registry": "DRAFTS WRITEUP_DRAFTS draft_names make_draft register_draft",
    "specdec.decoding.drafts": "Draft UnknownDraftError",
    "specdec.measure.exactness": "verify",
    "specdec.model.gpt": "GPT ContextOverflowError GPTConfig",
    "specdec.model.protocol": "Target TargetConfig",
    "specdec.model.hf": "HFModelError HFTarget load_hf",  # transformers itself only when called
    "specdec.model.export_hf": "export_hf",
    "specdec.measure.anatomy.attribution": "attribution",
    "specdec.measure.anatomy.roofline": "measure_machine overhead_table pass_bytes pass_flops",
    "specdec.decoding.rule": "accept_reject",
    "specdec.measure.stats": "expected_length optimal_k predicted_speedup refined_speedup summarize",
    "specdec.model.train": "CheckpointError load_checkpoint load_target save_checkpoint",
    "specdec.decoding.trees": "TreeSpec",
    "specdec.measure.workload": "WORKLOADS Workload WorkloadError load_workload",
}
_WHERE = {name: module for module, names in _MODULES.items() for name in names.split()}
_LOADED: set[str] = set()


def __getattr__(name: str):
    # a name read once and then deleted (a test standing in for a commit without it) stays deleted
    if name not in _WHERE or name in _LOADED:
        raise AttributeError(f"module 'specdec' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value  # read once: later reads are plain attribute lookups
    _LOADED.add(name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


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
