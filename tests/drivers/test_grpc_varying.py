"""gRPC requests that vary, against a grpcio server with generated stubs
(``tests/support/schema_server.py``): a numeric field filled from ``{{request_number}}``, a
``{{uuid}}`` in metadata, both seen by the server exactly once per call, with both clients;
``expect`` with placeholders; data files of messages; a mix of calls recorded apart; the
message templates themselves (fields set per request joined with the fixed ones)."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.model import Result
from rpcmeter.plan.load import build_suite
from rpcmeter.protocols import grpc_schema as gs
from rpcmeter.protocols.grpc import frame
from rpcmeter.protocols.templates import Expr
from rpcmeter.run.execute import run_suite

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
ROUTE_GUIDE = ROOT / "benchmarks" / "greeter" / "route_guide.proto"
KITCHEN = ROOT / "tests" / "support" / "protos" / "kitchen.proto"


def server(*flags: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.support.schema_server", "--port", "{port}", *flags]
    return {"command": command, "cwd": str(ROOT), "ready_timeout_s": 60}


def run(raw: dict[str, Any], where: Path | None = None) -> Result:
    suite = build_suite({"repeat": 1, **raw}, str(where) if where else "<suite>")
    if where is not None:
        suite.path = str(where)
    return run_suite(suite)


def get_features(
    tmp_path: Path, options: dict[str, Any], load: dict[str, Any]
) -> tuple[Any, list[dict[str, Any]]]:
    """A GetFeature case against the schema server, which records what each call carried:
    the case and the records."""
    record = tmp_path / "seen.jsonl"
    result = run(
        {
            "target": {
                "driver": "grpc",
                "server": server("--record", str(record)),
                "options": {
                    "proto": str(ROUTE_GUIDE),
                    "call": "routeguide.RouteGuide/GetFeature",
                    **options,
                },
            },
            "workloads": {"GetFeature": {"kind": "noop"}},
            "load": load,
        }
    )
    (case,) = result.cases
    return case, [json.loads(line) for line in record.read_text().splitlines()]


@pytest.mark.parametrize("client", ["h2", "grpcio"])
def test_numbers_and_uuids_reach_the_server_once_each(client: str, tmp_path: Path) -> None:
    options = {
        "client": client,
        "data": {"latitude": "{{request_number}}", "longitude": -746143763},
        "metadata": {"x-request-id": "{{uuid}}"},
        "expect": {"location": {"latitude": "{{request_number}}"}},
    }
    load = {"clients": 2, "concurrency": 3, "requests": 30, "warmup": 2}
    case, seen = get_features(tmp_path, options, load)
    assert case.status == "ok" and case.ok == 2 * 3 * 30, (case.reason, case.error_samples)
    sent = 2 * 3 * 32
    assert sorted(s["latitude"] for s in seen) == list(range(sent))
    ids = {s["request_id"] for s in seen}
    assert len(ids) == sent and all(uuid.UUID(i).version == 4 for i in ids)


def test_requests_made_again_in_place_reach_the_server_whole(tmp_path: Path) -> None:
    """The HTTP/2 client's usual varying calls (fixed metadata, no deadline: each loop's
    request made again in place, its message spliced or its varying field serialized alone):
    every number reaches the server once, and an echoed string field is each request's own."""
    load = {"clients": 1, "concurrency": 3, "requests": 40, "warmup": 0}
    options = {
        "data": {"latitude": "{{request_number}}", "longitude": 5},
        "metadata": {"x-request-id": "fixed"},
    }
    case, seen = get_features(tmp_path, options, load)
    assert case.status == "ok" and case.ok == 3 * 40, (case.reason, case.error_samples)
    assert sorted(s["latitude"] for s in seen) == list(range(3 * 40))
    assert {s["request_id"] for s in seen} == {"fixed"}
    echo = {"proto": str(KITCHEN), "call": "kitchen.Kitchen/Echo"}
    for data, expect in [
        ({"id": "o-{{request_number}}", "voucher": 3}, {"id": "o-{{request_number}}"}),
        ({"id": "{{uuid}}", "big": 1}, {"id": "{{uuid}}"}),
        ({"id": "{{request_number}}", "big": 1}, {"big": 1}),  # the number alone: one call
    ]:
        result = run(
            {
                "target": {
                    "driver": "grpc",
                    "server": server(),
                    "options": {**echo, "data": data, "expect": expect},
                },
                "workloads": {"Echo": {"kind": "noop"}},
                "load": load,
            }
        )
        (case,) = result.cases
        assert case.status == "ok" and case.ok == 3 * 40, (case.reason, case.error_samples)


def test_expect_with_placeholders_names_the_wrong_field(tmp_path: Path) -> None:
    """Kitchen/Echo sends the order back: an ``expect`` of the request's own values passes,
    one of other values fails on every call, naming the field."""
    options = {"proto": str(KITCHEN), "call": "kitchen.Kitchen/Echo"}
    data = {
        "id": "o-{{request_number}}",
        "big": "{{request_number}}",
        "address": {"street": "{{random_string(6)}}"},
    }
    result = run(
        {
            "target": {"driver": "grpc", "server": server(), "options": options},
            "variants": {
                "right": {"options": {"data": data, "expect": data}},
                "wrong": {
                    "options": {
                        "data": data,
                        "expect": {"big": "{{client}}", "id": "o-{{request_number}}"},
                    }
                },
            },
            "workloads": {"echo": {"kind": "noop"}},
            "load": {"concurrency": 2, "requests": 20, "warmup": 1},
        }
    )
    cases = {c.variant: c for c in result.cases}
    assert cases["right"].status == "ok" and cases["right"].ok == 40
    wrong = cases["wrong"]
    assert wrong.errors == {"mismatch": 40} or wrong.errors == {"mismatch": 39}  # request 0: big 0
    assert wrong.error_samples["mismatch"].startswith("big: expected ")


def test_data_file_and_mix(tmp_path: Path) -> None:
    """A ``.jsonl`` data file of points sent in turn (a bad line names the file and line), and
    a mix of two calls whose figures are kept apart."""
    points = tmp_path / "points.jsonl"
    points.write_text(
        "".join(
            json.dumps({"latitude": 407838351 + i, "longitude": -746143763}) + "\n"
            for i in range(4)
        )
    )
    suite_file = tmp_path / "suite.toml"
    suite_file.write_text("")
    result = run(
        {
            "target": {
                "driver": "grpc",
                "server": server(),
                "options": {"proto": str(ROUTE_GUIDE)},
            },
            "workloads": {
                "mixed": {
                    "kind": "mix",
                    "calls": [
                        {
                            "name": "point",
                            "weight": 3,
                            "call": "routeguide.RouteGuide/GetFeature",
                            "data_file": "points.jsonl",
                        },
                        {
                            "name": "note",
                            "weight": 1,
                            "call": "routeguide.RouteGuide/GetFeature",
                            "data": {"latitude": "{{random_int(1, 9)}}"},
                            "expect": {"location": {"latitude": 10}},
                        },
                    ],
                }
            },
            "load": {"concurrency": 2, "requests": 200, "warmup": 0},
        },
        suite_file,
    )
    (case,) = result.cases
    assert case.status == "ok", case.reason
    calls = {c.name: c for c in case.calls or []}
    assert calls["point"].errors == {} and calls["point"].ok == calls["point"].requests > 250
    assert calls["note"].errors == {"mismatch": calls["note"].requests}  # latitude is 1-9, not 10
    assert calls["point"].requests + calls["note"].requests == case.requests == 400
    points.write_text('{"latitude": 1}\n{"latitude": "north"}\n')
    with pytest.raises(Exception, match=r"points\.jsonl:2: data\.latitude: expected int32"):
        build_suite(
            {
                "target": {
                    "driver": "grpc",
                    "server": server(),
                    "options": {
                        "proto": str(ROUTE_GUIDE),
                        "call": "routeguide.RouteGuide/GetFeature",
                        "data_file": "points.jsonl",
                    },
                },
                "workloads": {"g": {"kind": "noop"}},
            },
            str(suite_file),
        )


def test_message_templates_join_fixed_and_varying_fields() -> None:
    schema = gs.load_schema(gs.compile_proto(KITCHEN), "proto", "kitchen.proto")
    desc = schema.pool.FindMessageTypeByName("kitchen.Order")
    data = {
        "id": "o-{{request_number}}",
        "address": {"street": "{{request_number}}", "geo": {"lat": "{{random_int(1, 9)}}"}},
        "big": "{{request_number}}",
        "voucher": 3,
    }
    made = gs.compile_message(desc, data)
    assert isinstance(made, gs.MessageTemplate) and made.data is None
    assert made.exprs == (Expr("request_number"), Expr("random_int", (1, 9)))
    fill = made.filler(schema.files, made.exprs)
    got = gs.message_class(desc).FromString(fill((12, 4)))  # type: ignore[attr-defined]
    want = gs.RequestEncoder(desc).message(
        {"id": "o-12", "address": {"street": "12", "geo": {"lat": 4}}, "big": 12, "voucher": 3}
    )
    assert got == want
    framed = made.filler(schema.files, made.exprs, framed=True)
    assert framed((12, 4)) == frame(fill((12, 4))) and framed((7, 1)) == frame(fill((7, 1)))
    # a placeholder inside a repeated field: the whole message made per request
    slow = gs.compile_message(
        desc, {"items": [{"name": "tea-{{loop}}"}], "counts": {"a": "{{client}}"}}
    )
    assert isinstance(slow, gs.MessageTemplate) and slow.data is not None
    got = gs.message_class(desc).FromString(slow.filler(schema.files, slow.exprs)((2, 5)))  # type: ignore[attr-defined]
    assert got.items[0].name == "tea-2" and got.counts["a"] == 5
    for bad, message in [
        ({"default_size": "{{client}}"}, r"data\.default_size: a field of type enum"),
        ({"big": "n{{client}}"}, r"data\.big: a uint64 field takes one numeric placeholder alone"),
        ({"big": "{{uuid}}"}, "takes one numeric placeholder"),
        ({"big": "{{random_int(-1, 5)}}"}, "goes beyond the uint64 range"),
        ({"note": "{{uuid}}"}, "bytes .base64. cannot take a placeholder"),
        ({"counts": {"{{uuid}}": 1}}, r"a map key cannot take a placeholder"),
        ({"address": {"street": "{{nope}}"}}, r"data\.address\.street: unknown placeholder"),
    ]:
        with pytest.raises(gs.SchemaError, match=message):
            gs.compile_message(desc, bad)


@pytest.mark.parametrize(
    ("data", "varying"),
    [
        ({"id": "{{request_number}}"}, {"id": "{n}"}),
        ({"id": "o-{{request_number}}", "big": 5}, {"id": "o-{n}"}),
        ({"id": "{{uuid}}/{{loop}}", "voucher": 3, "address": {"street": "x"}}, {"id": "{u}/2"}),
        ({"address": {"street": "{{request_number}}"}, "id": "a"}, {"address": {"street": "{n}"}}),
        ({"big": "{{request_number}}", "id": "fixed"}, {"big": "{n}"}),
    ],
)
def test_spliced_messages_are_protobufs_own_bytes(data: Any, varying: Any) -> None:
    """A message made as its fixed part, then the varying field's bytes (spliced: its tag and
    length from protobuf once per size): protobuf's own serialization of the fixed part and of
    the varying fields alone, whatever the varying text's size (a length of one varint byte and
    of two) and characters."""
    schema = gs.load_schema(gs.compile_proto(KITCHEN), "proto", "kitchen.proto")
    desc = schema.pool.FindMessageTypeByName("kitchen.Order")
    encoder = gs.RequestEncoder(desc)
    made = gs.compile_message(desc, data)
    assert isinstance(made, gs.MessageTemplate)
    spliced = made.splice(schema.files, made.exprs)
    assert spliced is not None
    fmt, piece, before = spliced
    assert (fmt is not None) == (len(made.leaves) == 1 and made.leaves[0].path == ("id",))
    fixed = {k: v for k, v in data.items() if k not in varying}
    for n, text in [(0, "é"), (7, "x" * 150), (12345678901234, "ü" * 70), (99, "")]:
        by_name: dict[str, int | str] = {"request_number": n, "uuid": text, "loop": 2}
        values = tuple(by_name[e.name] for e in made.exprs)
        filled = json.loads(json.dumps(varying).replace("{n}", str(n)).replace("{u}", text))
        p = piece(values)
        got = before(len(p)) + p
        assert got == made.fixed + encoder.encode(filled), (n, text)
        assert gs.message_class(desc).FromString(got) == encoder.message({**fixed, **filled})  # type: ignore[attr-defined]
