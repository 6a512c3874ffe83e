"""What a reply's header block costs the client to decode, without sockets: real blocks of nginx
1.22 (every field but ``:status`` added to the dynamic table, Huffman coded, on every reply) and
of Go's net/http (fields added once, then referred to by index), decoded by the ``hpack``
library, by :class:`rpcmeter.protocols.h2.header_blocks.Decoder` (strings remembered, and not),
and looked up by :class:`~rpcmeter.protocols.h2.header_blocks.HeaderBlocks` as the HTTP/2
connection does; CPU time per block, best of ``--repeat``.

    python benchmarks/hpack_decode.py [--blocks 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import hpack

from rpcmeter.protocols.h2.header_blocks import Decoder, HeaderBlocks, huffman_table

# captured from real connections (GET /): nginx 1.22 with http2, and the Go greeter's h2c port
NGINX = bytes.fromhex(
    "887689aa6355e580ae212e1f6196df3dbf4a09c5349fba82009c5021b810dc0094c5a37f"
    "5f87497ca58ae819aa5c0135"
)
GO_FIRST = bytes.fromhex(
    "885f87497ca58ae819aa5c01306196df3dbf4a09c5349fba82009c5021b8166e01e53168df"
)
GO_AGAIN = bytes.fromhex("88c0bfbe")


def per_block(run: Callable[[], object], n: int, repeat: int) -> float:
    """CPU microseconds per call of ``run``, best of ``repeat`` rounds of ``n``."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(n):
            run()
        best = min(best, (time.process_time() - t0) / n)
    return best * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    n, r = args.blocks, args.repeat
    huffman_table()  # built once per process
    library = hpack.Decoder()
    ours = Decoder()
    forgetful = Decoder()
    forgetful.STRINGS = 0
    cached = HeaderBlocks()
    assert [tuple(h) for h in library.decode(NGINX, raw=True)] == ours.decode(NGINX)

    def no_strings() -> object:
        forgetful.strings.clear()
        return forgetful.decode(NGINX)

    rows = [
        ("nginx", "hpack library", per_block(lambda: library.decode(NGINX, raw=True), n, r)),
        ("nginx", "Decoder, strings remembered", per_block(lambda: ours.decode(NGINX), n, r)),
        ("nginx", "Decoder, every string decoded", per_block(no_strings, n, r)),
        ("nginx", "HeaderBlocks (the connection)", per_block(lambda: cached.view_of(NGINX), n, r)),
    ]
    go_library, go_cached = hpack.Decoder(), HeaderBlocks()
    go_library.decode(GO_FIRST)
    go_cached.view_of(GO_FIRST)
    rows += [
        ("Go", "hpack library", per_block(lambda: go_library.decode(GO_AGAIN, raw=True), n, r)),
        (
            "Go",
            "HeaderBlocks (the connection)",
            per_block(lambda: go_cached.view_of(GO_AGAIN), n, r),
        ),
    ]
    print(f"{'server':<7} {'decoded by':<32} {'us CPU/block':>12}  (best of {r} x {n:,})")
    for server, how, us in rows:
        print(f"{server:<7} {how:<32} {us:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
