//! Nothing: this package exists for its test, `tests/ui.rs` (see Cargo.toml for why it is a
//! package of its own).
