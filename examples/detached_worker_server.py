"""An HTTP server (200 with an empty body for every GET, like the built-in one's ``noop``) that
hands work to a detached worker: its first request double-forks a process that leaves the server's
session and tree (reparented to init), burns ``--spin-s`` seconds of CPU and exits, writing its
pid to ``--done`` (when given) first. Used by ``detached-worker.toml`` and the tests: a process
tree walk never sees that worker; the server's cgroup counts it.

    python detached_worker_server.py --port 8080 [--spin-s 0.5] [--done FILE]
"""

from __future__ import annotations

import argparse
import http.server
import os
import time


def spin_detached(spin_s: float, done: str | None) -> None:
    """Double-fork a worker out of this process's session and tree that burns ``spin_s`` CPU."""
    if os.fork() != 0:
        return
    os.setsid()
    if os.fork() == 0:
        start = time.process_time()
        while time.process_time() - start < spin_s:
            pass
        if done:
            with open(done + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(done + ".tmp", done)
    os._exit(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--spin-s", type=float, default=0.5)
    parser.add_argument("--done")
    args = parser.parse_args()
    started = False

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            nonlocal started
            if not started:
                started = True
                spin_detached(args.spin_s, args.done)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    http.server.ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
