"""rpcmeter's exception tree.

Every error a user can cause derives from :class:`RpcmeterError`; the CLI prints its message as one
line and exits with its ``exit_code``. Anything else escaping the library is a bug.

- :class:`RpcmeterError` (exit 1): base.
  - :class:`SuiteError` (exit 2): a suite file or an override is invalid; names file, key, value.
  - :class:`UsageError` (exit 2): bad command-line usage not caught by argparse.
  - :class:`ServerError`: a server failed to start, died, or did not become ready.
  - :class:`CaseError`: a case could not complete (timeout, client crash, lost connection).
  - :class:`StoreError` (exit 2): the history database or a result file cannot be read or
    written.
    - :class:`NoSuchRun` (exit 2): a run named on the command line does not exist.
  - :class:`ClusterError`: a ``--cluster`` is malformed, unreachable or without workers.
  - :class:`EnvError`: a variant's environment (interpreter, virtualenv, install, git revision)
    cannot be prepared; fails that variant only.

Two exceptions are no user's error but a reply's, counted per kind while the load goes on:
:class:`ReplyMismatch` and :class:`ReplyError` (raised by drivers and by the reply checks of
:mod:`rpcmeter.protocols.bodies`; see :mod:`rpcmeter.drivers.base`).
"""

from __future__ import annotations


class RpcmeterError(Exception):
    """Base of every error a user can cause."""

    exit_code = 1


class SuiteError(RpcmeterError):
    """A suite file or a ``--set`` override is invalid."""

    exit_code = 2


class UsageError(RpcmeterError):
    """The command line is inconsistent."""

    exit_code = 2


class ServerError(RpcmeterError):
    """A server failed to start, exited, or never became ready."""

    def __init__(self, message: str, output_tail: str = "") -> None:
        super().__init__(message)
        self.output_tail = output_tail


class CaseError(RpcmeterError):
    """A case could not be completed."""


class StoreError(RpcmeterError):
    """The history store or a result file could not be used (exit 2; 1 once a run began)."""

    exit_code = 2


class NoSuchRun(StoreError):
    """A run named on the command line (id, tag, ``last~N``, a result file) does not exist: a
    usage error."""

    exit_code = 2


class ClusterError(RpcmeterError):
    """A load cluster (``--cluster``) cannot be used."""


class EnvError(RpcmeterError):
    """A variant's environment could not be prepared (bad interpreter, revision or install)."""


class ReplyMismatch(Exception):
    """A reply arrived but did not match what was sent or expected (validation)."""


class ReplyError(Exception):
    """A reply arrived and reports a failure; counted under ``kind`` (``http_503``, ...)."""

    def __init__(self, kind: str, message: str = "") -> None:
        super().__init__(message or kind)
        self.kind = kind


class ConnectionClosed(ConnectionResetError):
    """The peer closed the connection (or it broke) while requests were outstanding."""


class RequestLost(ConnectionClosed):
    """A request was in flight on a connection that had served requests before, when the
    server closed it (or it broke): counted as ``connection_closed``, but not fatal: the loop
    goes on over a new connection (a connection that cannot be opened is fatal)."""

    kind = "connection_closed"


class ProtocolError(ConnectionError):
    """The peer sent bytes that break the protocol (a malformed frame or head, a reply that
    answers no request): the connection cannot be trusted any longer and is dropped."""


def error_kind(exc: BaseException) -> str:
    """The name an error is counted under: ``mismatch``, the ``kind`` of a :class:`ReplyError`
    (or of any exception that has one), one of
    the connection kinds (``protocol_error``, ``connection_refused``, ``connection_closed``,
    ``timeout``, ``connection_error``) or, for anything else, the exception's type name."""
    if isinstance(exc, ReplyMismatch):
        return "mismatch"
    kind = getattr(exc, "kind", None)  # ReplyError's, or a driver's own error's
    if isinstance(kind, str) and kind:
        return kind
    if isinstance(exc, ProtocolError):
        return "protocol_error"
    if isinstance(exc, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(exc, ConnectionError | EOFError):
        return "connection_closed"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, OSError):
        return "connection_error"
    return type(exc).__name__


def describe(exc: BaseException) -> str:
    """``KIND: message`` for a reason line: the kind ``exc`` is counted under, then its text,
    the kind said once when the text already begins with it (``protocol_error: DATA on ...``)."""
    kind = error_kind(exc)
    text = str(exc)
    return text if text == kind or text.startswith(f"{kind}: ") else f"{kind}: {text}"
