"""The attribution as a figure: where a target-only step and a speculative round spend their µs, stacked by
category, one pair of bars per backend (issue 12's "stacked bars per backend")."""

from __future__ import annotations

from pathlib import Path

from specdec.measure.overhead import CATEGORIES
from specdec.util.files import atomic_path


def plot_attribution(attribution: dict[str, dict[str, dict[str, float]]], path: Path,
                     title: str = "where the time goes") -> bool:
    """Stacked bars of µs by category (`overhead.CATEGORIES`, bottom to top) for each backend's step and round.

    attribution: backend -> {"step": category -> µs, "round": category -> µs}, as report.json's `attribution`.
    False (and nothing written) when there is nothing to draw or matplotlib is not installed.
    """
    if not attribution:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    bars = [(f"{backend}\n{scope}", scopes[scope]) for backend, scopes in attribution.items()
            for scope in ("step", "round") if scope in scopes]
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(bars), 3.6), dpi=110)
    bottom = [0.0] * len(bars)
    for i, name in enumerate(CATEGORIES):
        heights = [max(0.0, cats.get(name, 0.0)) for _, cats in bars]  # a negative residual has no bar
        ax.bar(range(len(bars)), heights, bottom=bottom, color=f"C{i}", width=0.7, label=name)
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(range(len(bars)), [label for label, _ in bars], fontsize=7)
    ax.set_ylabel("µs per step / per round", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def write_attribution(attribution: dict, path: Path, title: str = "where the time goes") -> bool:
    """`plot_attribution` into a temporary file beside `path`, then renamed onto it: all or nothing."""
    if not attribution:
        return False
    with atomic_path(path) as tmp:
        return plot_attribution(attribution, tmp, title)
