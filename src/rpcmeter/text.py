"""Text from users and servers shown safely: control characters as escapes."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """``text`` with every control character (newlines, escape sequences, NUL, ...) written as
    its Python escape, so that it shows as one line and cannot drive a terminal."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


# A warning (checks.py, analysis.py, derived.py) is its headline, one short line the terminal
# prints, then, after a line break, its details (what was seen, what to do), which the reports
# (HTML, Markdown, JSON) show in full.


def warning(headline: str, details: str = "") -> str:
    """A warning as results keep it: ``headline``, then ``details`` after a line break."""
    return f"{headline}\n{details}" if details else headline


def headline(warning: str) -> str:
    """A warning's headline: its first line."""
    return warning.partition("\n")[0]


def details(warning: str) -> str:
    """A warning's details: what follows its first line (empty when none)."""
    return warning.partition("\n")[2]
