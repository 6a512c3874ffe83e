"""Replies checked field by field against ``expect``."""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import (
    json_format,
)
from google.protobuf.descriptor import (
    Descriptor,
    FieldDescriptor,
)
from google.protobuf.message import DecodeError, Message

from rpcmeter.errors import ReplyMismatch
from rpcmeter.protocols import templates
from rpcmeter.protocols.grpc_schema.message_templates import (
    MessageTemplate,
    _filled,
    _fills,
    compile_message,
)
from rpcmeter.protocols.grpc_schema.messages import (
    RequestEncoder,
    _is_map,
    _is_table,
    _parse_error,
    _real_oneof,
    _repeated,
    message_class,
    plain,
    show,
)


@dataclass
class _Node:
    """One field ``expect`` names: compared whole (``children`` None), or its named fields
    (``children``), or per element / per key (``items``)."""

    field: FieldDescriptor
    children: list[_Node] | None = None  # a message given as a table: its named fields
    items: list[list[_Node] | None] | None = None  # a repeated field given as an array
    keys: dict[Any, list[_Node] | None] | None = None  # a map given as a table


def _nodes(desc: Descriptor, given: Mapping[str, Any], parsed: Message) -> list[_Node]:
    by_name = {f.name: f for f in desc.fields}
    by_name.update({f.json_name: f for f in desc.fields if f.json_name not in by_name})
    out: list[_Node] = []
    for key, value in given.items():
        f = by_name[key]
        if _is_map(f):
            value_field = f.message_type.fields_by_name["value"]
            got = getattr(parsed, f.name)
            keys: dict[Any, list[_Node] | None] = {}
            for k, v in got.items():
                sub = _find_key(value, k)
                keys[k] = (
                    _nodes(value_field.message_type, sub, v)
                    if _is_table(value_field) and isinstance(sub, Mapping)
                    else None
                )
            out.append(_Node(f, keys=keys))
        elif _repeated(f):
            elems = getattr(parsed, f.name)
            items = [
                _nodes(f.message_type, v, elems[i])
                if _is_table(f) and isinstance(v, Mapping)
                else None
                for i, v in enumerate(value or [])
            ]
            out.append(_Node(f, items=items))
        elif _is_table(f) and isinstance(value, Mapping):
            out.append(_Node(f, children=_nodes(f.message_type, value, getattr(parsed, f.name))))
        else:
            out.append(_Node(f))
    return out


def _find_key(given: Mapping[str, Any], key: Any) -> Any:
    for k, v in given.items():
        if str(k) == str(key) or (isinstance(key, bool) and str(k).lower() == str(key).lower()):
            return v
    return None


def _shown(f: FieldDescriptor, value: Any) -> str:
    """A field's value as JSON text, for a mismatch."""
    if isinstance(value, Message):
        return show(json_format.MessageToDict(value, preserving_proto_field_name=True))
    if f.type == FieldDescriptor.TYPE_ENUM:
        found = f.enum_type.values_by_number.get(value)
        return show(found.name if found is not None else value)
    if isinstance(value, bytes):
        return show(base64.b64encode(value).decode("ascii"))
    if hasattr(value, "__len__") and not isinstance(value, str):  # a repeated or a map
        return show([json_format.MessageToDict(v) if isinstance(v, Message) else v for v in value])
    return show(value)


def _compare(nodes: list[_Node], got: Message, want: Message, path: str) -> str | None:
    """Where ``got`` differs from ``want`` in the fields ``nodes`` name (None: nowhere)."""
    for node in nodes:
        f = node.field
        name = f.name
        where = f"{path}.{name}" if path else name
        oneof = _real_oneof(f)
        if oneof is not None:
            chosen = got.WhichOneof(oneof.name)
            if chosen != name:
                instead = f"{chosen} set instead" if chosen else "no field of it set"
                return f"{where}: expected {_shown(f, getattr(want, name))}, got {instead}"
        g, w = getattr(got, name), getattr(want, name)
        if node.keys is not None:
            for k, sub in node.keys.items():
                at = f"{where}[{show(k)}]"
                if k not in g:
                    return f"{at}: expected {_shown(f, [w[k]])[1:-1]}, got no such key"
                if sub is None:
                    if g[k] != w[k]:
                        vf = f.message_type.fields_by_name["value"]
                        return f"{at}: expected {_shown(vf, w[k])}, got {_shown(vf, g[k])}"
                elif (problem := _compare(sub, g[k], w[k], at)) is not None:
                    return problem
        elif node.items is not None:
            if len(g) != len(node.items):
                return f"{where}: expected {len(node.items)} elements, got {len(g)}"
            for i, sub in enumerate(node.items):
                if sub is None:
                    if g[i] != w[i]:
                        return f"{where}[{i}]: expected {_shown(f, w[i])}, got {_shown(f, g[i])}"
                elif (problem := _compare(sub, g[i], w[i], f"{where}[{i}]")) is not None:
                    return problem
        elif node.children is not None:
            if not got.HasField(name):
                return f"{where}: expected {_shown(f, w)}, got no {name}"
            if (problem := _compare(node.children, g, w, where)) is not None:
                return problem
        elif g != w:
            return f"{where}: expected {_shown(f, w)}, got {_shown(f, g)}"
    return None


class FieldExpect:
    """The reply check of ``expect``: a subset of the reply message's fields, compared after
    decoding. ``last`` holds the last reply that matched; a reply of the same bytes is not
    decoded again (callers compare with ``last`` first, so repeating replies cost one bytes
    comparison), nor is one that repeats the last reply that did not match."""

    def __init__(self, desc: Descriptor, expect: Mapping[str, Any]) -> None:
        self.desc = desc
        self.cls = message_class(desc)
        self.want = RequestEncoder(desc).message(expect, "expect")
        self.nodes = _nodes(desc, plain(expect), self.want)
        self.last: bytes | None = None
        self.wrong: tuple[bytes, str] | None = None  # the last reply that did not match, and why

    def problem(self, body: bytes) -> str | None:
        """Where ``body`` differs from what ``expect`` names (None: it matches)."""
        try:
            got = self.cls.FromString(body)  # type: ignore[attr-defined]
        except (DecodeError, RuntimeError, ValueError) as exc:
            return f"a reply that is not a {self.desc.full_name} ({_parse_error(exc)})"
        return _compare(self.nodes, got, self.want, "")

    def __call__(self, body: bytes) -> ReplyMismatch | None:
        wrong = self.wrong
        if wrong is not None and body == wrong[0]:  # a wrong reply that repeats: not decoded
            return ReplyMismatch(wrong[1])
        problem = self.problem(body)
        if problem is None:
            self.last = bytes(body)
            return None
        self.wrong = (bytes(body), problem)
        return ReplyMismatch(problem)


class TemplatedExpect:
    """The reply check of an ``expect`` with placeholders: the fields it names compared with
    the message it makes with each request's values (``check(body, values)``), the same
    values the request was made with. Every reply is decoded (the replies that echo a request's
    value differ anyway)."""

    def __init__(self, desc: Descriptor, expect: Mapping[str, Any], files: bytes) -> None:
        self.desc = desc
        self.cls = message_class(desc)
        made = compile_message(desc, expect, "expect")
        assert isinstance(made, MessageTemplate), "an expect with placeholders"
        self.template = made
        self.files = files
        texts = {t.text: t for t in _all_templates(plain(expect))}
        samples = {e: templates.sample(e) for t in texts.values() for e in t.exprs}
        rendered = _fills(texts.values(), lambda t: lambda values: t.render(samples))
        sample = _filled(plain(expect), rendered, None)
        self.nodes = _nodes(desc, sample, RequestEncoder(desc).message(sample, "expect"))

    @functools.cached_property
    def exprs(self) -> tuple[templates.Expr, ...]:
        return self.template.exprs

    def bind(
        self, exprs: tuple[templates.Expr, ...]
    ) -> Callable[[bytes, templates.Values], ReplyMismatch | None]:
        """``check(body, values)`` for requests whose values come in ``exprs``' order."""
        want_bytes = self.template.filler(self.files, exprs)
        parse = self.cls.FromString  # type: ignore[attr-defined]
        nodes, name = self.nodes, self.desc.full_name

        def check(body: bytes, values: templates.Values) -> ReplyMismatch | None:
            try:
                got = parse(body)
            except (DecodeError, RuntimeError, ValueError) as exc:
                return ReplyMismatch(f"a reply that is not a {name} ({_parse_error(exc)})")
            problem = _compare(nodes, got, parse(want_bytes(values)), "")
            return None if problem is None else ReplyMismatch(problem)

        return check


def _all_templates(data: Any) -> list[templates.Template]:
    if isinstance(data, str):
        return [templates.parse(data)] if templates.is_template(data) else []
    if isinstance(data, Mapping):
        return [t for v in data.values() for t in _all_templates(v)]
    if isinstance(data, list):
        return [t for v in data for t in _all_templates(v)]
    return []
