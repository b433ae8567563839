"""llama.cpp as an engine (`--engine llama-cpp`, the [llamacpp] extra): target-only and speculative generation
run by llama-cpp-python's own loop, `Llama.generate` with and without its `draft_model`.

The target is a GGUF file (`--target gguf:PATH`), or by default the shipped target exported by `export_gguf`
into a temporary folder, so that a real llama.cpp pair exists on every machine. Drafts: `prompt-lookup`
(llama-cpp-python's `LlamaPromptLookupDecoding`), `small` (the shipped small draft, exported the same way) and
`gguf:PATH` (a draft GGUF of the target's vocabulary), the last two run greedily for k tokens by
`llamacpp_drafts.GreedyModelDraft`.

One `Llama` serves every configuration: the draft is chosen per call by setting `llama.draft_model`, which
`generate` reads each round. The target is built with `logits_all=True` (its scores buffer then holds every
position, which verifying drafts needs) and `_logits_all` is set per call, so that a target-only generation
computes the last position's logits only, as llama.cpp does without a draft. Each call starts from an empty
KV cache (`reset`), target and draft, so that every generation pays its prefill, like the baseline.

Sampling: temperature 0 is llama.cpp's greedy sampler; otherwise only temperature and a seeded draw (top-k, top-p,
min-p and the repetition penalty switched off). llama-cpp-python accepts a draft token when the target's own
sampled token equals it, so every emitted token is one draw of the target's sampler in the same order as
without a draft: greedy output is the target's token for token, and so is sampled output with the same seed
(up to float differences between a one-position and a multi-position pass). The cost is a lower acceptance than
the exact rejection rule gives at temperature > 0.

Counts: drafted and accepted (`llamacpp_drafts.CountingDraft`), target passes (one per `eval`: the prefill,
then one per round, so N target-only tokens take N passes). llama.cpp's loop samples the first token from the
prefill before any draft, so its rounds start one token later than specdec's (whose first round drafts from the
prompt): counts equal specdec's own loop run from the prompt plus that first token.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import gguf  # both are the [llamacpp] extra: the registry names it when either is missing
import llama_cpp

from specdec.engines.base import EngineOptions, EngineResult, Spec
from specdec.engines.llamacpp_drafts import CountingDraft, GreedyModelDraft, prompt_lookup
from specdec.model import sampling
from specdec.util.errors import InputError

GGUF_PREFIX = "gguf:"
NAMED_DRAFTS = ("prompt-lookup", "small")  # besides gguf:PATH
MAX_CTX = 4096  # a user's model may train on 128k positions; the KV cache is sized to what a report generates
SAMPLER = dict(top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0, repeat_penalty=1.0)  # temperature alone


class _CountingLlama(llama_cpp.Llama):
    """A Llama that counts its evaluations: one per target pass (n_batch is the context, so one decode)."""

    passes = 0
    evaluated = 0  # tokens evaluated: a generation that reused a cached prompt would show fewer

    def eval(self, tokens):
        self.passes += 1
        self.evaluated += len(tokens)
        return super().eval(tokens)


def gguf_path(spec: str, what: str) -> Path:
    """The file of `gguf:PATH`, checked to be a GGUF file (its magic), else a one-line InputError."""
    if not spec.startswith(GGUF_PREFIX) or len(spec) == len(GGUF_PREFIX):
        raise InputError(f"{what} {spec!r}: the llama-cpp engine loads GGUF files, give gguf:PATH")
    path = Path(spec[len(GGUF_PREFIX):])
    if not path.is_file():
        raise InputError(f"{what} {spec!r}: no such file {str(path)!r}")
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise InputError(f"{what} {spec!r}: {str(path)!r} is not a GGUF file")
    return path


def _load(path: Path, what: str, n_ctx: int, threads: int, gpu_layers: int, cls=llama_cpp.Llama, **kw):
    try:
        return cls(model_path=str(path), n_ctx=n_ctx, n_batch=n_ctx, n_threads=threads, n_threads_batch=threads,
                   n_gpu_layers=gpu_layers, verbose=False, **kw)
    except (ValueError, RuntimeError) as exc:  # llama.cpp could not load it: say which file, in one line
        raise InputError(f"{what} {str(path)!r}: llama.cpp cannot load it as a model ({exc})") from None


def context_length(path: Path) -> int | None:
    """The positions the model was trained on, from the file's metadata (before a KV cache is sized by it)."""
    try:
        reader = gguf.GGUFReader(str(path))
    except Exception as exc:  # a truncated or corrupt file: one line naming it
        raise InputError(f"{str(path)!r} is not a readable GGUF file ({exc})") from None
    for key, field in reader.fields.items():
        if key.endswith(".context_length"):
            return int(field.parts[field.data[0]][0])
    return None


def token_texts(llama) -> list[bytes]:
    """Every token's text as stored in the model (bytes: a byte-level piece need not be valid UTF-8)."""
    vocab = llama._model.vocab
    return [llama_cpp.llama_vocab_get_text(vocab, i) for i in range(llama.n_vocab())]


class LlamaCppEngine:
    """See the module docstring."""

    name = "llama-cpp"
    units = "tokens"

    def __init__(self, target, target_path: Path, drafts: dict, paths: dict, options: EngineOptions,
                 tmp: Path | None):
        self.llama, self.target_path, self._drafts, self.paths = target, target_path, drafts, paths
        self.options, self._tmp = options, tmp
        texts = token_texts(target)
        # a character with no token of its own and no byte token to fall back on aborts llama.cpp's SentencePiece
        # tokenizer (the exported vocabulary has none): such a prompt is refused before it gets there
        spm = target._model.vocab_type() == llama_cpp.LLAMA_VOCAB_TYPE_SPM
        self._byte_fallback = not spm or b"<0x00>" in texts
        self._chars = {t.replace(b"\xe2\x96\x81", b" ").decode("utf-8", "replace") for t in texts if len(t) <= 4}

    @classmethod
    def open(cls, options: EngineOptions) -> LlamaCppEngine:
        """The target and every draft loaded and checked (InputError, one line) before anything is timed."""
        # by default: the drafts every engine runs on the shipped pair, or prompt lookup beside a user's target
        names = list(options.drafts) or (["small", "prompt-lookup"] if options.target is None else ["prompt-lookup"])
        for name in names:
            if name not in NAMED_DRAFTS and not name.startswith(GGUF_PREFIX):
                raise InputError(f"unknown draft {name!r} for the llama-cpp engine "
                                 f"(allowed: {', '.join(NAMED_DRAFTS)}, gguf:PATH)")
        if options.dtype is not None:
            raise InputError(f"dtype {options.dtype!r}: the llama-cpp engine computes in the GGUF file's own tensor "
                             "types (export or convert the model in the one you want)")
        if options.threads < 1:
            raise InputError(f"threads must be at least 1, got {options.threads}")
        target_path = None if options.target is None else gguf_path(options.target, "--target")
        draft_paths = {n: gguf_path(n, "draft") for n in names if n.startswith(GGUF_PREFIX)}
        tmp = None
        if target_path is None or "small" in names:
            from specdec.model.export_gguf import export_gguf

            tmp = Path(tempfile.mkdtemp(prefix="specdec-gguf-"))
            exported = export_gguf(tmp)
            target_path = target_path or exported["target"]
            draft_paths.update({"small": exported["small"]} if "small" in names else {})
        try:
            return cls._load_all(options, names, target_path, draft_paths, tmp)
        except BaseException:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def _load_all(cls, options: EngineOptions, names: list[str], target_path: Path, draft_paths: dict,
                  tmp: Path | None) -> LlamaCppEngine:
        gpu = 0 if options.device == "cpu" else -1
        n_ctx = min(context_length(target_path) or MAX_CTX, MAX_CTX)
        target = _load(target_path, "--target", n_ctx, options.threads, gpu, cls=_CountingLlama, logits_all=True)
        target_texts = token_texts(target)
        drafts = {}
        for name in names:
            if name == "prompt-lookup":
                drafts[name] = CountingDraft(prompt_lookup(1))
                continue
            llama = _load(draft_paths[name], f"draft {name}", n_ctx, options.threads, gpu)
            texts = token_texts(llama)
            if texts != target_texts:
                diff = next((i for i, (a, b) in enumerate(zip(texts, target_texts)) if a != b), None)
                where = f"token {diff} is {texts[diff]!r} against {target_texts[diff]!r}" if diff is not None else ""
                raise InputError(f"draft {name!r} has another vocabulary than the target ({len(texts)} tokens "
                                 f"against {len(target_texts)}{'; ' + where if where else ''})")
            drafts[name] = CountingDraft(GreedyModelDraft(llama))
        paths = {n: str(p) for n, p in draft_paths.items()}
        return cls(target, target_path, drafts, paths, options, tmp)

    def describe(self) -> dict:
        return {"engine": self.name, "llama_cpp_python": llama_cpp.__version__, "target": str(self.target_path),
                "drafts": {n: self.paths.get(n, "llama-cpp-python LlamaPromptLookupDecoding(max_ngram_size=2)")
                           for n in self._drafts},
                "n_ctx": self.llama.n_ctx(), "threads": self.options.threads,
                "n_gpu_layers": 0 if self.options.device == "cpu" else -1,
                "sampler": "greedy at temperature 0, else temperature and a seeded draw only",
                "model_drafts": "greedy, k tokens per round"}

    def drafts(self) -> list[str]:
        return list(self._drafts)

    def tokenize(self, prompt: str) -> list[int]:
        """The prompt's ids as llama.cpp tokenizes it (BOS as the model's file says)."""
        if not self._byte_fallback:
            bad = sorted({ch for ch in prompt if ch not in self._chars})
            if bad:
                raise InputError(f"character {bad[0]!r} has no token in the target's vocabulary")
        return self.llama.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)

    def generate(self, prompt: str, max_new: int, seed: int, temperature: float,
                 spec: Spec | None = None) -> EngineResult:
        sampling.check_temperature(temperature)
        if max_new < 1:
            raise InputError(f"max_new must be at least 1, got {max_new}")
        if not 0 <= seed < llama_cpp.LLAMA_DEFAULT_SEED:  # that value itself asks llama.cpp for a random seed
            raise InputError(f"seed must be in 0..{llama_cpp.LLAMA_DEFAULT_SEED - 1} for llama.cpp, got {seed}")
        ids = self.tokenize(prompt)
        if len(ids) + max_new > self.llama.n_ctx():
            raise InputError(f"prompt ({len(ids)} tokens) + {max_new} new tokens exceed the context of "
                             f"{self.llama.n_ctx()}")
        draft = self._draft_for(spec, len(ids), max_new)
        llama = self.llama
        llama.draft_model = draft
        llama._logits_all = draft is not None  # see the module docstring: last-position logits only without
        llama.reset()
        llama.set_seed(seed)
        llama.passes = llama.evaluated = 0
        out: list[int] = []
        gen = llama.generate(ids, temp=float(temperature), **SAMPLER)
        try:
            for tok in gen:
                out.append(int(tok))
                if draft is not None:
                    draft.observe(int(tok))
                if len(out) == max_new:
                    break
        finally:
            gen.close()
            llama.draft_model = None
        text = llama.detokenize(out, prev_tokens=ids).decode("utf-8", "replace")
        if draft is None:
            return EngineResult(text, out, target_passes=llama.passes)
        return EngineResult(text, out, drafted=draft.drafted, accepted=draft.accepted, target_passes=llama.passes,
                            accepted_per_position=list(draft.per_position))

    def _draft_for(self, spec: Spec | None, n_prompt: int, max_new: int) -> CountingDraft | None:
        if spec is None:
            return None
        if spec.draft not in self._drafts:
            raise InputError(f"draft {spec.draft!r} was not opened (opened: {', '.join(self._drafts) or 'none'})")
        if spec.k < 1:
            raise InputError(f"k must be at least 1, got {spec.k}")
        draft = self._drafts[spec.draft]
        inner = draft.inner
        if isinstance(inner, GreedyModelDraft):
            inner.k = spec.k
            inner.reset()
        else:
            inner.num_pred_tokens = spec.k
        draft.begin(n_prompt, max_new, spec.k)
        return draft

    def close(self) -> None:
        for draft in self._drafts.values():
            if isinstance(draft.inner, GreedyModelDraft):
                draft.inner.llama.close()
        self.llama.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
