"""Every figure the report writes keeps its text on the canvas: each title, axis label, tick label and legend
entry lies inside the figure it is saved as (a long title on a narrow figure once ran off the left edge of
attribution.png). The figures are built from small hand-made documents, drawn, and checked artist by artist;
the saved file is checked to be that same canvas."""

import struct

import pytest

pytest.importorskip("matplotlib")

from matplotlib.text import Text  # noqa: E402

from specdec.measure.anatomy.profiler_split import CATEGORIES  # noqa: E402
from specdec.report import figures  # noqa: E402

PIXEL = 0.5  # an extent may round half a pixel past the edge


def _row(draft, k, measured, tree=None):
    return {"draft": draft, "k": k, "tree": tree, "measured": measured, "ci_low": measured - 0.05,
            "ci_high": measured + 0.05, "predicted": measured * 1.1, "predicted_before": measured * 0.95, "items": 3,
            "per_item_ratios": [{"ratio": measured - 0.1}, {"ratio": measured}, {"ratio": measured + 0.1}]}


def _doc(drafts):
    rows = [_row(d, k, 1.0 + 0.1 * i + 0.05 * k) for i, d in enumerate(drafts) for k in (1, 2, 4, 8)]
    rows.append(_row(drafts[0], 5, 1.2, tree={"shape": "budget 32"}))
    rows.append(_row(drafts[0], 4, 1.1, tree={"shape": "4x2x2x1"}))
    return {"speedup": rows, "machine": {"threads": 1, "device": "cpu"},
            "settings": {"workload": {"name": "shakespeare24"}},
            "noise_floor": {"ci_low": 0.98, "ci_high": 1.02}}


def _attribution(backends, old=True):
    """report.json's attribution: each backend's step and round, and with `old` the "round (old)" scope an older
    version also saved."""
    scopes = {"step": 10.0, "round": 20.0, **({"round (old)": 30.0} if old else {})}
    return {b: {scope: {c: base + i for i, c in enumerate(CATEGORIES)} for scope, base in scopes.items()}
            for b in backends}


def _off_canvas(fig) -> list[str]:
    """What leaves the figure's canvas once drawn: every visible, non-empty text artist (titles, axis labels,
    legend entries) by its text, and each shown axis's drawn tick labels together (`Axis.get_tightbbox`: a tick
    label outside the view limits exists but is not drawn, so it is not checked on its own)."""
    fig.canvas.draw()
    renderer, box = fig.canvas.get_renderer(), fig.bbox
    ticks = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks() for label in (tick.label1, tick.label2)}
    extents = [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
               if t.get_visible() and t.get_text().strip() and id(t) not in ticks]
    extents += [(f"{ax.get_title()!r} {axis.axis_name}-axis tick labels", axis.get_tightbbox(renderer))
                for ax in fig.axes if ax.axison for axis in (ax.xaxis, ax.yaxis)]
    return [name for name, e in extents if e is not None and (
        e.x0 < box.x0 - PIXEL or e.y0 < box.y0 - PIXEL or e.x1 > box.x1 + PIXEL or e.y1 > box.y1 + PIXEL)]


def _texts(fig) -> set[str]:
    return {t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()}


def _png_size(path) -> tuple[int, int]:
    return struct.unpack(">II", path.read_bytes()[16:24])  # the IHDR chunk: width, height


CASES = {
    "speedup.png, two drafts": (lambda: figures.speedup_figure(_doc(["bigram", "int8"])),
                                "speculative decoding, 1 thread(s), cpu"),
    "per-prompt.png, one draft (the narrowest)": (lambda: figures.per_prompt_figure(_doc(["bigram"])), "grey"),
    "per-prompt.png, four drafts (two rows)": (
        lambda: figures.per_prompt_figure(_doc(["bigram", "int8", "int4", "ngram"])), "grey"),
    "attribution.png, one backend (the narrowest)": (
        lambda: figures.attribution_figure(_attribution(["eager"]), "where the time goes (eager backend)"),
        "where the time goes"),
    "attribution.png, one backend of a report without the old round": (
        lambda: figures.attribution_figure(_attribution(["eager"], old=False), "where the time goes (eager backend)"),
        "where the time goes"),
    "attribution.png, three backends": (
        lambda: figures.attribution_figure(_attribution(["eager", "numpy", "onnx"]), "where the time goes, by backend"),
        "by backend"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_text_of_a_figure_lies_on_its_canvas(case):
    build, title_part = CASES[case]
    fig = build()
    try:
        texts = _texts(fig)
        assert any(title_part in t for t in texts)  # the title is drawn (wrapped if it must)
        assert {"matmul", "draft"} <= texts or "attribution" not in case  # the legend is among the checked texts
        assert _off_canvas(fig) == []
    finally:
        fig.clf()


def _bar_labels(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_xticklabels()]


def test_the_attribution_figure_draws_the_step_and_the_round():
    """Two bars a backend -- step, round -- each a stack of every category (20 + i for the round's i-th
    category); an older report's "round (old)" draws no bar."""
    fig = figures.attribution_figure(_attribution(["eager", "onnx"]))
    try:
        assert _bar_labels(fig) == ["eager\nstep", "eager\nround", "onnx\nstep", "onnx\nround"]
        patches = fig.axes[0].patches
        assert len(patches) == 4 * len(CATEGORIES)  # one rectangle per bar and category
        round_bars = patches[1::4]  # bar 1 (eager's round) of each category's four
        assert [p.get_height() for p in round_bars] == [20.0 + i for i in range(len(CATEGORIES))]
        assert round_bars[-1].get_y() == sum(20.0 + i for i in range(len(CATEGORIES) - 1))  # stacked
    finally:
        fig.clf()
    fig = figures.attribution_figure(_attribution(["eager"], old=False))
    try:
        assert _bar_labels(fig) == ["eager\nstep", "eager\nround"]
    finally:
        fig.clf()


def test_the_saved_files_are_the_checked_canvas(tmp_path):
    """Saved at the size laid out (no cropping): what the test above checks is what the file shows."""
    doc, att = _doc(["bigram", "int8"]), _attribution(["eager"])
    for name, build, save in (
            ("speedup.png", lambda: figures.speedup_figure(doc), lambda p: figures.plot_speedup(doc, p)),
            ("per-prompt.png", lambda: figures.per_prompt_figure(doc), lambda p: figures.plot_per_prompt(doc, p)),
            ("attribution.png", lambda: figures.attribution_figure(att), lambda p: figures.plot_attribution(att, p))):
        fig = build()
        want = (round(fig.bbox.width), round(fig.bbox.height))
        fig.clf()
        assert save(tmp_path / name) and _png_size(tmp_path / name) == want, name


def test_a_title_too_long_for_its_figure_wraps_and_a_short_one_does_not():
    long = "where the time goes (eager backend): a target-only step and a speculative round"
    fig = figures.attribution_figure(_attribution(["eager"]), long)
    assert "\n" in fig._suptitle.get_text()  # 4.5 inches wide (three bars): one line would not fit
    assert fig._suptitle.get_text().replace("\n", " ") == long and _off_canvas(fig) == []
    wide = figures.attribution_figure(_attribution(["eager", "numpy", "onnx"]), long)
    assert wide._suptitle.get_text() == long


def test_nothing_to_draw_draws_nothing(tmp_path):
    one_prompt = _doc(["bigram"])
    for r in one_prompt["speedup"]:
        r["items"] = 1
    assert figures.per_prompt_figure(one_prompt) is None
    assert not figures.plot_attribution({}, tmp_path / "a.png") and not (tmp_path / "a.png").exists()
