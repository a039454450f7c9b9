//! The database a command names, located by the backend registry (`backends/`): the one type
//! the commands hold, whatever the backend.

use crate::backend::{Ledger, Store};
pub use crate::backends::Access;
use crate::backends::{failure, locate, Location};
use crate::fail::Failure;

/// The database a command runs on.
#[derive(Debug)]
pub struct Database(Box<dyn Location>);

impl Database {
    /// Checks the target: the backend that claims it (a `postgres://` URL with a namespace, or
    /// a path to an existing SQLite file) says where the database is; nothing is opened yet.
    pub fn locate(target: &str, namespace: Option<&str>) -> Result<Database, Failure> {
        locate(target, namespace).map(Database)
    }

    /// How messages name the database: the file, or the server without its password and the
    /// namespace.
    pub fn name(&self) -> String {
        self.0.name()
    }

    /// The blob store and checkpoints.
    pub fn store(&self, access: Access) -> Result<Store, Failure> {
        self.0.store(access, failure)
    }

    /// The effect ledger.
    pub fn ledger(&self, access: Access) -> Result<Ledger, Failure> {
        self.0.ledger(access, failure)
    }
}
