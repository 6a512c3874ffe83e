"""Requests written as JSON made protobuf messages, and where data does not fit a message."""

from __future__ import annotations

import datetime
import difflib
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from google.protobuf import (
    json_format,
    message_factory,
)
from google.protobuf.descriptor import (
    Descriptor,
    FieldDescriptor,
    OneofDescriptor,
)
from google.protobuf.message import Message

from rpcmeter.protocols.grpc_schema.source import WELL_KNOWN_PREFIX, SchemaError


def message_class(desc: Descriptor) -> Callable[[], Message]:
    return message_factory.GetMessageClass(desc)  # type: ignore[no-any-return]


def plain(value: Any) -> Any:
    """A TOML value as JSON: dates and times as RFC 3339 text, tables and arrays copied."""
    if isinstance(value, datetime.datetime):
        text = value.isoformat()
        return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _repeated(f: FieldDescriptor) -> bool:
    flag = getattr(f, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(f.label == FieldDescriptor.LABEL_REPEATED)  # protobuf before 6


def _is_map(f: FieldDescriptor) -> bool:
    return bool(f.message_type is not None and f.message_type.GetOptions().map_entry)


def _is_table(f: FieldDescriptor) -> bool:
    """A message field written as a JSON object of its fields (not a well-known type, whose
    JSON form is its own: text for a Timestamp, a number for a wrapper...)."""
    return f.message_type is not None and not f.message_type.full_name.startswith(WELL_KNOWN_PREFIX)


def _real_oneof(f: FieldDescriptor) -> OneofDescriptor | None:
    """The oneof ``f`` belongs to, if it is not proto3's synthetic one of an ``optional``."""
    oneof = f.containing_oneof
    if oneof is None or (len(oneof.fields) == 1 and oneof.name == f"_{f.name}"):
        return None
    return oneof


_SCALARS = {
    getattr(FieldDescriptor, f"TYPE_{name.upper()}"): name
    for name in (
        "double",
        "float",
        "int64",
        "uint64",
        "int32",
        "fixed64",
        "fixed32",
        "bool",
        "string",
        "bytes",
        "uint32",
        "sfixed32",
        "sfixed64",
        "sint32",
        "sint64",
    )
}


def type_name(f: FieldDescriptor) -> str:
    """What a field holds, for messages: ``int32``, ``bytes (base64)``, ``enum pkg.Kind (A, B)``,
    ``google.protobuf.Timestamp (RFC 3339 text)``, ``routeguide.Point``."""
    if f.type == FieldDescriptor.TYPE_ENUM:
        names = [v.name for v in f.enum_type.values]
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        return f"enum {f.enum_type.full_name} ({shown})"
    if f.message_type is not None:
        name = f.message_type.full_name
        form = {
            "google.protobuf.Timestamp": ' (RFC 3339 text, "2024-01-31T12:00:00Z")',
            "google.protobuf.Duration": ' (seconds as text, "1.5s")',
            "google.protobuf.FieldMask": ' (paths as text, "a,b.c")',
        }.get(name, "")
        return f"{name}{form}"
    name = _SCALARS.get(f.type, "value")
    return "bytes (base64)" if name == "bytes" else name


def show(value: Any) -> str:
    """A JSON value as it reads in a message: ``"abc"``, ``7``, ``{"a": 1}``."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _parse_error(exc: Exception) -> str:
    return str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__


_TOO_DEEP = re.compile(r"Message too deep\. Max recursion depth is (\d+)")
_FIELD_OF = re.compile(r"Failed to parse (\S+) field: ")


def _too_deep(exc: Exception, where: str) -> str | None:
    """The one line for data nested deeper than protobuf's limit (its parser says so once per
    level, ``Failed to parse tree field: ...``): the path, its repeated names said once."""
    text = str(exc)
    deep = _TOO_DEEP.search(text)
    if deep is None:
        return None
    names = _FIELD_OF.findall(text)
    path = ".".join(names[:3])
    if len(names) > 3:
        kinds = ", ".join(sorted(set(names)))
        path += f"... ({len(names)} levels of {kinds})"
    at = f"{where}.{path}" if path else where
    return f"{at}: nested deeper than protobuf's limit of {deep.group(1)}"


def _fits(desc: Descriptor, name: str, value: Any) -> bool:
    """Whether field ``name`` of ``desc`` takes ``value`` (protobuf's JSON mapping decides)."""
    try:
        json_format.ParseDict({name: value}, message_class(desc)())
    except (json_format.ParseError, ValueError, TypeError, AttributeError, KeyError):
        return False
    return True


def locate(desc: Descriptor, data: Any, path: str) -> str | None:
    """The first place where ``data`` does not fit message ``desc``, as ``path.field: why``
    (None: none found). Protobuf's JSON mapping decides what fits; this names where."""
    if not isinstance(data, Mapping):
        return f"{path}: expected a table of {desc.full_name} fields, got {show(data)}"
    by_name = {f.name: f for f in desc.fields}
    by_name.update({f.json_name: f for f in desc.fields if f.json_name not in by_name})
    oneofs: dict[str, str] = {}
    for key, value in data.items():
        f = by_name.get(key)
        where = f"{path}.{key}"
        if f is None:
            close = difflib.get_close_matches(key, [x.name for x in desc.fields], n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            names = ", ".join(x.name for x in desc.fields) or "none"
            return f"{where}: {desc.full_name} has no field {key!r} ({hint}its fields: {names})"
        oneof = _real_oneof(f)
        if oneof is not None and value is not None:
            other = oneofs.setdefault(oneof.name, f.name)
            if other != f.name:
                return f"{where}: {other} and {f.name} are both of oneof {oneof.name} (give one)"
        if value is None:
            continue  # null: the field's default
        problem = _locate_field(desc, f, value, where)
        if problem is not None:
            return problem
    return None


def _locate_field(desc: Descriptor, f: FieldDescriptor, value: Any, where: str) -> str | None:
    if _is_map(f):
        if not isinstance(value, Mapping):
            return f"{where}: expected a table (a map), got {show(value)}"
        value_field = f.message_type.fields_by_name["value"]
        for k, v in value.items():
            item = f"{where}[{show(k)}]"
            if _is_table(value_field):
                if (problem := locate(value_field.message_type, v, item)) is not None:
                    return problem
            elif not _fits(desc, f.name, {k: v}):
                key_type = type_name(f.message_type.fields_by_name["key"])
                return (
                    f"{item}: expected {type_name(value_field)} (keys: {key_type}), got {show(v)}"
                )
        return None
    if _repeated(f):
        if not isinstance(value, list):
            return f"{where}: expected an array of {type_name(f)}, got {show(value)}"
        for i, item in enumerate(value):
            at = f"{where}[{i}]"
            if _is_table(f):
                if (problem := locate(f.message_type, item, at)) is not None:
                    return problem
            elif not _fits(desc, f.name, [item]):
                return f"{at}: expected {type_name(f)}, got {show(item)}"
        return None
    if _is_table(f):
        return locate(f.message_type, value, where)
    if not _fits(desc, f.name, value):
        out_of_range = (
            isinstance(value, int)
            and not isinstance(value, bool)
            and _SCALARS.get(f.type, "") not in ("string", "bytes", "bool")
            and f.enum_type is None
        )
        note = " (out of range)" if out_of_range else ""
        return f"{where}: expected {type_name(f)}, got {show(value)}{note}"
    return None


class RequestEncoder:
    """Turns JSON data into the bytes of message ``desc`` (protobuf's JSON mapping), naming the
    field path at fault when the data does not fit."""

    def __init__(self, desc: Descriptor) -> None:
        self.desc = desc
        self.cls = message_class(desc)

    def message(self, data: Any, where: str = "data") -> Message:
        data = plain(data)
        if not isinstance(data, Mapping):
            raise SchemaError(
                f"{where}: expected a table of {self.desc.full_name} fields, got {show(data)}"
            )
        msg = self.cls()
        try:
            json_format.ParseDict(data, msg)
        except (json_format.ParseError, ValueError, TypeError, AttributeError, KeyError) as exc:
            deep = _too_deep(exc, where)
            if deep is not None:
                raise SchemaError(deep) from None
            problem = locate(self.desc, data, where)
            raise SchemaError(problem or f"{where}: {_parse_error(exc)}") from None
        return msg

    def encode(self, data: Any, where: str = "data") -> bytes:
        return bytes(self.message(data, where).SerializeToString(deterministic=True))
