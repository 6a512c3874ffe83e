"""What the one-liners share (rpcmeter.cli.oneline): the suite each saves, and the TLS flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from rpcmeter.cli import main


def _rpcmeter(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(argv))
    code = exc.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().err


ONE_LINERS = {
    "cmd": ["cmd", "--no-store", "--no-live", "-r", "1", "-N", "true"],
    "http": ["http", "--no-store", "--dry-run", "https://h.invalid/x"],
    "grpc": ["grpc", "--no-store", "--dry-run", "h.invalid:1", "a.B/C", "--proto", "x.proto"],
}


@pytest.mark.parametrize("verb", ONE_LINERS)
def test_every_one_liner_saves_its_suite_alike(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.proto").write_text(
        'syntax = "proto3"; package a; message M {} service B { rpc C (M) returns (M); }'
    )
    saved = tmp_path / "sub" / "saved.toml"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        code, err = _rpcmeter([*ONE_LINERS[verb], "--save-suite", str(saved)], capsys)
        assert code == 0, err
        assert f"rpcmeter: suite written to {saved} (rpcmeter run {saved})\n" in err
        text = saved.read_text()
        assert text.startswith(f"# rpcmeter {verb} ")
        assert "\n# run it again: rpcmeter run THIS_FILE\n" in text
        # a place it cannot write is one line and status 2, before anything runs
        code, err = _rpcmeter([*ONE_LINERS[verb], "--save-suite", "/proc/no/such.toml"], capsys)
        assert code == 2
        assert (
            err == "rpcmeter: error: --save-suite /proc/no/such.toml: No such file or directory\n"
        )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["http", "https://h.invalid/", "--cacert", "no.pem"], "--cacert no.pem: no such file"),
        (["grpc", "h.invalid:1", "a.B/C", "--cacert", "no.pem"], "--cacert no.pem: no such file"),
        (["grpc", "h.invalid:1", "a.B/C", "--cert", "c.pem"], "--cert and --key go together"),
        (
            ["grpc", "h.invalid:1", "a.B/C", "--cert", "c.pem", "--key", "k.pem"],
            "--cert c.pem: no such file",
        ),
    ],
)
def test_the_tls_flags_files_are_checked_alike(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        code, err = _rpcmeter([*argv, "--no-store", "--dry-run"], capsys)
    assert code == 2 and err == f"rpcmeter: error: {message}\n"
