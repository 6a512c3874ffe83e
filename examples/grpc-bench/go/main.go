// The Go server of examples/grpc-bench: grpc-go, the helloworld.Greeter service whose SayHello
// replies with the message it was sent (decoded and encoded again by the generated code in
// helloworld/, made with `protoc --go_out --go-grpc_out` from ../proto/helloworld.proto).
//
//	go build -o server . && ./server 127.0.0.1:50051
package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"

	pb "grpcbench/helloworld"
)

type echo struct {
	pb.UnimplementedGreeterServer
}

func (echo) SayHello(_ context.Context, in *pb.HelloRequest) (*pb.HelloReply, error) {
	return &pb.HelloReply{Response: in.GetRequest()}, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: server HOST:PORT")
		os.Exit(2)
	}
	listener, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
	server := grpc.NewServer()
	pb.RegisterGreeterServer(server, echo{})
	if err := server.Serve(listener); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}
