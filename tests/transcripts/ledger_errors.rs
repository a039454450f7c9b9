//! A ledger that fails to read or record the checkpoint sequence is reported as that, with
//! its own error (`CompactionError::CheckpointSequence`), not as a failure to read an effect
//! scope with an empty name; and the session is not wedged by it.

use crate::session_driver::{compactor, effect_of, fresh_agent};
use crate::session_faults::FlakyLedger;

use compaction::session::{Session, SessionError};
use compaction::{CompactionError, MemoryStore, Message};

#[test]
fn a_failed_sequence_write_names_the_sequence_and_the_next_request_succeeds() {
    for which in ["advance", "newest"] {
        let ledger = FlakyLedger::default();
        let mut session = Session::builder("agent-sequence")
            .compactor(compactor(4_000))
            .store(MemoryStore::new())
            .ledger(ledger.clone())
            .effect_calls(effect_of)
            .open_blocking(fresh_agent)
            .unwrap();
        session.push(Message::user("hello"));
        match which {
            "advance" => ledger.advance.arm(),
            _ => ledger.newest.arm(),
        }
        let error = session.next_request_blocking().unwrap_err();
        assert!(
            matches!(
                &error,
                SessionError::Compaction(CompactionError::CheckpointSequence { .. })
            ),
            "{which}: {error:?}"
        );
        let text = error.to_string();
        assert!(text.contains("checkpoint sequence"), "{which}: {text}");
        assert!(!text.contains("effect scope"), "{which}: {text}");
        let request = session.next_request_blocking().unwrap();
        assert_eq!(request.sequence(), 1, "{which}");
    }
}
