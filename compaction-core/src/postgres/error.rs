//! The typed error of the PostgreSQL backend: what went wrong, on which server and namespace.

use deadpool_postgres::PoolError;
use std::fmt;
use tokio_postgres::error::SqlState;

/// What kind of failure a [`PgError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PgErrorKind {
    /// The connection string or the namespace is not valid (nothing was sent to a server).
    Config,
    /// No connection could be made: the server is down or unreachable, refuses the login, the
    /// database does not exist, or every pooled connection stayed busy past the wait timeout.
    CannotConnect,
    /// The connection broke during the operation (network cut, server restart, the backend was
    /// terminated). The operation's transaction did not commit, except when the break fell
    /// between the server's commit and its reply: then it committed whole. Never half of it.
    ConnectionLost,
    /// The database was written by a newer version of this crate (schema version too high).
    Schema,
    /// A row holds something this crate never writes (an unknown status, JSON that does not
    /// parse, bytes that are not UTF-8).
    Corrupt,
    /// Another transaction conflicted (deadlock, serialization failure, a concurrent insert of
    /// the same key) on every retry.
    Conflict,
    /// The server accepts only reads (a hot standby, or `default_transaction_read_only`).
    ReadOnly,
    /// The server cancelled the statement (`statement_timeout`, `lock_timeout`, or an operator).
    Timeout,
    /// The role may not read or write the tables (`permission denied`).
    PermissionDenied,
    /// Anything else the server or the client reports.
    Other,
}

impl PgErrorKind {
    fn describe(self) -> &'static str {
        match self {
            PgErrorKind::Config => "invalid connection string or namespace",
            PgErrorKind::CannotConnect => "cannot connect to the server",
            PgErrorKind::ConnectionLost => "connection lost during the operation",
            PgErrorKind::Schema => "database schema is not one this version can use",
            PgErrorKind::Corrupt => "a stored row is not what this crate wrote",
            PgErrorKind::Conflict => "conflicting concurrent transaction",
            PgErrorKind::ReadOnly => "server is read-only",
            PgErrorKind::Timeout => "statement cancelled or timed out",
            PgErrorKind::PermissionDenied => "permission denied",
            PgErrorKind::Other => "database error",
        }
    }

    /// The kind of a client error. A server `FATAL` that ends the session (an operator's
    /// `pg_terminate_backend`, a shutdown) counts as a lost connection.
    pub(crate) fn of(error: &tokio_postgres::Error) -> PgErrorKind {
        if error.is_closed() {
            return PgErrorKind::ConnectionLost;
        }
        if let Some(code) = error.code() {
            return PgErrorKind::of_code(code);
        }
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            if cause.is::<std::io::Error>() {
                return PgErrorKind::ConnectionLost;
            }
            source = cause.source();
        }
        PgErrorKind::Other
    }

    fn of_code(code: &SqlState) -> PgErrorKind {
        let class = &code.code()[..2];
        if *code == SqlState::ADMIN_SHUTDOWN
            || *code == SqlState::CRASH_SHUTDOWN
            || *code == SqlState::IDLE_SESSION_TIMEOUT
            || class == "08"
        {
            PgErrorKind::ConnectionLost
        } else if *code == SqlState::CANNOT_CONNECT_NOW
            || *code == SqlState::INVALID_CATALOG_NAME
            || *code == SqlState::TOO_MANY_CONNECTIONS
            || class == "28"
        {
            PgErrorKind::CannotConnect
        } else if *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
            // Two transactions inserting the same new key: the loser retries and finds it.
            || *code == SqlState::UNIQUE_VIOLATION
        {
            PgErrorKind::Conflict
        } else if *code == SqlState::READ_ONLY_SQL_TRANSACTION {
            PgErrorKind::ReadOnly
        } else if *code == SqlState::QUERY_CANCELED || *code == SqlState::LOCK_NOT_AVAILABLE {
            PgErrorKind::Timeout
        } else if *code == SqlState::INSUFFICIENT_PRIVILEGE {
            PgErrorKind::PermissionDenied
        } else if *code == SqlState::CHARACTER_NOT_IN_REPERTOIRE
            || *code == SqlState::UNTRANSLATABLE_CHARACTER
            || *code == SqlState::CHECK_VIOLATION
        {
            PgErrorKind::Corrupt
        } else {
            PgErrorKind::Other
        }
    }
}

impl fmt::Display for PgErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// What failed inside an operation, before the server and namespace are attached.
#[derive(Debug)]
pub(crate) enum Cause {
    /// The client or the server reported an error.
    Client(tokio_postgres::Error),
    /// The pool could not hand out a connection.
    Pool(PoolError),
    /// Found without an error from below (a corrupt row, a newer schema).
    Found(PgErrorKind, String),
}

impl From<tokio_postgres::Error> for Cause {
    fn from(e: tokio_postgres::Error) -> Self {
        Cause::Client(e)
    }
}

impl From<PoolError> for Cause {
    fn from(e: PoolError) -> Self {
        Cause::Pool(e)
    }
}

impl Cause {
    pub(crate) fn kind(&self) -> PgErrorKind {
        match self {
            Cause::Client(e) => PgErrorKind::of(e),
            Cause::Pool(PoolError::Backend(e)) => match PgErrorKind::of(e) {
                // A connection that could not be made was never established, so it was not
                // lost mid-operation.
                PgErrorKind::ConnectionLost | PgErrorKind::Other => PgErrorKind::CannotConnect,
                kind => kind,
            },
            Cause::Pool(_) => PgErrorKind::CannotConnect,
            Cause::Found(kind, _) => *kind,
        }
    }

    /// The SQLSTATE the server reported, if it did.
    fn sql_state(&self) -> Option<String> {
        let client = match self {
            Cause::Client(e) | Cause::Pool(PoolError::Backend(e)) => e,
            _ => return None,
        };
        client.code().map(|code| code.code().to_string())
    }

    /// What went wrong, as text a caller may print: the client's chain of errors, and of a
    /// server error its severity and message only. The server's `DETAIL` is left out: it
    /// quotes rows (`Key (namespace, scope, key)=(...)`, `Failing row contains (...)`), so it
    /// would carry effect keys, targets and values into the caller's logs.
    fn text(&self) -> String {
        match self {
            Cause::Client(e) => client_text(e),
            Cause::Pool(PoolError::Backend(e)) => {
                format!("cannot make a connection: {}", client_text(e))
            }
            Cause::Pool(e) => e.to_string(),
            Cause::Found(_, detail) => detail.clone(),
        }
    }
}

fn client_text(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    if let Some(db) = error.as_db_error() {
        text.push_str(&format!(": {}: {}", db.severity(), db.message()));
        return text;
    }
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// The user name and password of a connection string, kept only to take them out of what the
/// server says: `role "alice" does not exist`, or (a URL without a database name connects to
/// the database named after the user) `database "alice" does not exist`. Never printed.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    user: Option<String>,
    password: Option<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Redactor(..)")
    }
}

impl Redactor {
    /// The secrets of a parsed connection configuration.
    pub(crate) fn of(config: &tokio_postgres::Config) -> Redactor {
        Redactor {
            user: config.get_user().map(str::to_owned),
            password: config
                .get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
        }
    }

    /// `text` without the user name or the password. A quoted name (how the server names a
    /// role or a database) goes whatever its length; a bare one from 3 characters on (a
    /// shorter one would take letters out of every word).
    pub(crate) fn apply(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (secret, label) in [(&self.password, "password"), (&self.user, "user")] {
            let Some(secret) = secret.as_deref().filter(|s| !s.is_empty()) else {
                continue;
            };
            out = out.replace(&format!("\"{secret}\""), &format!("\"<{label}>\""));
            if secret.chars().count() >= 3 {
                out = out.replace(secret, &format!("<{label}>"));
            }
        }
        out
    }
}

/// A failure of the PostgreSQL backend, naming the server, the database and the namespace
/// (never the user name or the password).
///
/// `Display` reads like `postgres `127.0.0.1:5432/agents` namespace `acme`: connection lost
/// during the operation (while claiming effect `charge-7`): db error: FATAL: terminating
/// connection due to administrator command`. What the server said is its severity and
/// message, without its `DETAIL` (which quotes rows) and with the login's user name taken out.
#[derive(Debug)]
pub struct PgError {
    target: Box<str>,
    namespace: Box<str>,
    kind: PgErrorKind,
    context: String,
    cause: String,
    sql_state: Option<String>,
}

impl PgError {
    pub(crate) fn new(
        target: &str,
        namespace: &str,
        context: impl Into<String>,
        cause: Cause,
        redactor: &Redactor,
    ) -> PgError {
        PgError {
            target: target.into(),
            namespace: namespace.into(),
            kind: cause.kind(),
            context: context.into(),
            cause: redactor.apply(&cause.text()),
            sql_state: cause.sql_state(),
        }
    }

    /// The server and database, as `host:port/dbname` (no user, no password).
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The namespace the handle was opened for.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> PgErrorKind {
        self.kind
    }

    /// What the backend was doing (`connecting`, `storing blob sha256:...`, ...).
    pub fn context(&self) -> &str {
        &self.context
    }

    /// The SQLSTATE the server reported, when it reported one (e.g. `57P01` for a terminated
    /// backend).
    pub fn sql_state(&self) -> Option<&str> {
        self.sql_state.as_deref()
    }
}

impl fmt::Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "postgres `{}` namespace `{}`: {} (while {}): {}",
            self.target, self.namespace, self.kind, self.context, self.cause
        )
    }
}

/// The client's errors are not kept as sources: their `Display` and `Debug` carry what the
/// server quoted (rows, the login's user name). What they said is in this error's `Display`.
impl std::error::Error for PgError {}
