"""Names from a suite (or a server's error text) are shown as themselves: the terminal escapes
control characters and rich markup, Markdown escapes its syntax, CSV disarms formulas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rpcmeter.reporters import csv as csv_reporter
from rpcmeter.reporters import markdown, terminal
from rpcmeter.reporters.build import build
from rpcmeter.result.document import Result
from tests.support.synthetic import parsed

GOLDEN = Path(__file__).parents[1] / "reporters" / "golden" / "result.json"
EVIL = "=ev\x1b[31mil[bold]x[/bold]|*_<b>[a](http://x)\nnew"


def evil_result() -> Result:
    doc: dict[str, Any] = json.loads(GOLDEN.read_text())
    old = doc["cases"][0]["variant"]
    for case in doc["cases"]:
        if case["variant"] == old:
            case["variant"] = EVIL
    suite = doc["suite"]
    suite["variants"] = {EVIL if k == old else k: v for k, v in suite["variants"].items()}
    if suite.get("baseline") == old:
        suite["baseline"] = EVIL
    doc["cases"][0]["status"] = "failed"
    doc["cases"][0]["reason"] = "server said \x1b[2J\x07"
    doc.pop("comparisons", None)
    return parsed(doc)


def test_terminal_shows_control_characters_and_markup_escaped() -> None:
    out = terminal.render(build(evil_result()), width=200)
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[31m" in out and "\\x1b[2J\\x07" in out  # shown, not obeyed
    assert "[bold]x[/bold]" in out  # markup shown as text


def test_markdown_escapes_its_syntax() -> None:
    out = markdown.render(build(evil_result()))
    assert "\x1b" not in out
    # the escape shown as text (its backslash escaped too), every Markdown character escaped
    assert "=ev\\\\x1b[31mil[bold]x[/bold]\\|\\*\\_\\<b\\>[a\\](http://x) new" in out
    assert "<b>" not in out and "[a](http" not in out


def test_csv_disarms_formulas_and_stays_parseable() -> None:
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(csv_reporter.render(build(evil_result())))))
    variants = {r["variant"] for r in rows}
    assert "'" + EVIL in variants  # a leading = is not a formula; the name is whole
    assert not any(v.startswith(("=", "+", "@")) for v in variants)
