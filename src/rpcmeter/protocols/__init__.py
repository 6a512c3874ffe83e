"""Wire formats shared by the drivers (clients) and the built-in servers: HTTP/2
(:mod:`rpcmeter.protocols.h2`, a sans-I/O connection and its thin asyncio transport), ZMTP
(:mod:`rpcmeter.protocols.zmtp`), gRPC's names and framing (:mod:`rpcmeter.protocols.grpc`),
protobuf schemas with requests written as JSON and replies checked field by field
(:mod:`rpcmeter.protocols.grpc_schema`, server reflection as a sans-I/O session), the raw frames
(:mod:`rpcmeter.protocols.raw`), ZeroMQ's frames and addresses (:mod:`rpcmeter.protocols.zmq`),
rpyc's connection options (:mod:`rpcmeter.protocols.rpyc`), the request and reply bodies of the
built-in workloads (:mod:`rpcmeter.protocols.bodies`) and how servers report their times
(:mod:`rpcmeter.protocols.timing`). Nothing here opens a socket but the HTTP/2 transport;
nothing here imports a driver or a server."""
