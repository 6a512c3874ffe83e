"""A call compiled once (:func:`compile_call`) into a :class:`PreparedCall`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rpcmeter.protocols.grpc_schema.checks import FieldExpect, TemplatedExpect
from rpcmeter.protocols.grpc_schema.message_templates import MessageTemplate, compile_message
from rpcmeter.protocols.grpc_schema.messages import plain, show
from rpcmeter.protocols.grpc_schema.methods import find_method, streaming
from rpcmeter.protocols.grpc_schema.source import Schema, SchemaError, _pool, load_schema


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
