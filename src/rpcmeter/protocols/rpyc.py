"""rpyc as rpcmeter's client and built-in server both configure it: the protocol options of a
connection, from the suite's options, the same at both ends."""

from __future__ import annotations

from typing import Any


def protocol_config(options: dict[str, Any]) -> dict[str, Any]:
    """rpyc's ``protocol_config``: thread binding (option ``bind_threads``) and a 300 s timeout
    on synchronous requests."""
    return {"bind_threads": bool(options.get("bind_threads", False)), "sync_request_timeout": 300}
