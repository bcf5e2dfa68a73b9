//! Compiles `switchyard.proto` with protox (pure Rust), so a fresh machine
//! needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/switchyard/v1/switchyard.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
