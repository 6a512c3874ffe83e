"""Draw plot data (:mod:`rpcmeter.reporters.plots`) with matplotlib: PNG files for a README or a
pull request, SVG text for the self-contained HTML report. One drawing function serves both, so
the PNG and the HTML show the same thing."""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rpcmeter.errors import StoreError
from rpcmeter.reporters.plots import Plot, Series, palette, slug

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rpcmeter.reporters.view import View

FIG_SIZE = (6.4, 3.7)  # inches; 640 x 370 px at 100 dpi
PNG_DPI = 100
SYS_HATCH = "////"


def _mpl() -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)


def _lighter(color: str, amount: float = 0.55) -> tuple[float, float, float]:
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def _nines_label(pct: float) -> str:
    text = f"{pct:.4f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _leading(value: float) -> int:
    """The leading digit of a positive number (for labelling 2 and 5 on log axes)."""
    return int(round(value / 10 ** math.floor(math.log10(value) + 1e-9), 6)) if value > 0 else 0


def _finite(values: tuple[float, ...]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def _errors(s: Series) -> tuple[list[float], list[float]] | None:
    if s.lo is None or s.hi is None:
        return None
    lows = [
        y - lo if math.isfinite(lo) and math.isfinite(y) else 0.0
        for y, lo in zip(s.y, s.lo, strict=True)
    ]
    highs = [
        hi - y if math.isfinite(hi) and math.isfinite(y) else 0.0
        for y, hi in zip(s.y, s.hi, strict=True)
    ]
    if not any(lows) and not any(highs):
        return None
    return [max(v, 0.0) for v in lows], [max(v, 0.0) for v in highs]


def draw(plot: Plot, colors: dict[str, str]) -> Figure:
    """A matplotlib Figure of ``plot``; series carry the SVG group id ``series-N``."""
    _mpl()
    from matplotlib.figure import Figure
    from matplotlib.layout_engine import ConstrainedLayoutEngine
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig = Figure(figsize=FIG_SIZE, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(plot.title, fontsize=10, loc="left")
    ax.set_xlabel(plot.x_label, fontsize=9)
    ax.set_ylabel(plot.y_label, fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)

    def color(s: Series) -> str:
        return colors.get(s.variant, "#444444")

    cats = list(plot.categories)
    n = len(plot.series)

    if plot.style == "line" and plot.x_scale == "nines":
        for i, s in enumerate(plot.series):
            xs = [1.0 / (1.0 - p / 100.0) for p in s.x]
            (line,) = ax.plot(
                xs, s.y, color=color(s), label=s.name, linewidth=1.6, linestyle=s.linestyle
            )
            line.set_gid(f"series-{i}")
        ax.set_xscale("log")
        ticks = [1.0, 2.0, *(10.0**k for k in range(1, 5))]  # 0 %, 50 %, 90 %, 99 %, ...
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _nines_label(100 * (1 - 1 / x))))
        right = max((1.0 / (1.0 - s.x[-1] / 100.0) for s in plot.series if s.x), default=10.0)
        ax.set_xlim(1.0, max(right, 10.0))
    elif plot.style in ("rate", "time"):  # numeric x; statistics by line style (and marker)
        timed = plot.style == "time"
        for i, s in enumerate(plot.series):
            (line,) = ax.plot(
                s.x,
                s.y,
                color=color(s),
                label=s.name,
                linestyle=s.linestyle,
                marker="." if timed else s.marker,
                markersize=3 if timed else 4,
                linewidth=1.2 if timed else 1.4,
                alpha=0.55 if timed and s.linestyle == ":" else 1.0,
            )
            line.set_gid(f"series-{i}")
        ax.set_xlim(left=0)
        if timed and plot.y_scale == "linear":
            ax.set_ylim(bottom=0)
    elif plot.style in ("line", "dot"):  # categories; dots are side by side, not joined
        dot = plot.style == "dot"
        for i, s in enumerate(plot.series):
            off = (i - (n - 1) / 2) * (0.7 / n) if dot and n > 1 else 0.0
            container = ax.errorbar(
                [j + off for j in range(len(cats))],
                s.y,
                yerr=_errors(s),
                color=color(s),
                label=s.name,
                marker="o",
                markersize=6 if dot else 4,
                linestyle="none" if dot else "-",
                linewidth=1.6,
                capsize=4 if dot else 3,
                elinewidth=1.4 if dot else 1,
            )
            container.lines[0].set_gid(f"series-{i}")
        ax.set_xticks(range(len(cats)), cats)
        ax.set_xlim(-0.6, len(cats) - 0.4)
        if not dot:
            ax.set_ylim(bottom=0)
    else:  # bar
        stacks = list(dict.fromkeys(s.stack or s.name for s in plot.series))
        stacked = len(stacks) < len(plot.series)
        width = 0.8 / max(len(stacks), 1)
        bottoms: dict[str, list[float]] = {k: [0.0] * len(cats) for k in stacks}
        for i, s in enumerate(plot.series):
            k = stacks.index(s.stack or s.name)
            xs = [j + (k - (len(stacks) - 1) / 2) * width for j in range(len(cats))]
            ys = [y if math.isfinite(y) else 0.0 for y in s.y]
            c = color(s)
            err = _errors(s)
            bars = ax.bar(
                xs,
                ys,
                width=width * 0.92,
                bottom=bottoms[s.stack or s.name],
                color=_lighter(c) if s.shade else c,
                edgecolor=c,
                linewidth=0.8,
                hatch=SYS_HATCH if s.shade else None,
                label=s.name,
                yerr=err,
                capsize=3 if err else 0,
                error_kw={"elinewidth": 1, "ecolor": "#333333"},
            )
            for j, patch in enumerate(bars.patches):
                patch.set_gid(f"series-{i}-bar-{j}")
            if not stacked:  # one bar per series and category: print its value on it
                ax.bar_label(
                    bars,
                    labels=[f"{y:.3g}" if math.isfinite(y) else "" for y in s.y],
                    fontsize=7,
                    padding=2,
                )
            bottoms[s.stack or s.name] = [
                b + y for b, y in zip(bottoms[s.stack or s.name], ys, strict=True)
            ]
        ax.set_xticks(range(len(cats)), cats)
        ax.set_ylim(bottom=0)

    if plot.y_scale == "log":
        values = [v for s in plot.series for v in _finite(s.y)]
        values += [v for s in plot.series for v in _finite(s.lo or ())]
        values += [v for s in plot.series for v in _finite(s.hi or ())]
        if plot.reference_y is not None:
            values.append(plot.reference_y)
        values = [v for v in values if v > 0]
        if values:
            ax.set_yscale("log")
            lo, hi = min(values), max(values)
            if hi / lo < 4:  # a narrow range: pad so the ticks make sense
                mid = math.sqrt(lo * hi)
                lo, hi = mid / 2, mid * 2
            ax.set_ylim(lo / 1.15, hi * 1.15)
            ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
            # label the minor ticks the range has room for: all of them within a factor of 8,
            # 2 and 5 over up to three decades, none beyond
            span = hi / lo
            labelled = range(2, 10) if span < 8 else (2, 5) if span < 1000 else ()
            ax.yaxis.set_minor_formatter(
                FuncFormatter(lambda y, _: f"{y:g}" if _leading(y) in labelled else "")
            )
    if plot.reference_y is not None:
        ax.axhline(plot.reference_y, color="#555555", linewidth=1, linestyle="--", zorder=0)
    if plot.marks:  # room above the data for the marks' labels
        low, high = ax.get_ylim()
        ax.set_ylim(low, high * 1.12 if ax.get_yscale() == "log" else high + (high - low) * 0.12)
    for x, text in plot.marks:
        ax.axvline(x, color="#C00000", linewidth=1, linestyle=":", zorder=0)
        ax.annotate(
            text,
            (x, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3, -10),
            textcoords="offset points",
            fontsize=8,
            color="#C00000",
        )
    if cats and not any("\n" in c for c in cats):  # labels of several lines stay upright
        longest = max(len(c) for c in cats)
        if longest * len(cats) > 60:
            for label in ax.get_xticklabels():
                label.set_rotation(20)
                label.set_horizontalalignment("right")

    handles: list[Any] = []
    seen = set()
    if plot.style in ("rate", "time"):  # the legend names the statistics (by line style) and,
        # where several variants share the plot (a time plot), their colours
        stats = dict.fromkeys((s.name, s.linestyle, s.marker) for s in plot.series)
        handles = [
            Line2D(
                [],
                [],
                color="#444444",
                linestyle=linestyle,
                marker="." if plot.style == "time" else marker,
                label=name,
            )
            for name, linestyle, marker in stats
        ]
        if len({s.variant for s in plot.series}) == 1:
            seen = {s.variant for s in plot.series}
    for s in plot.series:
        if s.variant in seen:
            continue
        seen.add(s.variant)
        handles.append(Patch(facecolor=colors.get(s.variant, "#444444"), label=s.variant))
    for part, shade in plot.legend:
        handles.append(
            Patch(
                facecolor=_lighter("#777777") if shade else "#777777",
                edgecolor="#777777",
                hatch=SYS_HATCH if shade else None,
                label=part,
            )
        )
    if handles:
        # spectra rise to the right, so their upper left is free
        if plot.style == "bar":  # bars fill the axes: the legend goes to their right
            ax.legend(
                handles=handles, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1, 1)
            )
        else:
            ax.legend(
                handles=handles,
                fontsize=8,
                frameon=False,
                loc="upper left" if plot.x_scale == "nines" else "best",
            )
    if plot.note:
        engine = fig.get_layout_engine()
        assert isinstance(engine, ConstrainedLayoutEngine)
        engine.set(rect=(0, 0.045, 1, 0.955))
        fig.text(0.995, 0.008, plot.note, fontsize=7, color="#666666", ha="right", va="bottom")
    return fig


def _prefix_ids(svg: str, prefix: str) -> str:
    """Make the ids of one SVG unique inside a page holding many."""
    svg = re.sub(r'\bid="([^"]+)"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)
    return re.sub(r"url\(#([^)]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)


def to_svg(plot: Plot, colors: dict[str, str]) -> str:
    """The plot as an inline ``<svg>`` element (no XML prolog, text kept as text)."""
    _mpl()
    import matplotlib

    fig = draw(plot, colors)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": plot.id}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, flags=re.S)  # RDF namespaces only
    return _prefix_ids(text, f"{slug(plot.id)}-")


def write_png(plot: Plot, colors: dict[str, str], path: Path) -> None:
    fig = draw(plot, colors)
    fig.savefig(path, format="png", dpi=PNG_DPI, metadata={"Software": None})


def write_pngs(view: View, directory: str | Path) -> list[Path]:
    """Every plot of the run as ``DIR/<plot id>.png``; returns the paths written."""
    out = Path(directory)
    colors = palette(view.variants)
    plots = view.all_plots
    paths = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for plot in plots:
            path = out / f"{plot.id}.png"
            write_png(plot, colors, path)
            paths.append(path)
    except OSError as exc:
        raise StoreError(f"{directory}: cannot write plots: {exc.strerror or exc}") from None
    return paths
