"""Work thresholds from a calibration: how far one row's count moves when the code does not change, measured on
runs kept apart from the runs it judges.

A calibration is a set of trees that run the same code -- one checkout under other link names (A/A), copied
deeper, and with code added that no row runs (null changes: `null_code`) -- each counted as `specdec ab` counts
a revision (its layouts, its plan). Per row, a one-way random-effects analysis over those trees splits the
relative variance of a layout's figure into a part per layout (sigma_l^2, the mean square within trees,
df_l = trees x (layouts - 1)) and a part per build (sigma_b^2: a build's own bias, which every layout of it
shares; the mean square between trees less the within part, df_b = trees - 1). The change of two builds' means
over n_a and n_b layouts then has variance 2 sigma_b^2 + sigma_l^2 (1/n_a + 1/n_b), with Satterthwaite's
degrees of freedom, and a row is worse (better) when its change passes the two-sided t-quantile at the run's
per-row rate times that standard deviation. Layouts are not paired across builds: the measured per-layout
differences of two builds spread as widely as unpaired ones (docs/work.md).

What the calibration holds is keyed (`key`): the counting plan (`work_pool.METHOD`), the counter, the CPU and
the instruction-set features that pick a library's kernels, the versions of the libraries the rows run, and the
configuration (backend, target, prompt, temperature, seed). A run whose key has no calibration is judged by its
own layouts' spread alone ("uncalibrated": few degrees of freedom, so wide thresholds), and says so.

Kept as JSON under `cache_dir()/work-calibration/` (`specdec calibrate-work` makes one) and, for the shipped
configuration on the machines it was made on, in the package (`specdec/data/work-calibration/`). Making one
(`ab_work.calibrate`, counting the trees `trees` lays out) is `ab_work`'s: it counts as `ab` counts.
"""

from __future__ import annotations

import hashlib
import json
import math
import platform
import random
import statistics
from importlib import metadata
from pathlib import Path

from specdec.measure.work import work_pool
from specdec.util.files import cache_dir, write_atomic

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "work-calibration"
# the x86 and arm features that pick ONNX Runtime's MLAS, oneDNN's and numpy's kernels (by cpuid at run time)
FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
            "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve", "sve2", "i8mm", "bf16")
# A threshold is never below MARGIN times the largest change between two of the calibration's unchanged trees: a
# build's bias can come in modes (most trees agree, a few sit apart in one row), which a variance fitted on a few
# trees understates; the leave-one-out check (`tools/work_study.py --left-out`, docs/work.md) and the held-out
# study are what the margin is judged by.
MARGIN = 3.0
CONFIG_KEYS = ("target", "backend", "dtype", "prompt", "temperature", "seed")
LIBRARIES = ("numpy", "torch", "onnxruntime", "scipy")


def cpu() -> dict:
    """The CPU's model name and the features (of FEATURES) it has: what decides which kernels a count ran."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            field, _, value = line.partition(":")
            field = field.strip()
            if field == "model name":
                name = value.strip()
            elif field in ("flags", "Features"):
                flags |= set(value.split())
    except OSError:
        pass
    return {"model": name, "features": sorted(f for f in FEATURES if f in flags)}


def versions() -> dict:
    out = {"python": platform.python_version()}
    for lib in LIBRARIES:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = None
    return out


def key(config: dict, counter: str) -> dict:
    """What a calibration must match to judge a run's counts."""
    return {"method": work_pool.METHOD, "counter": counter, "cpu": cpu(), "versions": versions(),
            "chars": min(config.get("chars", work_pool.COUNT_CHARS), work_pool.COUNT_CHARS),
            **{k: config.get(k) for k in CONFIG_KEYS}}


def key_id(k: dict) -> str:
    return hashlib.sha256(json.dumps(k, sort_keys=True).encode()).hexdigest()[:16]


def fit(figures: dict[str, dict[str, list[float]]]) -> dict[str, dict]:
    """row -> {"sigma_l", "df_l", "ms_between", "sigma_b", "df_b", "largest", "trees", "layouts"} (relative to
    the row's grand mean) from {row: {tree: [figure per layout]}}; "largest" is the largest change between two
    of the calibration's trees' means. Trees with fewer layouts than the most are left out (a balanced design)."""
    out = {}
    for row, trees in figures.items():
        n = max(len(v) for v in trees.values())
        groups = [v for v in trees.values() if len(v) == n]
        if len(groups) < 2 or n < 2:
            continue
        grand = statistics.fmean(x for g in groups for x in g)
        rel = [[x / grand for x in g] for g in groups]
        means = [statistics.fmean(g) for g in rel]
        msw = statistics.fmean(statistics.variance(g) for g in rel)
        msb = n * statistics.variance(means)
        out[row] = {"sigma_l": math.sqrt(msw), "df_l": len(rel) * (n - 1), "ms_between": msb,
                    "df_b": len(rel) - 1, "sigma_b": math.sqrt(max(0.0, (msb - msw) / n)),
                    "largest": max(abs(x / y - 1) for x in means for y in means),
                    "trees": len(rel), "layouts": n, "mean": grand}
    return out


def spread(cal: dict, n_a: int, n_b: int) -> tuple[float, float]:
    """(standard deviation of the relative change of two builds' means over n_a and n_b layouts, its degrees of
    freedom): 2 sigma_b^2 + sigma_l^2 (1/n_a + 1/n_b), Satterthwaite's df from the two mean squares it is made
    of (sigma_b^2 = (MSB - MSW)/n; where that comes out negative the build part is zero and MSW alone is left)."""
    n = cal["layouts"]
    msw, msb = cal["sigma_l"] ** 2, cal["ms_between"]
    inv = 1 / n_a + 1 / n_b
    if msb <= msw:
        return math.sqrt(msw * inv), float(cal["df_l"])
    # 2 (MSB - MSW)/n + MSW inv = (2/n) MSB + (inv - 2/n) MSW: a linear combination of the two mean squares
    ca, cb = 2 / n, inv - 2 / n
    var = ca * msb + cb * msw
    dof = var**2 / ((ca * msb) ** 2 / cal["df_b"] + (cb * msw) ** 2 / cal["df_l"])
    return math.sqrt(max(var, 0.0)), dof


def make(figures: dict[str, dict[str, list[float]]], k: dict, trees: dict[str, str], command: str) -> dict:
    """A calibration document: its key, the trees it counted (name -> what), each row's fit and figures."""
    return {"key": k, "id": key_id(k), "command": command, "trees": trees, "rows": fit(figures),
            "figures": figures}


def store(doc: dict, folder: Path | None = None) -> Path:
    path = (folder or cache_dir() / "work-calibration") / f"{doc['id']}.json"
    write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return path


def find(k: dict) -> dict | None:
    """The calibration kept for this key: the user's (cache) before the shipped one; None where there is none."""
    name = f"{key_id(k)}.json"
    for folder in (cache_dir() / "work-calibration", SHIPPED):
        path = folder / name
        if path.is_file():
            doc = json.loads(path.read_text())
            if doc.get("key") == k:
                return {**doc, "path": str(path)}
    return None


# modules every row imports (through the public API) and whose code added here no row runs
NULL_MODULES = ["specdec/__init__.py", "specdec/decoding/registry.py", "specdec/decoding/drafts.py",
                "specdec/decoding/generate.py", "specdec/model/backend_onnx.py", "specdec/decoding/ngram.py",
                "specdec/decoding/rule.py", "specdec/model/gpt.py", "specdec/measure/clock.py",
                "specdec/model/train.py"]
# nulls 11 on: the report modules (no row imports them: a change there must not move a verdict either) beside more
# of what the rows do import; nulls 1-10 keep the list above, so a study's first ten are the same at any --null
MORE_NULL_MODULES = ["specdec/report/ab/ab_render.py", "specdec/report/render.py", "specdec/decoding/registry.py",
                     "specdec/__init__.py", "specdec/model/protocol.py", "specdec/decoding/batch.py",
                     "specdec/model/sampling.py", "specdec/decoding/outputs.py", "specdec/report/markdown.py",
                     "specdec/measure/ab/ab.py"]

def trees(scratch: Path, package: Path, aa: int, nulls: list[int]) -> dict[str, tuple[Path, str]]:
    """name -> (a folder holding a copy of `package` as `specdec/`, what it is): "base", "aa-1".. (the base under
    other link names: `work_pool` shows every tree through a link of its own), "deep" (a copy 60 characters
    deeper) and "null-i" for i in `nulls` (`null_code` appended to a module the rows import)."""
    import shutil

    def copy(dest: Path) -> Path:
        shutil.copytree(package, dest / "specdec", ignore=shutil.ignore_patterns("__pycache__"))
        return dest

    base = copy(scratch / "base")
    out = {"base": (base, "the checkout")}
    out.update({f"aa-{i}": (base, "the base under another link name") for i in range(1, aa + 1)})
    out["deep"] = (copy(scratch / ("d" * 60) / "deep"), "the base 60 characters deeper")
    for i in nulls:
        tree = copy(scratch / f"null-{i}")
        module, code = null_code(i)
        with open(tree / module, "a") as f:
            f.write(code)
        out[f"null-{i}"] = (tree, f"{module}: +{code.count(chr(10))} lines never run")
    return out


def null_code(i: int) -> tuple[str, str]:
    """The i-th null change: (module, code appended), drawn from seed i: a function, a constant, a string or a
    class of a random size, appended to a module the rows import (NULL_MODULES; from the 11th on
    MORE_NULL_MODULES, with the report modules no row imports). None of it runs: nothing calls, reads or
    subclasses it."""
    rng = random.Random(1000 + i)
    modules = NULL_MODULES if i <= len(NULL_MODULES) else MORE_NULL_MODULES
    module = modules[i % len(modules)]
    kind = ["function", "constant", "string", "class"][i % 4]
    name = f"_study_null_{i}"
    if kind == "function":
        body = "\n".join(f"    x{j} = x{j - 1} * {rng.randrange(2, 99)} + {j}" for j in range(1, rng.randrange(3, 40)))
        code = f"def {name}(x0=0):\n{body}\n    return x0\n"
    elif kind == "constant":
        code = f"{name.upper()} = {tuple(rng.randrange(10 ** 6) for _ in range(rng.randrange(10, 600)))}\n"
    elif kind == "string":
        code = f"{name.upper()} = {''.join(rng.choice('abcdefgh ') for _ in range(rng.randrange(20, 3000)))!r}\n"
    else:
        methods = "\n".join(f"    def m{j}(self):\n        return {j}\n" for j in range(rng.randrange(1, 25)))
        code = f"class _StudyNull{i}:\n    attr_{i} = {i}\n\n{methods}"
    return module, f"\n\n{code}"
