"""Messages whose data holds placeholders: compiled once, filled in per call."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf import (
    json_format,
)
from google.protobuf.descriptor import (
    Descriptor,
    FieldDescriptor,
)
from google.protobuf.message import Message

from rpcmeter.protocols import templates
from rpcmeter.protocols.grpc import PREFIX, frame
from rpcmeter.protocols.grpc_schema.messages import (
    _SCALARS,
    RequestEncoder,
    _is_map,
    _is_table,
    _real_oneof,
    _repeated,
    message_class,
    plain,
    show,
    type_name,
)
from rpcmeter.protocols.grpc_schema.source import SchemaError, _pool

_INTEGERS = frozenset(
    {
        "int32",
        "int64",
        "uint32",
        "uint64",
        "sint32",
        "sint64",
        "fixed32",
        "fixed64",
        "sfixed32",
        "sfixed64",
    }
)
_RANGES = {
    "int32": (-(1 << 31), (1 << 31) - 1),
    "sint32": (-(1 << 31), (1 << 31) - 1),
    "sfixed32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "fixed32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "sint64": (-(1 << 63), (1 << 63) - 1),
    "sfixed64": (-(1 << 63), (1 << 63) - 1),
    "uint64": (0, (1 << 64) - 1),
    "fixed64": (0, (1 << 64) - 1),
}


@dataclass(frozen=True)
class Leaf:
    """A field of a request set from a placeholder: its path of field names from the message,
    its template and what it holds (``str``, ``int`` or ``float``)."""

    path: tuple[str, ...]
    template: templates.Template
    kind: str


@dataclass(frozen=True)
class MessageTemplate:
    """A message whose data holds placeholders (see :func:`compile_message`): ``fixed``, the
    message without its varying fields; ``leaves``, the singular fields set per request; or,
    where a placeholder sits inside a repeated field or a map, ``data``, the JSON filled and
    encoded whole per request (slower). Picklable: made once, filled in each client."""

    type_name: str
    fixed: bytes
    leaves: tuple[Leaf, ...] = ()
    data: Any = None  # JSON with placeholders, encoded whole per request (None: leaves)
    texts: tuple[templates.Template, ...] = ()  # every template in ``data``

    @functools.cached_property
    def exprs(self) -> tuple[templates.Expr, ...]:
        return templates.distinct([*(leaf.template for leaf in self.leaves), *self.texts])

    def filler(
        self, files: bytes, exprs: tuple[templates.Expr, ...], framed: bool = False
    ) -> Callable[[templates.Values], bytes]:
        """``fill(values) -> bytes``: the message for a request's values (in ``exprs``' order;
        ``framed``: with the 5-byte prefix of a gRPC message). The fixed part and the varying
        fields are serialized apart and joined (protobuf merges the fields of a message that
        appears twice)."""
        parts = self.parts(files, exprs)
        if parts is None:  # a placeholder in a repeated field or a map: the whole message
            encoder = RequestEncoder(_pool(files).FindMessageTypeByName(self.type_name))
            data = self.data
            fills = _fills(self.texts, lambda t: templates.text_formatter(t, exprs))
            if framed:
                return lambda values: frame(encoder.encode(_filled(data, fills, values)))
            return lambda values: encoder.encode(_filled(data, fills, values))
        fixed, set_fields, serialize = parts
        if framed:
            nf = len(fixed)

            def fill_framed(values: templates.Values) -> bytes:
                set_fields(values)
                tail = serialize()
                return b"".join((PREFIX(0, nf + len(tail)), fixed, tail))

            return fill_framed

        def fill(values: templates.Values) -> bytes:
            set_fields(values)
            return fixed + serialize()

        return fill

    def parts(
        self, files: bytes, exprs: tuple[templates.Expr, ...]
    ) -> tuple[bytes, Callable[[templates.Values], None], Callable[[], bytes]] | None:
        """How a request's message is made, for a caller that joins the parts itself: the
        fixed part's bytes, ``set_fields(values)`` (the varying fields set on a message of
        their own) and that message's ``serialize()``. None when the message is made whole
        per request (``data``)."""
        if self.data is not None:
            return None
        scratch = message_class(_pool(files).FindMessageTypeByName(self.type_name))()
        setters = []
        for leaf in self.leaves:
            parent = scratch
            for name in leaf.path[:-1]:
                parent = getattr(parent, name)
            setters.append(_setter(parent, leaf, exprs))
        serialize: Callable[[], bytes] = scratch.SerializeToString
        if len(setters) == 1:
            return self.fixed, setters[0], serialize

        def set_fields(values: templates.Values) -> None:
            for set_leaf in setters:
                set_leaf(values)

        return self.fixed, set_fields, serialize

    def splice(
        self, files: bytes, exprs: tuple[templates.Expr, ...]
    ) -> (
        tuple[
            templates.BytesFormat | None,
            Callable[[templates.Values], bytes],
            Callable[[int], bytes],
        ]
        | None
    ):
        """How a request's message is made by a caller that keeps, per size, what does not
        vary: ``piece(values)``, the bytes that vary, and ``before(n)``, the message's bytes
        before a piece of ``n`` bytes (the same for every piece of that size), so that the
        message is ``before(len(piece)) + piece``. A message whose one varying field is a
        string of the message itself is spliced: the piece is the field's text (``format``, a
        :class:`~rpcmeter.protocols.templates.BytesFormat` of it), its tag and length come
        from protobuf once per size; any other is the varying fields serialized by protobuf
        (``format`` None). None when the message is made whole per request (``data``)."""
        parts = self.parts(files, exprs)
        if parts is None:
            return None
        fixed, set_fields, serialize = parts
        leaf = self.leaves[0]
        if len(self.leaves) > 1 or leaf.kind != "str" or len(leaf.path) != 1:

            def piece(values: templates.Values) -> bytes:
                set_fields(values)
                return serialize()

            return None, piece, lambda n: fixed
        fmt = templates.BytesFormat.of(templates.text_parts(leaf.template), exprs)
        scratch = message_class(_pool(files).FindMessageTypeByName(self.type_name))()
        name = leaf.path[0]

        def before(n: int) -> bytes:
            setattr(scratch, name, "a" * n)  # protobuf's own tag and length for n bytes
            whole: bytes = scratch.SerializeToString()
            return fixed + whole[: -n or None]

        return fmt, fmt.formatter(), before


def _setter(
    parent: Message, leaf: Leaf, exprs: tuple[templates.Expr, ...]
) -> Callable[[templates.Values], None]:
    """``set(values)``: one varying field set on ``parent`` (the text of a string field made
    in place when it is one placeholder or a format of several)."""
    name = leaf.path[-1]
    single = leaf.template.single
    if single is not None:
        i = exprs.index(single)
        if leaf.kind == "float":
            return lambda values: setattr(parent, name, float(values[i]))
        if leaf.kind == "str":
            return lambda values: setattr(parent, name, str(values[i]))
        return lambda values: setattr(parent, name, values[i])
    assert leaf.kind == "str", "a numeric field takes one placeholder alone"
    fmt, picks = templates.text_format(leaf.template, exprs)
    return lambda values: setattr(parent, name, fmt % tuple([values[i] for i in picks]))


Fills = Mapping[str, Callable[[templates.Values], str]]


def _fills(texts: Iterable[templates.Template], fill: Any) -> dict[str, Any]:
    """For each template's text: ``fill(template)``, which makes its text."""
    return {t.text: fill(t) for t in texts}


def _filled(data: Any, fills: Fills, values: Any) -> Any:
    """JSON ``data`` with every templated string filled (as text: the JSON mapping takes a
    number given as text for a numeric field)."""
    if isinstance(data, str):
        fill = fills.get(data)
        return data if fill is None else fill(values)
    if isinstance(data, Mapping):
        return {k: _filled(v, fills, values) for k, v in data.items()}
    if isinstance(data, list):
        return [_filled(v, fills, values) for v in data]
    return data


Placed = tuple[str, tuple[str, ...], FieldDescriptor | None, str]


def _placed(
    desc: Descriptor, data: Any, path: str, keys: tuple[str, ...], out: list[Placed]
) -> None:
    """Every templated string in ``data`` (message ``desc``): where it is, the field names on
    the way, its field (None inside a repeated field or a map: filled whole) and the string. A
    placeholder in a key is a SchemaError."""
    if not isinstance(data, Mapping):
        return
    by_name = {f.name: f for f in desc.fields}
    by_name.update({f.json_name: f for f in desc.fields if f.json_name not in by_name})
    for key, value in data.items():
        where = f"{path}.{key}"
        if templates.is_template(key):
            raise SchemaError(f"{where}: a field name cannot take a placeholder")
        f = by_name.get(key)
        if f is None:
            continue  # the encoder names it
        if _is_map(f) or _repeated(f):
            for sub_where, sub in _templated(value, where):
                out.append((sub_where, (), None, sub))
        elif _is_table(f) and isinstance(value, Mapping):
            _placed(f.message_type, value, where, (*keys, f.name), out)
        elif templates.is_template(value):
            out.append((where, (*keys, f.name), f, value))


def _templated(value: Any, where: str) -> list[tuple[str, str]]:
    """Templated strings anywhere in ``value`` (a repeated field or a map), with where."""
    if isinstance(value, str):
        return [(where, value)] if templates.is_template(value) else []
    if isinstance(value, Mapping):
        found = []
        for k, v in value.items():
            if templates.is_template(k):
                raise SchemaError(f"{where}[{show(k)}]: a map key cannot take a placeholder")
            found += _templated(v, f"{where}[{show(k)}]")
        return found
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _templated(v, f"{where}[{i}]")]
    return []


def _leaf_kind(f: FieldDescriptor, template: templates.Template, where: str) -> str:
    """What a singular field set from ``template`` holds; SchemaError when it cannot take it."""
    kind = _SCALARS.get(f.type, "")
    if kind == "string" and f.message_type is None:
        return "str"
    if kind in _INTEGERS or kind in ("double", "float"):
        single = template.single
        if single is None or not single.numeric:
            raise SchemaError(
                f"{where}: a {kind} field takes one numeric placeholder alone "
                f'("{{{{request_number}}}}", "{{{{random_int(a, b)}}}}", ...), not '
                f"{show(template.text)}"
            )
        bounds, limits = single.bounds(), _RANGES.get(kind)
        if bounds is not None and limits is not None:
            lo, hi = limits
            if bounds[0] < lo or bounds[1] > hi:
                raise SchemaError(f"{where}: {single} goes beyond the {kind} range ({lo} to {hi})")
        return "int" if kind in _INTEGERS else "float"
    raise SchemaError(f"{where}: a field of type {type_name(f)} cannot take a placeholder")


def compile_message(desc: Descriptor, data: Any, where: str = "data") -> bytes | MessageTemplate:
    """Message ``desc`` of JSON ``data``: its bytes, or, where a string holds placeholders
    (:mod:`rpcmeter.protocols.templates`), a :class:`MessageTemplate`. A string field takes any
    template; a numeric field one numeric placeholder alone (``"{{request_number}}"``, filled
    through the JSON mapping as the number it is); no other field takes one. SchemaError naming
    the field path of any fault (``data.location.latitude: ...``)."""
    data = plain(data if data is not None else {})
    found: list[Placed] = []
    _placed(desc, data, where, (), found)
    parsed: dict[str, templates.Template] = {}
    for at, *_, text in found:
        try:
            parsed[text] = templates.parse(text)
        except templates.TemplateError as exc:
            raise SchemaError(f"{at}: {exc}") from None
    if not found:
        return RequestEncoder(desc).encode(data, where)
    leaves = [
        Leaf(names, parsed[text], _leaf_kind(f, parsed[text], at))
        for at, names, f, text in found
        if f is not None
    ]
    # the data must fit the message with every placeholder at a value it can take
    samples = {e: templates.sample(e) for t in parsed.values() for e in t.exprs}
    rendered = _fills(parsed.values(), lambda t: lambda values: t.render(samples))
    RequestEncoder(desc).encode(_filled(data, rendered, None), where)
    if len(leaves) < len(found):  # a placeholder in a repeated field or a map
        return MessageTemplate(desc.full_name, b"", data=data, texts=tuple(parsed.values()))
    fixed = _without_leaves(desc, data, {leaf.path for leaf in leaves})
    return MessageTemplate(desc.full_name, RequestEncoder(desc).encode(fixed, where), tuple(leaves))


def _without_leaves(desc: Descriptor, data: Any, paths: set[tuple[str, ...]]) -> Any:
    """``data`` without the values at ``paths`` (field names; the data's keys may be JSON
    names)."""
    if not isinstance(data, Mapping):
        return data
    by_name = {f.name: f for f in desc.fields}
    by_name.update({f.json_name: f for f in desc.fields if f.json_name not in by_name})
    out = {}
    for key, value in data.items():
        f = by_name.get(key)
        if f is None:
            out[key] = value
            continue
        if (f.name,) in paths:
            continue
        below = {p[1:] for p in paths if len(p) > 1 and p[0] == f.name}
        out[key] = _without_leaves(f.message_type, value, below) if below else value
    return out


def skeleton(desc: Descriptor, depth: int = 0) -> dict[str, Any]:
    """Message ``desc`` as JSON with every field at a default value (the first member of each
    oneof only; a message inside itself as ``{}``): a template of ``data``."""
    out: dict[str, Any] = {}
    oneofs: set[str] = set()
    for f in desc.fields:
        oneof = _real_oneof(f)
        if oneof is not None:
            if oneof.name in oneofs:
                continue
            oneofs.add(oneof.name)
        if _is_map(f):
            value_field = f.message_type.fields_by_name["value"]
            key = "key" if f.message_type.fields_by_name["key"].type == f.TYPE_STRING else "0"
            out[f.name] = {key: _default(value_field, depth)}
        elif _repeated(f):
            out[f.name] = [_default(f, depth)]
        else:
            out[f.name] = _default(f, depth)
    return out


def typed_skeleton(desc: Descriptor, within: tuple[str, ...] = ()) -> dict[str, Any]:
    """Message ``desc`` as JSON with each field's type as its value (:func:`type_name`; every
    member of a oneof, marked ``oneof NAME``; a message inside itself by its name): what
    ``rpcmeter grpc describe`` prints."""
    within = (*within, desc.full_name)
    out: dict[str, Any] = {}
    for f in desc.fields:
        oneof = _real_oneof(f)
        if _is_map(f):
            key_type = type_name(f.message_type.fields_by_name["key"])
            out[f.name] = {f"<{key_type}>": _typed(f.message_type.fields_by_name["value"], within)}
        elif _repeated(f):
            out[f.name] = [_typed(f, within)]
        else:
            value = _typed(f, within)
            if oneof is not None and isinstance(value, str):
                value = f"{value} (oneof {oneof.name})"
            out[f.name] = value
    return out


def _typed(f: FieldDescriptor, within: tuple[str, ...]) -> Any:
    if not _is_table(f) or f.message_type.full_name in within:
        return type_name(f)
    return typed_skeleton(f.message_type, within)


def _default(f: FieldDescriptor, depth: int) -> Any:
    if f.type == FieldDescriptor.TYPE_ENUM:
        return f.enum_type.values[0].name
    if f.message_type is None:
        kind = _SCALARS.get(f.type, "")
        if kind in ("string", "bytes"):
            return ""
        if kind == "bool":
            return False
        return 0.0 if kind in ("double", "float") else 0
    if not _is_table(f):
        try:
            return json_format.MessageToDict(message_class(f.message_type)())
        except (TypeError, ValueError, json_format.SerializeToJsonError):
            return {}
    if depth >= 8:
        return {}
    return skeleton(f.message_type, depth + 1)
