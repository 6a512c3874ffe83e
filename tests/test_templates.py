"""Request templates (rpcmeter.protocols.templates), data files, rotations and the weighted draw
of a mix (rpcmeter.protocols.request_data): parsing and its one-line errors, the values each
placeholder takes, numbering distinct across loops, formats that give the same bytes as
filling the text by hand."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter as Tally
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.drivers.varying import Fill, LoopState, source
from rpcmeter.protocols.http_request import (
    HttpRequest,
    RequestError,
    build_request,
    h1_filler,
    request_from,
)
from rpcmeter.protocols.request_data import DRAW_BLOCK, DataError, Draw, Rotation, read_entries
from rpcmeter.protocols.templates import (
    BytesFormat,
    Counter,
    Expr,
    Loop,
    TemplateError,
    distinct,
    evaluator,
    parse,
    text_formatter,
    text_parts,
)


def test_parse_pieces_and_placeholders() -> None:
    t = parse("/kv/{{ random_int(1, 10) }}?n={{request_number}}&u={{uuid}}")
    assert t.pieces == ("/kv/", "?n=", "&u=", "")
    assert t.exprs == (Expr("random_int", (1, 10)), Expr("request_number"), Expr("uuid"))
    assert parse("{{request_number}}").single == Expr("request_number")
    assert parse("n{{request_number}}").single is None
    assert not parse("plain text, {single} braces and }} alone").exprs


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "{{request_nuber}}",
            r"unknown placeholder \{\{request_nuber\}\}.*did you mean \{\{request_number\}\}",
        ),
        ("/kv/{{request_number", r"unbalanced \{\{ at character 5"),
        ("{{uuid {{client}}", r"unbalanced \{\{ at character 1"),
        ("{{random_int(1)}}", r"expected \{\{random_int\(a, b\)\}\}"),
        ("{{random_int(9, 1)}}", r"a must not be above b"),
        ("{{random_int(a, 2)}}", r"whole numbers \(got 'a'\)"),
        ("{{uuid()}}", r"expected \{\{uuid\}\}"),
        ("{{random_string(0)}}", r"n must be from 1"),
    ],
)
def test_parse_errors_are_one_line(text: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message) as err:
        parse(text)
    assert "\n" not in str(err.value)


def values_of(loop: Loop, text: str, n: int) -> list[str]:
    t = parse(text)
    counter = Counter(loop)
    fill = text_formatter(t, t.exprs)
    values = evaluator(t.exprs, loop, counter, loop.rng("values"))
    out = []
    for _ in range(n):
        out.append(fill(values()))
        counter.advance()
    return out


def test_values_each_placeholder_takes() -> None:
    loop = Loop(client=1, loop=2, clients=3, loops=4, seed=7)
    assert values_of(loop, "{{client}}/{{loop}}", 2) == ["1/2", "1/2"]
    assert values_of(loop, "{{request_number}}", 3) == ["6", "18", "30"]  # g = 6 of G = 12
    for u in values_of(loop, "{{uuid}}", 50):
        assert uuid.UUID(u).version == 4 and str(uuid.UUID(u)) == u
    ints = [int(v) for v in values_of(loop, "{{random_int(-2, 2)}}", 2000)]
    assert set(ints) == {-2, -1, 0, 1, 2}
    strings = values_of(loop, "{{random_string(12)}}", 500)
    assert all(re.fullmatch(r"[A-Za-z0-9]{12}", s) for s in strings)
    assert len(set(strings)) == 500
    # the same placeholder twice in a request: one value
    assert all(a == b for a, b in (v.split("=") for v in values_of(loop, "{{uuid}}={{uuid}}", 20)))


def test_seeded_values_repeat_and_differ_by_loop_and_seed() -> None:
    text = "{{uuid}} {{random_int(0, 1000000)}} {{random_string(8)}}"
    a = values_of(Loop(0, 0, 2, 2, seed=1), text, 20)
    assert a == values_of(Loop(0, 0, 2, 2, seed=1), text, 20)
    assert not set(a) & set(values_of(Loop(0, 1, 2, 2, seed=1), text, 20))
    assert not set(a) & set(values_of(Loop(1, 0, 2, 2, seed=1), text, 20))
    assert not set(a) & set(values_of(Loop(0, 0, 2, 2, seed=2), text, 20))


def test_request_numbers_are_distinct_and_dense_across_loops() -> None:
    clients, loops, requests = 4, 8, 25
    seen = [
        int(v)
        for c in range(clients)
        for g in range(loops)
        for v in values_of(Loop(c, g, clients, loops), "{{request_number}}", requests)
    ]
    assert sorted(seen) == list(range(clients * loops * requests))


def test_entries_of_a_loop_share_its_generator() -> None:
    """Two templated entries of one loop never draw the same random sequence."""
    state = LoopState(Loop(seed=3))
    t = parse("{{uuid}}")
    fills: list[str | Fill[str]] = [Fill(t.exprs, text_formatter(t, t.exprs)) for _ in range(2)]
    nxt = source(fills, state, advance=True)
    got = [nxt() for _ in range(40)]
    assert len(set(got)) == 40


def test_bytes_format_fills_like_text() -> None:
    t = parse("100% {{client}}-{{uuid}}-{{client}} {{random_string(3)}}")
    exprs = distinct([t])
    fmt = BytesFormat.of(text_parts(t), exprs)
    values = (5, "x-y", "abc")
    assert fmt.formatter()(values) == b"100% 5-x-y-5 abc"
    assert fmt.formatter()(values).decode() == text_formatter(t, exprs)(values)
    assert BytesFormat.of([b"50%"], ()).constant == b"50%"


def test_http_requests_of_templates() -> None:
    base = HttpRequest("GET", parse("/noop"))
    req = request_from(
        {
            "path": "/kv/{{request_number}}",
            "headers": {"X-Id": "{{uuid}}"},
            "body": "v={{request_number}}",
        },
        base,
    )
    fill = h1_filler(req, "h", req.exprs)
    assert fill((12, "u-1")) == (
        b"GET /kv/12 HTTP/1.1\r\nHost: h\r\nX-Id: u-1\r\nContent-Length: 4\r\n\r\nv=12"
    )
    fixed = request_from({"method": "post", "path": "/echo", "body": "abc"}, base)
    assert h1_filler(fixed, "h", ())(()) == build_request("POST", "/echo", "h", {}, b"abc")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"method": "{{uuid}}"}, "method: a method cannot take a placeholder"),
        ({"headers": {"X-{{uuid}}": "1"}}, "a header name cannot take a placeholder"),
        ({"path": "/{{nope}}"}, "path: unknown placeholder"),
        ({"pth": "/"}, "pth: a request has no key 'pth' \\(did you mean 'path'"),
        ({"expect": "x"}, "expect: expected \\{ body"),
    ]
    for table, message in cases:
        with pytest.raises(RequestError, match=message):
            request_from(table, base, "calls[0]")


def test_data_files(tmp_path: Path) -> None:
    lines = tmp_path / "requests.jsonl"
    lines.write_text('{"path": "/a"}\n\n{"path": "/b"}\n')
    assert [(e.value, e.where) for e in read_entries(lines, "requests.jsonl")] == [
        ({"path": "/a"}, "requests.jsonl:1"),
        ({"path": "/b"}, "requests.jsonl:3"),
    ]
    array = tmp_path / "requests.json"
    array.write_text(json.dumps([{"x": 1}, {"x": 2}]))
    assert [e.where for e in read_entries(array, "requests.json")] == [
        "requests.json[0]",
        "requests.json[1]",
    ]
    lines.write_text('{"path": "/a"}\n{"path": /b}\n')
    with pytest.raises(DataError, match=r"^requests.jsonl:2: not JSON: Expecting value"):
        read_entries(lines, "requests.jsonl")
    lines.write_text("\n\n")
    with pytest.raises(DataError, match=r"requests\.jsonl is empty"):
        read_entries(lines, "requests.jsonl")
    with pytest.raises(DataError, match=r"no such file missing\.jsonl"):
        read_entries(tmp_path / "missing.jsonl", "missing.jsonl")


def test_rotation_starts_each_loop_at_its_own_offset() -> None:
    starts = [Rotation(100, Loop(c, g, 2, 4)).next() for c in range(2) for g in range(4)]
    assert starts == [0, 12, 25, 37, 50, 62, 75, 87]
    r = Rotation(3, Loop())
    assert [r.next() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_weighted_draw_is_seeded_per_loop() -> None:
    draws = Draw([8, 2, 1], Loop(seed=5))
    got = [draws.next() for _ in range(3 * DRAW_BLOCK)]
    assert draws.current == got[-1]
    shares = Tally(got)
    assert abs(shares[0] / len(got) - 8 / 11) < 0.03 and abs(shares[2] / len(got) - 1 / 11) < 0.02
    again = Draw([8, 2, 1], Loop(seed=5))
    assert [again.next() for _ in range(3 * DRAW_BLOCK)] == got
    other = Draw([8, 2, 1], Loop(loop=1, loops=2, seed=5))
    assert [other.next() for _ in range(100)] != got[:100]
