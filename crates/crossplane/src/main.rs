//! `crossplane`: a controller-manager binary of crossplane-rs.
//!
//! Its controllers arrive with their issues; until then it only reports its version.
#![forbid(unsafe_code)]

fn main() -> anyhow::Result<()> {
    let arg = std::env::args().nth(1);
    match arg.as_deref() {
        Some("--version") => {
            println!("{} {}", env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        _ => {
            eprintln!("{}: not yet implemented beyond --version", env!("CARGO_PKG_NAME"));
            std::process::exit(2)
        }
    }
}
