//! PostgreSQL: one namespace (tenant) of a database, `postgres://...` with `--namespace`. In a
//! build without the `postgres` feature, the entry still claims such targets, to say that this
//! build cannot open them and how to get one that can.

/// Whether `target` is a PostgreSQL connection string.
fn claims(target: &str) -> bool {
    let lower = target.to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

#[cfg(feature = "postgres")]
pub use enabled::BACKEND;

#[cfg(feature = "postgres")]
mod enabled {
    use super::claims;
    use crate::backend::{Classify, Ledger, Store};
    use crate::backends::{Access, Backend, Located, Location};
    use crate::fail::{Exit, Failure};
    use compaction::{block_on, PgError, PgErrorKind, PgLedger, PgStore};

    /// The registry's entry.
    pub const BACKEND: Backend = Backend {
        claims,
        locate,
        failure: |e| e.downcast_ref::<PgError>().map(failure),
        corrupt: |e| {
            e.downcast_ref::<PgError>()
                .filter(|pg| pg.kind() == PgErrorKind::Corrupt)
                .map(|pg| pg.to_string())
        },
    };

    /// One namespace of a PostgreSQL database.
    #[derive(Debug)]
    struct Namespace {
        /// The connection string, as given (never shown: it may hold a password).
        url: String,
        /// The tenant.
        namespace: String,
    }

    fn locate(url: &str, namespace: Option<&str>) -> Located {
        let namespace = namespace.ok_or_else(|| {
            Failure::new(Exit::Usage, format!("{} needs a namespace", server_of(url))).hint(
                "add --namespace NAME (or set COMPACTION_NAMESPACE): the one the agents passed \
                 to `PgStore::connect(url, namespace)`",
            )
        })?;
        Ok(Box::new(Namespace {
            url: url.to_string(),
            namespace: namespace.to_string(),
        }))
    }

    impl Location for Namespace {
        fn name(&self) -> String {
            format!("{} (namespace {})", server_of(&self.url), self.namespace)
        }

        // Writes and reads go through the same connection: the role decides what it may do.
        fn store(&self, _access: Access, classify: Classify) -> Result<Store, Failure> {
            block_on(PgStore::connect(&self.url, &self.namespace))
                .map(|store| Store::new(store, classify))
                .map_err(|e| classify(&e))
        }

        fn ledger(&self, _access: Access, classify: Classify) -> Result<Ledger, Failure> {
            block_on(PgLedger::connect(&self.url, &self.namespace))
                .map(|ledger| Ledger::new(ledger, classify))
                .map_err(|e| classify(&e))
        }
    }

    /// How messages name a PostgreSQL connection string: its server and database as
    /// tokio-postgres parses it (the string is never split by hand: an unescaped `@` in a
    /// password would put part of the password where a hand split sees the host), without the
    /// user name or the password. A string that does not parse is not shown at all.
    pub fn server_of(url: &str) -> String {
        match compaction::postgres::target_of(url) {
            Ok(target) => format!("postgres `{target}`"),
            Err(_) => "an unreadable postgres:// connection string".into(),
        }
    }

    /// A failure of the PostgreSQL backend, classified by its kind. Its message names the
    /// server, database and namespace, never the password.
    fn failure(error: &PgError) -> Failure {
        let hint = match error.kind() {
            PgErrorKind::Config => "check the connection string and the namespace",
            PgErrorKind::CannotConnect => {
                "check that the server is up, that the database exists and that this role may \
                 log in (the password goes in the URL or in PGPASSWORD)"
            }
            PgErrorKind::Schema => "the database was written by a newer version: upgrade this tool",
            PgErrorKind::PermissionDenied | PgErrorKind::ReadOnly => {
                "this role may not read (or, for writes, write) the compaction schema"
            }
            _ => "the message above says what PostgreSQL reported",
        };
        let exit = match error.kind() {
            PgErrorKind::Config
            | PgErrorKind::CannotConnect
            | PgErrorKind::Schema
            | PgErrorKind::PermissionDenied
            | PgErrorKind::ReadOnly => Exit::CannotOpen,
            _ => Exit::Problems,
        };
        Failure::new(exit, error.to_string()).hint(hint)
    }

    #[cfg(test)]
    mod tests {
        use super::server_of;

        #[test]
        fn passwords_never_reach_messages() {
            // tokio-postgres reads the first `@` as the end of the login: the rest of this
            // password would be the host. Such a string is not shown at all.
            let shown = server_of("postgres://agent:s3cr@t@db.internal:5432/fleet");
            assert!(
                !shown.contains("s3cr") && !shown.contains("t@db"),
                "{shown}"
            );
            assert!(!shown.contains("agent"), "{shown}");
            assert_eq!(
                server_of("postgres://agent:s3cr%40t@db.internal:5432/fleet"),
                "postgres `db.internal:5432/fleet`"
            );
            // No database name: the server uses the user's, which is not shown either.
            let shown = server_of("postgres://agent@db");
            assert!(!shown.contains("agent"), "{shown}");
        }
    }
}

#[cfg(not(feature = "postgres"))]
pub use disabled::BACKEND;

#[cfg(not(feature = "postgres"))]
mod disabled {
    use super::claims;
    use crate::backends::{Backend, Located};
    use crate::fail::{Exit, Failure};

    /// The registry's entry in a build without PostgreSQL: it refuses its targets with a hint.
    pub const BACKEND: Backend = Backend {
        claims,
        locate: unsupported,
        failure: |_| None,
        corrupt: |_| None,
    };

    fn unsupported(_url: &str, _namespace: Option<&str>) -> Located {
        Err(Failure::new(
            Exit::CannotOpen,
            "a postgres:// target: this build has no PostgreSQL support",
        )
        .hint("build the tool with it: cargo install compaction-cli --features postgres"))
    }
}
