"""Every report format behind one name: ``text``, ``json``, ``csv``, ``markdown``, ``html`` and
``plots``. The CLI asks the registry for a format (``report``, ``show --format``, ``compare
--format``, and ``run``'s exports ``--csv``, ``--markdown``, ``--html``, ``--plots``, ``-o``)
and each reporter draws the same :class:`~rpcmeter.reporters.view.View`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rpcmeter.errors import StoreError
from rpcmeter.names import COLUMN_FORMATS as COLUMN_FORMATS
from rpcmeter.names import TEXT_FORMATS as TEXT_FORMATS
from rpcmeter.reporters import csv, json, markdown, terminal
from rpcmeter.reporters.view import ComparisonView, View


@dataclass(frozen=True)
class Options:
    width: int = 120
    color: bool = False


def _html(view: View, options: Options) -> str:
    from rpcmeter.reporters import html

    return html.render(view)


def _write_plots(view: View, path: Path) -> str:
    from rpcmeter.reporters import figures

    return f"{len(figures.write_pngs(view, path))} plots written to {path}"


@dataclass(frozen=True)
class Reporter:
    name: str
    label: str  # what a written file is called: "CSV written to out.csv"
    render: Callable[[View, Options], str] | None = None  # a run as text
    compare: Callable[[ComparisonView, Options], str] | None = None  # two runs compared
    files: Callable[[View, Path], str] | None = None  # writes files itself; says what it wrote

    def write(self, view: View, path: Path, options: Options = Options()) -> str:
        """Write the report of ``view`` to ``path``; returns the line saying so. An unwritable
        path is a :class:`StoreError`."""
        if self.files is not None:
            return self.files(view, path)
        assert self.render is not None
        text = self.render(view, options)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from None
        return f"{self.label} written to {path}"


REPORTERS: dict[str, Reporter] = {
    r.name: r
    for r in (
        Reporter(
            "text",
            "Text",
            render=lambda v, o: terminal.render(v, width=o.width, color=o.color),
            compare=lambda c, o: terminal.render_comparison(c, width=o.width, color=o.color),
        ),
        Reporter(
            "json",
            "JSON",
            render=lambda v, o: json.render(v),
            compare=lambda c, o: json.render_comparison(c),
        ),
        Reporter(
            "csv",
            "CSV",
            render=lambda v, o: csv.render(v),
            compare=lambda c, o: csv.render_comparison(c),
        ),
        Reporter(
            "markdown",
            "Markdown",
            render=lambda v, o: markdown.render(v),
            compare=lambda c, o: markdown.render_comparison(c),
        ),
        Reporter("html", "HTML report", render=_html),
        Reporter("plots", "plots", files=_write_plots),
    )
}


def get(name: str) -> Reporter:
    return REPORTERS[name]


def render_columns(view: View, name: str, fmt: str, options: Options) -> str:
    """A run's figures as the column set ``name`` lays them out (rpcmeter.reporters.columns),
    in ``fmt`` (one of :data:`COLUMN_FORMATS`)."""
    from rpcmeter.reporters.columns import COLUMN_SETS

    grids = COLUMN_SETS[name](view)
    if fmt == "markdown":
        return markdown.grids_markdown(grids)
    return "\n".join(
        terminal.render_grid(g, width=options.width, color=options.color) for g in grids
    )
