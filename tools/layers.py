"""Print the package's import levels and any import that points the wrong way between its layers.

The layers, in the order data flows: util -> model -> decoding -> engines -> measure -> report -> cli. A module may import
from its own layer and the layers before it. Exits 1 on any upward import.
Usage: python tools/layers.py [specdec]"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LAYERS = ("util", "model", "decoding", "engines", "measure", "report", "cli")


def imports(root: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (top-level or inside functions)."""
    pkg = root.name
    mods = {".".join(f.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__"): f
            for f in root.rglob("*.py")}
    out = {}
    for m, f in mods.items():
        seen = set()
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for t in names:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t not in (m, pkg):
                    seen.add(t)
        out[m] = seen
    return out


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def levels(graph: dict[str, set[str]]) -> dict[str, int]:
    """A module's level: 0 when it imports none of the package, else one more than its deepest import."""
    memo: dict[str, int] = {}

    def level(m: str, stack=()) -> int:
        if m not in memo:
            deps = [d for d in graph[m] if d not in stack]
            memo[m] = 1 + max((level(d, stack + (m,)) for d in deps), default=-1)
        return memo[m]

    return {m: level(m) for m in graph}


def main(argv: list[str]) -> int:
    root = Path(argv[0] if argv else "specdec")
    graph = imports(root)
    bad = [(m, d) for m, ds in graph.items() for d in ds if layer(d) > layer(m) and not m.endswith(root.name)]
    lv = levels(graph)
    print(f"{len(graph)} modules, {max(lv.values()) + 1} import levels")
    for m, d in sorted(bad):
        print(f"upward: {m} imports {d}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
