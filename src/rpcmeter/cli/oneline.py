"""What the one-line commands (``rpcmeter http``, ``rpcmeter grpc ADDRESS METHOD``, and for its
suite ``rpcmeter cmd``) share: their load and TLS flags, the targets they compare, and the way
from flags to a run.

A one-liner writes the suite document a TOML file would parse to (:func:`suite_document`'s
caller fills ``target``, ``variants`` and ``workloads``), turns it into TOML text and back, and
builds the :class:`~rpcmeter.plan.load.Suite` from that text with
:func:`rpcmeter.plan.load.build_suite`: the run plans exactly as ``rpcmeter run`` of the same text
does, and ``--save-suite FILE`` writes that text. Several targets are several variants, the first
the baseline, run interleaved; the suite repeats each case enough for a verdict unless told
otherwise.

Light at import, as every command module: the suite, the TOML writer and the run come in when
the command runs.
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from rpcmeter.cli.options import whole
from rpcmeter.errors import UsageError

if TYPE_CHECKING:
    from rpcmeter.suite.model import Suite

# how many repetitions a comparison of several targets gets by default: rpcmeter.plan.load's
# COMPARE_REPEAT (checked by the tests; kept here so that the parser stays light)
COMPARE_REPEAT = 5
WRITTEN_BY = "written by: "  # the suite's description: rpcmeter.reporters.single reads it
DEFAULT_REQUESTS = 200  # oha's default -n (in total, over all connections)
DEFAULT_CONNECTIONS = 50  # oha's and ghz's default -c

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
# ``name=TARGET``: a name without ':' '/' or '=' before the first '='
_NAMED = re.compile(r"^([^=:/\s]+)=(.+)$")


def duration(text: str) -> float:
    """``-z``'s value: ``10s``, ``1m``, ``500ms``, ``1h``, or a number of seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} (expected e.g. 10s, 1m, 500ms, or seconds)"
        )
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration above zero")
    return seconds


positive_int = whole(1)
count = whole(0)  # ``--warmup 0`` too


def rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: requests per second above zero")
    return value


def brief_errors(p: argparse.ArgumentParser) -> None:
    """A wrong flag or value is one line naming it (and exit status 2), not the whole usage."""

    def error(message: str) -> NoReturn:
        p.exit(
            2,
            f"rpcmeter: error: {p.prog.removeprefix('rpcmeter ')}: {message} (see {p.prog} --help)\n",
        )

    p.error = error  # type: ignore[method-assign]
    p.set_defaults(brief_parser=p)  # main() reports arguments left over through it


def add_load_flags(p: argparse.ArgumentParser, connections_flag: Sequence[str]) -> None:
    """The load flags every one-liner has, with oha's, wrk's and ghz's letters (``-c`` is
    ``connections_flag``'s first: connections for HTTP, concurrent workers for gRPC)."""
    g = p.add_argument_group("load")
    g.add_argument(
        "-n",
        "--requests",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"requests in all, over every connection and stream (default {DEFAULT_REQUESTS}); "
        "spread evenly over the loops, rounded up",
    )
    g.add_argument(
        "-z",
        "--duration",
        type=duration,
        default=None,
        metavar="TIME",
        help="run for this long instead of a count: 10s, 1m, 500ms",
    )
    g.add_argument(
        "-q",
        "--rate",
        type=rate,
        default=None,
        metavar="RPS",
        help="open loop: send this many requests per second in all, on schedule, whatever the "
        "replies do (latency counted from each request's intended send time)",
    )
    g.add_argument(
        "--warmup",
        type=count,
        default=None,
        metavar="N",
        help="requests per loop sent before measuring, discarded (default 10)",
    )
    g.add_argument(
        "--timeout",
        type=duration,
        default=None,
        metavar="TIME",
        help="a case still running this long after its clients started fails, named as a "
        "timeout (default 600s; rpcmeter has no per-request deadline)",
    )
    g.add_argument(
        "--repeat",
        "-r",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"run each target N times, interleaved (default 1 for one target, "
        f"{COMPARE_REPEAT} to compare several: enough for a verdict)",
    )
    g.add_argument("--name", default=None, help="the run's name in the reports and the history")
    g.add_argument(
        "--save-suite",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the suite (TOML) that reproduces this run: rpcmeter run FILE",
    )
    g.add_argument(
        "--dry-run",
        action="store_true",
        help="check the flags and print the suite they make (TOML), without running it",
    )


def add_data_file_flag(g: argparse._ArgumentGroup, help: str) -> None:
    """``-D/--data-file FILE``: the request (``help`` says how) from a file."""
    g.add_argument("-D", "--data-file", type=Path, default=None, metavar="FILE", help=help)


# the files a one-liner's TLS flags name, and the suite's ``tls`` keys for them
TLS_FILES = (("cacert", "ca_file"), ("cert", "cert_file"), ("key", "key_file"))


def add_tls_flags(
    g: argparse._ArgumentGroup,
    insecure: Sequence[str],
    insecure_help: str,
    *,
    client: bool = False,
    prefix: str = "",
) -> None:
    """A one-liner's TLS flags in group ``g``: ``insecure`` (its names and meaning are the peer
    tool's), ``--cacert``, and with ``client`` ``--tls``, a client certificate (``--cert``,
    ``--key``) and the server name to check (``--cname``); ``prefix`` starts their help."""
    g.add_argument(*insecure, action="store_true", help=insecure_help)
    if client:
        g.add_argument("--tls", action="store_true", help="TLS, checked against the system's CAs")
    g.add_argument("--cacert", default=None, metavar="FILE", help=f"{prefix}the CA to trust")
    if client:
        g.add_argument("--cert", default=None, metavar="FILE", help=f"{prefix}a client certificate")
        g.add_argument(
            "--key", default=None, metavar="FILE", help=f"{prefix}the client certificate's key"
        )
        g.add_argument(
            "--cname", default=None, metavar="NAME", help=f"{prefix}the server name to check"
        )


def tls_files(args: argparse.Namespace) -> dict[str, str]:
    """The suite's ``tls`` keys for the files that :func:`add_tls_flags`' flags name, each
    checked and made absolute."""
    if bool(getattr(args, "cert", None)) != bool(getattr(args, "key", None)):
        raise UsageError("--cert and --key go together")
    table: dict[str, str] = {}
    for flag, key in TLS_FILES:
        path = getattr(args, flag, None)
        if path is not None:
            if not Path(path).is_file():
                raise UsageError(f"--{flag} {path}: no such file")
            table[key] = str(Path(path).resolve())
    return table


def targets(items: Sequence[str]) -> list[tuple[str | None, str]]:
    """``TARGET`` or ``name=TARGET`` each: (the name given or None, the target)."""
    out: list[tuple[str | None, str]] = []
    for item in items:
        match = _NAMED.match(item)
        if match is not None:
            out.append((match.group(1), match.group(2)))
        else:
            out.append((None, item))
    return out


def variant_names(given: Sequence[str | None], shown: Sequence[str], flag: str) -> list[str]:
    """The variants' names: the names given, else how each target is shown; two alike are
    a usage error."""
    names = [g if g is not None else s for g, s in zip(given, shown, strict=True)]
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise UsageError(f"{flag}: two targets named {name!r} (name them: NAME={flag})")
        seen.add(name)
    return names


def load_table(args: argparse.Namespace, connections: int, loops: int) -> dict[str, Any]:
    """The ``[load]`` table: ``connections`` connections carrying ``loops`` closed loops (or
    open-loop senders) in one client process; ``-n`` in all, spread over the loops."""
    load: dict[str, Any] = {"connections": connections, "concurrency": loops}
    if args.duration is not None:
        if args.requests is not None:
            raise UsageError("-n/--requests and -z/--duration: give one or the other")
        load["duration_s"] = args.duration
    else:
        total = args.requests if args.requests is not None else DEFAULT_REQUESTS
        load["requests"] = max(1, math.ceil(total / loops))
    if args.rate is not None:
        load["mode"] = "open"
        load["rate"] = args.rate
    if args.warmup is not None:
        load["warmup"] = args.warmup
    if args.timeout is not None:
        if args.duration is not None and args.timeout <= args.duration:
            raise UsageError(
                f"--timeout {args.timeout:g}s: longer than -z/--duration ({args.duration:g}s), "
                "which it bounds"
            )
        load["timeout_s"] = args.timeout
    return load


def suite_document(
    args: argparse.Namespace, name: str, command: str, n_variants: int
) -> dict[str, Any]:
    """The top of the suite document: the name, the repetitions and what made it."""
    repeat = args.repeat if args.repeat is not None else (COMPARE_REPEAT if n_variants > 1 else 1)
    return {
        "name": args.name or name,
        "description": f"{WRITTEN_BY}{command}",
        "repeat": repeat,
    }


def command_line(prog: str, argv: Sequence[str]) -> str:
    """``prog`` and the arguments as a shell would take them back."""
    return " ".join([prog, *(shlex.quote(a) for a in argv)])


def to_toml(raw: dict[str, Any], header: str) -> str:
    import tomli_w

    return f"# {header}\n# run it again: rpcmeter run THIS_FILE\n\n" + tomli_w.dumps(raw)


def build(raw: dict[str, Any], where: str, header: str) -> tuple[Suite, str]:
    """The suite of ``raw`` as ``rpcmeter run`` would read its TOML text, and the text."""
    import hashlib
    import tomllib

    from rpcmeter.plan.load import build_suite

    text = to_toml(raw, header)
    suite = build_suite(tomllib.loads(text), where)
    suite.source_text = text
    suite.source_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return suite, text


def repeat_note(suite: Suite) -> str | None:
    """What to say when several targets run too few times each for a verdict."""
    from rpcmeter.analysis.compare import can_decide

    if len(suite.variants) < 2 or can_decide(suite.repeat, suite.repeat):
        return None
    need = next(n for n in range(suite.repeat, 100) if can_decide(n, n))
    return (
        f"rpcmeter: note: --repeat {suite.repeat} is too few repetitions for a verdict "
        f"(at least {need} per target); the ratios are shown without one\n"
    )


def save_suite(path: Path | None, text: str, err: TextIO) -> None:
    """Write the suite's ``text`` where ``--save-suite`` says, if it does."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--save-suite {path}: {exc.strerror or exc}") from None
    err.write(f"rpcmeter: suite written to {path} (rpcmeter run {path})\n")


def prepare(
    raw: dict[str, Any], args: argparse.Namespace, where: str, header: str, err: TextIO
) -> tuple[Suite, str]:
    """What every one-liner does before it runs: check the output flags, build the suite of
    ``raw`` (:func:`build`) and save it where ``--save-suite`` says. The suite and its text."""
    from rpcmeter.cli import run as run_command

    run_command.check_run_outputs(args)
    suite, text = build(raw, where, header)
    save_suite(args.save_suite, text, err)
    return suite, text


def run(
    raw: dict[str, Any],
    args: argparse.Namespace,
    where: str,
    header: str,
    out: TextIO,
    err: TextIO,
) -> int:
    """Build the suite of ``raw``, save it where ``--save-suite`` says (:func:`prepare`), and
    run it with every output flag of :func:`rpcmeter.cli.run.add_run_outputs` (or print it:
    ``--dry-run``)."""
    from rpcmeter.cli import run as run_command

    suite, text = prepare(raw, args, where, header, err)
    if args.dry_run:
        out.write(text)
        return 0
    note = repeat_note(suite)
    if note:
        err.write(note)
    render = None
    if len(suite.variants) == 1 and len(suite.workloads) == 1:
        from rpcmeter.reporters import single

        render = single.render
    return run_command.run_and_report(suite, args, out, err, render=render)
