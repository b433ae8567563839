"""The measuring method's own files, loaded by path: the one loader every by-path file goes through.

A few files are the method rather than the product: the worker every revision runs (`ab_worker.py`, with its
rows, `ab_rows.py`), the work counter (`work/work.py`, its counters and dump reader) and the counting pool
(`work/work_pool.py`), and the side-by-side turns every timed comparison takes (`turns.py`, which asv's harness
loads from here). `specdec ab`, `specdec bisect` and asv's harness build and count *every* revision with
the running checkout's copy of them, never the revision's own, so that the method stays fixed while the code
under test varies. Where they run, the `specdec` on the path may be the revision's; so they import nothing of
specdec's and reach each other through `load`, which runs a file of this folder by path and registers it as
`specdec_<stem>_method` (before it runs: a dataclass looks its module up while it is made). One module object
per file and process, whoever asked first.

This file imports only the standard library. A file that cannot import specdec (the worker script, the
harness at an old commit, the method's own files) gets `load` by running this one by path with the standard
library's `runpy.run_path(<specdec/measure>/method.py)["load"]`: one line, and no second copy of the loader.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

HERE = os.path.dirname(os.path.abspath(__file__))  # the running checkout's specdec/measure


def name(rel: str) -> str:
    """The name a method file is registered by: `work/work.py` -> `specdec_work_method`."""
    return f"specdec_{os.path.splitext(os.path.basename(rel))[0]}_method"


def load(rel: str) -> ModuleType:
    """The method file `rel` (a path under specdec/measure/, e.g. "work/work.py"), loaded once per process."""
    module = sys.modules.get(name(rel))
    if module is None:
        spec = importlib.util.spec_from_file_location(name(rel), os.path.join(HERE, rel))
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # registered before it runs: its dataclasses look their module up
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[spec.name]  # a file that failed half-way is not left behind as loaded
            raise
    return module

