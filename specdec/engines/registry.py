"""The engines by name, each imported only when asked for, with the extra it needs named when missing."""

from __future__ import annotations

import importlib

from specdec.engines.base import Engine, EngineOptions
from specdec.util.errors import InputError

# name -> (module, class, the pip extra that installs what it imports; None: core dependencies only)
ENGINES = {
    "specdec": ("specdec.engines.own", "OwnEngine", None),
    "transformers": ("specdec.engines.hf_assisted", "TransformersEngine", "hf"),
    "llama-cpp": ("specdec.engines.llamacpp", "LlamaCppEngine", "llamacpp"),
    "openai": ("specdec.engines.openai_api", "OpenAIEngine", None),
}
DEFAULT_ENGINE = "specdec"


def engine_class(name: str):
    """The class of engine `name`; InputError naming the allowed engines, or the extra to install."""
    if name not in ENGINES:
        raise InputError(f"unknown engine {name!r} (allowed: {', '.join(ENGINES)})")
    module, cls, extra = ENGINES[name]
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        if extra is None or missing in ("", "specdec"):  # the package's own module missing is a bug
            raise
        raise InputError(f"engine {name} needs the [{extra}] extra ({exc.name} is not installed): "
                         f"pip install 'specdec-bench[{extra}]'") from None


def open_engine(name: str, options: EngineOptions) -> Engine:
    """Engine `name` opened with `options`: its inputs checked (InputError) before anything is timed."""
    return engine_class(name).open(options)
