//! The Rust server of examples/grpc-bench: tonic on tokio's multi-threaded runtime (one worker
//! per CPU the process may use), the helloworld.Greeter service whose SayHello replies with the
//! message it was sent.
//!
//!     cargo build --release && target/release/server 127.0.0.1:50051

use std::net::SocketAddr;

use tonic::{transport::Server, Request, Response, Status};

pub mod helloworld {
    tonic::include_proto!("helloworld");
}

use helloworld::greeter_server::{Greeter, GreeterServer};
use helloworld::{HelloReply, HelloRequest};

struct Echo;

#[tonic::async_trait]
impl Greeter for Echo {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let reply = HelloReply {
            response: request.into_inner().request,
        };
        Ok(Response::new(reply))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address: SocketAddr = std::env::args()
        .nth(1)
        .ok_or("usage: server HOST:PORT")?
        .parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(
        Server::builder()
            .add_service(GreeterServer::new(Echo))
            .serve(address),
    )?;
    Ok(())
}
