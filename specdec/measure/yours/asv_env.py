"""An asv environment plugin: every commit benchmarked by the interpreter asv runs in, its tree a plain checkout.

`specdec asv-init` lists this module in the asv.conf.json it writes (`"plugins": [".specdec.measure.yours.asv_env"]`,
`"environment_type": "specdec"`). asv's own environments build a virtualenv per configuration and pip-install
each commit into it: minutes with torch, and the harness would be whatever the commit's requirements pulled in.
A user's repository is not specdec, and its benchmarks measure it through the specdec installed beside asv. So
this environment creates nothing: the benchmarks run in asv's own interpreter (`sys.executable`, which has
specdec, torch and asv), and "installing" a commit is checking it out (`git clone --shared` once, then
`git checkout -f` and `git clean -fdx` per commit: milliseconds) into the environment's build folder, whose path
reaches the benchmarks as ASV_SPECDEC_TREE (`user_bench.tree`). The harness stays the running specdec (its
folder is put on the benchmarks' PYTHONPATH where it is not the interpreter's own site-packages) while the
user's modules come from each commit. Results are kept per commit, as with any installing environment (asv keeps
none from `--python=same` without `--set-commit-hash`).

This module imports asv; only asv imports it.
"""

from __future__ import annotations

import os
import site
import sys

from asv import environment, util

from specdec.measure.entry import harness_root
from specdec.measure.yours.user_bench import TREE_VAR

NAME = "specdec"


def _current() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def pythonpath() -> str | None:
    """The harness's folder where the interpreter would not find it by itself (an editable checkout on
    PYTHONPATH, which asv drops from a benchmark's environment); None where it is in site-packages."""
    root = os.path.realpath(harness_root())
    sites = [*site.getsitepackages(), site.getusersitepackages()]
    return None if any(os.path.realpath(s) == root for s in sites) else root


class SpecdecEnvironment(environment.Environment):
    """asv's interpreter, no virtualenv, no install: each commit checked out for the benchmarks to import from."""

    tool_name = NAME

    def __init__(self, conf, python, requirements, tagged_env_vars):
        self._executable = sys.executable
        self._python = python
        self._requirements = {}
        super().__init__(conf, python, {}, tagged_env_vars)
        self._requirements = {}
        self._tree = os.path.join(self._build_root, self._repo_subdir or "")
        self._global_env_vars[TREE_VAR] = self._tree
        self._harness = pythonpath()

    @classmethod
    def matches(cls, python) -> bool:
        return python == _current()

    def check_presence(self) -> bool:
        return os.path.isdir(self._path)

    def _setup(self) -> None:
        os.makedirs(self._path, exist_ok=True)

    def run(self, args, **kwargs):
        return self.run_executable("python", args, **kwargs)

    def run_executable(self, executable, args, **kwargs):
        """asv's, but the harness's folder reaches the benchmark's interpreter: asv turns ASV_PYTHONPATH into
        PYTHONPATH here, and its benchmark script then drops PYTHONPATH's folders from sys.path unless
        ASV_PYTHONPATH is still set; both are set (to the harness, then whatever ASV_PYTHONPATH said)."""
        env = dict(kwargs.pop("env", os.environ))
        env.update(self._global_env_vars)
        paths = [p for p in (self._harness, env.get("ASV_PYTHONPATH")) if p]
        env.pop("PYTHONPATH", None)
        env.pop("ASV_PYTHONPATH", None)
        if paths:
            env["PYTHONPATH"] = env["ASV_PYTHONPATH"] = os.pathsep.join(paths)
        exe = self._executable if executable == "python" else util.which(executable)
        kwargs.setdefault("timeout", self._install_timeout)
        return util.check_output([exe, *args], env=env, **kwargs)

    def install_project(self, conf, repo, commit_hash) -> None:
        """Check the commit out (nothing built, nothing installed); already there: nothing to do."""
        if self._get_installed_commit_hash() == commit_hash and os.path.isdir(self._tree):
            self._set_commit_hash(commit_hash)
            return
        self._set_installed_commit_hash(None)
        self.checkout_project(repo, commit_hash)
        self._set_installed_commit_hash(commit_hash)
