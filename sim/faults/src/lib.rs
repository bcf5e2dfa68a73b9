//! See `Cargo.toml`: this package only holds tests.
