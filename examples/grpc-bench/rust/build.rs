// Generates the helloworld messages and the Greeter service from ../proto with tonic-prost-build,
// using the protoc that the protoc-bin-vendored crate brings (no protoc needed on the machine).
fn main() -> Result<(), Box<dyn std::error::Error>> {
    std::env::set_var("PROTOC", protoc_bin_vendored::protoc_bin_path()?);
    tonic_prost_build::compile_protos("../proto/helloworld.proto")?;
    Ok(())
}
