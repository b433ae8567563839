"""The work gate's determinism study: one commit against itself, against commits that add code the rows never
run, and against real changes of known size -- counted and judged exactly as `specdec ab` counts and judges
its work rows (`ab_work.count_sources`, `ab_work.judge`), all in one counting process.

    python tools/work_study.py --out docs/work-study.json [--keep DIR] [--aa 10] [--null 20]
    python tools/work_study.py --table docs/work-study.json [MORE.json ...]   # docs/work.md's table from them
    python tools/work_study.py --per-call 6                         # a generation row's count, call by call

This file counts; the studies' JSON is read back (tables, fits, judgements with a calibration made on other trees)
by tools/work_study_judge.py, which the --table, --calibration-table, --fit, --pairs, --judge and --left-out forms
call.

Trees (each a copy of this checkout's `specdec/` in a scratch folder, seen through a link of the same length):

    base             the checkout as it is
    aa-N             the base again under another link name (N = 1..--aa): an A/A of the method
    deep             the base copied into a folder 60 characters deeper: two worktrees at different depths
    null-N           code the rows never run, appended to a module they import (functions, constants,
                     strings and classes of seeded sizes: `null_code`); from null-11 on also to the report
                     modules, which no row imports
    draft-local, draft-or, draft-sign, draft-ops, draft-copy
                     the bigram draft's proposal made dearer by real changes (a local, an `| 0`, a sign check,
                     four integer operations, its context copied 7 deep); the sizes they measure are in the
                     study's JSON and docs/work.md, not in their names
    round-min, round-finite
                     the accept/reject rule made dearer (a reduction over q; one numpy scalar check) per round
    pass-write, pass-write3
                     the target pass made dearer by one (three) numpy item writes
    alloc            one temporary array allocated in the target pass and dropped: an allocation only

Trees are counted one after another (`ORDER`: every kind early), each in every layout; every tree is judged
against base. The JSON holds every comparison's per-row change, threshold and verdict,
each row's largest |change| over the A/A and null trees, and the seconds it took; `--keep` keeps every child's
callgrind dumps and answers (the per-function split of a change: ../shared/tools/cgdiff.py DUMP_A DUMP_B).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specdec.measure.ab import ab_work  # noqa: E402
from specdec.measure.work import work  # noqa: E402
from specdec.measure.work.work_calibration import null_code  # noqa: E402
from specdec.measure.ab.ab_sources import Source  # noqa: E402
from specdec.measure.ab_rows import KINDS  # noqa: E402
from specdec.util.files import write_atomic  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from work_study_judge import (CONFIG, ROWS, TIMED_ROWS, _calibration_studies, calibration_table, fit,  # noqa: E402
                              held_out, leave_one_out, pairs, table)


# (file, old, new, what): real code changes, each made once in its tree
INJECTIONS = {
    "draft-local": ("specdec/decoding/drafts.py", "    def _key(self, tokens):\n        return tokens[-1]\n",
                  "    def _key(self, tokens):\n        t = tokens[-1]\n        return t\n",
                  "BigramDraft._key: the key through a local (a store and a load per drafted token)"),
    "draft-or": ("specdec/decoding/drafts.py", "    def _key(self, tokens):\n        return tokens[-1]\n",
                   "    def _key(self, tokens):\n        return tokens[-1] | 0\n",
                   "BigramDraft._key: `tokens[-1] | 0` (one more operation per drafted token)"),
    "draft-sign": ("specdec/decoding/drafts.py", "    def _key(self, tokens):\n        return tokens[-1]\n",
                  "    def _key(self, tokens):\n        t = tokens[-1]\n        return t + 0 if t >= 0 else -t\n",
                  "BigramDraft._key: a sign check and an addition per drafted token"),
    "draft-ops": ("specdec/decoding/drafts.py", "    def _key(self, tokens):\n        return tokens[-1]\n",
                "    def _key(self, tokens):\n        t = tokens[-1]\n"
                "        return (t | 0) + (t & 0) - (t ^ t) if t >= 0 else -t\n",
                "BigramDraft._key: a sign check and four integer operations per drafted token"),
    "draft-copy": ("specdec/decoding/drafts.py", '    name = "bigram"\n\n    def __init__',
                   '    name = "bigram"\n    history = 7\n\n    def __init__',
                   "BigramDraft: its context copied 7 characters deep, not 1 (it reads one): about +0.3 % per proposal"),
    "round-min": ("specdec/decoding/rule.py", "    k = len(drafted)\n    for i in range(k):\n",
                   "    k = len(drafted)\n    if q.min() < 0:\n        raise ValueError('q')\n"
                   "    for i in range(k):\n", "accept_reject: a check that q is not negative (one reduction) per round"),
    "pass-write": ("specdec/model/onnx_session.py", "        self._lengths(T, pos)\n        if self.model.want_features:\n",
                  "        self._lengths(T, pos)\n        self.seqlens[0] = pos + T - 1\n"
                  "        if self.model.want_features:\n",
                  "Session._pass: the sequence length written twice (one numpy item write)"),
    "round-finite": ("specdec/decoding/rule.py", "    k = len(drafted)\n    for i in range(k):\n",
                     "    k = len(drafted)\n    if not np.isfinite(q[0, 0]):\n        raise ValueError('q')\n"
                     "    for i in range(k):\n", "accept_reject: one numpy scalar check per round"),
    "round-neg": ("specdec/decoding/rule.py", "    k = len(drafted)\n    for i in range(k):\n",
                  "    k = len(drafted)\n    if q[0, 0] < 0:\n        raise ValueError('q')\n"
                  "    for i in range(k):\n", "accept_reject: one numpy item compared per round"),
    "pass-write3": ("specdec/model/onnx_session.py", "        self._lengths(T, pos)\n        if self.model.want_features:\n",
                    "        self._lengths(T, pos)\n" + "        self.seqlens[0] = pos + T - 1\n" * 3
                    + "        if self.model.want_features:\n",
                    "Session._pass: the sequence length written three more times (three numpy item writes)"),
    "alloc": ("specdec/model/onnx_session.py", "        self._lengths(T, pos)\n        if self.model.want_features:\n",
              "        self._lengths(T, pos)\n        scratch = np.empty(T * 64)  # noqa: F841\n"
              "        if self.model.want_features:\n", "Session._pass: a temporary array of T * 64 floats per pass"),
}


def make_trees(scratch: Path, aa: int, nulls: int) -> tuple[dict, dict]:
    """label -> folder (labels of one length: a link's length moves the work) and label -> what it is."""
    def copy(dest: Path) -> Path:
        shutil.copytree(ROOT / "specdec", dest / "specdec", ignore=shutil.ignore_patterns("__pycache__"))
        return dest

    base = copy(scratch / "base")
    trees, what = {"T00": base}, {"T00": ("base", "the checkout")}
    for i in range(1, aa + 1):
        trees[f"T{len(trees):02d}"] = base
        what[f"T{len(what):02d}"] = (f"aa-{i}", "the base under another link name")
    for name, (path, old, new, desc) in INJECTIONS.items():
        tree = copy(scratch / name)
        text = (tree / path).read_text()
        assert text.count(old) == 1, f"{name}: the code to change is not in {path} once"
        (tree / path).write_text(text.replace(old, new))
        label = f"T{len(trees):02d}"
        trees[label], what[label] = tree, (name, desc)
    deep = copy(scratch / ("d" * 60) / "deep")
    trees[f"T{len(trees):02d}"], what[f"T{len(what):02d}"] = deep, ("deep", "the base 60 characters deeper")
    for i in range(1, nulls + 1):
        tree = copy(scratch / f"null-{i}")
        module, code = null_code(i)
        with open(tree / module, "a") as f:
            f.write(code)
        label = f"T{len(trees):02d}"
        trees[label], what[label] = tree, (f"null-{i}", f"{module}: +{code.count(chr(10))} lines never run")
    return _interleaved(trees, what)


# the order trees are counted in: each kind early, so that a study stopped before its end (its children's answers
# stay in the counting folder) has some of every kind
ORDER = ["aa-1", "draft-copy", "null-1", "null-2", "pass-write3", "aa-2", "null-3", "null-4", "round-finite", "draft-or",
         "null-5", "null-6", "draft-ops", "alloc", "aa-3", "null-7", "null-8", "draft-local", "deep", "null-9", "null-10",
         "round-min", "pass-write", "draft-sign"]


def _interleaved(trees: dict, what: dict) -> tuple[dict, dict]:
    names = {what[lab][0]: lab for lab in trees}
    order = ["T00"] + [names[n] for n in ORDER if n in names] + [lab for lab in trees if lab != "T00"
                                                                 and what[lab][0] not in ORDER]
    return {lab: trees[lab] for lab in order}, {lab: what[lab] for lab in order}


def study_doc(got: dict, trees: dict, what: dict, head: dict, calibration: dict | None = None) -> dict:
    """The study's JSON: every tree judged against base (the first) as a default `specdec ab` run judges its work
    rows (with `calibration` where given: one made on other trees; else each pair's own layouts), each row's
    largest |change| over the A/A, deep and null trees, and every tree's figures per layout."""
    labels = list(trees)
    comparisons = {}
    for i, label in enumerate(labels[1:], start=1):
        counted = {"rows": {r: {"a": per[0], "b": per[i]} for r, per in got.items()}, "calibration": calibration}
        judged = ab_work.judge(counted, len(TIMED_ROWS) + len(ROWS))
        comparisons[what[label][0]] = {"label": label, "what": what[label][1], "rows": {
            r: {"change": j["change"], "threshold": j["threshold"], "verdict": j["verdict"],
                "alloc_change": (j["alloc"] or {}).get("change")} for r, j in judged.items()}}
    largest = {r: {kind: max([abs(c["rows"][r]["change"]) for n, c in comparisons.items() if n.startswith(kind)],
                             default=None) for kind in ("aa", "deep", "null")} for r in got}
    return {**head, "layouts": list(ab_work.LAYOUTS), "method": ab_work.work_pool.METHOD, "kinds": list(KINDS),
            "calibration": (calibration or {}).get("id"),
            "largest_null_change": largest,
            "figures": {r: {what[lab][0]: [c["fewest"] for c in per[i]] for i, lab in enumerate(labels)}
                        for r, per in got.items()},
            "comparisons": comparisons}


def recover(folder: str, aa: int, nulls: int) -> tuple[dict, dict, dict]:
    """A stopped study's whole trees from its counting folder's answers (answer-<label>-<layout>.json): the same
    labels as `make_trees` gives for --aa and --null."""
    with tempfile.TemporaryDirectory() as tmp:
        trees, what = make_trees(Path(tmp), aa, nulls)
    answers = {}
    for label in trees:
        files = [Path(folder) / f"answer-{label}-{i}.json" for i in ab_work.LAYOUTS]
        if all(f.exists() for f in files):
            answers[label] = [json.loads(f.read_text()) for f in files]
    trees = {lab: trees[lab] for lab in trees if lab in answers}
    got = {r: [[a["counts"][r] for a in answers[lab]] for lab in trees] for r in ROWS
           if all(r in a["counts"] for lab in trees for a in answers[lab])}
    return got, trees, {lab: what[lab] for lab in trees}


def per_call(calls: int) -> int:
    """The checkout's generation rows (and pass 1, draft bigram) counted with no warm-up, `calls` calls each, in
    every layout: per call, the mean over the layouts and their spread (sd / mean). `ab_worker._plan`'s warm-ups
    rest on this table."""
    import os
    import statistics

    from specdec.measure.work import work_pool

    os.environ["SPECDEC_WORK_WARMUP"] = "0"  # the zygote's children read it (0 asked for in a request means "the plan")
    avail = work.probe()
    if avail.kind is None:
        print(f"work_study: no counter here: {avail.reason}", file=sys.stderr)
        return 2
    rows = ["target-only", "spec bigram k=4", "round bigram k=4", "spec ngram k=4", "round ngram k=4", "pass 1",
            "draft bigram"]
    got = work_pool.count_trees({"base": str(ROOT)}, ab_work.counting_config(CONFIG), rows, avail.kind,
                                list(ab_work.LAYOUTS), jobs=2, calls=calls,
                                progress=lambda line: print(line, file=sys.stderr, flush=True))
    print("row | " + " | ".join(f"call {i + 1}" for i in range(calls)))
    for row in rows:
        cells = []
        for i in range(calls):
            xs = [c["counts"][i]["work"] for c in got["rows"][row]["base"]]
            mean = statistics.fmean(xs)
            cells.append(f"{mean:,.0f} (sd {statistics.pstdev(xs) / mean:.3%})")
        print(f"{row} | " + " | ".join(cells))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--calibration-table"]:  # --calibration-table CAL_STUDY.json [CAL_STUDY2.json ...] INJ.json
        print(calibration_table(_calibration_studies(argv[1:-1]), json.loads(Path(argv[-1]).read_text())))
        return 0
    if argv[:1] == ["--fit"]:  # --fit STUDY.json [STUDY2.json ...] [DIR]: their unchanged trees, kept as a calibration
        from specdec.measure.work import work_calibration

        studies = [a for a in argv[1:] if a.endswith(".json")]
        doc = fit(_calibration_studies(studies), "python tools/work_study.py " + " ".join(argv))
        dirs = [a for a in argv[1:] if not a.endswith(".json")]
        folder = Path(dirs[0]) if dirs else work_calibration.SHIPPED
        print(f"wrote {work_calibration.store(doc, folder)}")
        return 0
    if argv[:1] == ["--pairs"]:  # --pairs STUDY.json CAL.json: every pair of the study's trees, held out
        study, cal = (json.loads(Path(a).read_text()) for a in argv[1:3])
        print(json.dumps(pairs(study, cal, len(TIMED_ROWS) + len(ROWS)), indent=1))
        return 0
    if argv[:1] in (["--judge"], ["--left-out"]):  # --judge STUDY.json CAL.json / --left-out STUDY.json [...]
        tests = len(TIMED_ROWS) + len(ROWS)  # a default ab run's family: its timed rows and its work rows
        got = (held_out(json.loads(Path(argv[1]).read_text()), json.loads(Path(argv[2]).read_text()), tests)
               if argv[0] == "--judge" else leave_one_out(_calibration_studies(argv[1:]), tests))
        print(json.dumps(got, indent=1))
        return 0
    if argv[:1] == ["--per-call"]:
        return per_call(int(argv[1]))
    if argv[:1] == ["--table"]:  # the table docs/work.md shows, from one or more studies' JSON
        print(table(*(json.loads(Path(a).read_text()) for a in argv[1:])))
        return 0
    if argv[:1] == ["--recover"]:  # --recover FOLDER AA NULLS OUT: a stopped study's whole trees
        got, trees, what = recover(argv[1], int(argv[2]), int(argv[3]))
        doc = study_doc(got, trees, what, {"command": f"python tools/work_study.py --aa {argv[2]} --null {argv[3]} "
                                           "(stopped; its whole trees recovered)", "counter": work.NAMES["callgrind"],
                                           "chars": ab_work.COUNT_CHARS})
        write_atomic(Path(argv[4]), json.dumps(doc, indent=1) + "\n")
        print(f"recovered {len(trees)} trees into {argv[4]}")
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--keep", default=None, help="keep every child's dumps and answers here")
    p.add_argument("--aa", type=int, default=10)
    p.add_argument("--null", type=int, default=20)
    p.add_argument("--only", nargs="*", default=None, help="count only these trees besides base (names)")
    p.add_argument("--calibration", default=None, help="judge the trees with this calibration (JSON; made on "
                   "other trees: --fit)")
    args = p.parse_args(argv)
    avail = work.probe()
    if avail.kind is None:
        print(f"work_study: no counter here: {avail.reason}", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="specdec-study-") as tmp:
        trees, what = make_trees(Path(tmp), args.aa, args.null)
        if args.only is not None:
            keep = {"T00"} | {lab for lab, (name, _) in what.items() if name in args.only}
            trees, what = {k: v for k, v in trees.items() if k in keep}, {k: v for k, v in what.items() if k in keep}
        sources = [Source(label, what[label][0], str(path), None) for label, path in trees.items()]
        print(f"work_study: {len(sources)} trees x {len(ab_work.LAYOUTS)} layouts, {avail.name}", file=sys.stderr)
        cfg = ab_work.counting_config(CONFIG)
        got = ab_work.count_sources(sources, cfg, avail.kind, ROWS, lambda s: print(s, file=sys.stderr, flush=True),
                                    keep=args.keep, by_tree=True)
    cal = json.loads(Path(args.calibration).read_text()) if args.calibration else None
    doc = study_doc(got, trees, what, {"command": "python tools/work_study.py " + " ".join(argv),
                                       "counter": avail.name, "chars": cfg["chars"],
                                       "seconds": round(time.monotonic() - t0, 1)}, cal)
    write_atomic(Path(args.out), json.dumps(doc, indent=1) + "\n")
    flagged = {n: [r for r, j in c["rows"].items() if j["verdict"] != "same"] for n, c in doc["comparisons"].items()}
    for n, rows in flagged.items():
        print(f"{n:12} flagged: {', '.join(rows) or '-'}")
    print(f"wrote {args.out} ({doc['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
