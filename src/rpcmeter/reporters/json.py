"""The result document as JSON (``--output``, ``show --format json``): a pure function."""

from __future__ import annotations

import json

from rpcmeter.reporters.view import ComparisonView, View
from rpcmeter.result.document import _clean, dumps


def render(view: View) -> str:
    """The versioned result document, with its comparison of variants."""
    return dumps(dict(view.document))


def render_comparison(view: ComparisonView) -> str:
    """A comparison document (``rpcmeter compare --format json``)."""
    return json.dumps(_clean(view.document), indent=1, allow_nan=False) + "\n"
