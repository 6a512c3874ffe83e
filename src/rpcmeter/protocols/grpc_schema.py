"""Protobuf schemas for gRPC calls: where the descriptors come from, which method a call names,
requests written as JSON, replies checked field by field. No sockets here: the server
reflection protocol is a sans-I/O session (:class:`ReflectionSession`) that a driver feeds.

A schema is a set of file descriptors (a ``FileDescriptorSet``) from one of three sources:

- a ``.proto`` file, compiled by protoc (``grpcio-tools``; :func:`compile_proto`), with the
  import paths given and the well-known types that come with grpcio-tools;
- a protoset, the ``FileDescriptorSet`` that ``protoc --descriptor_set_out --include_imports``
  writes (:func:`read_protoset`);
- a server's reflection service (:class:`ReflectionSession`).

:func:`load_schema` turns the descriptors into a :class:`Schema`: a protobuf descriptor pool, and
the descriptors in a canonical form (dependencies first, then by name, serialized
deterministically) whose SHA-256 identifies the schema in the result. A dependency on one of
protobuf's well-known types that a protoset or a server leaves out is taken from the protobuf
library.

A call is compiled once (:func:`compile_call`) into a :class:`PreparedCall`: the method's path,
its request pre-encoded from JSON with protobuf's own JSON mapping
(``google.protobuf.json_format``; the hot path sends these bytes as it sends raw bytes), and the
reply check of ``expect`` (:class:`FieldExpect`). Data that does not fit the message is an error
naming the field path (``data.location.latitude: expected int32, got "abc"``). Encoding goes
through :class:`RequestEncoder`, the one place that turns JSON into message bytes, so that a
request built per call (a template filled in) can use the same encoder and errors later.
"""

from __future__ import annotations

import base64
import datetime
import difflib
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    json_format,
    message_factory,
    unknown_fields,
)
from google.protobuf.descriptor import (
    Descriptor,
    FieldDescriptor,
    FileDescriptor,
    MethodDescriptor,
    OneofDescriptor,
)
from google.protobuf.message import DecodeError, Message

from rpcmeter.errors import ReplyMismatch
from rpcmeter.protocols import templates
from rpcmeter.protocols.grpc import PREFIX, frame

SOURCES = ("proto", "protoset", "reflection")
WELL_KNOWN_PREFIX = "google.protobuf."
PROTOC_TIMEOUT_S = 120.0
_NEEDS = "needs {} to {}: pip install 'rpcmeter[grpc]'"


class SchemaError(ValueError):
    """A schema, a call or its data that cannot be used; the text is one line naming the place
    at fault (``data.location.latitude: expected int32, got "abc"``)."""


# ---- where the descriptors come from ------------------------------------------------------------


def well_known_include() -> Path:
    """The directory of the well-known ``.proto`` files that come with grpcio-tools."""
    try:
        import grpc_tools
    except ImportError:
        raise SchemaError(_NEEDS.format("grpcio-tools", "compile a .proto")) from None
    return Path(grpc_tools.__file__).parent / "_proto"


def compile_proto(path: Path, import_paths: Iterable[Path] = ()) -> bytes:
    """The ``FileDescriptorSet`` (with every import) of the ``.proto`` file at ``path``, compiled
    by grpcio-tools' protoc. SchemaError with protoc's first error line when it does not
    compile."""
    if not path.is_file():
        raise SchemaError(f"no such file {path}")
    imports = [p.resolve() for p in import_paths]
    for inc in imports:
        if not inc.is_dir():
            raise SchemaError(f"import path {inc} is not a directory")
    includes = [*map(str, imports), "."]  # "." is the file's directory (protoc runs there)
    with tempfile.TemporaryDirectory(prefix="rpcmeter-protoc-") as tmp:
        out = Path(tmp) / "set.pb"
        command = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            *[f"--proto_path={inc}" for inc in includes],
            f"--proto_path={well_known_include()}",
            f"--descriptor_set_out={out}",
            "--include_imports",
            path.name,  # its errors then name it as the suite does, without its directory
        ]
        try:
            done = subprocess.run(
                command,
                cwd=path.resolve().parent,
                capture_output=True,
                text=True,
                timeout=PROTOC_TIMEOUT_S,
                check=False,
                env={**os.environ, "PYTHONWARNINGS": "ignore"},
            )
        except subprocess.TimeoutExpired:
            raise SchemaError(f"protoc did not finish within {PROTOC_TIMEOUT_S:g} s") from None
        if done.returncode != 0 or not out.is_file():
            lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
            errors = [ln for ln in lines if not ln.lower().startswith("warning")]
            first = (errors or lines or [f"protoc exited with status {done.returncode}"])[0]
            raise SchemaError(f"does not compile: {first}")
        return out.read_bytes()


def read_protoset(path: Path) -> bytes:
    """The bytes of the protoset at ``path`` (checked to be a ``FileDescriptorSet`` when it is
    loaded, :func:`load_schema`)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise SchemaError(f"no such file {path}") from None
    except OSError as exc:
        raise SchemaError(f"cannot read {path}: {exc.strerror or exc}") from None


def _well_known_file(name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor of one of protobuf's own ``google/protobuf/*.proto`` files, from the
    protobuf library (None: not one of them)."""
    if not name.startswith("google/protobuf/"):
        return None
    module = "google.protobuf." + name.removeprefix("google/protobuf/").removesuffix(".proto")
    try:
        __import__(module.replace("/", ".") + "_pb2")
        found: FileDescriptor = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    return proto


def _ordered(files: Mapping[str, descriptor_pb2.FileDescriptorProto]) -> list[str]:
    """The names of ``files``, every file after its dependencies, otherwise by name."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise SchemaError(f"{name} depends on itself (an import cycle)")
        state[name] = 1
        for dep in sorted(files[name].dependency):
            if dep in files:
                visit(dep)
        state[name] = 2
        order.append(name)

    for name in sorted(files):
        visit(name)
    return order


@dataclass(frozen=True)
class Schema:
    """A loaded schema: its descriptors in canonical form (``files``, a serialized
    ``FileDescriptorSet``), where they came from and their SHA-256."""

    files: bytes
    source: str  # proto, protoset or reflection
    origin: str  # the file, or the server's address
    sha256: str
    undescribed: tuple[str, ...] = ()  # services a server lists but gives no descriptors of

    @functools.cached_property
    def pool(self) -> descriptor_pool.DescriptorPool:
        pool = descriptor_pool.DescriptorPool()
        for proto in descriptor_pb2.FileDescriptorSet.FromString(self.files).file:
            pool.Add(proto)
        return pool

    def file_names(self) -> list[str]:
        return [f.name for f in descriptor_pb2.FileDescriptorSet.FromString(self.files).file]

    def services(self) -> list[Any]:
        """Every service of the schema (ServiceDescriptor), by full name; reflection's own
        service left out."""
        found: dict[str, Any] = {}
        for name in self.file_names():
            for service in self.pool.FindFileByName(name).services_by_name.values():
                if not service.full_name.startswith("grpc.reflection."):
                    found[service.full_name] = service
        return [found[k] for k in sorted(found)]

    def methods(self) -> list[MethodDescriptor]:
        return [m for s in self.services() for m in s.methods]

    def describe(self) -> dict[str, Any]:
        """What the result records of it."""
        return {
            "source": self.source,
            "origin": self.origin,
            "sha256": self.sha256,
            "files": self.file_names(),
        }


def load_schema(data: bytes, source: str, origin: str, undescribed: Iterable[str] = ()) -> Schema:
    """A :class:`Schema` of a serialized ``FileDescriptorSet``; SchemaError when ``data`` is not
    one, or when a file's dependency is missing."""
    what = "a FileDescriptorSet (as protoc --descriptor_set_out --include_imports writes it)"
    try:
        parsed = descriptor_pb2.FileDescriptorSet.FromString(data)
    except (DecodeError, RuntimeError, ValueError):
        raise SchemaError(f"not {what}: its {len(data)} bytes do not parse as one") from None
    files = {f.name: f for f in parsed.file}
    if not files or not all(files) or len(unknown_fields.UnknownFieldSet(parsed)):
        raise SchemaError(f"not {what}: no file descriptors in its {len(data)} bytes")
    for proto in list(files.values()):
        for dep in proto.dependency:
            if dep not in files:
                known = _well_known_file(dep)
                if known is None:
                    raise SchemaError(
                        f"{proto.name} imports {dep}, which the descriptors do not hold "
                        "(a protoset needs --include_imports)"
                    )
                files[dep] = known
    canonical = descriptor_pb2.FileDescriptorSet()
    for name in _ordered(files):
        canonical.file.append(files[name])
    blob = canonical.SerializeToString(deterministic=True)
    schema = Schema(blob, source, origin, hashlib.sha256(blob).hexdigest(), tuple(undescribed))
    try:
        schema.pool  # noqa: B018 - builds the pool: each file must resolve
    except (TypeError, ValueError, KeyError) as exc:
        raise SchemaError(f"not {what}: {exc}") from None
    return schema


# ---- which method --------------------------------------------------------------------------------


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


# ---- JSON <-> messages ---------------------------------------------------------------------------


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


# ---- messages whose data holds placeholders ------------------------------------------------------

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


# ---- checking replies ----------------------------------------------------------------------------


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


# ---- a prepared call ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedCall:
    """A call compiled once (picklable: it travels to client processes): the method's
    ``path``, its ``kind`` (``unary``, or a stream mode), the pre-encoded ``request``, the
    ``expect`` to check replies with (JSON; None: none), the schema's descriptors (the reply's
    type is looked up there) and what the result records of the schema."""

    path: str
    kind: str
    request: bytes
    reply_type: str
    files: bytes = field(repr=False)
    schema: Mapping[str, Any] = field(default_factory=dict)
    expect: Mapping[str, Any] | None = None
    # the requests in turn when they are more than ``request`` (a data file's), or one whose
    # data holds placeholders (empty: ``request`` alone)
    messages: tuple[bytes | MessageTemplate, ...] = field(default=(), repr=False)
    expect_varies: bool = False  # ``expect`` holds placeholders (TemplatedExpect)

    @property
    def varies(self) -> bool:
        """Whether its requests or its check are not one fixed message and one fixed check."""
        return bool(self.messages) or self.expect_varies

    def entries(self) -> tuple[bytes | MessageTemplate, ...]:
        """The request messages, sent in turn (each fixed bytes or a template)."""
        return self.messages or (self.request,)

    def reply_check(self) -> FieldExpect | None:
        """The check of ``expect`` (None without one, or when it holds placeholders:
        :meth:`templated_check`); made in the process that checks."""
        if self.expect is None or self.expect_varies:
            return None
        return FieldExpect(_pool(self.files).FindMessageTypeByName(self.reply_type), self.expect)

    def templated_check(self) -> TemplatedExpect | None:
        """The check of an ``expect`` with placeholders (None: it has none)."""
        if self.expect is None or not self.expect_varies:
            return None
        return TemplatedExpect(
            _pool(self.files).FindMessageTypeByName(self.reply_type), self.expect, self.files
        )

    def describe(self) -> dict[str, Any]:
        """What the result records: the schema's source, origin and SHA-256, the call."""
        return {**self.schema, "call": self.path.removeprefix("/")}

    def loaded_schema(self) -> Schema:
        """The schema the call was compiled from."""
        return load_schema(self.files, str(self.schema["source"]), str(self.schema["origin"]))


@functools.lru_cache(maxsize=8)
def _pool(files: bytes) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for proto in descriptor_pb2.FileDescriptorSet.FromString(files).file:
        pool.Add(proto)
    return pool


def compile_call(
    schema: Schema,
    call: str,
    data: Any = None,
    expect: Any = None,
    where: tuple[str, str, str] = ("call", "data", "expect"),
    lines: Sequence[tuple[Any, str]] = (),
) -> PreparedCall:
    """Compile ``call`` of ``schema`` with its request ``data`` (JSON; None: the empty message),
    or the requests of ``lines`` (a data file's: each value and where it is, sent in turn), and
    ``expect``; SchemaError naming the option at fault (``where``: the names to give the call,
    data and expect in errors). Data and ``expect`` may hold placeholders
    (:func:`compile_message`)."""
    try:
        method = find_method(schema, call)
    except SchemaError as exc:
        raise SchemaError(f"{where[0]}: {exc}") from None
    if lines:
        messages = [compile_message(method.input_type, v, f"{at}: data") for v, at in lines]
    else:
        messages = [compile_message(method.input_type, data or {}, where[1])]
    expect_varies = False
    if expect is not None:
        expect = plain(expect)
        if not isinstance(expect, Mapping):
            raise SchemaError(
                f"{where[2]}: expected a table of {method.output_type.full_name} fields, "
                f"got {show(expect)}"
            )
        expect_varies = isinstance(
            compile_message(method.output_type, expect, where[2]), MessageTemplate
        )
    first = messages[0]
    return PreparedCall(
        path=f"/{method.containing_service.full_name}/{method.name}",
        kind=streaming(method),
        request=first if isinstance(first, bytes) else b"",
        reply_type=method.output_type.full_name,
        files=schema.files,
        schema=schema.describe() | {"sha256": schema.sha256},
        expect=expect,
        messages=tuple(messages) if len(messages) > 1 or not isinstance(first, bytes) else (),
        expect_varies=expect_varies,
    )


# ---- server reflection (sans-I/O) ---------------------------------------------------------------

# the reflection service's method, newest first; its two versions' messages are the same
REFLECTION_PATHS = (
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
)


class ReflectionSession:
    """Asks a server's reflection service for every service's files: feed it each reply to
    the request it gave (:meth:`next_request`), until it gives none; then :meth:`file_set`."""

    def __init__(self, host: str = "") -> None:
        try:
            from grpc_reflection.v1alpha import reflection_pb2
        except ImportError:
            raise SchemaError(_NEEDS.format("grpcio-reflection", "ask a server")) from None

        self.pb = reflection_pb2
        self.host = host
        self.files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
        self.asked: set[tuple[str, str]] = set()
        self.queue: list[Any] = []
        self.services: list[str] = []
        self.undescribed: list[str] = []  # services listed whose files the server does not give
        self.ask("list_services", "*")

    def ask(self, kind: str, value: str) -> None:
        if (kind, value) in self.asked:
            return
        self.asked.add((kind, value))
        self.queue.append(self.pb.ServerReflectionRequest(host=self.host, **{kind: value}))

    def next_request(self) -> bytes | None:
        """The next request to send (None: done)."""
        return self.queue.pop(0).SerializeToString() if self.queue else None

    def feed(self, data: bytes) -> None:
        """One reply of the server's (SchemaError when it does not parse)."""
        try:
            reply = self.pb.ServerReflectionResponse.FromString(data)
        except (DecodeError, RuntimeError, ValueError):
            raise SchemaError(
                f"reflection: the server's reflection reply does not parse ({len(data)} bytes "
                "that are not a ServerReflectionResponse)"
            ) from None
        which = reply.WhichOneof("message_response")
        if which == "error_response":
            asked = reply.original_request
            if asked.file_by_filename:
                return  # load_schema takes a well-known one from protobuf, or names it
            if asked.file_containing_symbol in self.services:
                self.undescribed.append(asked.file_containing_symbol)
                return  # listed, not described (a service without descriptors of its own)
            err = reply.error_response
            raise SchemaError(
                "reflection: the server cannot give the list of its services: "
                f"{err.error_message or err.error_code}"
            )
        if which == "list_services_response":
            self.services = [s.name for s in reply.list_services_response.service]
            for name in self.services:
                if not name.startswith("grpc.reflection."):
                    self.ask("file_containing_symbol", name)
        elif which == "file_descriptor_response":
            for blob in reply.file_descriptor_response.file_descriptor_proto:
                try:
                    proto = descriptor_pb2.FileDescriptorProto.FromString(blob)
                except (DecodeError, RuntimeError, ValueError):
                    raise SchemaError(
                        "reflection: the server's reflection reply does not parse (a file "
                        "descriptor that is not a FileDescriptorProto)"
                    ) from None
                self.files.setdefault(proto.name, proto)
            for proto in list(self.files.values()):
                for dep in proto.dependency:
                    if dep not in self.files:
                        self.ask("file_by_filename", dep)

    def file_set(self) -> bytes:
        """The files it was given, as a serialized ``FileDescriptorSet``."""
        if not self.files:
            listed = ", ".join(self.services) or "none"
            raise SchemaError(
                f"reflection: the server describes none of the services it lists ({listed})"
            )
        out = descriptor_pb2.FileDescriptorSet()
        out.file.extend(self.files[n] for n in sorted(self.files))
        return bytes(out.SerializeToString())
