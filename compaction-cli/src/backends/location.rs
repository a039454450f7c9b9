//! What one backend's entry in the registry is: how it claims a target, locates the database,
//! opens it and classifies its errors. Below the backends' files and the registry beside them
//! (`mod.rs`), which both name these types.

use crate::backend::{Classify, Ledger, Store};
use crate::fail::Failure;
use std::error::Error;

/// Whether a command only reads or also writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read-only: the database is never changed (nor its schema migrated).
    Read,
    /// Read-write (reconcile, gc).
    Write,
}

/// A located database of one backend: what the commands open on it. `classify` is how the
/// handles' errors (and the opening's) become failures: the registry's classification
/// (`backends::failure`), handed down since a backend's file sits below the registry.
pub trait Location: std::fmt::Debug {
    /// How messages name it (never with a password).
    fn name(&self) -> String;
    /// The blob store and checkpoints.
    fn store(&self, access: Access, classify: Classify) -> Result<Store, Failure>;
    /// The effect ledger.
    fn ledger(&self, access: Access, classify: Classify) -> Result<Ledger, Failure>;
}

/// A located database, or why the target cannot be one.
pub type Located = Result<Box<dyn Location>, Failure>;

/// One backend the tool knows.
pub struct Backend {
    /// Whether `target` (the DATABASE argument) is this backend's, e.g. by its URL scheme.
    pub claims: fn(target: &str) -> bool,
    /// Checks the target and namespace (no connection yet) and says where the database is.
    pub locate: fn(target: &str, namespace: Option<&str>) -> Located,
    /// The failure an error of this backend is (its kind gives the exit code and the hint);
    /// `None` when `error` is not this backend's.
    pub failure: fn(error: &(dyn Error + 'static)) -> Option<Failure>,
    /// What `error` says when it is this backend's report of a damaged database (`verify`
    /// lists it as a problem instead of failing); `None` otherwise.
    pub corrupt: fn(error: &(dyn Error + 'static)) -> Option<String>,
}
