"""``rpcmeter http``: one-line loads of the built-in HTTP server, as a user of oha or wrk types
them, the suite they make (``--save-suite``, ``rpcmeter run -``) and the usage errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rpcmeter.cli import main
from rpcmeter.cli.oneline import COMPARE_REPEAT
from rpcmeter.net.endpoints import Endpoint
from rpcmeter.plan.cases import expand
from rpcmeter.plan.load import COMPARE_REPEAT as SUITE_COMPARE_REPEAT
from rpcmeter.plan.load import load_suite
from rpcmeter.servers import nginx
from rpcmeter.servers.process import expand_command, new_endpoint
from tests.support.kv import kv_server, tally

pytestmark = pytest.mark.timeout(120)
QUIET = ["--no-store", "--no-live", "--warmup", "0"]


@pytest.fixture(scope="module")
def server() -> Iterator[Endpoint]:
    with kv_server() as ep:
        yield ep


def url(ep: Endpoint, path: str) -> str:
    return f"http://{ep.host}:{ep.port}{path}"


def test_one_url_prints_one_screen(server: Endpoint, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["http", url(server, "/noop"), "-c", "2", "-n", "200", *QUIET])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "2 connections · 200 requests" in out
    assert "200 in " in out and "200 ok, 0 failed" in out
    assert "requests/s" in out and "client CPU" in out and "us per request" in out
    assert "server CPU     - (a server rpcmeter did not start)" in out
    assert "p99 " in out and "p99.9 " in out
    assert "Latency histogram (each row: the requests up to its latency):" in out and "■" in out
    assert "[2xx] 200 replies" in out


def test_placeholders_reach_the_server(
    server: Endpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every request of a PUT to /kv/{{request_number}} is a key of its own."""
    before = tally(server)
    status = main(
        [
            "http",
            url(server, "/kv/i47a-{{request_number}}"),
            "-m",
            "put",
            "-d",
            "{{random_string(8)}}",
            "-H",
            "X-Id: {{uuid}}",
            "-c",
            "2",
            "-p",
            "2",
            "-n",
            "40",
            *QUIET,
        ]
    )
    assert status == 0, capsys.readouterr()
    after = tally(server)
    assert after["puts"] - before["puts"] == 40
    assert after["keys"] - before["keys"] == 40


def test_status_codes_are_counted(server: Endpoint, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["http", url(server, "/nowhere"), "-c", "1", "-n", "20", *QUIET])
    out = capsys.readouterr().out
    assert status == 1  # every request failed: the case failed
    assert "[404]" in out and "20 replies" in out


def test_two_urls_compare_with_too_few_repetitions_noted(
    server: Endpoint, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "http",
            f"one={url(server, '/noop')}",
            f"two={url(server, '/noop')}",
            "--http2",
            "-c",
            "1",
            "-p",
            "2",
            "-n",
            "40",
            "--repeat",
            "2",
            *QUIET,
        ]
    )
    captured = capsys.readouterr()
    assert status == 0, captured.out
    assert "--repeat 2 is too few repetitions for a verdict (at least 4 per target)" in (
        captured.err
    )
    assert "one" in captured.out and "two" in captured.out and "4 cases" in captured.out


def test_compare_repeat_is_the_suites() -> None:
    assert COMPARE_REPEAT == SUITE_COMPARE_REPEAT


def test_saved_suite_plans_the_same_cases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "one.toml"
    argv = [
        "http",
        "a=http://127.0.0.1:9/x?y={{uuid}}",
        "https://localhost:8443/",
        "-c",
        "3",
        "-p",
        "2",
        "-z",
        "1.5s",
        "-q",
        "100",
        "-H",
        "Authorization: Bearer t",
        "-d",
        "{}",
        "--http2",
        "--insecure",
        "--save-suite",
        str(saved),
        "--dry-run",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert printed == saved.read_text()
    suite = load_suite(saved)
    assert suite.repeat == COMPARE_REPEAT and list(suite.variants) == ["a", "localhost:8443/"]
    assert suite.load.mode == "open" and suite.load.rate == 100
    assert suite.load.connections == 3 and suite.load.concurrency == 6
    assert suite.load.duration_s == 1.5
    assert suite.options_of("a") == {
        "method": "POST",
        "headers": {"Authorization": "Bearer t"},
        "body": "{}",
        "http": "2",
        "path": "/x?y={{uuid}}",
        "host": "127.0.0.1:9",
    }
    tls = suite.tls_of("localhost:8443/")
    assert tls is not None and tls.verify is False and suite.tls_of("a") is None
    # the one-liner's own suite (the same flags, not written) plans the very same cases
    from rpcmeter.cli.app import build_parser
    from rpcmeter.cli.http import suite_of
    from rpcmeter.cli.oneline import build

    args = build_parser().parse_args(argv)
    raw, command = suite_of(args, argv[1:])
    own, _ = build(raw, "rpcmeter http", command)
    assert expand(own) == expand(suite)
    assert own.variants == suite.variants and own.target == suite.target


def test_run_reads_the_saved_suite_from_stdin(server: Endpoint, tmp_path: Path) -> None:
    saved = tmp_path / "s.toml"
    assert (
        main(
            [
                "http",
                url(server, "/noop"),
                "-c",
                "1",
                "-n",
                "30",
                "--save-suite",
                str(saved),
                "--dry-run",
            ]
        )
        == 0
    )
    proc = subprocess.run(
        [sys.executable, "-m", "rpcmeter", "run", "-", "--no-store", "--no-live"],
        input=saved.read_text(),
        capture_output=True,
        text=True,
        timeout=100,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "GET /noop" in proc.stdout and "1 cases" in proc.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ftp://h/x"], "'ftp://h/x': not an http:// or https:// URL"),
        (["http://h:70000/"], "the port is not a number from 1 to 65535"),
        (["http:///x"], "no host in the URL"),
        (["-z", "10x", "http://h/"], "argument -z/--duration: not a duration: '10x'"),
        (["-m", "G T", "http://h/"], "-m 'G T': not an HTTP method"),
        (["-H", "nocolon", "http://h/"], "-H 'nocolon': expected 'Name: value'"),
        (["-n", "5", "-z", "1s", "http://h/"], "-n/--requests and -z/--duration"),
        (["-c", "0", "http://h/"], "argument -c/--connections: 0: at least 1"),
        (["a=http://h/", "a=http://g/"], "two targets named 'a'"),
        (["--insecure", "http://h/"], "--insecure and --cacert are for https:// URLs"),
        (["--bogus", "http://h/"], "http: unrecognized arguments: --bogus (see rpcmeter http"),
    ],
)
def test_usage_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before any connection: the hosts here do not exist."""
    with pytest.raises(SystemExit) as exc:
        status = main(["http", *argv, "--no-store"])
        raise SystemExit(status)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert err.startswith("rpcmeter: error: ") and message in err, err
    assert err.count("\n") == 1


def test_a_unix_socket_as_ohas_unix_socket_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--unix-socket PATH`: the requests go to the socket; the URL gives the path and Host."""
    with kv_server(transport="unix") as ep:
        assert ep.path is not None
        argv = ["http", "--unix-socket", ep.path, "http://localhost/noop", "-c", "2"]
        status = main([*argv, "-n", "100", *QUIET])
        out = capsys.readouterr().out
        assert status == 0, out
        assert "100 ok, 0 failed" in out and "[2xx] 100 replies" in out
    for argv, message in [
        ([str(tmp_path / "none.sock"), "http://h/"], "none.sock: No such file or directory"),
        ([str(tmp_path), "http://h/"], f"--unix-socket {tmp_path}: not a socket"),
        ([str(tmp_path), "https://h/"], "--unix-socket: for http:// URLs"),
    ]:
        with pytest.raises(SystemExit) as exc:
            raise SystemExit(main(["http", "--unix-socket", *argv, "--no-store"]))
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and err.count("\n") == 1, err


def test_https_with_a_ca_or_insecure_over_both_protocols(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The built-in server over TLS with a certificate of the test's own CA: --cacert trusts
    it (HTTP/2 by ALPN here), --insecure does not check it, and without either it fails."""
    import json
    import socket
    import time

    import trustme

    from rpcmeter.servers.process import new_endpoint

    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    ca_file, cert_file, key_file = tmp_path / "ca.pem", tmp_path / "c.pem", tmp_path / "c.key"
    ca_file.write_bytes(ca.cert_pem.bytes())
    cert_file.write_bytes(b"".join(p.bytes() for p in cert.cert_chain_pems))
    key_file.write_bytes(cert.private_key_pem.bytes())
    ep = new_endpoint("tcp")
    tls = {"tls": {"cert_file": str(cert_file), "key_file": str(key_file)}}
    command = [sys.executable, "-m", "rpcmeter.servers.http_server", "--port", str(ep.port)]
    proc = subprocess.Popen([*command, "--options", json.dumps(tls)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", ep.port or 0), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "no server"
                time.sleep(0.05)
        base = ["http", f"https://localhost:{ep.port}/noop", "-c", "1", "-n", "20", *QUIET]
        assert main([*base, "--cacert", str(ca_file), "--http2"]) == 0
        out = capsys.readouterr().out
        assert "[2xx] 20 replies" in out and "20 ok, 0 failed" in out
        assert main([*base, "--insecure"]) == 0
        out = capsys.readouterr().out
        assert "[2xx] 20 replies" in out and "verification OFF" in out
        assert main(base) == 1  # the system's CAs do not know the test's
        assert "certificate" in capsys.readouterr().out.lower()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_jsonl_data_file_sends_its_requests_in_turn(
    server: Endpoint, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = tmp_path / "requests.jsonl"
    lines.write_text(
        '{"method": "PUT", "path": "/kv/i47a-file-a", "body": "a"}\n'
        '{"method": "PUT", "path": "/kv/i47a-file-b", "body": "{{request_number}}"}\n'
    )
    before = tally(server)
    argv = ["http", url(server, "/"), "-D", str(lines), "-c", "1", "-n", "20", *QUIET]
    assert main(argv) == 0, capsys.readouterr()
    after = tally(server)
    assert after["puts"] - before["puts"] == 20
    assert after["keys"] - before["keys"] == 2  # the two keys, each stored, then replaced


@pytest.mark.skipif(
    nginx.executable() is None, reason="nginx is not installed (.ci/run installs it)"
)
@pytest.mark.parametrize("http2", [False, True], ids=["http1", "h2c"])
def test_against_nginx(tmp_path: Path, http2: bool, capsys: pytest.CaptureFixture[str]) -> None:
    """``rpcmeter http`` as a user types it, against a stock nginx: every request answered,
    and the connection nginx ends (after its default 1000 requests) opened again. A 503
    location counts its replies by status and fails the run."""
    ep = new_endpoint("tcp")
    command = expand_command(nginx.prepare(tmp_path / "nginx", http2=http2), ep)
    base = ["http", "-c", "1", *(["--http2"] if http2 else []), *QUIET]
    out = tmp_path / "out.json"
    # started here, not as a ServerProcess: the end of a run stops every one of those
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(proc, ep)
        status = main([*base, url(ep, "/noop"), "-n", "1500", "-o", str(out)])
        printed = capsys.readouterr().out
        assert status == 0, printed
        assert "[2xx] 1,500 replies" in printed and "1,500 ok, 0 failed" in printed, printed
        case = json.loads(out.read_text())["cases"][0]
        assert case["status"] == "ok" and case["ok"] == 1500 and case["errors"] == {}, case
        assert case["connections"]["opened"] >= 2, case["connections"]  # nginx ended one
        assert main([*base, url(ep, "/unavailable"), "-n", "20"]) == 1
        printed = capsys.readouterr().out
        assert "[503] 20 replies" in printed, printed
    finally:
        proc.terminate()  # nginx's master stops its worker
        proc.wait(timeout=10)


def wait_for(proc: subprocess.Popen[bytes], ep: Endpoint) -> None:
    """Until ``ep`` accepts connections (30 s at most, while ``proc`` lives)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection((ep.host, ep.port or 0), timeout=1).close()
            return
        except OSError:
            assert proc.poll() is None, f"the server exited with status {proc.returncode}"
            assert time.monotonic() < deadline, "the server did not listen within 30 s"
            time.sleep(0.05)
