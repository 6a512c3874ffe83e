"""The TLS transport of the event-loop drivers: TLS over a non-blocking socket through OpenSSL's
memory BIOs, the loop watching the socket, with no asyncio SSL protocol in the path. It is opened
by :func:`rpcmeter.net.tls.open_tls` (the handshake) and carries HTTP/1.1 and the raw frames
(:mod:`rpcmeter.drivers.stream`), HTTP/2 and gRPC (:mod:`rpcmeter.protocols.h2.transport`).

A module of its own, importing nothing of rpcmeter's, so that the compiled build (``setup.py``)
compiles it with the rest of the hot path: a read and a write are native code then.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections.abc import Callable
from typing import Any

READ_SIZE = 65536  # one decrypted read (a TLS record holds 16 KiB at most)
SOCKET_READ = 65536  # one read of a TLS transport's socket (a larger buffer is an mmap per read)
# a read of the socket after one that was one short record alone: small enough for the bytes
# object to come from Python's own allocator (at most 512 bytes with its 33-byte header), where
# SOCKET_READ's is a C library malloc of 64 KiB, shrunk to what came (about 440 instructions a read)
SMALL_READ = 479


class TlsTransport:
    """An asyncio transport running TLS over a non-blocking socket through memory BIOs: the loop
    watches the file descriptor (``add_reader``); each readable event is one ``read`` of what the
    socket holds (up to 64 KiB; up to ``SMALL_READ`` after a read of one short record), handed to
    OpenSSL's incoming BIO, and every record in it is decrypted before one ``data_received`` (a
    multiplexed protocol, HTTP/2, answers them in one write); a write encrypts into the outgoing
    BIO and sends the records with one ``write``. The socket is read and written with
    ``os.read`` and ``os.write`` on its descriptor, the same system calls as ``recv`` and
    ``send`` without flags: they take their arguments by the fast calling convention, where the
    socket's methods parse theirs with ``PyArg_ParseTuple`` (about 440 instructions a request
    each way, ``benchmarks/tls_call_cost.py``). OpenSSL reading the socket itself (an
    ``SSLSocket``) reads each record in two system calls (its 5-byte header, then the rest) and
    one record a read; uvloop's TLS transport adds Python layers and copies (measured: see
    ``benchmarks/vs_wrk.py --tls`` and ``benchmarks/vs_h2load.py --tls``).

    Writes that do not go out at once are kept and flushed when the socket is writable;
    ``get_extra_info("ssl_object")`` is the :class:`ssl.SSLObject` (``session``,
    ``session_reused``, ``selected_alpn_protocol()``, ``version()``)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        tls: ssl.SSLObject,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        protocol: asyncio.Protocol,
    ) -> None:
        self.loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self.tls = tls
        self.incoming = incoming
        self.outgoing = outgoing
        self.protocol = protocol
        self.pending: list[bytes] = []  # encrypted, not yet sent (the socket was full)
        self.closing = False
        self.wrote = False  # a write since the reader last delivered (it sent what OpenSSL held)
        # OpenSSL may hold part of a record (in the incoming BIO or its own buffer): until a
        # read took one record whole and left the BIO empty, the next bytes may not start one
        self.partial = True
        self.socket_read: object = SOCKET_READ  # the next read's size (see _reader)
        # the C methods of the hot path, bound once (the SSLObject's own C object when it has
        # one: its Python wrappers cost a call more each way), in closures: a read and a write
        # cost no attribute lookups (benchmarks/tls_call_cost.py, HTTPS/1.1 against nginx:
        # 1,500 instructions a request above the bare floor client, 3,090 as methods)
        c_tls = getattr(tls, "_sslobj", tls)
        self.read: Callable[[int], bytes] = c_tls.read
        self.write: Callable[[bytes], None] = self._writer(c_tls.write, outgoing.read)
        protocol.connection_made(self)  # type: ignore[arg-type]
        if not self.closing:  # the protocol may refuse the connection at once (ALPN)
            loop.add_reader(self.fd, self._reader(incoming, c_tls.read, protocol))
            if incoming.pending:  # records that came with the end of the handshake
                loop.call_soon(self._decrypt, None)

    def _reader(
        self,
        incoming: ssl.MemoryBIO,
        read: Callable[..., bytes],
        protocol: asyncio.Protocol,
    ) -> Callable[[], None]:
        """The readable event's callback: one ``read``, into the incoming BIO; the one record
        it usually brings decrypted and delivered, or every record (:meth:`_decrypt`). A read
        that is one whole record (its header's length, the BIO empty before) leaves nothing in
        the BIO, which is then not asked (a C attribute read: about 280 instructions). What
        reading made OpenSSL answer is sent after the delivery, unless a write of the protocol's
        took it along (a request sent from a reply's callback): then asking the BIO is spared."""
        feed, outgoing, deliver = incoming.write, self.outgoing, protocol.data_received
        lost, decrypt, send = self._lost, self._decrypt, self._send
        want_read, ended = ssl.SSLWantReadError, (ssl.SSLZeroReturnError, ssl.SSLEOFError)
        # the descriptor and the sizes as the objects the C calls take (compiled, an int
        # constant is made into one at every call, and a module global is a dict lookup)
        fd: object = self.fd
        large: object = SOCKET_READ
        small: object = SMALL_READ
        small_n = SMALL_READ
        read_size: object = READ_SIZE
        read_socket: Callable[..., bytes] = os.read

        def readable() -> None:
            try:
                data = read_socket(fd, self.socket_read)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                lost(exc)
                return
            if not data:
                lost(None)
                return
            feed(data)
            n = len(data)
            partial = self.partial
            whole = not partial and n > 5 and n - 5 == (data[3] << 8 | data[4])
            # the next read's size: after one short record alone (a short reply, the socket
            # emptied) most likely another, a small read; after anything else (a read that
            # filled the small size: the loop's watch is level-triggered, so the socket is
            # readable again at once; several records; a long record's parts) a large read
            self.socket_read = small if whole and n < small_n else large
            try:
                # one record's data at most. At a record's start (nothing held of one) no
                # record's plaintext is longer than what was read, so asking for that much
                # takes the first record whole, in a buffer of that size (asking for READ_SIZE
                # allocated 64 KiB and shrank it, each read)
                chunk = read(read_size if partial else n)
            except want_read:  # the rest of the record is still on its way
                self.partial = True
                return
            except ended:
                lost(None)
                return
            except OSError as exc:  # ssl.SSLError: an alert, a bad record
                lost(exc)
                return
            if not chunk or (not whole and incoming.pending):  # close_notify, or more records
                decrypt(chunk)
            else:  # the common case: the one record a read brought
                self.partial = False
                self.wrote = False
                deliver(chunk)
                if not self.wrote and not self.closing and outgoing.pending:
                    send(outgoing.read())  # what reading made OpenSSL answer

        return readable

    def _writer(
        self, encrypt: Callable[[bytes], int], encrypted: Callable[[], bytes]
    ) -> Callable[[bytes], None]:
        """``write``: encrypt into the outgoing BIO, one ``write`` of the records to the socket;
        what does not go out waits (in order) for the socket to be writable."""
        pending, lost = self.pending, self._lost
        fd: object = self.fd
        write_socket: Callable[..., int] = os.write

        def write(data: bytes) -> None:
            if self.closing:
                return
            try:
                encrypt(data)
            except OSError as exc:
                lost(exc)
                return
            out = encrypted()  # (with anything OpenSSL had to send: see _reader)
            self.wrote = True
            if pending:
                pending.append(out)
                return
            try:
                n = write_socket(fd, out)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:
                lost(exc)
                return
            if n < len(out):
                pending.append(out[n:])
                self.loop.add_writer(self.fd, self._writable)

        return write

    def _decrypt(self, first: bytes | None = None) -> None:
        """Decrypt every whole record the incoming BIO holds (after ``first``, already read);
        one delivery."""
        read: Callable[..., bytes] = self.read
        incoming = self.incoming
        chunks: list[bytes] = []
        end: tuple[Exception | None] | None = None  # the connection ended after these
        try:
            chunk = read(READ_SIZE) if first is None else first
            while True:
                if not chunk:  # the server's close_notify
                    end = (None,)
                    break
                chunks.append(chunk)
                left = incoming.pending
                if not left:  # every record read whole
                    self.partial = False
                    break
                # a read that returned data took its record whole: the next starts the BIO, and
                # no record's plaintext is longer than what the BIO holds (a buffer that size,
                # not READ_SIZE's 64 KiB allocated and shrunk)
                chunk = read(left)
        except ssl.SSLWantReadError:  # the rest of a record is still on its way
            self.partial = True
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            end = (None,)
        except OSError as exc:  # ssl.SSLError: an alert, a bad record
            end = (exc,)
        if chunks and not self.closing:
            self.protocol.data_received(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        if self.outgoing.pending and not self.closing:  # what reading made OpenSSL answer
            self._send(self.outgoing.read())
        if end is not None:
            self._lost(end[0])

    def _send(self, data: bytes) -> None:
        if self.closing:  # the descriptor is closed, and its number may be another's by now
            return
        if self.pending:
            self.pending.append(data)
            return
        try:
            n = os.write(self.fd, data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:
            self._lost(exc)
            return
        if n < len(data):
            self.pending.append(data[n:])
            self.loop.add_writer(self.fd, self._writable)

    def _writable(self) -> None:
        data = b"".join(self.pending)
        self.pending.clear()
        self.loop.remove_writer(self.fd)
        self._send(data)  # what does not go out waits for the socket again

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self.tls
        if name == "socket":
            return self.sock
        if name == "peername":
            return self.sock.getpeername()
        return default

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self._lost(None)

    def abort(self) -> None:
        self._lost(None)

    def _lost(self, exc: Exception | None) -> None:
        if self.closing:
            return
        self.closing = True
        self.pending.clear()
        self.loop.remove_reader(self.fd)
        self.loop.remove_writer(self.fd)
        with contextlib.suppress(OSError):
            self.sock.close()
        self.loop.call_soon(self.protocol.connection_lost, exc)


def set_ready(future: asyncio.Future[None]) -> None:
    """A descriptor watch's callback: resolve ``future`` (once; the watch may fire again)."""
    if not future.done():
        future.set_result(None)
