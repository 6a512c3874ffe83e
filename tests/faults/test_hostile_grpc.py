"""A hostile gRPC server (:mod:`tests.faults.hostile`, protocol ``grpc``), through the command
line: a reflection service that answers bytes that are not a reflection reply is one line, exit
2, for ``run``, ``describe`` and ``grpc list``; a unary reply over ``max_message_bytes`` (4 MiB
by default) fails the call as ``grpc:RESOURCE_EXHAUSTED`` on both clients, rpcmeter's own and
grpcio's, as grpcio fails it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rpcmeter.cli import main
from rpcmeter.servers.process import ServerProcess, expand_command, new_endpoint

pytestmark = pytest.mark.timeout(120)
HOSTILE = Path(__file__).with_name("hostile.py")


def command(mode: str) -> list[str]:
    return [sys.executable, str(HOSTILE), "grpc", mode, "--port", "{port}"]


def suite(mode: str, options: str, variants: str = "", requests: int = 5) -> str:
    return (
        'name = "x"\nrepeat = 1\n[target]\ndriver = "grpc"\ntransport = "tcp"\n'
        f"options = {{ {options} }}\n"
        f"[target.server]\ncommand = {json.dumps(command(mode))}\n"
        f'[workloads.get]\nkind = "noop"\n[load]\nrequests = {requests}\nwarmup = 0\n'
        "[resources]\nidle_s = 0\n" + variants
    )


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one error line (after any progress lines)."""
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err, captured.err
    errors = [line for line in captured.err.splitlines() if "error" in line]
    assert len(errors) == 1 and captured.err.endswith(errors[0] + "\n"), captured.err
    return errors[0]


REFLECTED = 'reflection = true, call = "a.B/C"'
NO_PARSE = "the server's reflection reply does not parse"


def test_garbage_reflection_reply_in_run_and_describe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.toml"
    path.write_text(suite("garbage", REFLECTED))
    assert main(["run", str(path), "--no-store"]) == 2
    err = one_line(capsys)
    assert err.startswith(
        f"rpcmeter: error: {path}: variants.default: options.reflection: reflection: "
    ), err
    assert NO_PARSE in err
    assert main(["describe", str(path)]) == 2
    err = one_line(capsys)
    assert err.startswith("rpcmeter: error: ") and NO_PARSE in err, err


def test_garbage_reflection_reply_in_grpc_list(capsys: pytest.CaptureFixture[str]) -> None:
    endpoint = new_endpoint("tcp")
    with ServerProcess(expand_command(command("garbage"), endpoint, {}), endpoint):
        address = f"127.0.0.1:{endpoint.port}"
        assert main(["grpc", "list", address]) == 2
    err = one_line(capsys)
    assert err.startswith(f"rpcmeter: error: grpc list {address}: reflection: "), err
    assert NO_PARSE in err


def test_a_unary_reply_over_the_limit_fails_alike_on_both_clients(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.toml"
    out = tmp_path / "out.json"
    variants = (
        '[variants.h2]\n[variants.grpcio]\noptions = { client = "grpcio" }\n'
        "[variants.raised]\noptions = { max_message_bytes = 16_000_000 }\n"
    )
    path.write_text(suite("big", 'method = "/x.Big/Get", request_hex = ""', variants, 3))
    assert main(["run", str(path), "--no-store", "-o", str(out)]) == 0
    capsys.readouterr()
    cases = {c["variant"]: c for c in json.loads(out.read_text())["cases"]}
    for name in ("h2", "grpcio"):  # 10 MB against the default 4 MiB: every call fails
        case = cases[name]
        assert case["ok"] == 0 and case["errors"] == {"grpc:RESOURCE_EXHAUSTED": 3}, (name, case)
    raised = cases["raised"]  # the limit raised above the reply: every call is answered
    assert raised["ok"] == 3 and not raised["errors"], raised
    assert raised["bytes"]["in_per_request"] == 10_000_000, raised["bytes"]
