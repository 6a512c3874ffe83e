"""The tutorial's gRPC server: helloworld's Greeter, with server reflection, so that a client
needs no .proto file to call it.

    python greeter_server.py --port 50051

It stops on SIGTERM. The stubs are generated when it starts (grpcio-tools), from the greeter.proto
of benchmarks/greeter (the Go greeter's service).
"""

from __future__ import annotations

import argparse
import signal
import sys
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from grpc_reflection.v1alpha import reflection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=50051)
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "greeter"))
    pb2, pb2_grpc = grpc.protos_and_services("greeter.proto")

    class Greeter(pb2_grpc.GreeterServicer):  # type: ignore[misc,name-defined]
        def SayHello(self, request: Any, context: Any) -> Any:
            return pb2.HelloReply(message=f"Hello, {request.name}")

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb2_grpc.add_GreeterServicer_to_server(Greeter(), server)
    names = (pb2.DESCRIPTOR.services_by_name["Greeter"].full_name, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    server.add_insecure_port(f"{args.host}:{args.port}")
    server.start()
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    print(f"listening {args.port}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
