//! Generates the RunFunction types, client and server from `proto/` with protox, a protobuf compiler
//! written in Rust, so building needs no `protoc`. The v1beta1 file must be the v1 contract under
//! another package; any other difference stops the build.

use std::error::Error;

/// The contract's lines that matter: no comments, no blank lines, no package line.
fn body(source: &str) -> Vec<&str> {
    source
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//") && !l.starts_with("package "))
        .collect()
}

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=proto");
    let v1 = std::fs::read_to_string("proto/v1/run_function.proto")?;
    let v1beta1 = std::fs::read_to_string("proto/v1beta1/run_function.proto")?;
    if body(&v1) != body(&v1beta1) {
        return Err(
            "proto/v1beta1/run_function.proto differs from proto/v1/run_function.proto \
                    beyond its package: copy v1 and change only the package line"
                .into(),
        );
    }
    let files = protox::compile(["v1/run_function.proto", "v1beta1/run_function.proto"], ["proto"])?;
    // BTreeMaps: maps encode in a stable order, so equal messages are equal bytes.
    tonic_prost_build::configure()
        .btree_map(".")
        .build_client(true)
        .build_server(true)
        .compile_fds(files)?;
    Ok(())
}
