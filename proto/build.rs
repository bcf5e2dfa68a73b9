//! Compiles `switchyard.proto` with protox (pure Rust), so a fresh machine
//! needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/switchyard/v1/switchyard.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    // `ConfigUpdate`'s payloads as `bytes::Bytes`: a coordinator encodes
    // each change once and hands the same buffer to every watch stream.
    tonic_prost_build::configure()
        .bytes(".switchyard.v1.ConfigUpdate")
        .compile_fds(descriptors)?;
    Ok(())
}
