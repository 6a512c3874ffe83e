"""Command lines with ``{name}`` placeholders (a whole command's, a command client's, a server
build's): split like a shell would, without a shell, and filled in (``{{`` and ``}}`` are
literal braces; booleans are written ``true``/``false``)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def placeholders(command: str | Sequence[str]) -> list[str]:
    """Names of the ``{name}`` placeholders in a command line."""
    parts = [command] if isinstance(command, str) else list(command)
    return [m.group(1) for p in parts for m in _PLACEHOLDER.finditer(p) if m.group(1)]


def fill(command: str | Sequence[str], values: Mapping[str, Any]) -> list[str]:
    """Split ``command`` (shell-like, without a shell) and fill its placeholders."""
    parts = shlex.split(command) if isinstance(command, str) else list(command)

    def sub(m: re.Match[str]) -> str:
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        return _text(values[m.group(1)])

    return [_PLACEHOLDER.sub(sub, p) for p in parts]


def fill_line(command: str | Sequence[str], values: Mapping[str, Any]) -> str:
    """``command`` as one line for ``/bin/sh`` (a list is joined, quoted), placeholders filled
    as they are written (no quoting: as hyperfine's parameters)."""
    line = command if isinstance(command, str) else shlex.join(command)

    def sub(m: re.Match[str]) -> str:
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        return _text(values[m.group(1)])

    return _PLACEHOLDER.sub(sub, line)
