"""Rich tables that fit the console's width without cutting a figure (terminal and ranking)."""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table

WHOLE = 20  # a value up to this wide (a figure, a time) is never wrapped; longer ones may be


class FitTable(Table):
    """A table whose figures and one-word headers (matrix keys) are not cut: when it is wider
    than the console, every header wider than its column's values goes one word a line, and
    only columns holding longer text (names, lists: over :data:`WHOLE` characters) wrap, a word
    too long for its column folding onto the next line."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        natural = Measurement.get(console, options.update_width(10_000), self).maximum
        if natural > options.max_width:
            for column in self.columns:
                lines = [line for cell in column.cells for line in str(cell).splitlines()]
                values = max((cell_len(line) for line in lines), default=0)
                header = column.header
                if isinstance(header, str) and max(map(cell_len, header.splitlines())) > values:
                    column.header = "\n".join(header.split())
                column.no_wrap = values <= WHOLE
                column.overflow = "fold"  # a long word (a hyphenated name) folds, not cut
            # still too wide: figures with words beside them ("0.030 (p99 0.066)", "~0 (within
            # noise)") go onto two lines, the widest column first, until the table fits
            spaced = [c for c in self.columns if c.no_wrap and any(" " in str(x) for x in c.cells)]
            spaced.sort(key=lambda c: -max(cell_len(str(x)) for x in c.cells))
            for column in spaced:
                if Measurement.get(console, options.update_width(10_000), self).maximum <= (
                    options.max_width
                ):
                    break
                column.no_wrap = False
        yield from super().__rich_console__(console, options)
