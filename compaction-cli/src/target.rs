//! Opening the database a command names: an existing SQLite file, read-only unless the command
//! writes; never creating or migrating a file by accident.

use crate::fail::{Exit, Failure};
use compaction::sqlite::{SqliteOptions, SqliteStore};
use compaction::SqliteLedger;
use std::path::{Path, PathBuf};

/// An existing database file.
#[derive(Debug, Clone)]
pub struct Database {
    path: PathBuf,
}

/// Whether a command only reads or also writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read-only: the file is never changed (nor its schema migrated).
    Read,
    /// Read-write (reconcile, gc).
    Write,
}

impl Database {
    /// Checks the target: a path to an existing file (`sqlite://` prefix allowed).
    pub fn locate(target: &str) -> Result<Database, Failure> {
        let lower = target.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            return Err(Failure::new(
                Exit::CannotOpen,
                "PostgreSQL targets are not supported yet (they come with the PostgreSQL backend)",
            )
            .hint("pass the path of a SQLite database file"));
        }
        let path = Path::new(target.strip_prefix("sqlite://").unwrap_or(target));
        if !path.is_file() {
            let what = if path.exists() {
                "is not a file"
            } else {
                "does not exist"
            };
            return Err(Failure::new(
                Exit::CannotOpen,
                format!("database `{}` {what}", path.display()),
            )
            .hint(
                "check the path: it is the file the agent passed to `SqliteStore::open` / \
                 `SqliteLedger::open` (this tool never creates one)",
            ));
        }
        Ok(Database {
            path: path.to_path_buf(),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn options(access: Access) -> SqliteOptions {
        SqliteOptions::new().read_only(access == Access::Read)
    }

    /// The blob store and checkpoints in the file.
    pub fn store(&self, access: Access) -> Result<SqliteStore, Failure> {
        SqliteStore::open_with(&self.path, &Self::options(access)).map_err(|e| Failure::store(&e))
    }

    /// The effect ledger in the file.
    pub fn ledger(&self, access: Access) -> Result<SqliteLedger, Failure> {
        SqliteLedger::open_with(&self.path, &Self::options(access)).map_err(|e| Failure::ledger(&e))
    }
}
