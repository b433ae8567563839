"""A sample user repository for `specdec ab --repo` and `specdec bisect` (built by the tests, never shipped).

`make(path)` writes a git repository of eight commits holding `mydraft.py`: a draft of its own (a character
bigram over a few lines of text, built through specdec's public API: `specdec.Draft`, `specdec.encode`), for the
shipped target. `mydraft:make` is its entry point. Commit 1 has no module yet; commit 5 makes the proposal dearer
by a real change (its uniform draws copied as float64: about 2 % of the proposal's instructions, no busy wait);
the other commits change nothing the rows run.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

TEXT = ("ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n"
        "KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up with our dead.\n")

DRAFT = '''"""My draft: a character bigram of its own, for specdec's shipped target."""

import numpy as np

import specdec

TEXT = {text!r}


def _tables(vocab: int):
    ids = specdec.encode(TEXT)
    counts = np.ones((vocab, vocab))
    for a, b in zip(ids, ids[1:]):
        counts[a, b] += 4.0
    q = counts / counts.sum(axis=1, keepdims=True)
    return q, q.cumsum(axis=1)


class Bigram(specdec.Draft):
    name = "mybigram"

    def __init__(self, vocab: int):
        self.q, self.cdf = _tables(vocab)

    def propose(self, tokens, k, rng, temperature):
{draws}
        last = tokens[-1]
        ids, rows = [], []
        for i in range(k):
            last = int(np.searchsorted(self.cdf[last], u[i] * self.cdf[last, -1]))
            ids.append(last)
            rows.append(self.q[ids[-2] if i else tokens[-1]])
        return ids, np.stack(rows)

    def rollback(self, n_valid):
{rollback}

    def weight_bytes(self):
        return self.q.nbytes


def make(target):
    return Bigram(target.vocab_size)
'''

DRAWS = "        u = rng.random(k)"
# commit 5: the draws copied as float64 (`astype` always copies): +2.3 % of the proposal's instructions at k = 4
# under callgrind (117,333 against 114,665 per call, counted with specdec.measure.work.work as ab counts a draft row)
DEARER = "        u = rng.random(k).astype(np.float64)"


def _git(path: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _commit(path: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (path / name).write_text(text)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", message)
    return _git(path, "rev-parse", "HEAD")


ROLLBACK = "        self.kept = n_valid"
# the loop calls rollback once a round, after the rule: a dearer rollback is a dearer round, not a dearer proposal
# (the draft row never runs it; the spec row does, every round)
DEARER_ROLLBACK = "        self.kept = sum([t * 2 for t in range(64 * n_valid)]) and n_valid"


def draft_source(dearer: bool = False, rollback: bool = False) -> str:
    return DRAFT.format(text=TEXT, draws=DEARER if dearer else DRAWS, rollback=DEARER_ROLLBACK if rollback else ROLLBACK)


def make(path: Path) -> list[str]:
    """The repository at `path` (created); its commits' hashes, oldest first (index i is commit i + 1)."""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    steps = [({"README.md": "my drafts\n"}, "1: readme"),
             ({"mydraft.py": draft_source()}, "2: my bigram draft"),
             ({"README.md": "my drafts, for specdec\n"}, "3: readme"),
             ({"NOTES.md": "to do: a trigram\n"}, "4: notes"),
             ({"mydraft.py": draft_source(dearer=True)}, "5: copy the draws as float64"),
             ({"NOTES.md": "to do: a trigram, a cache\n"}, "6: notes"),
             ({"LICENSE": "MIT\n"}, "7: license"),
             ({"README.md": "my drafts, for specdec's harness\n"}, "8: readme")]
    return [_commit(path, files, message) for files, message in steps]


GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def history(sample: tuple[Path, list[str]], name: str, steps) -> tuple[Path, list[str]]:
    """A copy of the sample repository (once per name) with branch `name` checked out: from the sample's commit
    steps[0], then one commit per step (`rm PATH`, `from I` (the sample's commit index I's tree), `add PATH TEXT`).
    Its commits' hashes, oldest first."""
    root0, commits0 = sample
    root = root0.parent / name
    if not root.exists():
        shutil.copytree(root0, root)
        subprocess.run(GIT + ["checkout", "-q", "-b", name, commits0[steps[0]]], cwd=root, check=True)
        for i, step in enumerate(steps[1:]):
            op, arg, *text = step
            if op == "rm":
                subprocess.run(GIT + ["rm", "-q", arg], cwd=root, check=True)
            elif op == "from":
                subprocess.run(GIT + ["checkout", "-q", commits0[arg], "--", "."], cwd=root, check=True)
            else:
                (root / arg).parent.mkdir(parents=True, exist_ok=True)
                (root / arg).write_text(text[0])
                subprocess.run(GIT + ["add", arg], cwd=root, check=True)
            subprocess.run(GIT + ["commit", "-q", "--allow-empty", "-m", f"{name} {i}: {op} {arg}"], cwd=root,
                           check=True)
    return root, subprocess.run(["git", "rev-list", "--reverse", "HEAD"], cwd=root, capture_output=True, text=True,
                                check=True).stdout.split()
