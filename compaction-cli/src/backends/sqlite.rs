//! SQLite: an existing file written by `SqliteStore` / `SqliteLedger`, opened read-only unless
//! the command writes, never created or migrated by accident. It claims every target no other
//! backend claims (a path, `sqlite://` prefix allowed).

use crate::backend::{Classify, Ledger, Store};
use crate::backends::{Access, Backend, Located, Location};
use crate::fail::{Exit, Failure};
use compaction::sqlite::{SqliteError, SqliteErrorKind, SqliteOptions, SqliteStore};
use compaction::SqliteLedger;
use std::path::{Path, PathBuf};

/// The registry's entry.
pub const BACKEND: Backend = Backend {
    claims: |_| true,
    locate,
    failure: |e| e.downcast_ref::<SqliteError>().map(failure),
    corrupt: |e| {
        e.downcast_ref::<SqliteError>()
            .filter(|s| s.kind() == SqliteErrorKind::Corrupt)
            .map(|s| s.context().to_string())
    },
};

/// An existing SQLite file.
#[derive(Debug)]
struct SqliteFile(PathBuf);

fn locate(target: &str, namespace: Option<&str>) -> Located {
    if namespace.is_some() {
        return Err(Failure::new(
            Exit::Usage,
            "--namespace applies to postgres:// targets only",
        )
        .hint("a SQLite file holds one tenant: drop --namespace"));
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
    Ok(Box::new(SqliteFile(path.to_path_buf())))
}

fn options(access: Access) -> SqliteOptions {
    SqliteOptions::new().read_only(access == Access::Read)
}

impl Location for SqliteFile {
    fn name(&self) -> String {
        self.0.display().to_string()
    }

    fn store(&self, access: Access, classify: Classify) -> Result<Store, Failure> {
        SqliteStore::open_with(&self.0, &options(access))
            .map(|store| Store::new(store, classify))
            .map_err(|e| classify(&e))
    }

    fn ledger(&self, access: Access, classify: Classify) -> Result<Ledger, Failure> {
        SqliteLedger::open_with(&self.0, &options(access))
            .map(|ledger| Ledger::new(ledger, classify))
            .map_err(|e| classify(&e))
    }
}

/// A failure of SQLite on a file, classified by its kind.
fn failure(error: &SqliteError) -> Failure {
    let hint = match error.kind() {
        SqliteErrorKind::Locked => {
            "another process holds the database's write lock; retry when it is done"
        }
        SqliteErrorKind::Corrupt => {
            "the file is not a compaction database or its pages are damaged; check the path, or \
             restore the file from a backup"
        }
        SqliteErrorKind::Schema => {
            "the file was written by a newer version (upgrade this tool), has an older schema \
             (the agent's next start migrates it; read commands never do), or is not a \
             compaction database (check the path)"
        }
        SqliteErrorKind::CannotOpen => {
            "check that the path exists and that you may read (and, for reconcile and gc, \
             write) the file and its directory"
        }
        SqliteErrorKind::ReadOnly => {
            "the file or its directory is read-only; run this command as a user who may write it"
        }
        _ => {
            "check the file with `compaction verify`; the message above says what SQLite \
             reported"
        }
    };
    Failure::new(Exit::CannotOpen, error.to_string()).hint(hint)
}
