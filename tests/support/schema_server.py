"""A gRPC server with stubs generated at start (grpcio-tools): RouteGuide (gRPC's example
service, ``benchmarks/greeter/route_guide.proto``) and ``kitchen.Kitchen``
(``tests/support/protos/kitchen.proto``), for the tests of calls named from a schema.

    python -m tests.support.schema_server --port 0 [--reflection] [--cert F --key F]

prints ``listening PORT`` once it serves; with ``--reflection`` it also serves grpcio's server
reflection (``grpc.reflection.v1alpha`` only, as grpcio-reflection does); with ``--api-key K``
every call (reflection's too) without the metadata ``x-api-key: K`` is refused
(``UNAUTHENTICATED``). With ``--record FILE`` it writes what every ``GetFeature`` call carried
(its point's latitude and its ``x-request-id`` metadata) as JSON lines, each before the call is
answered (so a server that rpcmeter had to kill at the end, slow to stop on a busy machine, has
written them all). It stops on SIGTERM.

RouteGuide: ``GetFeature`` answers the feature at a point (an unnamed one where there is none),
``ListFeatures`` streams the features inside a rectangle, ``RecordRoute`` sums up a stream of
points, ``RouteChat`` answers every note with itself (gRPC's example answers with the earlier
notes at the same place; one reply per note suits a ping-pong stream). Kitchen: ``Echo`` the
order as decoded, ``Place`` a receipt, ``Stream`` every order back.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIRS = (ROOT / "benchmarks" / "greeter", Path(__file__).resolve().parent / "protos")
FEATURES = ROOT / "benchmarks" / "greeter" / "route_guide_db.json"


def stubs() -> tuple[Any, Any, Any, Any]:
    """The generated modules: (route_guide_pb2, route_guide_pb2_grpc, kitchen_pb2,
    kitchen_pb2_grpc)."""
    for d in PROTO_DIRS:
        if str(d) not in sys.path:
            sys.path.append(str(d))
    rg, rg_grpc = grpc.protos_and_services("route_guide.proto")
    k, k_grpc = grpc.protos_and_services("kitchen.proto")
    return rg, rg_grpc, k, k_grpc


def distance(a: Any, b: Any) -> int:
    """Metres between two points (haversine, as gRPC's example computes it)."""
    lat1, lat2 = math.radians(a.latitude / 1e7), math.radians(b.latitude / 1e7)
    dlat, dlon = lat2 - lat1, math.radians((b.longitude - a.longitude) / 1e7)
    h = math.sin(dlat / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin(dlon / 2) ** 2
    return int(6371000 * 2 * math.atan2(math.sqrt(h), math.sqrt(1 - h)))


class KeyCheck(grpc.ServerInterceptor):  # type: ignore[misc]
    """Refuses every call without the metadata ``x-api-key`` of the given value."""

    def __init__(self, key: str) -> None:
        self.key = key

        def refuse(request: Any, context: Any) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "x-api-key missing or wrong")

        self.refused = grpc.unary_unary_rpc_method_handler(refuse)
        self.refused_stream = grpc.stream_stream_rpc_method_handler(refuse)

    def intercept_service(self, continuation: Any, details: Any) -> Any:
        if (("x-api-key", self.key)) in tuple(details.invocation_metadata):
            return continuation(details)
        return self.refused_stream if "Reflection" in details.method else self.refused


def serve(args: argparse.Namespace) -> int:
    rg, rg_grpc, k, k_grpc = stubs()
    db = [
        rg.Feature(name=f["name"], location=rg.Point(**f["location"]))
        for f in json.loads(FEATURES.read_text())
    ]

    # --record: each GetFeature's latitude and x-request-id, a line apiece, written at once
    record = None
    if args.record:  # (closed when the server stops)
        record = open(args.record, "w", buffering=1, encoding="utf-8")  # noqa: SIM115
    lock = threading.Lock()

    class RouteGuide(rg_grpc.RouteGuideServicer):  # type: ignore[misc, name-defined]
        def GetFeature(self, point: Any, context: Any) -> Any:
            if record is not None:
                meta = dict(context.invocation_metadata())
                rid = str(meta.get("x-request-id", ""))
                line = json.dumps({"latitude": point.latitude, "request_id": rid})
                with lock:
                    record.write(line + "\n")
            for feature in db:
                if feature.location == point:
                    return feature
            return rg.Feature(name="", location=point)

        def ListFeatures(self, rect: Any, context: Any) -> Iterator[Any]:
            lo = (
                min(rect.lo.latitude, rect.hi.latitude),
                min(rect.lo.longitude, rect.hi.longitude),
            )
            hi = (
                max(rect.lo.latitude, rect.hi.latitude),
                max(rect.lo.longitude, rect.hi.longitude),
            )
            for f in db:
                if lo[0] <= f.location.latitude <= hi[0] and lo[1] <= f.location.longitude <= hi[1]:
                    yield f

        def RecordRoute(self, points: Iterator[Any], context: Any) -> Any:
            count = features = metres = 0
            prev = None
            for p in points:
                count += 1
                features += any(f.location == p and f.name for f in db)
                if prev is not None:
                    metres += distance(prev, p)
                prev = p
            return rg.RouteSummary(point_count=count, feature_count=features, distance=metres)

        def RouteChat(self, notes: Iterator[Any], context: Any) -> Iterator[Any]:
            yield from notes

    class Kitchen(k_grpc.KitchenServicer):  # type: ignore[misc, name-defined]
        def Echo(self, order: Any, context: Any) -> Any:
            return order

        def Place(self, order: Any, context: Any) -> Any:
            return k.Receipt(
                id=order.id,
                item_count=len(order.items),
                placed=order.placed,
                wait=order.wait,
                payment=order.WhichOneof("payment") or "",
            )

        def Stream(self, orders: Iterator[Any], context: Any) -> Iterator[Any]:
            yield from orders

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8),
        interceptors=[KeyCheck(args.api_key)] if args.api_key else [],
    )
    rg_grpc.add_RouteGuideServicer_to_server(RouteGuide(), server)
    k_grpc.add_KitchenServicer_to_server(Kitchen(), server)
    if args.reflection:
        from grpc_reflection.v1alpha import reflection

        names = [
            rg.DESCRIPTOR.services_by_name["RouteGuide"].full_name,
            k.DESCRIPTOR.services_by_name["Kitchen"].full_name,
            reflection.SERVICE_NAME,
        ]
        reflection.enable_server_reflection(names, server)
    address = f"{args.host}:{args.port}"
    if args.cert:
        creds = grpc.ssl_server_credentials(
            [(Path(args.key).read_bytes(), Path(args.cert).read_bytes())]
        )
        port = server.add_secure_port(address, creds)
    else:
        port = server.add_insecure_port(address)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print(f"listening {port}", flush=True)
    stop.wait()
    server.stop(grace=None)
    if record is not None:
        record.close()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--reflection", action="store_true")
    parser.add_argument("--cert", help="TLS: the certificate chain (PEM)")
    parser.add_argument("--key", help="TLS: the private key (PEM)")
    parser.add_argument("--api-key", help="refuse calls without this x-api-key metadata")
    parser.add_argument("--record", help="write what every GetFeature call carried here")
    return serve(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
