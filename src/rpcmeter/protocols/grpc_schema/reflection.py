"""Server reflection as a sans-I/O session that a driver feeds."""

from __future__ import annotations

from typing import Any

from google.protobuf import (
    descriptor_pb2,
)
from google.protobuf.message import DecodeError

from rpcmeter.protocols.grpc_schema.source import _NEEDS, SchemaError

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
