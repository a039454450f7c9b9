//! The registry of backends the tool opens: one [`Backend`] entry per backend, each in its own
//! file beside its feature gate. A target goes to the first entry that claims it; everything
//! after opening goes through the library's traits (`CheckpointStore`, `Store`, `StoreAdmin`,
//! `EffectLedger`, wrapped in `backend.rs`), and a backend's errors are classified by its own
//! entry. Adding a backend: its file here, one `mod` line and one line in [`BACKENDS`]. What an
//! entry is sits below (`location.rs`), so a backend's file names it without naming the
//! registry; the registry's classification reaches the handles a backend opens as an argument
//! (`Location::store`, `Location::ledger`).

mod location;
mod postgres;
mod sqlite;

pub use location::{Access, Backend, Located, Location};

use crate::fail::{Exit, Failure};
use std::error::Error;

/// Every backend, asked in this order. SQLite is last: it claims every target no other entry
/// claims (a file path).
pub const BACKENDS: &[Backend] = &[postgres::BACKEND, sqlite::BACKEND];

/// The backend that claims `target`.
pub fn locate(target: &str, namespace: Option<&str>) -> Located {
    let backend = BACKENDS
        .iter()
        .find(|b| (b.claims)(target))
        .unwrap_or(&sqlite::BACKEND);
    (backend.locate)(target, namespace)
}

/// Any backend's failure (a store's, a ledger's, a checkpoint store's), by what it carries:
/// an error of a registered backend anywhere in its chain of sources is classified by that
/// backend (its kind gives the exit code and the hint); anything else (a refusal by the effect
/// state machine, a missing blob) is a problem with its message. Backend failures keep their
/// path and kind.
pub fn failure(error: &(dyn Error + 'static)) -> Failure {
    classified(error).unwrap_or_else(|| Failure::new(Exit::Problems, error.to_string()))
}

/// `error`, or one of its sources, as a backend classifies it.
fn classified(error: &(dyn Error + 'static)) -> Option<Failure> {
    chain(error).find_map(|e| BACKENDS.iter().find_map(|b| (b.failure)(e)))
}

/// What a backend's report of a damaged database in `error` (or its sources) says.
pub fn corrupt(error: &(dyn Error + 'static)) -> Option<String> {
    chain(error).find_map(|e| BACKENDS.iter().find_map(|b| (b.corrupt)(e)))
}

/// `error` and its sources, outermost first.
fn chain<'a>(error: &'a (dyn Error + 'static)) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(error), |&e| e.source())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fail::Exit;

    #[test]
    fn each_target_goes_to_the_backend_that_claims_it() {
        // A postgres URL, any case, goes to PostgreSQL's entry whatever the build: it asks for
        // a namespace, or says this build cannot open it; it is never taken for a file name.
        for url in ["postgres://u@h/db", "POSTGRESQL://u@h/db"] {
            let refused = locate(url, None).unwrap_err();
            assert!(refused.message.contains("postgres"), "{}", refused.message);
            assert!(!refused.message.contains("does not exist"));
        }
        // Anything else is a SQLite path, checked before anything is opened.
        let missing = locate("sqlite:///nonexistent/agents.db", None).unwrap_err();
        assert_eq!(missing.exit, Exit::CannotOpen);
        assert!(missing
            .message
            .contains("/nonexistent/agents.db` does not exist"));
        let tenant = locate("/nonexistent/agents.db", Some("billing")).unwrap_err();
        assert_eq!(tenant.exit, Exit::Usage);
        let dir = std::env::temp_dir();
        let not_a_file = locate(dir.to_str().unwrap(), None).unwrap_err();
        assert!(not_a_file.message.contains("is not a file"));
        // SQLite, last, claims what no other entry does.
        assert!((BACKENDS.last().unwrap().claims)("relative/agents.db"));
        assert_eq!(
            BACKENDS
                .iter()
                .filter(|b| (b.claims)("postgres://h/db"))
                .count(),
            2,
            "postgres:// is PostgreSQL's first, then the catch-all"
        );
    }

    #[test]
    fn errors_no_backend_knows_are_problems_with_their_message() {
        let error = std::io::Error::other("disk on fire");
        assert!(classified(&error).is_none());
        assert!(corrupt(&error).is_none());
        let shown = failure(&error);
        assert_eq!(shown.exit, Exit::Problems);
        assert_eq!(shown.message, "disk on fire");
    }
}
