//! End-to-end suites across binaries. The suites live in `tests/`.
#![forbid(unsafe_code)]
