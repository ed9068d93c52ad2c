// Generates the messages and the Greeter service of grpc_bench's helloworld.proto (protoc comes
// from Debian's protobuf-compiler, found on PATH or through the PROTOC variable).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::configure()
        .build_client(false)
        .compile_protos(&["../proto/grpc_bench/helloworld.proto"], &["../proto"])?;
    Ok(())
}
