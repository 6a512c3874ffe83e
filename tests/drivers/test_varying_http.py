"""HTTP requests that vary, against the built-in server and its key/value store: request numbers
exactly once across 4 clients x 8 loops (the store counts the keys it was given), placeholders
checked against echoed replies over HTTP/1.1 and HTTP/2, data files sent in turn, and a mix whose
calls are recorded apart and add up to the case."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rpcmeter.analysis.derived import document
from rpcmeter.model import Result
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.plan.load import build_suite
from rpcmeter.reporters import html, markdown, terminal
from rpcmeter.reporters.build import build
from rpcmeter.run.execute import run_suite
from rpcmeter.servers.aio import Corrupter
from rpcmeter.servers.http_server import KvStore
from rpcmeter.servers.http_server import handle as server_handle
from tests.support import kv

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def kv_server() -> Iterator[Endpoint]:
    with kv.kv_server() as ep:
        yield ep


tally = kv.tally


def run(raw: dict[str, Any], where: str = "<suite>") -> Result:
    suite = build_suite({"repeat": 1, **raw}, where)
    if where != "<suite>":
        suite.path = where
    return run_suite(suite)


@pytest.mark.parametrize("http", ["1.1", "2"])
def test_request_numbers_exactly_once_across_clients_and_loops(
    kv_server: Endpoint, http: str
) -> None:
    """4 clients x 8 loops, 25 requests and 2 warmup requests each: every request stores a key
    named by its number; the store holds as many keys as requests were sent (warmup
    included), so no number was sent twice."""
    result = run(
        {
            "target": {
                "driver": "http",
                "address": f"127.0.0.1:{kv_server.port}",
                "options": {
                    "method": "PUT",
                    "path": "/kv/{{request_number}}",
                    "body": "x",
                    "http": http,
                },
            },
            "workloads": {"put": {"kind": "noop"}},
            "load": {"clients": 4, "concurrency": 8, "connections": 2, "requests": 25, "warmup": 2},
        }
    )
    (case,) = result.cases
    assert case.status == "ok" and case.requests == case.ok == 4 * 8 * 25, case.reason
    assert tally(kv_server) == {
        "keys": 4 * 8 * 27,
        "puts": 4 * 8 * 27,
        "hits": 0,
        "misses": 0,
        "deletes": 0,
    }


@pytest.mark.parametrize("http", ["1.1", "2"])
def test_placeholders_reach_the_server_and_expect_checks_them(http: str) -> None:
    """``echo`` sends back the body: with ``validate`` each reply is checked against its own
    request's body; ``expect`` with placeholders is evaluated with the request's values (a
    wrong one is a mismatch on every request)."""
    body = "n={{request_number}} c={{client}} l={{loop}} u={{uuid}} i={{random_int(1, 6)}}"
    result = run(
        {
            "validate": True,
            "target": {
                "driver": "http",
                "options": {"http": http, "headers": {"X-Id": "{{uuid}}"}},
            },
            "variants": {
                "echo": {"options": {"body": body}},
                "expect": {
                    "options": {
                        "path": "/echo",
                        "body": "{{random_string(9)}}",
                        "expect": {"body": "{{random_string(9)}}"},
                    }
                },
                "wrong": {
                    "options": {
                        "path": "/echo",
                        "body": "{{request_number}}",
                        "expect": {"body": "x{{request_number}}"},
                    }
                },
            },
            "workloads": {"echo": {"kind": "echo"}},
            "load": {"clients": 2, "concurrency": 3, "requests": 40, "warmup": 2},
        }
    )
    cases = {c.variant: c for c in result.cases}
    for name in ("echo", "expect"):
        assert cases[name].status == "ok" and cases[name].ok == 240, cases[name].error_samples
    wrong = cases["wrong"]
    assert wrong.errors == {"mismatch": 240}
    assert "expected" in wrong.error_samples["mismatch"]
    assert cases["echo"].bytes is not None and (cases["echo"].bytes.out_per_request or 0) > 60


def test_data_file_lines_in_turn(kv_server: Endpoint, tmp_path: Path) -> None:
    lines = [{"method": "PUT", "path": f"/kv/{k}", "body": k} for k in "abcde"]
    (tmp_path / "requests.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    suite_file = tmp_path / "s.toml"
    suite_file.write_text("")
    result = run(
        {
            "target": {
                "driver": "http",
                "address": f"127.0.0.1:{kv_server.port}",
                "options": {"data_file": "requests.jsonl"},
            },
            "workloads": {"put": {"kind": "noop"}},
            "load": {"concurrency": 2, "requests": 50, "warmup": 0},
        },
        str(suite_file),
    )
    assert result.cases[0].ok == 100
    assert tally(kv_server)["keys"] == 5 and tally(kv_server)["puts"] == 100


def test_mix_calls_apart_add_up_to_the_case() -> None:
    """A read-heavy mix on the key/value store: each call's requests, replies and share add up
    to the case's; the reports show the calls table."""
    result = run(
        {
            "target": {"driver": "http", "options": {"kv_miss_us": 20}},
            "variants": {"a": {}, "b": {"options": {"kv_capacity": 10}}},
            "workloads": {
                "kv": {
                    "kind": "mix",
                    "calls": [
                        {"name": "get", "weight": 8, "path": "/kv/{{random_int(1, 50)}}"},
                        {
                            "name": "put",
                            "weight": 2,
                            "method": "PUT",
                            "path": "/kv/{{random_int(1, 50)}}",
                            "body": "{{random_string(16)}}",
                        },
                        {"name": "gone", "weight": 1, "method": "DELETE", "path": "/kv/none"},
                    ],
                }
            },
            "load": {"clients": 2, "concurrency": 2, "requests": 300, "warmup": 2},
        }
    )
    for case in result.cases:
        calls = {c.name: c for c in case.calls or []}
        assert list(calls) == ["get", "put", "gone"]
        assert sum(c.requests for c in calls.values()) == case.requests == 1200
        assert sum(c.ok for c in calls.values()) == case.ok
        assert calls["gone"].errors == {"http_404": calls["gone"].requests} == case.errors
        assert (
            calls["get"].histogram is not None and calls["get"].histogram.count == calls["get"].ok
        )
        assert sum(c.share or 0 for c in calls.values()) == pytest.approx(1.0)
        assert calls["get"].share == pytest.approx(8 / 11, abs=0.05)
        assert sum(c.throughput_rps or 0 for c in calls.values()) == pytest.approx(
            case.throughput_rps
        )
    doc: dict[str, Any] = json.loads(json.dumps(document(result)))
    assert {c["name"] for c in doc["cases"][0]["calls"]} == {"get", "put", "gone"}
    rows = [r for r in doc["comparisons"]["rows"] if r.get("call")]
    assert {r["call"] for r in rows} == {"get", "put"}  # "gone" has no replies to compare
    view = build(result)
    text = terminal.render(view, width=160)
    assert "kv · calls" in text and "(all)" in text
    assert "| put |" in markdown.render(view).replace("  ", " ")
    assert "kv · calls" in html.render(view)


def test_store_hits_misses_and_tally() -> None:
    store = KvStore({"kv_capacity": 2, "kv_miss_us": 0})
    corrupt = Corrupter({})

    def handle(url: bytes, body: bytes, corrupt: Corrupter, method: bytes, store: KvStore) -> Any:
        answer = server_handle(url, body, corrupt, method, store)
        assert isinstance(answer, tuple)
        return answer

    assert handle(b"/kv/a", b"", corrupt, b"GET", store)[3] == b"miss"
    assert handle(b"/kv/a", b"", corrupt, b"GET", store)[3] == b"hit"
    assert handle(b"/kv/b", b"v", corrupt, b"PUT", store)[:2] == (200, b"")
    assert handle(b"/kv/b", b"", corrupt, b"GET", store)[1] == b"v"
    handle(b"/kv/c", b"w", corrupt, b"PUT", store)  # a is the least recently used: forgotten
    assert handle(b"/kv/a", b"", corrupt, b"GET", store)[3] == b"miss"
    assert handle(b"/kv/zz", b"", corrupt, b"DELETE", store)[0] == 404
    assert handle(b"/kv/a", b"", corrupt, b"PATCH", store)[0] == 405
    assert json.loads(handle(b"/kv", b"", corrupt, b"GET", store)[1]) == {
        "keys": 2,
        "hits": 2,
        "misses": 2,
        "puts": 2,
        "deletes": 1,
    }


def test_uuids_differ_from_run_to_run_and_other_values_repeat(
    kv_server: Endpoint, tmp_path: Path
) -> None:
    """Two runs of the same suite and seed through the command line: every ``{{uuid}}`` key is
    new in the second run (the result names the run's uuid_seed), while the seeded
    ``{{random_string(n)}}`` keys are the first run's again."""
    from rpcmeter.cli import main

    suite = tmp_path / "ids.toml"
    suite.write_text(
        f"""
        repeat = 1
        seed = 7
        [target]
        driver = "http"
        address = "127.0.0.1:{kv_server.port}"
        [variants.ids]
        options = {{ method = "PUT", path = "/kv/id-{{{{uuid}}}}", headers = {{ X-Request-Id = "{{{{uuid}}}}" }}, body = "x" }}
        [variants.seeded]
        options = {{ method = "PUT", path = "/kv/s-{{{{random_string(16)}}}}", body = "x" }}
        [workloads.put]
        kind = "noop"
        [load]
        clients = 2
        concurrency = 2
        connections = 2
        requests = 20
        warmup = 0
        [resources]
        idle_s = 0
        """.replace("\n        ", "\n")
    )
    seeds = []
    for n in (1, 2):
        out = tmp_path / f"run{n}.json"
        assert main(["run", str(suite), "-o", str(out), "--no-store"]) == 0
        doc = json.loads(out.read_text())
        assert all(c["status"] == "ok" and c["ok"] == 80 for c in doc["cases"])
        seeds.append(doc["suite"].get("uuid_seed"))
    counts = tally(kv_server)
    assert counts["puts"] == 4 * 80
    assert counts["keys"] == 2 * 80 + 80  # every id new in the second run; the seeded keys again
    assert seeds[0] != seeds[1] and all(len(s) == 32 for s in seeds)
