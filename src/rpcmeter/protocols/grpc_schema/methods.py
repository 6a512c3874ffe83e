"""Which method a call names, and the listing of a schema's methods."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping

from google.protobuf.descriptor import (
    MethodDescriptor,
)

from rpcmeter.protocols.grpc_schema.message_templates import skeleton
from rpcmeter.protocols.grpc_schema.source import Schema, SchemaError


def method_names(schema: Schema) -> list[str]:
    """Every method as ``package.Service/Method``."""
    return [f"{m.containing_service.full_name}/{m.name}" for m in schema.methods()]


def find_method(schema: Schema, call: str) -> MethodDescriptor:
    """The method ``call`` names: ``package.Service/Method``, ghz's ``package.Service.Method``
    or a path ``/package.Service/Method``. SchemaError listing the closest names when the
    schema has none such."""
    text = call.strip().removeprefix("/")
    service, sep, method = text.rpartition("/")
    if not sep:
        service, _, method = text.rpartition(".")
    for svc in schema.services():
        if svc.full_name == service:
            found = svc.methods_by_name.get(method)
            if found is not None:
                return found
    names = method_names(schema)
    close = difflib.get_close_matches(f"{service}/{method}", names, n=3, cutoff=0.4)
    unknown = (
        f"; the server lists {', '.join(schema.undescribed)} without describing them"
        if schema.undescribed
        else ""
    )
    if not names:
        raise SchemaError(f"no method {call!r}: the schema has no service{unknown}")
    hint = f"closest: {', '.join(close)}" if close else f"methods: {', '.join(names[:8])}"
    more = "" if close or len(names) <= 8 else f", ... ({len(names)} in all)"
    raise SchemaError(f"no method {call!r} in the schema ({hint}{more}){unknown}")


def streaming(method: MethodDescriptor) -> str:
    """``unary``, or the stream workload's mode: ``server``, ``client`` or ``bidi``."""
    client, server = method.client_streaming, method.server_streaming
    if client and server:
        return "bidi"
    return "client" if client else "server" if server else "unary"


def signature(method: MethodDescriptor) -> str:
    """``GetFeature(routeguide.Point) returns (routeguide.Feature)``, with ``stream``s."""
    arg = ("stream " if method.client_streaming else "") + method.input_type.full_name
    ret = ("stream " if method.server_streaming else "") + method.output_type.full_name
    return f"{method.name}({arg}) returns ({ret})"


def listing(schema: Schema, called: Mapping[str, list[str]] | None = None) -> list[str]:
    """Every service and method of ``schema``, each method with its input message as a JSON
    skeleton (:func:`skeleton`, what ``data`` takes) and, from ``called`` (``package.Service/
    Method`` -> names), who calls it."""
    lines: list[str] = []
    for service in schema.services():
        lines.append(service.full_name)
        for method in service.methods:
            by = (called or {}).get(f"{service.full_name}/{method.name}")
            lines.append(f"  {signature(method)}" + (f"  <- {', '.join(by)}" if by else ""))
            lines.append(f"    {json.dumps(skeleton(method.input_type), ensure_ascii=False)}")
    return lines
