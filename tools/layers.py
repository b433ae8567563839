"""Print the package's import levels and any import that points the wrong way between its layers.

The layers, in the order data flows: util -> model -> decoding -> engines -> measure -> report -> cli. A module may import
from its own layer and the layers before it. Inside measure and report the same holds for their rooms (their
subpackages, docs/architecture.md): ROOMS lists each layer's ranks in order; a module may import its own room, the
ranks before its own, and never a peer room of the same rank. Modules at a layer's top belong to its first rank,
except those TOP names. Exits 1 on any upward or sideways import.
Usage: python tools/layers.py [specdec]"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LAYERS = ("util", "model", "decoding", "engines", "measure", "report", "cli")
# per layer, its ranks in order: the first is the modules at the layer's top (the shared core), the others rooms
ROOMS = {"measure": (("core",), ("work",), ("ab", "load", "anatomy"), ("yours",)),
         "report": (("base",), ("anatomy", "compare", "ab", "batch", "engines"), ("full",))}
# modules at a layer's top that belong to a later rank: measure's aliases of the user's-code modules (users' files
# hold those names) and the full report, which assembles report's rooms
TOP = {"measure": {"user_bench": "yours", "asv_env": "yours", "pytest_pair": "yours"},
       "report": {"build": "full", "render": "full"}}


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
                subs = [f"{node.module}.{a.name}" for a in node.names]
                # `from package import module`: the module, not also the package's __init__
                names = subs if all(s in mods for s in subs) else [node.module] + subs
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


def room(module: str) -> tuple[str, int, str] | None:
    """(layer, rank, room) of a module inside a layer with rooms; None outside them."""
    parts = module.split(".")
    if len(parts) < 3 or parts[1] not in ROOMS:
        return None
    ranks = ROOMS[parts[1]]
    rooms = {r: i for i, rank in enumerate(ranks) for r in rank}
    # a room's package or a module in it; else a module at the layer's top (no top module shares a room's name)
    name = parts[2] if parts[2] in rooms and parts[2] != ranks[0][0] else TOP[parts[1]].get(parts[2], ranks[0][0])
    return parts[1], rooms[name], name


def wrong_way(m: str, d: str) -> bool:
    """m's import of d points to a later layer, or inside a layer to a later rank or a peer room."""
    if layer(d) != layer(m):
        return layer(d) > layer(m)
    a, b = room(m), room(d)
    if a is None or b is None or a[2] == b[2]:
        return False
    return b[1] >= a[1]


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
    bad = [(m, d) for m, ds in graph.items() for d in ds if wrong_way(m, d) and not m.endswith(root.name)]
    lv = levels(graph)
    print(f"{len(graph)} modules, {max(lv.values()) + 1} import levels")
    for m, d in sorted(bad):
        print(f"upward: {m} imports {d}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
