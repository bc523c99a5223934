//! Compiles `walletops/v1/*.proto` with the pure-Rust protox compiler (no protoc needed) and
//! writes the encoded descriptor set that the core serves through gRPC reflection.

use std::{env, fs, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // tonic-prost-build does not emit this for proto files itself.
    println!("cargo:rerun-if-changed=walletops");
    let files = [
        "walletops/v1/wallet_ops.proto",
        "walletops/v1/api_keys.proto",
        "walletops/v1/admin.proto",
        "walletops/v1/dashboard.proto",
        "walletops/v1/webhooks.proto",
        "walletops/v1/approvals.proto",
        "walletops/v1/effects.proto",
        "walletops/v1/deposits.proto",
        "walletops/v1/payouts.proto",
    ];
    let mut compiler = protox::Compiler::new(["."])?;
    compiler.include_imports(true).include_source_info(true);
    compiler.open_files(files)?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    // compile_fds() ignores file_descriptor_set_path, so the set for reflection is written here.
    fs::write(
        out.join("walletops_descriptor.bin"),
        compiler.encode_file_descriptor_set(),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
