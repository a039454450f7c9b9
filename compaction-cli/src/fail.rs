//! The command line's failures: what went wrong, with which path, what to do, and the exit code.

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

    /// A store failure; backend failures keep their path and kind.
    pub fn store(error: &StoreError) -> Failure {
        Failure::backend(error)
    }

    /// A checkpoint failure; backend failures keep their path and kind.
    pub fn checkpoint(error: &CheckpointError) -> Failure {
        Failure::backend(error)
    }

    /// Any backend's failure (a store's, a ledger's, a checkpoint store's), by what it
    /// carries: an error of a registered backend anywhere in its chain of sources is
    /// classified by that backend (its kind gives the exit code and the hint); anything else
    /// (a refusal by the effect state machine, a missing blob) is a problem with its message.
    pub fn backend(error: &(dyn std::error::Error + 'static)) -> Failure {
        crate::backends::failure(error)
            .unwrap_or_else(|| Failure::new(Exit::Problems, error.to_string()))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Messages quote keys, agent ids and what a backend said: escaped like every printed
        // string, so none of them can drive the terminal.
        write!(f, "error: {}", crate::output::printable(&self.message))?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {}", crate::output::printable(hint))?;
        }
        Ok(())
    }
}

/// What a command returns: its exit code on success (0, or 1 when it found problems).
pub type Outcome = Result<Exit, Failure>;
