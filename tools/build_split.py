"""Where a finished cmake build's compile time went, by part of llama.cpp: each object file's share is the time
between its being written and the one written before it (a build of -j N writes them in the order they finish,
so over a whole build this splits the wall time by part; it says nothing of one file alone).

    python tools/build_split.py ~/.cache/specdec/llama-server/.work-VERSION/build

Prints the span, then per part (common, mtmd, server, llama, ggml, ...) its seconds and share. docs/load.md quotes
it for the whole (static) server build: what `specdec build-server` no longer compiles where the wheel's
libraries serve.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path


def part(rel: Path) -> str:
    """The part of llama.cpp a build file belongs to: its first folder, tools/<name> for a tool, src -> llama."""
    top = rel.parts[0]
    if top == "tools" and len(rel.parts) > 1:
        return f"tools/{rel.parts[1]}"
    return {"src": "llama", "bin": "link"}.get(top, top)


def split(build: Path) -> tuple[float, Counter]:
    written = sorted((p.stat().st_mtime, p.relative_to(build)) for p in build.rglob("*")
                     if p.is_file() and (p.suffix in (".o", ".a") or p.name == "llama-server"))
    if not written:
        raise SystemExit(f"build_split: no object files under {build}")
    per: Counter = Counter()
    for (before, _), (t, rel) in zip(written, written[1:]):
        per[part(rel)] += t - before
    return written[-1][0] - written[0][0], per


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build", type=Path, help="a finished cmake build folder")
    args = parser.parse_args(argv)
    if not args.build.is_dir():
        print(f"build_split: {args.build}: no such folder", file=sys.stderr)
        return 2
    span, per = split(args.build)
    print(f"span {span:.0f} s")
    for name, seconds in per.most_common():
        if seconds >= 1:
            print(f"{name:24s} {seconds:7.0f} s {seconds / span:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
