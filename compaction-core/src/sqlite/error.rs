//! The typed error of the SQLite backend: what went wrong, and with which file.

use crate::store::StoreError;
use rusqlite::ffi::ErrorCode;
use std::fmt;
use std::path::{Path, PathBuf};

/// What kind of failure a [`SqliteError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SqliteErrorKind {
    /// Another connection holds the lock longer than the busy timeout.
    Locked,
    /// The file (or its directory) cannot be written, or was opened read-only.
    ReadOnly,
    /// The file is not a SQLite database, or its pages are damaged, or a row holds bytes that
    /// are not what this crate wrote.
    Corrupt,
    /// The file cannot be opened: its directory is missing, or permission is denied.
    CannotOpen,
    /// The database was written by a newer version of this crate (schema version too high), or
    /// a read-only database has no schema.
    Schema,
    /// A disk I/O error, or the disk is full.
    Io,
    /// Anything else SQLite reports.
    Other,
}

impl SqliteErrorKind {
    fn describe(self) -> &'static str {
        match self {
            SqliteErrorKind::Locked => "database is locked by another connection",
            SqliteErrorKind::ReadOnly => "database is read-only",
            SqliteErrorKind::Corrupt => "file is not a SQLite database or is corrupt",
            SqliteErrorKind::CannotOpen => {
                "cannot open database file (missing directory or permission denied)"
            }
            SqliteErrorKind::Schema => "database schema is not one this version can use",
            SqliteErrorKind::Io => "disk I/O error",
            SqliteErrorKind::Other => "database error",
        }
    }

    pub(crate) fn of(error: &rusqlite::Error) -> Self {
        match error.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => SqliteErrorKind::Locked,
            Some(ErrorCode::ReadOnly) => SqliteErrorKind::ReadOnly,
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => SqliteErrorKind::Corrupt,
            Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
                SqliteErrorKind::CannotOpen
            }
            Some(ErrorCode::SystemIoFailure | ErrorCode::DiskFull) => SqliteErrorKind::Io,
            _ => match error {
                rusqlite::Error::FromSqlConversionFailure(..)
                | rusqlite::Error::InvalidColumnType(..)
                | rusqlite::Error::IntegralValueOutOfRange(..)
                | rusqlite::Error::Utf8Error(..) => SqliteErrorKind::Corrupt,
                _ => SqliteErrorKind::Other,
            },
        }
    }
}

impl fmt::Display for SqliteErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A failure of the SQLite backend, naming the database file.
///
/// `Display` reads like `sqlite database `/srv/agent.db`: database is locked by another
/// connection (while claiming effect `mig-7`): database is locked`.
#[derive(Debug)]
pub struct SqliteError {
    path: PathBuf,
    kind: SqliteErrorKind,
    context: String,
    source: Option<rusqlite::Error>,
}

impl SqliteError {
    pub(crate) fn new(
        path: &Path,
        context: impl Into<String>,
        source: rusqlite::Error,
    ) -> SqliteError {
        SqliteError {
            path: path.to_path_buf(),
            kind: SqliteErrorKind::of(&source),
            context: context.into(),
            source: Some(source),
        }
    }

    pub(crate) fn without_source(
        path: &Path,
        kind: SqliteErrorKind,
        context: impl Into<String>,
    ) -> SqliteError {
        SqliteError {
            path: path.to_path_buf(),
            kind,
            context: context.into(),
            source: None,
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> SqliteErrorKind {
        self.kind
    }

    /// What the backend was doing (`opening`, `storing blob sha256:...`, ...).
    pub fn context(&self) -> &str {
        &self.context
    }

    /// The SQLite error code, when SQLite reported one.
    pub fn sqlite_code(&self) -> Option<ErrorCode> {
        self.source.as_ref().and_then(|e| e.sqlite_error_code())
    }

    /// The `SqliteError` inside a store error, if the store is a [`SqliteStore`](super::SqliteStore).
    pub fn from_store_error(error: &StoreError) -> Option<&SqliteError> {
        match error {
            StoreError::Backend {
                source: Some(source),
                ..
            } => source.downcast_ref::<SqliteError>(),
            _ => None,
        }
    }

    /// Wraps this error as a store error whose message names the path.
    pub(crate) fn into_store_error(self) -> StoreError {
        StoreError::Backend {
            message: self.to_string(),
            source: Some(Box::new(self)),
        }
    }
}

impl fmt::Display for SqliteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sqlite database `{}`: {} (while {})",
            self.path.display(),
            self.kind,
            self.context
        )?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SqliteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
