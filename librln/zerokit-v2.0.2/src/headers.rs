//! zerokit v2.0.2's `rln.h`, written by its own generator into the current directory.
fn main() -> std::io::Result<()> {
    rln::ffi::generate_headers()
}
