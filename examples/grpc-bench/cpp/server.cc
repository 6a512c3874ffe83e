// The C++ server of examples/grpc-bench: gRPC C++ (Debian's libgrpc++-dev) with the callback API,
// the helloworld.Greeter service whose SayHello replies with the message it was sent.
//
//     make && build/server 127.0.0.1:50051
#include <cstdio>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "helloworld.grpc.pb.h"

namespace {

class Echo final : public helloworld::Greeter::CallbackService {
  grpc::ServerUnaryReactor* SayHello(grpc::CallbackServerContext* context,
                                     const helloworld::HelloRequest* request,
                                     helloworld::HelloReply* reply) override {
    *reply->mutable_response() = request->request();
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s HOST:PORT\n", argv[0]);
    return 2;
  }
  Echo service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(argv[1], grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) {
    std::fprintf(stderr, "server: cannot listen on %s\n", argv[1]);
    return 1;
  }
  server->Wait();
  return 0;
}
