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
