"""Values a suite accepted until they failed elsewhere, or that were blamed on the wrong thing:
each is now one line when the suite loads, naming what and where, exit 2, before any server
starts (the suites' server commands would fail if one were started); and `grpc list
--timeout` that no call can meet, a usage error before it asks the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.test_bad_inputs import GOOD, mix, one_line_error

DEEP = 5000


def data_file_suite(name: str) -> str:
    return (
        GOOD
        + f'[target.server]\ncommand = "false {{port}}"\n[target.options]\ndata_file = "{name}"\n'
    )


def tree_suite(depth: int) -> str:
    """A gRPC suite calling a method of a recursive message, its data ``depth`` levels deep."""
    data = "{tree = " * depth + "{v = 1}" + "}" * depth
    return (
        GOOD.replace('"http"', '"grpc"')
        + '[target.server]\ncommand = "false {port}"\n[target.options]\n'
        + f'proto = "tree.proto"\ncall = "t.T/Get"\ndata = {data}\n'
    )


# name -> (suite text, the files beside it, what the error line holds)
CASES: dict[str, tuple[str, dict[str, str], list[str]]] = {
    "weight_inf": (
        mix('[{ name = "a", weight = inf, path = "/noop" }]').decode(),
        {},
        ["workloads.m.calls[0].weight: must be finite (got inf, call 'a')"],
    ),
    "weights_beyond_a_float": (
        mix(
            '[{ name = "a", weight = 1e308, path = "/x" }, { name = "b", weight = 1e308 }]'
        ).decode(),
        {},
        ["workloads.m.calls: the weights add up to more than a float holds"],
    ),
    "record_path_a_number": (
        data_file_suite("requests.jsonl"),
        {"requests.jsonl": '{"path": "/noop"}\n\n{"path": 5}\n'},
        ['options.data_file: requests.jsonl:3: path: expected text, e.g. "/items/1" (got 5)'],
    ),
    "data_file_nested_deep": (
        data_file_suite("deep.json"),
        {"deep.json": "[" * DEEP + "]" * DEEP},
        ["options.data_file: deep.json: JSON arrays or objects nested too deeply"],
    ),
    "data_file_line_nested_deep": (
        data_file_suite("deep.jsonl"),
        {"deep.jsonl": '{"path": "/a"}\n{"body": ' + "[" * DEEP + "]" * DEEP + "}\n"},
        ["options.data_file: deep.jsonl:2: JSON arrays or objects nested too deeply"],
    ),
    "message_nested_past_protobufs_limit": (
        tree_suite(150),
        {
            "tree.proto": 'syntax = "proto3";\npackage t;\nmessage Tree { Tree tree = 1; int32 v = 2; }\n'
            "service T { rpc Get(Tree) returns (Tree); }\n"
        },
        [
            "variants.default: options.data.tree.tree.tree... (100 levels of tree): "
            "nested deeper than protobuf's limit of 100"
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_value_that_cannot_work_is_refused_when_the_suite_loads(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text, files, says = CASES[name]
    monkeypatch.chdir(tmp_path)
    for file, content in files.items():
        (tmp_path / file).write_text(content)
    path = tmp_path / "suite.toml"
    path.write_text(text)
    err = one_line_error(["run", str(path), "--no-store"], capsys)
    assert err.startswith(f"rpcmeter: error: {path}: "), err
    assert "invalid TOML" not in err and len(err) < 300, err
    for part in says:
        assert part in err, err


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf"])
def test_grpc_list_timeout_that_no_call_can_meet_is_a_usage_error(
    timeout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # nothing listens at port 1: a timeout taken would blame the server (DEADLINE_EXCEEDED)
    err = one_line_error(["grpc", "list", "127.0.0.1:1", "--timeout", timeout], capsys)
    assert err.startswith("rpcmeter: error: grpc list --timeout: seconds above 0"), err
    assert f"(got {float(timeout):g})" in err, err
