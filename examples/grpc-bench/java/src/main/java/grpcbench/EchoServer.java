// The Java server of examples/grpc-bench: grpc-java on Netty, the helloworld.Greeter service whose
// SayHello replies with the message it was sent. The handler never blocks, so calls run on the
// Netty event loop threads (directExecutor) rather than being handed to a second pool.
package grpcbench;

import grpcbench.helloworld.GreeterGrpc;
import grpcbench.helloworld.HelloReply;
import grpcbench.helloworld.HelloRequest;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;

public final class EchoServer {
  private EchoServer() {}

  static final class Echo extends GreeterGrpc.GreeterImplBase {
    @Override
    public void sayHello(HelloRequest request, StreamObserver<HelloReply> replies) {
      replies.onNext(HelloReply.newBuilder().setResponse(request.getRequest()).build());
      replies.onCompleted();
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: java -jar grpcbench-server.jar HOST PORT");
      System.exit(2);
    }
    Server server =
        NettyServerBuilder.forAddress(new InetSocketAddress(args[0], Integer.parseInt(args[1])))
            .directExecutor()
            .addService(new Echo())
            .build()
            .start();
    server.awaitTermination();
  }
}
