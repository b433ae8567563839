"""The versions of optional libraries the package needs, checked where they load.

pyproject states each extra's floor; `FLOORS` holds the same numbers for the libraries whose older releases
lack an API the package calls (tests/test_versions.py keeps the two equal, and `tools/check_floors.py`
installs exactly the stated floors and runs the extra's tests on them). An older installed version is a
one-line InputError naming the extra and the version needed, raised where the adapter or backend loads,
instead of a traceback from deep inside it.
"""

from __future__ import annotations

import importlib
import re
import sys

from specdec.util.errors import InputError

# module -> (the oldest version checked to work, the extra that installs it)
FLOORS = {
    "transformers": ("5.24.0", "hf"),  # model(cache=) (5.23 knows only past_key_values), DynamicCache(config=)
    "onnxruntime": ("1.22.0", "onnx"),  # GroupQueryAttention's attention_bias input on the CPU
}


def installed(module: str) -> str:
    """The version of an installed module, from its `__version__` (a distribution such as onnxruntime-gpu
    installs the module under another package name, so the module is asked, not the package metadata)."""
    mod = sys.modules.get(module) or importlib.import_module(module)
    return str(getattr(mod, "__version__", "0"))


def as_tuple(version: str) -> tuple[int, ...]:
    """'4.57.6' -> (4, 57, 6); a pre-release or local tag ('5.0.0rc1', '2.13.0+cpu') counts by its numbers."""
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+")[0].split("rc")[0])[:3])


def too_old(module: str) -> str | None:
    """A one-line reason when the installed `module` is older than its floor; None when it is new enough."""
    floor, extra = FLOORS[module]
    have = installed(module)
    if as_tuple(have) >= as_tuple(floor):
        return None
    return (f"{module} {have} is older than the {extra} extra needs ({module}>={floor}): "
            f"pip install -U 'specdec-bench[{extra}]'")


def require(module: str) -> None:
    """InputError (one line) when the installed `module` is older than its floor."""
    if reason := too_old(module):
        raise InputError(reason)
