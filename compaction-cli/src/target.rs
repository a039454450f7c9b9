//! Opening the database a command names: an existing SQLite file, read-only unless the command
//! writes, never creating or migrating a file by accident; or, with the `postgres` feature, one
//! namespace of a PostgreSQL database (`postgres://...` with `--namespace`).

use crate::backend::{Ledger, Store};
use crate::fail::{Exit, Failure};
use compaction::sqlite::{SqliteOptions, SqliteStore};
use compaction::SqliteLedger;
use std::path::{Path, PathBuf};

/// The database a command runs on.
#[derive(Debug, Clone)]
pub enum Database {
    /// An existing SQLite file.
    Sqlite(PathBuf),
    /// One namespace of a PostgreSQL database.
    #[cfg(feature = "postgres")]
    Postgres {
        /// The connection string, as given.
        url: String,
        /// The tenant.
        namespace: String,
    },
}

/// Whether a command only reads or also writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read-only: the file is never changed (nor its schema migrated).
    Read,
    /// Read-write (reconcile, gc).
    Write,
}

/// Whether `target` is a PostgreSQL connection string.
fn is_postgres(target: &str) -> bool {
    let lower = target.to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// A connection string without its password, for messages.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user, host)) if user.contains(':') => {
            let user = user.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        _ => url.to_string(),
    }
}

impl Database {
    /// Checks the target: a path to an existing file (`sqlite://` prefix allowed), or a
    /// `postgres://` URL with a namespace (with the `postgres` feature).
    pub fn locate(target: &str, namespace: Option<&str>) -> Result<Database, Failure> {
        if is_postgres(target) {
            return Self::postgres(target, namespace);
        }
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
        Ok(Database::Sqlite(path.to_path_buf()))
    }

    #[cfg(feature = "postgres")]
    fn postgres(url: &str, namespace: Option<&str>) -> Result<Database, Failure> {
        let namespace = namespace.ok_or_else(|| {
            Failure::new(
                Exit::Usage,
                format!("`{}` needs a namespace", redacted(url)),
            )
            .hint(
                "add --namespace NAME (or set COMPACTION_NAMESPACE): the one the agents passed \
                 to `PgStore::connect(url, namespace)`",
            )
        })?;
        Ok(Database::Postgres {
            url: url.to_string(),
            namespace: namespace.to_string(),
        })
    }

    #[cfg(not(feature = "postgres"))]
    fn postgres(url: &str, _namespace: Option<&str>) -> Result<Database, Failure> {
        Err(Failure::new(
            Exit::CannotOpen,
            format!("`{}`: this build has no PostgreSQL support", redacted(url)),
        )
        .hint("build the tool with it: cargo install compaction-cli --features postgres"))
    }

    /// How messages name the database: the file, or the server without its password and the
    /// namespace.
    pub fn name(&self) -> String {
        match self {
            Database::Sqlite(path) => path.display().to_string(),
            #[cfg(feature = "postgres")]
            Database::Postgres { url, namespace } => {
                format!("{} (namespace {namespace})", redacted(url))
            }
        }
    }

    fn options(access: Access) -> SqliteOptions {
        SqliteOptions::new().read_only(access == Access::Read)
    }

    /// The blob store and checkpoints: the one place a target's backend is chosen.
    pub fn store(&self, access: Access) -> Result<Store, Failure> {
        match self {
            Database::Sqlite(path) => SqliteStore::open_with(path, &Self::options(access))
                .map(Store::new)
                .map_err(|e| Failure::store(&e)),
            #[cfg(feature = "postgres")]
            Database::Postgres { url, namespace } => compaction::PgStore::connect(url, namespace)
                .map(Store::new)
                .map_err(|e| Failure::store(&e)),
        }
    }

    /// The effect ledger: the one place a target's backend is chosen.
    pub fn ledger(&self, access: Access) -> Result<Ledger, Failure> {
        match self {
            Database::Sqlite(path) => SqliteLedger::open_with(path, &Self::options(access))
                .map(Ledger::new)
                .map_err(|e| Failure::backend(&e)),
            #[cfg(feature = "postgres")]
            Database::Postgres { url, namespace } => compaction::PgLedger::connect(url, namespace)
                .map(Ledger::new)
                .map_err(|e| Failure::backend(&e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redacted("postgres://agent:s3cr@t@db.internal:5432/fleet"),
            "postgres://agent:***@db.internal:5432/fleet"
        );
        assert_eq!(
            redacted("postgres://agent@db/fleet"),
            "postgres://agent@db/fleet"
        );
        assert_eq!(redacted("/tmp/a.db"), "/tmp/a.db");
    }
}
