"""A user's own target or draft named by entry point, `MODULE:CALLABLE`, imported from a revision's tree.

`specdec ab --repo R --target pkg.mod:make_target --drafts mydraft:make` measures code that is not specdec's: the
running specdec is the harness (its worker, rows, statistics and work counts) and each revision's tree gives the
module. A target's callable takes no arguments and returns an object implementing `model.protocol.Target`; a
draft's takes the target and returns a `Draft` (or an object with the Draft interface).

Three checks, each a one-line InputError before any timing:
  * `check_static`: the module's file and a top-level name for the callable exist at a revision (read with
    `git ls-tree` / `git show`, no worktree) or in a folder (parsed with `ast`, nothing imported);
  * `probe`: in a subprocess, the revision's tree (a temporary `git archive` export, or the folder) imported
    after the running specdec, each callable called, its result's missing methods named; a module the current
    environment lacks (an ImportError of a third-party module) is refused, since a revision's dependencies are
    found in the environment specdec runs in.
  * a callable that raises is not bad input: `probe` reports it as a failure (exit 1).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from specdec.util.errors import Failure, InputError

_ENTRY = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
TARGET_MEMBERS = ("config", "device", "vocab_size", "context", "tokenize", "detokenize", "ids", "setup_cache",
                  "rollback", "__call__")
DRAFT_MEMBERS = ("name", "reset", "rollback", "propose")
PROBE_TIMEOUT = 600.0  # seconds one revision's probe may take (a Hugging Face target loads here)


class EntryError(InputError):
    """An entry point that does not exist or returns the wrong kind of object (exit 2)."""


class EntryFailed(Failure):
    """An entry point's callable raised at a revision: the user's code failed, not their input (exit 1)."""


def is_entry(spec) -> bool:
    """`MODULE:CALLABLE` (an `hf:PATH` or a shipped name is not)."""
    return isinstance(spec, str) and not spec.startswith("hf:") and bool(_ENTRY.match(spec))


def split(spec: str) -> tuple[str, str]:
    module, _, name = spec.partition(":")
    return module, name


def _candidates(module: str) -> list[str]:
    base = module.replace(".", "/")
    return [f"{base}.py", f"{base}/__init__.py"]


def _defines(source: str, name: str) -> bool:
    """A top-level def, class, assignment or import binding `name` in the module's text."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # the import in `probe` says what is wrong with it, with the line
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name or a.name == "*" for a in node.names):
                return True
    return False


def _git(args: list[str], cwd: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def check_static(spec: str, where: str, repo: str | Path | None = None, commit: str | None = None,
                 folder: str | Path | None = None) -> None:
    """The module's file and the callable's top-level name exist: at `commit` of `repo` (git alone), or in
    `folder`. `where` names the revision or folder in the message."""
    module, name = split(spec)
    text = None
    for rel in _candidates(module):
        if commit is not None:
            got = _git(["show", f"{commit}:{rel}"], repo)
            if got.returncode == 0:
                text = got.stdout
                break
        elif (Path(folder) / rel).is_file():
            text = (Path(folder) / rel).read_text(errors="replace")
            break
    if text is None:
        raise EntryError(f"{spec}: no module {module!r} at {where} (looked for {' or '.join(_candidates(module))})")
    if not _defines(text, name):
        raise EntryError(f"{spec}: module {module!r} at {where} defines no {name!r} at its top level")


def exists_at(spec: str, repo: str | Path, commit: str) -> bool:
    """Whether the module's file exists at `commit` (bisect skips the commits where it does not yet)."""
    return any(_git(["cat-file", "-e", f"{commit}:{rel}"], repo).returncode == 0 for rel in _candidates(split(spec)[0]))


def missing(obj, members: tuple[str, ...]) -> list[str]:
    return [m for m in members if not hasattr(obj, m)]


def harness_root() -> str:
    """The folder holding the running specdec package: first on every worker's path, so both sides of a user's
    comparison run this harness."""
    import specdec

    return os.path.dirname(os.path.dirname(os.path.abspath(specdec.__file__)))


def enter(tree: str, harness: str) -> None:
    """In a worker: import the running specdec from `harness`, then put the revision's `tree` first on the path
    (its modules win over anything else of that name; specdec is already imported, so the harness stays)."""
    sys.path.insert(0, harness)
    import specdec

    del sys.path[0]
    where = os.path.realpath(os.path.dirname(os.path.abspath(specdec.__file__)))
    if where != os.path.realpath(os.path.join(harness, "specdec")):
        raise RuntimeError(f"imported specdec from {where}, not from the harness {harness}")
    tree = os.path.abspath(tree)
    if tree in sys.path:
        sys.path.remove(tree)
    sys.path.insert(0, tree)


def load(spec: str):
    """The callable an entry point names (imported from the path `enter` set)."""
    module, name = split(spec)
    return getattr(importlib.import_module(module), name)


def make_target(spec: str):
    target = load(spec)()
    lacking = missing(target, TARGET_MEMBERS)
    if lacking:
        raise EntryError(f"--target {spec} returned a {type(target).__name__}, not a specdec Target (missing: "
                         f"{', '.join(lacking)})")
    return target


def make_draft(spec: str, target):
    draft = load(spec)(target)
    lacking = missing(draft, DRAFT_MEMBERS)
    if lacking:
        raise EntryError(f"--drafts {spec} returned a {type(draft).__name__}, not a specdec Draft (missing: "
                         f"{', '.join(lacking)})")
    return draft


def _third_party(exc: ImportError, tree: str) -> str | None:
    """The top-level module name an ImportError could not find, where the revision's tree does not hold it."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    if not name or (Path(tree) / name).exists() or (Path(tree) / f"{name}.py").exists():
        return None
    return name


def _probe_here(tree: str, harness: str, target: str | None, drafts: list[str]) -> dict:
    """In the probe's subprocess: {"ok"} or {"bad": line} (bad input) or {"failed": line} (the code raised)."""
    enter(tree, harness)
    import specdec

    try:
        obj = make_target(target) if is_entry(target) else specdec.load_target(target)
        for d in drafts:
            if is_entry(d):
                make_draft(d, obj)
    except EntryError as exc:
        return {"bad": str(exc)}
    except ImportError as exc:
        name = _third_party(exc, tree)
        if name is not None:
            return {"bad": f"the code imports {name!r}, which the current environment ({sys.prefix}) lacks: install "
                           "it there (a revision's dependencies are found in the environment specdec runs in)"}
        return {"failed": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:  # noqa: BLE001 -- the user's code failed: said, exit 1
        return {"failed": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    return {"ok": True}


def probe(tree: str, where: str, target: str | None, drafts: list[str], harness: str | None = None) -> None:
    """Import the entry points of `tree` in a fresh interpreter (the running specdec first) and check what they
    return; EntryError (bad input) or EntryFailed (the code raised) naming `where`."""
    harness = harness or harness_root()
    req = json.dumps({"tree": os.path.abspath(tree), "harness": harness, "target": target, "drafts": drafts})
    code = ("import json, sys; sys.path.insert(0, sys.argv[2]); from specdec.measure import entry; "
            "print(json.dumps(entry._probe_here(**json.loads(sys.argv[1]))))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the harness, then the tree: nothing else
    with tempfile.TemporaryDirectory(prefix="specdec-probe-") as cwd:  # not the user's cwd: its modules stay out
        try:
            out = subprocess.run([sys.executable, "-c", code, req, harness], capture_output=True, text=True, env=env,
                                 cwd=cwd, timeout=PROBE_TIMEOUT)
        except subprocess.TimeoutExpired:  # the child is killed by subprocess.run; said as the code's failure
            raise EntryFailed(f"{where}: importing the entry points and calling them took more than "
                              f"{PROBE_TIMEOUT:g} s (an import or a call that does not return)") from None
    lines = out.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise EntryFailed(f"{where}: importing the entry points failed: {tail}") from None
    if "bad" in answer:
        raise EntryError(f"{where}: {answer['bad']}")
    if "failed" in answer:
        raise EntryFailed(f"{where}: the entry points raised {answer['failed']}")


def probe_commit(repo: str | Path, commit: str, where: str, target: str | None, drafts: list[str],
                 harness: str | None = None) -> None:
    """`probe` on a temporary export of `commit` (`git archive`: no worktree, nothing in the repository)."""
    with tempfile.TemporaryDirectory(prefix="specdec-export-") as tmp:
        arch = subprocess.run(["git", "archive", "--format=tar", commit], cwd=repo, capture_output=True)
        if arch.returncode:
            raise EntryFailed(f"{where}: git archive failed: {arch.stderr.decode(errors='replace').strip()}")
        subprocess.run(["tar", "-x", "-C", tmp], input=arch.stdout, check=True)
        probe(tmp, where, target, drafts, harness)
