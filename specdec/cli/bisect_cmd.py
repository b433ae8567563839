"""`specdec bisect GOOD BAD`: the first commit that made the code slower, the running specdec the harness at every
step (`measure.bisect`). The criterion is work (instructions per call of the target pass and of each draft's
proposal: deterministic, and cheaper than timing) where a counter runs, else time (an `ab` run of the commit
against GOOD per step, exit 1 of any timed row). Exit 0: one commit named; 1: none could be (BAD not slower,
skipped commits around the answer, a failure); 2: bad input, before anything is checked out; 3: BAD could not
be measured (no answer either way)."""

from __future__ import annotations

import contextlib
import math
import subprocess
from collections.abc import Iterator

from specdec.cli import ab_cmd, models
from specdec.cli.checks import UsageError, work_plan
from specdec.util.errors import Failure
from specdec.measure import entry
from specdec.measure.ab.ab_sources import Source, SourceError, checkout, repo_root, resolve


UNMEASURED = 3  # the exit status where BAD could not be measured: neither "worse" nor "not worse"


def _commits(root, good: str, bad: str) -> list[str]:
    """The commits after GOOD up to BAD along BAD's first parents, oldest first (BAD last)."""
    if subprocess.run(["git", "merge-base", "--is-ancestor", good, bad], cwd=root).returncode:
        raise UsageError(f"GOOD {good[:10]} is not an ancestor of BAD {bad[:10]}: bisect searches the history "
                         "from GOOD to BAD")
    out = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", f"{good}..{bad}"], cwd=root,
                         capture_output=True, text=True, check=True).stdout.split()
    if not out:
        raise UsageError("GOOD and BAD are the same commit: nothing to search")
    return out


def _subject(root, commit: str) -> str:
    return subprocess.run(["git", "log", "-1", "--format=%h %s", commit], cwd=root, capture_output=True,
                          text=True).stdout.strip()


def _holds(root, commit: str, own: list[str]) -> bool:
    """Whether the commit holds what the workers import: the entry points' modules, or a specdec package."""
    if own:
        try:
            for spec in own:
                entry.check_static(spec, commit[:10], root, commit)
        except entry.EntryError:
            return False
        return True
    return subprocess.run(["git", "cat-file", "-e", f"{commit}:specdec/__init__.py"], cwd=root).returncode == 0


def cmd_bisect(args) -> int:
    from specdec.measure.ab import ab_work

    from specdec.cli.parser import build_parser

    for name, value in vars(build_parser().parse_args(["ab"])).items():  # ab's defaults for what bisect leaves out
        if not hasattr(args, name):
            setattr(args, name, value)
    args.a, args.b, args.a_path, args.b_path = args.good, args.bad, None, None
    config, cpu = ab_cmd._check(args)
    kind, why_not = work_plan(args, config)
    own = ab_cmd.entries(config)
    root = repo_root(args.repo, "bisect")
    good, bad = resolve(root, args.good), resolve(root, args.bad)
    commits = _commits(root, good, bad)
    for name, commit in (("GOOD", good), ("BAD", bad)):  # both ends must run: bad input otherwise
        if not _holds(root, commit, own):
            raise SourceError(f"{name} {commit[:10]} holds no {' or '.join(own) if own else 'specdec package'}")
        if own:
            entry.probe_commit(root, commit, f"{name} {commit[:10]}", config["target"], config["drafts"],
                               config["harness"])
    criterion = f"work ({ab_work.work.NAMES[kind]})" if kind else f"time (work: {why_not})"
    models.log(f"specdec bisect: {len(commits)} commits after {good[:10]} up to {bad[:10]}; criterion {criterion}")
    with contextlib.ExitStack() as stack:
        steps = 1 + math.ceil(math.log2(len(commits)))  # BAD, then halving: the judgements the search may make
        judge = (_by_work(root, good, bad, config, kind, stack, steps) if kind
                 else _by_time(root, good, config, cpu, args))
        return _search(root, good, bad, commits, own, criterion, judge)


def _search(root, good: str, bad: str, commits: list[str], own: list[str], criterion: str, judge) -> int:
    """git bisect's search over `commits` with `judge`, its progress on stderr, its answer on stdout."""
    from specdec.measure.ab.ab import WorkerError
    from specdec.measure.ab.bisect import search

    def step(i: int) -> bool | None:
        try:
            verdict = judge(commits[i])
        except WorkerError as exc:  # the user's code failed at a step, or a worker died: exit 1 with what failed
            lines = str(exc).splitlines()
            raise Failure(f"{_subject(root, commits[i])} could not be judged against GOOD {good[:10]}: "
                          f"{lines[0] if lines else 'a worker failed'}", tail=lines[1:][-12:]) from None
        models.log(f"  {_subject(root, commits[i])}: "
                   f"{'skipped (nothing measurable)' if verdict is None else 'worse' if verdict else 'good'}")
        return verdict

    def skip(i: int) -> bool:
        missing = not _holds(root, commits[i], own)
        if missing:
            models.log(f"  {_subject(root, commits[i])}: skipped (the module does not exist there)")
        return missing

    found = search(len(commits), step, skip)
    print(f"criterion: {criterion}; judged {len(found.judged)} of {len(commits)} commits, "
          f"skipped {len(found.skipped)}")
    if len(commits) - 1 not in found.judged:  # BAD itself could not be measured: no answer either way
        why = "its module does not exist there" if len(commits) - 1 in found.skipped else "no row measurable in both"
        print(f"BAD {bad[:10]} could not be measured ({why}): no answer either way")
        return UNMEASURED
    if found.first is None:
        print(f"BAD {bad[:10]} is not worse than GOOD {good[:10]}: no commit to name"
              + (" (by time: no row changed beyond what it could detect, each row's logged above; a larger --budget "
                 "detects smaller changes)" if criterion.startswith("time") else ""))
        return 1
    if len(found.candidates) > 1:
        print("the first slower commit is one of (skipped commits border it):")
        for i in found.candidates:
            print(f"  {_subject(root, commits[i])}")
        return 1
    print(f"first slower commit: {commits[found.first]} ({_subject(root, commits[found.first])})")
    return 0


def _by_work(root, good: str, bad: str, config: dict, kind: str, stack: contextlib.ExitStack, steps: int):
    """A commit judged against GOOD by its work, as `specdec ab` judges its work rows: the same rows (every row ab
    times, a draft's generation rows and the verify pass at the largest k: `ab_work.largest_k`), counted by the
    same plan, judged by `ab_work.judge` with this machine's calibration, the family-wise rate shared by the
    rows of every step the search may take (`steps`). GOOD is counted with BAD, then each commit alone, all in
    one counting pool (its start-up paid once, closed with `stack`)."""
    from specdec.measure.ab import ab_work
    from specdec.measure.work import work_pool

    rows = ab_work.largest_k(ab_work.row_names(config))
    cfg = ab_work.counting_config(config)
    cal = ab_work.calibration(config, kind)
    models.log("  work thresholds: " + (f"calibrated ({cal['path']})" if cal else
                                        "UNCALIBRATED (no calibration for this machine and configuration: "
                                        "`specdec calibrate-work` makes one)"))
    cache: dict[str, dict] = {}

    pool = stack.enter_context(work_pool.Pool(kind, cfg["threads"], models.log))  # BAD is always judged: needed

    def count(commits: list[str]) -> None:
        with _trees(root, commits) as sources:
            got = ab_work.count_sources(sources, cfg, kind, rows, progress=models.log, pool=pool)
        for i, commit in enumerate(commits):
            cache[commit] = {row: per[i] for row, per in got.items()}

    def judge(commit: str) -> bool | None:
        if good not in cache:
            count([good, bad])  # BAD is always judged: counted with GOOD, in one pass of the pool
        if commit not in cache:
            count([commit])
        g, c = cache[good], cache[commit]
        names = [r for r in rows if r in g and r in c]
        if not names:
            return None
        verdicts = ab_work.judge({"rows": {r: {"a": g[r], "b": c[r]} for r in names}, "calibration": cal},
                                 tests=len(rows) * steps)
        for r, v in verdicts.items():
            models.log(f"    {r}: {v['change']:+.3%} of work (threshold {v['threshold']:.3%}): {v['verdict']}")
        return any(v["verdict"] == "worse" for v in verdicts.values())

    return judge


def _by_time(root, good: str, config: dict, cpu: int, args):
    """A commit judged against GOOD by an `ab` timing run of the budget given: worse where any row is."""
    from specdec.measure.ab import ab
    from specdec.report.ab import ab_render

    def judge(commit: str) -> bool | None:
        with _trees(root, [good, commit]) as (a, b):
            run = ab.measure(a, b, config, args.budget, args.pairs, cpu, progress=models.log)
            doc = ab_render.document(run, a, b, cpu)
        for r, row in doc["rows"].items():  # a row without a pair's estimate has no change: n/a
            change = "n/a" if row["change"] is None else f"{row['change']:+.2%}"
            models.log(f"    {r}: {change} of time (could detect {row['detectable']:.2%}): {row['verdict']}")
        if not doc["rows"]:
            return None
        return bool(doc["worse"])

    return judge


@contextlib.contextmanager
def _trees(root, commits: list[str]) -> Iterator[list[Source]]:
    """The commits checked out as Sources labelled A, B (equal-length labels) for the block, removed after it."""
    with contextlib.ExitStack() as stack:
        yield [Source("AB"[i], c[:10], str(stack.enter_context(checkout(root, c))), c) for i, c in enumerate(commits)]
