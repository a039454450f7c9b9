//! The command line's failures: what went wrong, with which path, what to do, and the exit code.

use compaction::sqlite::{SqliteError, SqliteErrorKind};
use compaction::{CheckpointError, StoreError};
use std::fmt;
use std::process::ExitCode;

/// The documented exit codes (also in `compaction --help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success.
    Ok = 0,
    /// Problems found (verify), or the command refused.
    Problems = 1,
    /// Bad arguments (clap uses 2 as well).
    Usage = 2,
    /// The database cannot be opened.
    CannotOpen = 3,
    /// No such agent, effect key or blob.
    NotFound = 4,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit as u8)
    }
}

/// A failure to print on stderr: the message names the path, the hint says what to do.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub exit: Exit,
    /// What went wrong (one line).
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Failure {
    /// A failure with a message and no hint.
    pub fn new(exit: Exit, message: impl Into<String>) -> Failure {
        Failure {
            exit,
            message: message.into(),
            hint: None,
        }
    }

    /// Adds what to do about it.
    pub fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }

    /// A failure of the SQLite backend on `path`, classified by its kind.
    pub fn sqlite(error: &SqliteError) -> Failure {
        let (exit, hint) = match error.kind() {
            SqliteErrorKind::Locked => (
                Exit::CannotOpen,
                "another process holds the database's write lock; retry when it is done",
            ),
            SqliteErrorKind::Corrupt => (
                Exit::CannotOpen,
                "the file is not a compaction database or its pages are damaged; check the \
                 path, or restore the file from a backup",
            ),
            SqliteErrorKind::Schema => (
                Exit::CannotOpen,
                "the file was written by a newer version (upgrade this tool), has an older \
                 schema (the agent's next start migrates it; read commands never do), or is not \
                 a compaction database (check the path)",
            ),
            SqliteErrorKind::CannotOpen => (
                Exit::CannotOpen,
                "check that the path exists and that you may read (and, for reconcile and gc, \
                 write) the file and its directory",
            ),
            SqliteErrorKind::ReadOnly => (
                Exit::CannotOpen,
                "the file or its directory is read-only; run this command as a user who may \
                 write it",
            ),
            _ => (
                Exit::CannotOpen,
                "check the file with `compaction verify`; the message above says what SQLite \
                 reported",
            ),
        };
        Failure::new(exit, error.to_string()).hint(hint)
    }

    /// A store failure; backend failures keep their path and kind.
    pub fn store(error: &StoreError) -> Failure {
        Failure::backend(error)
    }

    /// A checkpoint failure; backend failures keep their path and kind.
    pub fn checkpoint(error: &CheckpointError) -> Failure {
        Failure::backend(error)
    }

    /// Any backend's failure (a store's, a ledger's, a checkpoint store's), by what it
    /// carries: a SQLite or PostgreSQL error anywhere in its chain of sources keeps its path
    /// and kind; anything else (a refusal by the effect state machine, a missing blob) is a
    /// problem with its message.
    pub fn backend(error: &(dyn std::error::Error + 'static)) -> Failure {
        let mut cause = Some(error);
        while let Some(e) = cause {
            if let Some(sqlite) = e.downcast_ref::<SqliteError>() {
                return Failure::sqlite(sqlite);
            }
            #[cfg(feature = "postgres")]
            if let Some(pg) = e.downcast_ref::<compaction::PgError>() {
                return Failure::postgres(pg);
            }
            cause = e.source();
        }
        Failure::new(Exit::Problems, error.to_string())
    }

    /// A failure of the PostgreSQL backend, classified by its kind. Its message names the
    /// server, database and namespace, never the password.
    #[cfg(feature = "postgres")]
    pub fn postgres(error: &compaction::PgError) -> Failure {
        use compaction::PgErrorKind;
        let hint = match error.kind() {
            PgErrorKind::Config => "check the connection string and the namespace",
            PgErrorKind::CannotConnect => {
                "check that the server is up, that the database exists and that this role may                  log in (the password goes in the URL or in PGPASSWORD)"
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
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

/// What a command returns: its exit code on success (0, or 1 when it found problems).
pub type Outcome = Result<Exit, Failure>;
