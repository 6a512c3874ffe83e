"""The floor client of ``vs_ghz.py`` and ``vs_h2load.py`` (the server, the rounds and the summary
are :mod:`versus`'s).

The floor is the cheapest Python HTTP/2 client on uvloop: per connection, requests pre-encoded
once (stream id patched per request), one write per reply, replies found by walking frame
headers with ``int.from_bytes`` (a reply ends at a frame carrying END_STREAM), no HPACK decoding,
no status check, no clock and no bookkeeping. It is not a usable load generator; rpcmeter's
distance from it is the cost of its own work per call. Over TLS (``ca_file``) the floor runs on
the mechanism rpcmeter's TLS transport uses, with nothing of its own: OpenSSL's memory BIOs, one
``os.read`` of the socket per readable event, every record in it decrypted, one ``os.write`` per
write (the loop's own TLS transport is slower than rpcmeter's, so it would be no floor).
"""

from __future__ import annotations

from versus import FLOOR_TLS_HANDSHAKE, greeter, run_python_floor

from rpcmeter.net.endpoints import Endpoint

__all__ = ["FLOOR", "FLOOR_PROTOCOL", "greeter", "run_floor"]

# the floor client's protocol (it needs ``parts``, the request frames split around the stream
# id, ``preface`` and ``asyncio``); ``replies`` counts the replies it saw
FLOOR_PROTOCOL = """
def frame(kind, flags, sid, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + sid.to_bytes(4, "big") + payload
replies = 0

class Floor(asyncio.Protocol):
    def connection_made(self, transport):
        self.write = transport.write
        self.sid = 1
        self.buf = b""
        self.write(preface)

    def send(self, n):
        out = []
        sid = self.sid
        for _ in range(n):
            out.append(sid.to_bytes(4, "big").join(parts))
            sid += 2
        self.sid = sid
        self.write(b"".join(out))

    def data_received(self, data):
        global replies
        if self.buf:
            data = self.buf + data
        pos, n, ended, extra = 0, len(data), 0, b""
        while n - pos >= 9:
            end = pos + 9 + int.from_bytes(data[pos:pos + 3])
            if end > n:
                break
            kind, flags = data[pos + 3], data[pos + 4]
            if kind == 4 and not flags & 1:
                extra += frame(4, 1, 0, b"")
            elif kind == 6 and not flags & 1:
                extra += frame(6, 1, 0, data[pos + 9:end])
            elif flags & 1 and kind < 2:
                ended += 1
            pos = end
        self.buf = data[pos:]
        if extra:
            self.write(extra)
        if ended:
            replies += ended
            self.send(ended)

"""

FLOOR = (
    """
import asyncio, os, resource, socket, ssl, sys, time, uvloop
"""
    + FLOOR_PROTOCOL
    + """
host, port, n_conns, streams, duration, mode = sys.argv[1:7]
path, ca_file = sys.argv[7].encode(), sys.argv[9]
from hpack import Encoder
headers = [(b":method", b"POST" if mode == "grpc" else b"GET"),
           (b":scheme", b"https" if ca_file else b"http"),
           (b":path", path), (b":authority", f"{host}:{port}".encode())]
if mode == "grpc":
    headers += [(b"content-type", b"application/grpc"), (b"te", b"trailers")]
    body = bytes.fromhex(sys.argv[8])
    block = Encoder().encode(headers)
    head = frame(1, 4, 0, block)
    parts = [head[:5], head[9:] + frame(0, 1, 0, b"\\0" + len(body).to_bytes(4, "big") + body)[:5],
             b"\\0" + len(body).to_bytes(4, "big") + body]
else:
    head = frame(1, 5, 0, Encoder().encode(headers))
    parts = [head[:5], head[9:]]
preface = (b"PRI * HTTP/2.0\\r\\n\\r\\nSM\\r\\n\\r\\n" + frame(4, 0, 0, (4).to_bytes(2, "big")
           + (1 << 30).to_bytes(4, "big")) + frame(8, 0, 0, (1 << 30).to_bytes(4, "big")))

"""
    + FLOOR_TLS_HANDSHAKE
    + """
class Tls:  # over TLS: memory BIOs, one os.read a readable event, one os.write a write
    def __init__(self, loop, protocol):
        context = floor_context(ca_file)
        context.set_alpn_protocols(["h2"])
        self.sock, tls, inc, out = handshake(context, host, int(port))  # (held: fd is read)
        assert tls.selected_alpn_protocol() == "h2"
        self.protocol = protocol
        fd, os_read, os_write, feed = self.sock.fileno(), os.read, os.write, inc.write
        deliver = protocol.data_received
        read, encrypt, encrypted, aligned = tls._sslobj.read, tls._sslobj.write, out.read, [False]

        def write(data):
            encrypt(data)
            os_write(fd, encrypted())

        def readable():  # as rpcmeter's transport: a record read by what can hold it
            data = os_read(fd, 65536)
            feed(data)
            size = len(data) if aligned[0] else 65536  # at a record's start: no more than that
            chunks = []
            try:
                while True:
                    chunks.append(read(size))
                    size = inc.pending  # the next record's start: it holds no more than that
                    if not size:
                        aligned[0] = True
                        break
            except ssl.SSLWantReadError:
                aligned[0] = False
            if chunks:
                deliver(b"".join(chunks))

        self.write = write
        protocol.connection_made(self)
        loop.add_reader(fd, readable)

async def main():
    loop = asyncio.get_running_loop()
    if ca_file:
        held = [Tls(loop, Floor()) for _ in range(int(n_conns))]  # their sockets stay open
        conns = [t.protocol for t in held]
    else:
        conns = [(await loop.create_connection(Floor, host, int(port)))[1]
                 for _ in range(int(n_conns))]
    await asyncio.sleep(0.2)
    start, before, cpu = time.perf_counter(), replies, resource.getrusage(resource.RUSAGE_SELF)
    for c in conns:
        c.send(int(streams))
    await asyncio.sleep(float(duration))
    seconds, end = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = end.ru_utime - cpu.ru_utime + end.ru_stime - cpu.ru_stime
    print(replies - before, seconds, cpu_s)

uvloop.run(main())
"""
)


def run_floor(
    endpoint: Endpoint,
    mode: str,
    path: str,
    body_hex: str,
    conns: int,
    streams: int,
    duration: float,
    cpu: int,
    ca_file: str = "",
) -> tuple[float, float]:
    """(calls/s, client CPU seconds per call) of the bare floor client (its own CPU over the
    measured interval, as rpcmeter's is); over TLS trusting ``ca_file`` when given."""
    args = [str(endpoint.host), str(endpoint.port), str(conns), str(streams), str(duration)]
    return run_python_floor(FLOOR, [*args, mode, path, body_hex, ca_file], cpu, duration + 60)
