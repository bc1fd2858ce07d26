//! Cross-crate integration tests live under `tests/tests/`; this library holds their shared helpers.
