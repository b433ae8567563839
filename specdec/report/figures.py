"""The report's figures: measured speedup against k (speedup.png), the per-prompt spread (per-prompt.png), and
where a step's and a round's µs go, stacked by category per backend (attribution.png).

Each figure is built by a `*_figure` function and saved by `_save` at the size it was laid out at (no
`bbox_inches` cropping), so what a test checks on the built figure -- every title, label, tick label and
legend inside the canvas -- is what the saved file shows. Everything reads only the report document.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from specdec.measure.anatomy.attribution import SCOPES
from specdec.measure.anatomy.profiler_split import CATEGORIES
from specdec.report.markdown import words
from specdec.report.render_trees import _chains
from specdec.util.files import atomic_path

TITLE_SHARE = 0.96  # a title may take this much of the figure's width; beyond it, it wraps onto more lines


def _pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed), or None where matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _fit_title(fig, text) -> None:
    """Wrap a title (a figure's suptitle) onto as many lines as it needs to fit the figure's width: a title
    longer than a narrow figure (one backend's two bars, one draft's box plot) would be cut off at both ends."""
    renderer = fig.canvas.get_renderer()
    full, width = text.get_text(), len(text.get_text())
    while width > 12 and text.get_window_extent(renderer).width > TITLE_SHARE * fig.bbox.width:
        width = int(width * 0.85)
        text.set_text(textwrap.fill(full, width, break_on_hyphens=False))


def _save(fig, path: Path) -> bool:
    fig.savefig(path)
    _pyplot().close(fig)
    return True


def series(r: dict) -> str:
    """A speedup row's line in the figures: its draft, and its engine's name in an engine report."""
    return f"{r['engine']} {r['draft']}" if "engine" in r else r["draft"]


def speedup_figure(doc: dict):
    """Measured speedup against k per draft (band: the re-run interval), the write-up's formula dashed, the
    prediction made before the run dotted with crosses, a line at 1.0. None without matplotlib or chain rows."""
    rows = _chains(doc["speedup"])  # against k: the tree rows are in the tables and the per-prompt figure
    plt = _pyplot() if rows else None  # no chain rows: a run an engine stopped before any pair
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    for i, name in enumerate(dict.fromkeys(map(series, rows))):
        mine = sorted((r for r in rows if series(r) == name), key=lambda r: r["k"])
        ks = [r["k"] for r in mine]
        color = f"C{i}"
        ax.plot(ks, [r["measured"] for r in mine], "o-", color=color, label=name)
        ax.fill_between(ks, [r["ci_low"] for r in mine], [r["ci_high"] for r in mine], color=color, alpha=0.15)
        if "predicted" in mine[0]:  # an engine report's rows have no prediction (no cost table)
            ax.plot(ks, [r["predicted"] for r in mine], "--", color=color, alpha=0.7)
            ax.plot(ks, [r["predicted_before"] for r in mine], ":", marker="x", color=color, alpha=0.9)
    ax.axhline(1.0, color="black", lw=0.8)
    drafts_legend = ax.legend(fontsize=7, loc="upper left", title="draft", title_fontsize=7)
    ax.add_artist(drafts_legend)
    styles = [plt.Line2D([], [], color="gray", marker="o", ls="-", label="measured median (band: 95 % re-run interval)"),
              plt.Line2D([], [], color="gray", ls="--", label="predicted: cpp / (1 + k·c)"),
              plt.Line2D([], [], color="gray", ls=":", marker="x", label="predicted before the run: refined model")]
    ax.legend(handles=styles, fontsize=7, loc="upper center")
    ks = sorted({r["k"] for r in rows})
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.set_xlabel(f"k ({words(doc)['units']} drafted per round)")
    ax.set_ylabel("speedup over target-only (x)")
    m = doc["machine"]
    _fit_title(fig, fig.suptitle(f"speculative decoding, {m['threads']} thread(s), {m['device']}", fontsize=10))
    fig.tight_layout()
    return fig


def per_prompt_figure(doc: dict):
    """Per draft, the per-prompt speedups at each configuration as a box (whiskers: min-max), the row's figure
    (the ratio of total times) as a diamond, and the noise floor's interval as a grey band around 1.0. None
    when no row was timed over two prompts or more (nothing to spread) or without matplotlib."""
    rows = doc["speedup"]
    plt = _pyplot() if max((r["items"] for r in rows), default=0) >= 2 else None  # no rows: a run stopped early
    if plt is None:
        return None
    drafts = list(dict.fromkeys(map(series, rows)))
    cols = min(3, len(drafts))
    nrows = -(-len(drafts) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.4 * cols, 2.8 * nrows), dpi=110, squeeze=False)
    f = doc["noise_floor"]
    for ax, name in zip(axes.flat, drafts):
        mine = sorted((r for r in rows if series(r) == name), key=lambda r: (r.get("tree") is not None, r["k"]))
        ax.axhspan(f["ci_low"], f["ci_high"], color="gray", alpha=0.2, lw=0)
        ax.boxplot([[e["ratio"] for e in r["per_item_ratios"]] for r in mine], whis=(0, 100), widths=0.5)
        ax.plot(range(1, len(mine) + 1), [r["measured"] for r in mine], "D", color="C3", ms=5)
        ax.axhline(1.0, color="black", lw=0.7)
        ax.set_xticks(range(1, len(mine) + 1), [f"k={r['k']}" if r.get("tree") is None
                                                  else r["tree"]["shape"].replace("budget ", "b") for r in mine])
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(drafts):]:
        ax.axis("off")
    _fit_title(fig, fig.suptitle(f"speedup per prompt ({doc['settings']['workload']['name']}); diamond: the "
                                 f"workload's (Σ target-only / Σ speculative); grey: A/A noise floor", fontsize=8))
    fig.tight_layout()
    return fig


def attribution_figure(attribution: dict[str, dict[str, dict[str, float]]], title: str = "where the time goes"):
    """Stacked bars of µs by category (`profiler_split.CATEGORIES`, bottom to top) for each backend's step and round
    (`attribution.SCOPES`).

    attribution: backend -> {"step": category -> µs, "round": category -> µs}, as report.json's `attribution`
    (scopes other than SCOPES, which older reports may hold, draw no bar).
    None when there is nothing to draw or matplotlib is not installed.
    """
    plt = _pyplot() if attribution else None
    if plt is None:
        return None
    bars = [(f"{backend}\n{scope}", scopes[scope]) for backend, scopes in attribution.items()
            for scope in SCOPES if scope in scopes]
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
    # over the figure, not the axes: the legend beside the bars pushes the axes left, and a title centred on
    # them ran off the figure's left edge
    _fit_title(fig, fig.suptitle(title, fontsize=9))
    fig.tight_layout()
    return fig


def plot_speedup(doc: dict, path: Path) -> bool:
    """speedup.png (`speedup_figure`); False (nothing written) without matplotlib."""
    fig = speedup_figure(doc)
    return fig is not None and _save(fig, path)


def plot_per_prompt(doc: dict, path: Path) -> bool:
    """per-prompt.png (`per_prompt_figure`); False (nothing written) when there is nothing to spread."""
    fig = per_prompt_figure(doc)
    return fig is not None and _save(fig, path)


def plot_attribution(attribution: dict[str, dict[str, dict[str, float]]], path: Path,
                     title: str = "where the time goes") -> bool:
    """attribution.png (`attribution_figure`); False (nothing written) when there is nothing to draw."""
    fig = attribution_figure(attribution, title)
    return fig is not None and _save(fig, path)


def write_attribution(attribution: dict, path: Path, title: str = "where the time goes") -> bool:
    """`plot_attribution` into a temporary file beside `path`, then renamed onto it: all or nothing."""
    if not attribution:
        return False
    with atomic_path(path) as tmp:
        return plot_attribution(attribution, tmp, title)


def batch_figure(doc: dict):
    """batch.png: measured speedup against batch size B per draft at its best k (bars: the re-run interval; B on
    a log-2 axis), the prediction made before the pairs dotted, a line at 1.0; beside it T_B(k+1)/T_B(1)
    predicted (from B = 1's passes) against measured. None without matplotlib or load rows."""
    rows = (doc.get("batch") or {}).get("rows") or []
    plt = _pyplot() if rows else None
    if plt is None:
        return None
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    by_draft: dict[str, list[dict]] = {}
    for r in sorted(rows, key=lambda r: r["batch"]):
        by_draft.setdefault(f"{r['draft']} k={r['k']}", []).append(r)
    for label, rs in by_draft.items():
        b = [r["batch"] for r in rs]
        m = [r["measured"] for r in rs]
        err = [[x - r["ci_low"] for x, r in zip(m, rs)], [r["ci_high"] - x for x, r in zip(m, rs)]]
        line = ax.errorbar(b, m, yerr=err, marker="o", capsize=3, label=label)[0]
        ax.plot(b, [r["predicted_before"] for r in rs], ":", color=line.get_color())
        ax_r.plot(b, [r["r_measured"] for r in rs], "o-", color=line.get_color(), label=f"{label} measured")
        ax_r.plot(b, [r["r_predicted"] for r in rs], "x:", color=line.get_color(), label=f"{label} predicted")
    for a in (ax, ax_r):
        a.set_xscale("log", base=2)
        a.set_xlabel("batch size B (sequences at once)")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_ylabel("speedup (target-only time / speculative time)")
    ax.set_title("speedup against B (dotted: predicted before the pairs)")
    ax.legend(fontsize=8)
    ax_r.set_ylabel("T_B(k+1) / T_B(1)")
    ax_r.set_title("verify pass against a step, at B")
    ax_r.legend(fontsize=7)
    _fit_title(fig, fig.suptitle(f"batch: speedup against batch size ({doc['machine'].get('backend', 'eager')})"))
    return fig


def plot_batch(doc: dict, path: Path) -> bool:
    """batch.png (`batch_figure`); False (nothing written) without matplotlib or a batch section."""
    fig = batch_figure(doc)
    return fig is not None and _save(fig, path)
