"""The two source trees `specdec ab` measures: git revisions checked out as temporary worktrees, or given folders.

A revision is checked out with `git worktree add --detach` into a temporary folder outside the user's checkout
(nothing is written into the checkout itself; git records the worktree in its own metadata and forgets it
when the folder is removed), and removed again when the run ends, an interrupt or an error included.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from specdec.util.errors import InputError


class SourceError(InputError):
    """A revision or folder that cannot be measured (bad input: one line, before any work)."""


@dataclass(frozen=True)
class Source:
    label: str  # "A" or "B"
    name: str  # what the user gave: a revision name or a folder
    path: str  # the tree whose specdec/ package the workers import
    commit: str | None  # the full hash for a revision (or a folder inside a git checkout), else None


def _git(args: list[str], cwd: str | Path) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        said = (out.stderr or out.stdout).strip()
        raise SourceError(said.splitlines()[-1] if said else f"git {' '.join(args)} failed")
    return out.stdout.strip()


def repo_root(cwd: str | Path = ".", command: str = "ab") -> Path:
    """The top of the git checkout around `cwd`; SourceError outside one, saying what `specdec COMMAND` can do
    instead (only ab takes two folders)."""
    folders = " (or give two source trees: --a-path DIR --b-path DIR)" if command == "ab" else ""
    if shutil.which("git") is None:
        raise SourceError(f"specdec {command} needs git on PATH{folders}")
    if not Path(cwd).is_dir():
        raise SourceError(f"--repo {cwd}: no such folder (a git repository: the current one by default)")
    try:
        return Path(_git(["rev-parse", "--show-toplevel"], cwd))
    except SourceError:
        raise SourceError(f"{Path(cwd).absolute()} is not inside a git checkout: run specdec {command} in one, or "
                          f"name one with --repo PATH{folders}") from None


def resolve(root: Path, rev: str) -> str:
    """The commit a revision name stands for; SourceError naming it when git does not know it."""
    try:
        return _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], root)
    except SourceError:
        raise SourceError(f"revision {rev!r} is not a commit in {root} (any name git rev-parse takes: "
                          "a branch, a tag, HEAD~1, a hash)") from None


def check_tree(option: str, path: str) -> str:
    """A folder holding a specdec package (specdec/__init__.py); its absolute path."""
    p = Path(path).absolute()
    if not (p / "specdec" / "__init__.py").is_file():
        raise SourceError(f"{option} {path}: not a specdec source tree (no specdec/__init__.py in it)")
    return str(p)


def _folder_commit(path: str) -> str | None:
    try:
        return _git(["rev-parse", "HEAD"], path)
    except (SourceError, OSError):
        return None


def check_folder(option: str, path: str, entries: list[str]) -> str:
    """A folder holding the entry points' modules (a user's code, `measure.entry`); its absolute path."""
    from specdec.measure import entry

    p = Path(path).absolute()
    if not p.is_dir():
        raise SourceError(f"{option} {path}: no such folder")
    for spec in entries:
        entry.check_static(spec, f"{option} {path}", folder=p)
    return str(p)


@contextlib.contextmanager
def sources(a: str | None, b: str | None, a_path: str | None = None, b_path: str | None = None,
            cwd: str | Path = ".", entries: list[str] | None = None,
            probe: Callable[[Source, Path | None], None] | None = None) -> Iterator[tuple[Source, Source]]:
    """(A, B) ready to import from; revisions are checked out for the block and removed after it.

    Everything that can be refused is checked before any checkout: the revisions resolve, the folders hold a
    package. With `entries` (a user's `MODULE:CALLABLE` entry points, `cwd` their repository) the trees need not
    hold specdec: each must hold the entry points' modules and names (`entry.check_static`, read from git), and
    `probe(source, repo root or None)` runs on each before any worktree exists (`entry.probe_commit`)."""
    given = {"A": (a, a_path), "B": (b, b_path)}
    root = None
    plan = {}
    for label, (_, path) in given.items():  # folders first: their check needs no git
        if path is not None:
            option = f"--{label.lower()}-path"
            tree = check_folder(option, path, entries) if entries else check_tree(option, path)
            plan[label] = Source(label, path, tree, _folder_commit(path))
    for label, (rev, path) in given.items():
        if path is None:
            root = root or repo_root(cwd)
            plan[label] = Source(label, rev, "", resolve(root, rev))
            for spec in entries or ():
                from specdec.measure import entry

                entry.check_static(spec, f"revision {rev!r} ({plan[label].commit[:10]})", root, plan[label].commit)
    plan = {label: plan[label] for label in given}
    for src in plan.values() if probe is not None else ():
        probe(src, None if src.path else root)
    with contextlib.ExitStack() as stack:
        for label, src in plan.items():
            if src.path:
                continue
            where = stack.enter_context(checkout(root, src.commit))
            plan[label] = Source(label, src.name, str(where), src.commit)
            if not entries and not (where / "specdec" / "__init__.py").is_file():
                raise SourceError(f"revision {src.name!r} ({src.commit[:10]}) has no specdec package")
        yield plan["A"], plan["B"]


@contextlib.contextmanager
def checkout(root: Path, commit: str) -> Iterator[Path]:
    """`commit` checked out as a temporary worktree outside the checkout for the block, removed after it (an
    interrupt or an error included)."""
    with tempfile.TemporaryDirectory(prefix="specdec-ab-") as tmp:
        where = Path(tmp) / "tree"
        _git(["worktree", "add", "--detach", "--quiet", str(where), commit], root)
        try:
            yield where
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=root, capture_output=True)
            subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True)
