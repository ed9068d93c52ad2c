//! tonic_greeter_server: grpc_bench's helloworld.Greeter/SayHello served by tonic.
//!
//!     tonic_greeter_server [PORT]
//!
//! Serves cleartext HTTP/2 on 127.0.0.1:PORT (0 or absent: a free port), prints
//! "tonic_greeter_server: listening on N" once bound and stops on SIGINT or SIGTERM. SayHello
//! moves the request's Hello into the reply, as grpc_bench's tonic server does. One thread: a
//! current-thread tokio runtime (run.py pins the process to one core), tonic's defaults otherwise.
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

pub mod helloworld {
    tonic::include_proto!("helloworld");
}
use helloworld::greeter_server::{Greeter, GreeterServer};
use helloworld::{HelloReply, HelloRequest};

struct GreeterImpl;

#[tonic::async_trait]
impl Greeter for GreeterImpl {
    async fn say_hello(&self, request: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        Ok(Response::new(HelloReply { response: request.into_inner().request }))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = std::env::args().nth(1).unwrap_or_else(|| "0".to_string());
    let listener = TcpListener::bind(format!("127.0.0.1:{port}")).await?;
    println!("tonic_greeter_server: listening on {}", listener.local_addr()?.port());
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    tonic::transport::Server::builder()
        .add_service(GreeterServer::new(GreeterImpl))
        // TCP_NODELAY, as tonic's own serve() sets it by default (and every other server here does).
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            async move {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
            },
        )
        .await?;
    Ok(())
}
