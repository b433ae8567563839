"""Workloads: a set of prompts × seeds over which every acceptance and speedup figure is summarised.

One prompt and one seed say little about a draft: over a workload the report gives the spread across items and
a bootstrap over items. The shipped workload, `shakespeare24`, is built by `build_default()` from the
validation split (plays the model never saw) with a fixed recipe, and `specdec/data/workload-shakespeare24.json`
is its output, checked by a test; `python -m specdec.measure.workload` rewrites it.

The recipe. The validation text is cut into blocks (runs of non-blank lines). A block whose first line is a
speaker's name (capitals, ending in '.', e.g. "SIR TOBY.") is a speech; its other lines are its text. A
speech with at least three text lines is *verse* when every text line's first letter is a capital, *prose*
when some text line after the first starts with a small letter (prose is wrapped, verse lines are capitalised).
Candidates per category:
  verse     a line of a verse speech other than its first, starting with a capital (mid-speech)
  prose     a sentence start in a prose speech (its first character, or a capital after '. ', '? ', '! ')
  dialogue  a speech from its name line on, with at least one word of its text
  stage     a direction: a '[' that starts a line, through its ']' (and the line's end)
A prompt is the longest prefix of its candidate (within its block) that ends at a boundary (the end of a line,
or a word followed by a space or a line end) and is at most `hi` characters long; the candidate is taken when
that length is at least `lo`. Item i (0..5) of category c (0..3, in the order above) takes the length range
LENGTH_BINS[(i + c) % 6] and the first candidate at or after the fraction (i + (c + 1) / 5) / 6 of the text,
so every category spans the whole split and every length range. Lengths run from 8 to 47: a 47-character
prompt, 200 generated characters and k = 8 drafts plus the bonus character fill the 256-position context.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from specdec.model import corpus
from specdec.model.gpt import GPTConfig
from specdec.model.protocol import units
from specdec.measure.stats import ratio_of_totals
from specdec.util.errors import InputError

DEFAULT_WORKLOAD = "shakespeare24"
WORKLOADS = (DEFAULT_WORKLOAD,)
DEFAULT_SEEDS = (0, 1, 2)
CATEGORIES = ("verse", "prose", "dialogue", "stage")
LENGTH_BINS = ((8, 12), (13, 18), (19, 24), (25, 32), (33, 40), (41, 47))
PER_CATEGORY = len(LENGTH_BINS)
CHARS, MAX_K = 200, 8  # what the report generates, and its largest k: a prompt must leave room for both
RECIPE = ("validation split; blocks of non-blank lines; speaker line = capitals ending in '.'; speech with 3+ "
          "text lines: verse if every text line starts with a capital, prose if a later one starts with a small "
          "letter; candidates: verse = a non-first line of a verse speech starting with a capital, prose = a "
          "sentence start in a prose speech, dialogue = name line + text, stage = '[...]' starting a line; "
          "prompt = longest prefix ending at a line or word end, length in LENGTH_BINS[(i + c) % 6]; item i of "
          "category c = first candidate at or after fraction (i + (c + 1) / 5) / 6 of the text; lengths 8-47")
_ALLOWED = ("allowed: a shipped name (" + ", ".join(WORKLOADS) + "), a .txt file (one prompt per non-empty line, "
            "'\\n' for a newline) or a .json file (a list of prompts, or {name, seeds, items: [{id, category, "
            "prompt}]})")
_SPEAKER = re.compile(r"[A-Z][A-Z' -]*[A-Z]\.")
_SENTENCE = re.compile(r"(?<=[.?!][ \n])(?=[A-Z])")


class WorkloadError(InputError):
    """A workload file or name that cannot be used; the message is one line."""


@dataclass(frozen=True)
class WorkloadItem:
    id: str
    category: str
    prompt: str


@dataclass(frozen=True)
class Workload:
    name: str
    items: tuple[WorkloadItem, ...]
    seeds: tuple[int, ...]
    recipe: str = ""

    def runs(self) -> list[tuple[WorkloadItem, int]]:
        """Every (item, seed), item by item."""
        return [(item, seed) for item in self.items for seed in self.seeds]

    def cycled(self, every: int = 1) -> list[tuple[WorkloadItem, int]]:
        """One run per item (every `every`-th item), the seeds taken in turn from item to item, the items
        interleaved across categories (verse, prose, dialogue, stage, verse, ...): what the report runs.

        A third of the runs() at a third of the cost, every seed still used; and any prefix of the list -- a
        timed row that got only its first few visits -- spans the categories evenly.
        """
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        by_category: dict[str, list[WorkloadItem]] = {}
        for item in self.items[::every]:
            by_category.setdefault(item.category, []).append(item)
        order = [item for group in itertools.zip_longest(*by_category.values()) for item in group if item]
        return [(item, self.seeds[i % len(self.seeds)]) for i, item in enumerate(order)]

    def to_json(self) -> str:
        doc = {"name": self.name, "recipe": self.recipe, "seeds": list(self.seeds),
               "items": [{"id": i.id, "category": i.category, "prompt": i.prompt} for i in self.items]}
        return json.dumps(doc, indent=2) + "\n"


# ---- the recipe ----

def _blocks(text: str) -> list[tuple[int, str]]:
    """(offset, block) for every run of non-blank lines, each block with its final newline."""
    return [(m.start(), m.group()) for m in re.finditer(r"(?:[^\n]+\n)+", text)]


def _first_letter_is_capital(line: str) -> bool | None:
    letter = next((ch for ch in line if ch.isalpha()), None)
    return None if letter is None else letter.isupper()


def _style(text_lines: list[str]) -> str | None:
    lines = [ln for ln in text_lines if not ln.lstrip().startswith("[")]  # directions inside a speech
    if len(lines) < 3:
        return None
    capitals = [_first_letter_is_capital(ln) for ln in lines]
    if all(capitals):
        return "verse"
    return "prose" if False in capitals[1:] else None


def _candidates(text: str) -> dict[str, list[tuple[int, str, int]]]:
    """Per category, (offset, unit, shortest) in text order: a prompt is a prefix of unit, at least shortest
    characters long (dialogue: the name line and one character of text)."""
    out: dict[str, list[tuple[int, str, int]]] = {c: [] for c in CATEGORIES}
    for off, block in _blocks(text):
        lines = block.splitlines(keepends=True)
        starts = [0, *itertools.accumulate(len(ln) for ln in lines)]
        for j, ln in enumerate(lines):  # directions may also sit inside a speech block
            if ln.startswith("[") and "]" in block[starts[j]:]:
                end = block.index("]", starts[j]) + 1
                end += block.startswith("\n", end)  # the line's end, when the direction closes it
                out["stage"].append((off + starts[j], block[starts[j]:end], 1))
        head = lines[0].rstrip("\n")
        if not _SPEAKER.fullmatch(head) or head.startswith(("ACT ", "SCENE ")) or len(lines) < 2:
            continue
        out["dialogue"].append((off, block, len(lines[0]) + 1))
        style = _style(lines[1:])
        if style == "verse":
            out["verse"] += [(off + starts[j], block[starts[j]:], 1) for j in range(2, len(lines))
                             if lines[j][:1].isupper()]
        elif style == "prose":
            body = block[starts[1]:]
            sentences = ([0] if body[:1].isupper() else []) + [m.start() for m in _SENTENCE.finditer(body)]
            out["prose"] += [(off + starts[1] + s, body[s:], 1) for s in sentences]
    return out


def _cut(unit: str, shortest: int, hi: int) -> str:
    """The longest prefix of unit, at most hi characters, ending at a line end or a word end ('' if none)."""
    for n in range(min(hi, len(unit)), shortest - 1, -1):
        if unit[n - 1] == "\n" or (not unit[n - 1].isspace() and n < len(unit) and unit[n] in " \n"):
            return unit[:n]
    return ""


def build_default() -> Workload:
    """The shipped workload, rebuilt from the validation split by the recipe in the module docstring."""
    text = corpus.decode(corpus.split_ids("val"))
    cands = _candidates(text)
    items = []
    for c, category in enumerate(CATEGORIES):
        for i in range(PER_CATEGORY):
            lo, hi = LENGTH_BINS[(i + c) % PER_CATEGORY]
            anchor = int((i + (c + 1) / 5) / PER_CATEGORY * len(text))
            prompt = next(p for off, unit, shortest in cands[category] if off >= anchor
                          and lo <= len(p := _cut(unit, shortest, hi)))
            items.append(WorkloadItem(f"{category}-{i + 1}", category, prompt))
    return Workload(DEFAULT_WORKLOAD, tuple(items), DEFAULT_SEEDS, RECIPE)


# ---- loading ----

def load_workload(name_or_path: str | Path, seeds: Sequence[int] | None = None, chars: int = CHARS,
                  context: int | None = None, max_k: int = MAX_K, target=None) -> Workload:
    """A shipped workload by name (WORKLOADS) or a user's .txt or .json file, checked prompt by prompt.

    .txt: one prompt per non-empty line, '\n' written as backslash-n; ids p1, p2, ...; category "user".
    .json: a list of prompts (as .txt), or {"name", "seeds", "items": [{"id", "category", "prompt"}]} with
    name, seeds, id and category optional (an item may also be a bare prompt string).
    seeds overrides the file's (default DEFAULT_SEEDS). Every prompt must fit `chars` generated characters and
    a round of max_k drafts plus one in `context` positions. Prompts are text: with `target`, a prompt is valid
    when the target can tokenize it and its tokens fit (context defaults to the target's); without one, when
    every character is in the shipped corpus's vocabulary (context: the shipped model's).
    Raises WorkloadError (a ValueError) with a one-line message naming the problem.
    """
    where = str(name_or_path)
    if where in WORKLOADS:
        raw, suffix = resources.files("specdec").joinpath(f"data/workload-{where}.json").read_text(), ".json"
    else:
        path = Path(name_or_path)
        suffix = path.suffix.lower()
        if suffix not in (".txt", ".json"):
            raise WorkloadError(f"unknown workload {where!r}; {_ALLOWED}")
        if not path.is_file():
            raise WorkloadError(f"workload file {where!r} does not exist; {_ALLOWED}")
        raw = path.read_text(encoding="utf-8", errors="replace")
    name, file_seeds, items, recipe = _parse_json(where, raw) if suffix == ".json" else _parse_txt(raw)
    if not items:
        raise WorkloadError(f"workload {where!r} has no prompts; {_ALLOWED}")
    if context is None:
        context = GPTConfig.context if target is None else target.context
    ids = set()
    for item in items:
        if item.id in ids:
            raise WorkloadError(f"workload {where!r}: duplicate id {item.id!r}; every item needs its own id")
        ids.add(item.id)
        _check_prompt(where, item, chars, context, max_k, target)
    seeds = seeds if seeds is not None else file_seeds if file_seeds is not None else DEFAULT_SEEDS
    if not isinstance(seeds, (list, tuple)) or not seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds):
        raise WorkloadError(f"workload {where!r}: seeds must be a non-empty list of integers >= 0, got {seeds!r}")
    return Workload(name or Path(where).stem, tuple(items), tuple(seeds), recipe)


def single(prompt: str, seed: int = 0) -> Workload:
    """The one-item workload that --prompt/--seed run (the write-up's configuration is single("ROMEO:", 0))."""
    return Workload("single", (WorkloadItem("prompt", "single", prompt),), (seed,))


def _parse_txt(raw: str) -> tuple[str, None, list[WorkloadItem], str]:
    prompts = [ln.replace("\\n", "\n") for ln in raw.splitlines() if ln.strip()]
    return "", None, [WorkloadItem(f"p{i + 1}", "user", p) for i, p in enumerate(prompts)], ""


def _parse_json(where: str, raw: str) -> tuple[str, object, list[WorkloadItem], str]:
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"workload {where!r} is not valid JSON ({exc}); {_ALLOWED}") from None
    if isinstance(doc, list):
        doc = {"items": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
        raise WorkloadError(f"workload {where!r} has no list of items; {_ALLOWED}")
    items = []
    for i, entry in enumerate(doc["items"]):
        entry = {"prompt": entry} if isinstance(entry, str) else entry  # a bare prompt, as in the list form
        if not isinstance(entry, dict) or not isinstance(entry.get("prompt"), str):
            raise WorkloadError(f"workload {where!r}: item {i + 1} is {entry!r}, not a string prompt or an "
                                f"object with a string 'prompt'; {_ALLOWED}")
        items.append(WorkloadItem(str(entry.get("id", f"p{i + 1}")), str(entry.get("category", "user")),
                                  entry["prompt"]))
    return str(doc.get("name", "")), doc.get("seeds"), items, str(doc.get("recipe", ""))


def _check_prompt(where: str, item: WorkloadItem, chars: int, context: int, max_k: int, target=None) -> None:
    if not item.prompt:
        raise WorkloadError(f"workload {where!r}: prompt {item.id!r} is empty; give at least one character")
    if target is None:
        vocab = corpus.vocabulary()
        bad = next((ch for ch in item.prompt if ch not in vocab), None)
        if bad is not None:
            raise WorkloadError(f"workload {where!r}: prompt {item.id!r} has the character {bad!r}, which is not "
                                f"in the vocabulary (allowed: {vocab!r})")
        n, what = len(item.prompt), "characters"
    else:
        try:
            n = len(target.tokenize(item.prompt))
        except ValueError as exc:
            raise WorkloadError(f"workload {where!r}: prompt {item.id!r} cannot be tokenized by the target: "
                                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        what = units(target)
        if not n:
            raise WorkloadError(f"workload {where!r}: prompt {item.id!r} tokenizes to no tokens; give some text")
    limit = context - chars - (max_k + 1)  # a round of max_k drafts plus one must still fit at the end
    if n > limit:
        raise WorkloadError(f"workload {where!r}: prompt {item.id!r} is {n} {what}; with {chars} generated and k "
                            f"up to {max_k} it must be at most {limit} (context {context})")


# ---- summaries over a workload ----

def describe(values: Sequence[float]) -> dict:
    """mean, median, min, max and the quartiles q1, q3 (numpy's linear interpolation) of the values."""
    x = np.asarray(values, dtype=float)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    return {"mean": float(x.mean()), "median": float(med), "min": float(x.min()), "max": float(x.max()),
            "q1": float(q1), "q3": float(q3)}



# ---- speedup over a workload ----

@dataclass(frozen=True)
class WorkloadInterval:
    estimate: float  # the summary over all items
    low: float  # percentile bootstrap interval over items
    high: float
    items: int
    confidence: float


def workload_interval(per_item_values, summary=ratio_of_totals, confidence: float = 0.95,
                      n_resamples: int = 2000, seed: int = 0) -> WorkloadInterval:
    """Percentile-bootstrap interval of summary(*per_item_values), resampling ITEMS with replacement.

    per_item_values: the summary's inputs, each one value per item, e.g. (target_times, speculative_times)
    with each item's times summed over its pairs; or a single sequence for a one-argument summary (np.median).
    Resampling whole items keeps an item's a and b together, so the interval holds the workload's variance
    (which items were drawn) and the timing noise inside each item's times; set it against the A/A floor to
    see which dominates. Constant per-item values give a zero-width interval at that value.
    """
    cols = np.atleast_2d(np.asarray(per_item_values, dtype=float))
    n = cols.shape[1]
    if n == 0:
        raise ValueError("workload_interval needs at least one item")
    idx = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    boot = np.array([summary(*cols[:, ix]) for ix in idx])
    low, high = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    return WorkloadInterval(float(summary(*cols)), float(low), float(high), n, confidence)


def best_k_per_item(rows: Sequence[dict], key: str = "chars_per_pass") -> dict[int, int]:
    """How many items each k is best for: rows are one draft's {"k", "per_item": [{"prompt_id", key, ...}]}
    (e.g. `acceptance.acceptance_over` results, or per-item predicted speedups under `key`). An item's value at a k is
    the mean over its entries (its seeds); the best k is the largest value, the smallest k on ties."""
    means = {}
    for row in rows:
        by_item: dict[str, list[float]] = {}
        for entry in row["per_item"]:
            by_item.setdefault(entry["prompt_id"], []).append(entry[key])
        means[row["k"]] = {pid: float(np.mean(v)) for pid, v in by_item.items()}
    ks = sorted(means)
    items = set(means[ks[0]]) if ks else set()
    if any(set(m) != items for m in means.values()):
        raise ValueError("best_k_per_item needs the same items at every k")
    counts = dict.fromkeys(ks, 0)
    for pid in items:
        counts[max(ks, key=lambda k: (means[k][pid], -k))] += 1
    return counts


if __name__ == "__main__":  # regenerate the shipped file from the recipe
    from specdec.util.files import write_atomic

    path = Path(__file__).parent.parent / "data" / f"workload-{DEFAULT_WORKLOAD}.json"  # specdec/data
    write_atomic(path, build_default().to_json())
    print(f"wrote {path}")
