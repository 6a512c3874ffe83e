// A small, fast greeter server for rpcmeter's benchmarks: gRPC (grpc-go) on one port, plain
// HTTP/2 without TLS (h2c, prior knowledge; net/http) on another, and HTTPS (HTTP/2 negotiated by
// ALPN h2, or HTTP/1.1; net/http) on a third, with the certificate and key files given.
//
// Streaming: rpcmeter's built-in streaming methods (rpcmeter.Bench/StreamServer, StreamClient,
// StreamBidi; workload "stream"), raw bytes: the call's metadata rpcmeter-messages and
// rpcmeter-reply-bytes say how many replies and how large (rpcmeter.protocols.bodies).
//
// gRPC: helloworld.Greeter/SayHello (HelloRequest{name} -> HelloReply{message: "Hello " + name}),
// with the two messages read and written by hand (one string field each), so no generated code
// is needed. HTTP: /noop answers 200 with an empty body, any other path 200 "Hello".
//
// Canned (canned.go): a server that answers every HTTP/1.1 or HTTP/2 request with nginx's reply
// and costs little per request, for benchmarks that must see the client's cost.
//
// RouteGuide (routeguide.RouteGuide, the service of gRPC's examples; route_guide.go): its
// messages are dynamic protobuf messages of the descriptors in route_guide.protoset (compiled
// from route_guide.proto), its features those of route_guide_db.json; both files are embedded.
// The server's reflection service (grpc.reflection.v1 and v1alpha) describes RouteGuide.
//
//	go build -o greeter . && ./greeter -grpc 127.0.0.1:50051 -http 127.0.0.1:8080 \
//	    -https 127.0.0.1:8443 -cert server.pem -key server.key
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/protobuf/proto"
)

// rawCodec passes message bytes through: the handlers below read and write protobuf by hand.
// Protobuf messages (RouteGuide's, reflection's) go through protobuf itself.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *[]byte:
		return *m, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	switch m := v.(type) {
	case *[]byte:
		*m = append((*m)[:0], data...)
		return nil
	case proto.Message:
		return proto.Unmarshal(data, m)
	}
	return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
}

func (rawCodec) Name() string { return "proto" }

// name reads field 1 (a string) of a HelloRequest.
func name(msg []byte) ([]byte, error) {
	for i := 0; i < len(msg); {
		tag := msg[i]
		i++
		if tag != 0x0a { // field 1, length-delimited
			return nil, errors.New("unexpected field")
		}
		n, shift := 0, 0
		for ; i < len(msg); i++ {
			n |= int(msg[i]&0x7f) << shift
			shift += 7
			if msg[i] < 0x80 {
				i++
				break
			}
		}
		if i+n > len(msg) {
			return nil, errors.New("truncated")
		}
		return msg[i : i+n], nil
	}
	return nil, nil
}

func sayHello(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var in []byte
	if err := dec(&in); err != nil {
		return nil, err
	}
	who, err := name(in)
	if err != nil {
		return nil, err
	}
	text := append([]byte("Hello "), who...)
	out := make([]byte, 0, len(text)+6)
	out = append(out, 0x0a)
	for n := len(text); ; n >>= 7 {
		if n < 0x80 {
			out = append(out, byte(n))
			break
		}
		out = append(out, byte(n&0x7f|0x80))
	}
	out = append(out, text...)
	return &out, nil
}

var greeter = grpc.ServiceDesc{
	ServiceName: "helloworld.Greeter",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "SayHello", Handler: sayHello}},
	Metadata:    "greeter.proto",
}

// streamParams reads how many replies a streaming call wants, and builds the reply message.
func streamParams(ctx context.Context) (int, []byte) {
	md, _ := metadata.FromIncomingContext(ctx)
	n, size := 1, 0
	if v := md.Get("rpcmeter-messages"); len(v) > 0 {
		n, _ = strconv.Atoi(v[0])
	}
	if v := md.Get("rpcmeter-reply-bytes"); len(v) > 0 {
		size, _ = strconv.Atoi(v[0])
	}
	pattern := []byte("rpcmeter-payload.")
	reply := make([]byte, 0, size+len(pattern))
	for len(reply) < size {
		reply = append(reply, pattern...)
	}
	return n, reply[:size]
}

func streamServer(_ any, stream grpc.ServerStream) error {
	var in []byte
	if err := stream.RecvMsg(&in); err != nil {
		return err
	}
	n, reply := streamParams(stream.Context())
	for i := 0; i < n; i++ {
		if err := stream.SendMsg(&reply); err != nil {
			return err
		}
	}
	return nil
}

func streamClient(_ any, stream grpc.ServerStream) error {
	_, reply := streamParams(stream.Context())
	var in []byte
	for {
		err := stream.RecvMsg(&in)
		if err == io.EOF {
			return stream.SendMsg(&reply)
		}
		if err != nil {
			return err
		}
	}
}

func streamBidi(_ any, stream grpc.ServerStream) error {
	_, reply := streamParams(stream.Context())
	var in []byte
	for {
		err := stream.RecvMsg(&in)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.SendMsg(&reply); err != nil {
			return err
		}
	}
}

var bench = grpc.ServiceDesc{
	ServiceName: "rpcmeter.Bench",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "StreamServer", Handler: streamServer, ServerStreams: true},
		{StreamName: "StreamClient", Handler: streamClient, ClientStreams: true},
		{StreamName: "StreamBidi", Handler: streamBidi, ServerStreams: true, ClientStreams: true},
	},
	Metadata: "rpcmeter",
}

func main() {
	grpcAddr := flag.String("grpc", "127.0.0.1:50051", "gRPC listen address (empty: none)")
	httpAddr := flag.String("http", "", "h2c listen address (empty: none)")
	httpsAddr := flag.String("https", "", "HTTPS listen address, h2 by ALPN (empty: none)")
	certFile := flag.String("cert", "", "HTTPS: the certificate (chain) file, PEM")
	keyFile := flag.String("key", "", "HTTPS: the private key file, PEM")
	cannedAddr := flag.String("canned", "", "the canned server's listen address, HTTP/1.1 and h2c (empty: none; canned.go)")
	cannedTLSAddr := flag.String("canned-tls", "", "the canned server over TLS, h2 or HTTP/1.1 by ALPN (empty: none)")
	flag.Parse()
	encoding.RegisterCodec(rawCodec{})

	if *grpcAddr != "" {
		lis, err := net.Listen("tcp", *grpcAddr)
		if err != nil {
			log.Fatal(err)
		}
		guide, err := newRouteGuide()
		if err != nil {
			log.Fatal(err)
		}
		srv := grpc.NewServer()
		srv.RegisterService(&greeter, struct{}{})
		srv.RegisterService(&bench, struct{}{})
		srv.RegisterService(guide.serviceDesc(), struct{}{})
		reflection.Register(srv)
		go func() { log.Fatal(srv.Serve(lis)) }()
		fmt.Printf("grpc %s\n", lis.Addr())
	}
	hello := []byte("Hello")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		if r.URL.Path != "/noop" {
			_, _ = w.Write(hello)
		}
	})
	if *httpAddr != "" {
		lis, err := net.Listen("tcp", *httpAddr)
		if err != nil {
			log.Fatal(err)
		}
		srv := &http.Server{Handler: handler}
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
		go func() { log.Fatal(srv.Serve(lis)) }()
		fmt.Printf("http %s\n", lis.Addr())
	}
	if *httpsAddr != "" {
		if *certFile == "" || *keyFile == "" {
			log.Fatal("-https needs -cert and -key")
		}
		lis, err := net.Listen("tcp", *httpsAddr)
		if err != nil {
			log.Fatal(err)
		}
		srv := &http.Server{Handler: handler}
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetHTTP2(true)
		go func() { log.Fatal(srv.ServeTLS(lis, *certFile, *keyFile)) }()
		fmt.Printf("https %s\n", lis.Addr())
	}
	if *cannedAddr != "" {
		lis, err := net.Listen("tcp", *cannedAddr)
		if err != nil {
			log.Fatal(err)
		}
		go serveCanned(lis, nil)
		fmt.Printf("canned %s\n", lis.Addr())
	}
	if *cannedTLSAddr != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			log.Fatalf("-canned-tls needs -cert and -key: %v", err)
		}
		lis, err := net.Listen("tcp", *cannedTLSAddr)
		if err != nil {
			log.Fatal(err)
		}
		config := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
		go serveCanned(lis, config)
		fmt.Printf("canned-tls %s\n", lis.Addr())
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
