"""Where a schema's descriptors come from: a ``.proto`` file, a protoset, or a server's
reflection; :func:`load_schema` makes them a :class:`Schema`."""

from __future__ import annotations

import functools
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    unknown_fields,
)
from google.protobuf.descriptor import (
    FileDescriptor,
    MethodDescriptor,
)
from google.protobuf.message import DecodeError

SOURCES = ("proto", "protoset", "reflection")
WELL_KNOWN_PREFIX = "google.protobuf."
PROTOC_TIMEOUT_S = 120.0
_NEEDS = "needs {} to {}: pip install 'rpcmeter[grpc]'"


class SchemaError(ValueError):
    """A schema, a call or its data that cannot be used; the text is one line naming the place
    at fault (``data.location.latitude: expected int32, got "abc"``)."""


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


@functools.lru_cache(maxsize=8)
def _pool(files: bytes) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for proto in descriptor_pb2.FileDescriptorSet.FromString(files).file:
        pool.Add(proto)
    return pool
