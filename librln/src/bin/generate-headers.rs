//! Writes `rln.h` for this library with safer_ffi's generator, as zerokit's own
//! `generate-headers` does for its: CI compares the two.

fn main() -> std::io::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "rln.h".to_owned());
    rln::generate_headers(&path)
}
