"""The result document as JSON (``--output``, ``show --format json``): a pure function."""

from __future__ import annotations

import json
from typing import Any

from rpcmeter.reporters.tables import comparisons_of
from rpcmeter.result import Result, _clean, dumps


def render(result: Result) -> str:
    """The versioned result document, with its comparison of variants."""
    return dumps({**result, "comparisons": comparisons_of(result)})


def render_comparison(doc: dict[str, Any]) -> str:
    """A comparison document (``rpcmeter compare --format json``)."""
    return json.dumps(_clean(doc), indent=1, allow_nan=False) + "\n"
