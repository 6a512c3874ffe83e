"""Protobuf schemas for gRPC calls (rpcmeter.protocols.grpc_schema), without sockets: .proto files
compiled by grpcio-tools' protoc, protosets, requests encoded from JSON and the errors that name
the field path, replies checked field by field, the sans-I/O reflection session."""

from __future__ import annotations

import datetime
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, json_format
from grpc_reflection.v1alpha import reflection_pb2

from rpcmeter.protocols import grpc_schema as gs

ROOT = Path(__file__).resolve().parents[1]
KITCHEN = ROOT / "tests" / "support" / "protos" / "kitchen.proto"
ROUTE_GUIDE = ROOT / "benchmarks" / "greeter" / "route_guide.proto"

ORDER = {
    "id": "A-17",
    "items": [
        {"name": "tea", "size": "LARGE", "extras": ["milk", "honey"]},
        {"name": "cake", "size": "SMALL"},
    ],
    "counts": {"tea": 2, "cake": 1},
    "favourites": {"sunday": {"name": "scone", "size": "SMALL"}},
    "address": {"street": "1 High Street", "geo": {"lat": 51.5, "lng": -0.12}},
    "voucher": "9007199254740993",  # int64 beyond a double, as JSON text
    "placed": "2024-01-02T03:04:05.250Z",
    "wait": "1.5s",
    "default_size": "LARGE",
    "note": "aGVsbG8=",
    "big": "18446744073709551615",
}


@pytest.fixture(scope="module")
def kitchen() -> gs.Schema:
    return gs.load_schema(gs.compile_proto(KITCHEN), "proto", "kitchen.proto")


@pytest.fixture(scope="module")
def order(kitchen: gs.Schema) -> Any:
    return kitchen.pool.FindMessageTypeByName("kitchen.Order")


def test_a_message_of_every_shape_encodes_as_protobuf_decodes_it(order: Any) -> None:
    body = gs.RequestEncoder(order).encode(ORDER)
    decoded = gs.message_class(order)().FromString(body)
    assert decoded.items[0].extras == ["milk", "honey"]
    assert decoded.items[1].size == 1  # SMALL
    assert dict(decoded.counts) == {"tea": 2, "cake": 1}
    assert decoded.favourites["sunday"].name == "scone"
    assert decoded.address.geo.lat == 51.5
    assert decoded.WhichOneof("payment") == "voucher"
    assert decoded.voucher == 9007199254740993
    assert decoded.placed.seconds == 1704164645 and decoded.placed.nanos == 250_000_000
    assert decoded.wait.seconds == 1 and decoded.wait.nanos == 500_000_000
    assert decoded.note == b"hello" and decoded.big == 2**64 - 1
    back = json_format.MessageToDict(decoded, preserving_proto_field_name=True)
    assert back == {**ORDER, "wait": "1.500s"}  # protobuf's own form of the same duration


def test_toml_dates_and_camel_case_names_are_taken(order: Any) -> None:
    when = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    body = gs.RequestEncoder(order).encode({"placed": when, "defaultSize": "SMALL"})
    decoded = gs.message_class(order)().FromString(body)
    assert decoded.placed.seconds == 1704164645 and decoded.default_size == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"address": {"geo": {"lat": "north"}}},
            'data.address.geo.lat: expected double, got "north"',
        ),
        (
            {"items": [{}, {"size": "HUGE"}]},
            "data.items[1].size: expected enum kitchen.Size (SIZE_UNSPECIFIED, SMALL, LARGE), "
            'got "HUGE"',
        ),
        ({"counts": {"tea": "x"}}, 'data.counts["tea"]: expected int32 (keys: string), got "x"'),
        ({"card": "a", "cash": True}, "data.cash: card and cash are both of oneof payment"),
        ({"placed": "yesterday"}, "data.placed: expected google.protobuf.Timestamp (RFC 3339"),
        ({"big": -1}, "data.big: expected uint64, got -1 (out of range)"),
        ({"items": [{"extras": [1]}]}, "data.items[0].extras[0]: expected string, got 1"),
        ({"idd": "x"}, "data.idd: kitchen.Order has no field 'idd' (did you mean 'id'?"),
        ({"items": {"name": "x"}}, "data.items: expected an array of kitchen.Item"),
        ({"address": "1 High Street"}, "data.address: expected a table of kitchen.Address"),
        ([1, 2], "data: expected a table of kitchen.Order fields, got [1, 2]"),
    ],
)
def test_data_that_does_not_fit_names_the_field_path(order: Any, data: Any, message: str) -> None:
    with pytest.raises(gs.SchemaError) as info:
        gs.RequestEncoder(order).encode(data)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


def test_the_issue_example_names_latitude() -> None:
    schema = gs.load_schema(gs.compile_proto(ROUTE_GUIDE), "proto", "route_guide.proto")
    feature = schema.pool.FindMessageTypeByName("routeguide.Feature")
    with pytest.raises(
        gs.SchemaError, match=r'^data.location.latitude: expected int32, got "abc"$'
    ):
        gs.RequestEncoder(feature).encode({"location": {"latitude": "abc"}})
    with pytest.raises(gs.SchemaError, match=r"latitude: expected int32, got 4294967296 \(out of"):
        gs.RequestEncoder(feature).encode({"location": {"latitude": 2**32}})


class Counting:
    """A message class whose decodes are counted."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls
        self.decodes = 0

    def FromString(self, body: bytes) -> Any:
        self.decodes += 1
        return self.cls.FromString(body)


@pytest.fixture
def reply(order: Any) -> bytes:
    return gs.RequestEncoder(order).encode(ORDER)


@pytest.mark.parametrize(
    ("expect", "problem"),
    [
        ({"id": "A-17"}, None),
        ({"address": {"geo": {"lng": -0.12}}}, None),
        ({"address": {}}, None),  # present
        ({"items": [{}, {"name": "cake"}]}, None),
        ({"counts": {"tea": 2}}, None),  # a subset of the keys
        ({"favourites": {"sunday": {"size": "SMALL"}}}, None),
        ({"placed": "2024-01-02T04:04:05.250+01:00", "wait": "1.500s"}, None),  # the same times
        ({"voucher": 9007199254740993, "big": "18446744073709551615"}, None),
        ({"address": {"geo": {"lng": 7}}}, "address.geo.lng: expected 7.0, got -0.12"),
        ({"items": [{}, {"size": "LARGE"}]}, 'items[1].size: expected "LARGE", got "SMALL"'),
        ({"items": [{}]}, "items: expected 1 elements, got 2"),
        ({"counts": {"tea": 3}}, 'counts["tea"]: expected 3, got 2'),
        ({"counts": {"jam": 1}}, 'counts["jam"]: expected 1, got no such key'),
        ({"card": "x"}, 'card: expected "x", got voucher set instead'),
        ({"wait": "2s"}, 'wait: expected "2s", got "1.500s"'),
        ({"note": "aGk="}, 'note: expected "aGk=", got "aGVsbG8="'),
    ],
)
def test_expect_compares_the_fields_it_names(
    order: Any, reply: bytes, expect: dict[str, Any], problem: str | None
) -> None:
    check = gs.FieldExpect(order, expect)
    assert check.problem(reply) == problem
    got = check(reply)
    assert (got is None) == (problem is None)
    if got is not None:
        assert str(got) == problem


def test_expect_decodes_only_replies_that_differ_from_the_last_match(
    order: Any, reply: bytes
) -> None:
    check = gs.FieldExpect(order, {"id": "A-17"})
    counting = Counting(check.cls)
    check.cls = counting  # type: ignore[assignment]
    other = gs.RequestEncoder(order).encode({**ORDER, "id": "B-2"})
    for body in (reply, reply, reply, other, other, reply):
        if body != check.last:  # what the drivers do before calling the check
            check(body)
    # reply (matches), other (does not: decoded once, then known), reply is still the last match
    assert counting.decodes == 2
    assert check.last == reply
    assert str(check(other)) == 'id: expected "A-17", got "B-2"' and counting.decodes == 2
    assert str(check(b"\xff\xff")).startswith("a reply that is not a kitchen.Order")


def test_expect_with_a_field_the_reply_lacks_is_an_error(order: Any) -> None:
    with pytest.raises(gs.SchemaError, match=r"^expect.address.town: kitchen.Address has no"):
        gs.FieldExpect(order, {"address": {"town": "x"}})


def test_methods_are_found_by_either_spelling_or_the_closest_are_named(
    kitchen: gs.Schema,
) -> None:
    for name in ("kitchen.Kitchen/Place", "kitchen.Kitchen.Place", "/kitchen.Kitchen/Place"):
        assert gs.find_method(kitchen, name).full_name == "kitchen.Kitchen.Place"
    assert gs.streaming(gs.find_method(kitchen, "kitchen.Kitchen/Stream")) == "bidi"
    with pytest.raises(gs.SchemaError) as info:
        gs.find_method(kitchen, "kitchen.Kitchen/Plase")
    assert "closest: kitchen.Kitchen/Place" in str(info.value)


def test_a_call_compiles_once_and_travels_pickled(kitchen: gs.Schema, reply: bytes) -> None:
    call = gs.compile_call(kitchen, "kitchen.Kitchen.Echo", ORDER, {"items": [{}, {}]})
    assert call.path == "/kitchen.Kitchen/Echo" and call.kind == "unary"
    assert call.request == reply
    copy = pickle.loads(pickle.dumps(call))
    check = copy.reply_check()
    assert check is not None and check(reply) is None
    assert copy.describe()["sha256"] == kitchen.sha256
    assert copy.describe()["call"] == "kitchen.Kitchen/Echo"
    with pytest.raises(gs.SchemaError, match=r"^expect.items: expected an array"):
        gs.compile_call(kitchen, "kitchen.Kitchen/Echo", {}, {"items": 3})


def test_a_proto_that_does_not_compile_gives_protocs_first_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.proto"
    bad.write_text('syntax = "proto3";\nmessage A {\n  int32 x = 1\n}\nmessage B { C c = 1; }\n')
    with pytest.raises(gs.SchemaError) as info:
        gs.compile_proto(bad)
    assert str(info.value).startswith("does not compile: bad.proto:4:1: Expected")
    assert "\n" not in str(info.value)
    with pytest.raises(gs.SchemaError, match="no such file"):
        gs.compile_proto(tmp_path / "nope.proto")


def test_imports_resolve_through_import_paths(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "geo.proto").write_text(
        'syntax = "proto3";\npackage geo;\nmessage P { int32 x = 1; }\n'
    )
    (tmp_path / "api.proto").write_text(
        'syntax = "proto3";\npackage api;\nimport "geo.proto";\n'
        "service S { rpc M(geo.P) returns (geo.P); }\n"
    )
    with pytest.raises(gs.SchemaError, match=r"geo\.proto"):
        gs.compile_proto(tmp_path / "api.proto")
    schema = gs.load_schema(
        gs.compile_proto(tmp_path / "api.proto", [tmp_path / "shared"]), "proto", "api.proto"
    )
    assert gs.method_names(schema) == ["api.S/M"]


def test_a_protoset_equals_its_proto_and_the_committed_one_is_current(tmp_path: Path) -> None:
    compiled = gs.load_schema(gs.compile_proto(ROUTE_GUIDE), "proto", "x")
    committed = gs.load_schema(
        gs.read_protoset(ROUTE_GUIDE.with_suffix(".protoset")), "protoset", "x"
    )
    assert committed.files == compiled.files and committed.sha256 == compiled.sha256


def test_what_is_not_a_file_descriptor_set_is_refused(tmp_path: Path) -> None:
    for data in (b"", b"hello world", KITCHEN.read_bytes(), b"\x08\x01"):
        with pytest.raises(gs.SchemaError, match=r"^not a FileDescriptorSet"):
            gs.load_schema(data, "protoset", "x")


def test_a_protoset_without_imports_takes_well_known_types_from_protobuf() -> None:
    full = descriptor_pb2.FileDescriptorSet.FromString(gs.compile_proto(KITCHEN))
    alone = descriptor_pb2.FileDescriptorSet(
        file=[f for f in full.file if f.name == "kitchen.proto"]
    )
    schema = gs.load_schema(alone.SerializeToString(), "protoset", "x")
    assert "google/protobuf/timestamp.proto" in schema.file_names()
    assert gs.find_method(schema, "kitchen.Kitchen/Place").output_type.name == "Receipt"
    other = descriptor_pb2.FileDescriptorProto(name="a.proto", dependency=["b.proto"])
    with pytest.raises(
        gs.SchemaError, match=r"a.proto imports b.proto, which .* --include_imports"
    ):
        gs.load_schema(descriptor_pb2.FileDescriptorSet(file=[other]).SerializeToString(), "p", "x")


def test_the_skeleton_is_data_the_message_takes(order: Any) -> None:
    skeleton = gs.skeleton(order)
    assert skeleton["items"] == [{"name": "", "size": "SIZE_UNSPECIFIED", "extras": [""]}]
    assert skeleton["placed"] == "1970-01-01T00:00:00Z" and skeleton["wait"] == "0s"
    assert "card" in skeleton and "voucher" not in skeleton  # the first of the oneof
    gs.RequestEncoder(order).encode(skeleton)  # it encodes


def reflection_replies(
    session: gs.ReflectionSession, files: dict[str, descriptor_pb2.FileDescriptorProto]
) -> Iterator[bytes]:
    """What a server holding ``files`` (and serving kitchen.Kitchen) answers each request."""
    while (data := session.next_request()) is not None:
        request = reflection_pb2.ServerReflectionRequest.FromString(data)
        out = reflection_pb2.ServerReflectionResponse(original_request=request)
        which = request.WhichOneof("message_request")
        if which == "list_services":
            out.list_services_response.service.add(name="kitchen.Kitchen")
            out.list_services_response.service.add(name="grpc.reflection.v1.ServerReflection")
        elif which == "file_containing_symbol" and "kitchen.proto" in files:
            out.file_descriptor_response.file_descriptor_proto.append(
                files["kitchen.proto"].SerializeToString()
            )
        elif request.file_by_filename in files:
            out.file_descriptor_response.file_descriptor_proto.append(
                files[request.file_by_filename].SerializeToString()
            )
        else:
            out.error_response.error_code = 5
            out.error_response.error_message = "not found"
        yield out.SerializeToString()


def test_the_reflection_session_gathers_a_service_and_its_imports(kitchen: gs.Schema) -> None:
    files = {f.name: f for f in descriptor_pb2.FileDescriptorSet.FromString(kitchen.files).file}
    session = gs.ReflectionSession()
    for reply in reflection_replies(session, files):
        session.feed(reply)
    schema = gs.load_schema(session.file_set(), "reflection", "v1")
    assert schema.sha256 == kitchen.sha256
    # a server that cannot give a well-known file: protobuf's own is taken
    del files["google/protobuf/duration.proto"]
    session = gs.ReflectionSession()
    for reply in reflection_replies(session, files):
        session.feed(reply)
    assert gs.load_schema(session.file_set(), "reflection", "v1").sha256 == kitchen.sha256
    # nor the service's own file: the service is listed but not described
    session = gs.ReflectionSession()
    del files["kitchen.proto"]
    for reply in reflection_replies(session, files):
        session.feed(reply)
    assert session.undescribed == ["kitchen.Kitchen"]
    with pytest.raises(gs.SchemaError) as info:
        session.file_set()
    assert str(info.value) == (
        "reflection: the server describes none of the services it lists (kitchen.Kitchen, "
        "grpc.reflection.v1.ServerReflection)"
    )
