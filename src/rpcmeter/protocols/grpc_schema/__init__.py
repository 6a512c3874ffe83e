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

from rpcmeter.protocols.grpc_schema.calls import (
    PreparedCall,
    compile_call,
)
from rpcmeter.protocols.grpc_schema.checks import (
    FieldExpect,
    TemplatedExpect,
)
from rpcmeter.protocols.grpc_schema.message_templates import (
    Fills,
    Leaf,
    MessageTemplate,
    Placed,
    compile_message,
    skeleton,
    typed_skeleton,
)
from rpcmeter.protocols.grpc_schema.messages import (
    RequestEncoder,
    locate,
    message_class,
    plain,
    show,
    type_name,
)
from rpcmeter.protocols.grpc_schema.methods import (
    find_method,
    listing,
    method_names,
    signature,
    streaming,
)
from rpcmeter.protocols.grpc_schema.reflection import (
    REFLECTION_PATHS,
    ReflectionSession,
)
from rpcmeter.protocols.grpc_schema.source import (
    PROTOC_TIMEOUT_S,
    SOURCES,
    WELL_KNOWN_PREFIX,
    Schema,
    SchemaError,
    compile_proto,
    load_schema,
    read_protoset,
    well_known_include,
)

__all__ = [
    "PROTOC_TIMEOUT_S",
    "REFLECTION_PATHS",
    "SOURCES",
    "WELL_KNOWN_PREFIX",
    "FieldExpect",
    "Fills",
    "Leaf",
    "MessageTemplate",
    "Placed",
    "PreparedCall",
    "ReflectionSession",
    "RequestEncoder",
    "Schema",
    "SchemaError",
    "TemplatedExpect",
    "compile_call",
    "compile_message",
    "compile_proto",
    "find_method",
    "listing",
    "load_schema",
    "locate",
    "message_class",
    "method_names",
    "plain",
    "read_protoset",
    "show",
    "signature",
    "skeleton",
    "streaming",
    "type_name",
    "typed_skeleton",
    "well_known_include",
]
