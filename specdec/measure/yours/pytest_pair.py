"""pytest-benchmark over your own pair: the `specdec_pair` fixture. One line in your conftest.py enables it:

    pytest_plugins = ["specdec.measure.yours.pytest_pair"]

    def test_draft(specdec_pair):
        specdec_pair.draft("mydraft:make", k=4)

Each method benchmarks one of `specdec ab`'s rows through pytest-benchmark's `benchmark` fixture (one a test, as
pytest-benchmark allows): `draft(SPEC, k)` a draft's proposal of k tokens, `target_pass(positions)` the target's
forward (1: a step; k + 1: a verify pass), `speculative(SPEC, k, chars)` and `target_only(chars)` whole
generations. The rows are `user_bench.rows`: your entry points imported from the rootdir (your repository) after
the running specdec, at one thread. The target is `--specdec-target MODULE:CALLABLE` (default specdec's shipped
one). Save and compare runs as pytest-benchmark does (`--benchmark-autosave`, `--benchmark-compare`).

`--specdec-work` adds each benchmark's instructions per call to its `extra_info` (`instructions`; a draft's also
per drafted token), counted as `specdec ab` counts them (`user_bench.work`: one counting process for the session,
after the last test, under callgrind where the machine has no hardware counter; a generation counted at most
12 characters long, `counted_chars`). Where no counter runs, `extra_info["work"]` says why.

Not registered as a pytest11 entry point: pytest would import it into every test run of every environment
specdec is installed in; enabling it is the one line above (or `-p specdec.measure.yours.pytest_pair`).
"""

from __future__ import annotations

import pytest

from specdec.measure import entry
from specdec.measure.yours import user_bench

DEFAULT_K, DEFAULT_CHARS = 4, 50


def pytest_addoption(parser) -> None:
    group = parser.getgroup("specdec", "specdec_pair: your own pair benchmarked")
    group.addoption("--specdec-target", default=None, metavar="MODULE:CALLABLE",
                    help="the target of specdec_pair's rows (a callable of no arguments returning a Target; default "
                    "specdec's shipped target)")
    group.addoption("--specdec-work", action="store_true",
                    help="count each specdec_pair benchmark's instructions per call into its extra_info (one "
                    "counting process after the last test)")


def pytest_configure(config) -> None:
    """A bad --specdec-target is a usage error here, before any test (pytest's exit 4); in a fixture it would be
    each test's error."""
    target = config.getoption("specdec_target")
    if target is not None and not entry.is_entry(target):
        raise pytest.UsageError(f"--specdec-target {target!r}: not MODULE:CALLABLE (a callable of no arguments "
                                "returning a Target, e.g. mymodel:load; leave it out for specdec's shipped target)")


class _Session:
    """The rows built so far (one build per pair and kind) and the benchmarks to count at the end."""

    def __init__(self, config):
        self.config = config
        self.target = config.getoption("specdec_target")
        self.tree = str(config.rootpath)
        self.built: dict = {}
        self.counted: list[tuple[user_bench.Pair, str, dict]] = []

    def call(self, pair: user_bench.Pair, kind: str, row: str):
        key = (pair, kind)
        if key not in self.built:
            self.built[key] = user_bench.rows(pair, self.tree, [kind])
        calls, answer = self.built[key]
        if row not in calls:
            got = answer.get(row)
            pytest.skip(f"{row}: {got['reason'] if got else 'not built'}")
        return calls[row]


class PairBenchmark:
    """`specdec_pair`: one of your pair's rows benchmarked by pytest-benchmark's `benchmark`."""

    def __init__(self, benchmark, session: _Session):
        self.benchmark, self.session = benchmark, session

    def _run(self, pair: user_bench.Pair, kind: str, row: str):
        call = self.session.call(pair, kind, row)
        prepare = getattr(call, "prepare", None)
        if prepare is not None:  # untimed, once: the pass's cache filled, the draft's generator at its state
            prepare()
        self.benchmark.extra_info.update(specdec_row=row, target=pair.target or "shipped")
        if self.session.config.getoption("specdec_work"):
            self.session.counted.append((pair, row, self.benchmark.extra_info))
        return self.benchmark(call)

    def _pair(self, drafts=(), ks=(DEFAULT_K,), chars=DEFAULT_CHARS) -> user_bench.Pair:
        return user_bench.Pair(self.session.target, tuple(drafts), tuple(ks), chars)

    def draft(self, spec: str, k: int = DEFAULT_K):
        """The draft's proposal of k tokens after a fixed context, stepping back one token first (as a round)."""
        return self._run(self._pair([spec], [k]), "draft", f"draft {spec}")

    def target_pass(self, positions: int = 1):
        """The target's forward over `positions` new positions at the end of a fixed context."""
        if positions == 1:
            return self._run(self._pair(), "pass", "pass 1")
        return self._run(self._pair(ks=[positions - 1]), "verify", f"verify {positions}")

    def speculative(self, spec: str, k: int = DEFAULT_K, chars: int = DEFAULT_CHARS):
        """Speculative generation of `chars` characters (tokens) with the draft at k."""
        return self._run(self._pair([spec], [k], chars), "spec", f"spec {spec} k={k}")

    def target_only(self, chars: int = DEFAULT_CHARS):
        """Target-only generation of `chars` characters (tokens)."""
        return self._run(self._pair(chars=chars), "target-only", "target-only")


def _state(config) -> _Session:
    if not hasattr(config, "_specdec_pair"):
        config._specdec_pair = _Session(config)
    return config._specdec_pair


@pytest.fixture
def specdec_pair(benchmark, request) -> PairBenchmark:
    return PairBenchmark(benchmark, _state(request.config))


def count(counted: list[tuple[user_bench.Pair, str, dict]], tree: str) -> None:
    """Each benchmark's row counted, into its extra_info: one `user_bench.work` per target, generation length and
    draft k (its drafts and ks the union of theirs): a draft's proposal is counted at the k its own test proposes,
    never at another test's."""
    from specdec.measure.work.work_pool import COUNT_CHARS

    groups: dict = {}
    for pair, row, info in counted:
        key = (pair.target, pair.chars, pair.draft_k)
        drafts, ks, rows = groups.setdefault(key, ({}, {}, {}))
        drafts.update(dict.fromkeys(pair.drafts))
        ks.update(dict.fromkeys(pair.ks))
        rows.setdefault(row, []).append((pair, info))
    for (target, chars, _), (drafts, ks, rows) in groups.items():
        pair = user_bench.Pair(target, tuple(drafts), tuple(ks), chars)
        got = user_bench.work(pair, tree, list(rows))
        for row, infos in rows.items():
            for each, info in infos:
                if got.get("counter") is None:
                    info["work"] = f"not counted: {got['reason']}"
                elif row not in got["rows"]:
                    info["work"] = f"not counted: {got['reasons'].get(row, 'not built')}"
                else:
                    info.update(instructions=got["rows"][row], counter=got["counter"], layouts=got["layouts"])
                    if row.startswith("draft "):
                        info["instructions_per_token"] = got["rows"][row] / each.draft_k
                    if row.startswith(("spec ", "target-only")):
                        info["counted_chars"] = min(each.config(tree, [])["chars"], COUNT_CHARS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session):
    """After the last test, before pytest-benchmark writes its JSON (at session finish): the counts."""
    yield
    state = getattr(session.config, "_specdec_pair", None)
    if state is not None and state.counted:
        count(state.counted, state.tree)
