//! The command line's failures: what went wrong, with which path, what to do, and the exit code.
//! Below the backends and the output: what a backend's error means is the backends' to say
//! (`backends::failure`), and this file imports nothing of the crate but the escaping its
//! messages go through.

use crate::escape::printable;
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
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Messages quote keys, agent ids and what a backend said: escaped like every printed
        // string, so none of them can drive the terminal.
        write!(f, "error: {}", printable(&self.message))?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {}", printable(hint))?;
        }
        Ok(())
    }
}

/// What a command returns: its exit code on success (0, or 1 when it found problems).
pub type Outcome = Result<Exit, Failure>;
