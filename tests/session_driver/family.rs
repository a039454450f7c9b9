//! A family member of `fixtures/src/family.rs` played through a `Session`, as
//! `benches/session.rs` plays it (the effect log synced into the ledger after each call and
//! result), for tests that measure what the bench measures on one session.

use compaction::session::{Session, SessionBuilder, SessionRequest};
use compaction::{block_on, Compactor, EffectLedger, MemoryLedger, Message, Tokenizer};
use compaction_fixtures::family::{Member, SessionKeep2, SessionKeep3};
use compaction_fixtures::session::{apply, Event, SessionState};

/// One request of a played session, with the transcript as it stood when it was made.
pub struct Played {
    pub request: SessionRequest,
    pub transcript: Vec<Message>,
}

/// Plays `member` (e.g. `coding-60-s1-k1`) at `budget` with o200k counts and the `Session`'s
/// defaults (its opening `keep_first` messages when given), and returns every request. Panics
/// on a refusal: the family's sessions fit every budget it is played at.
pub fn play_member(member: &str, budget: usize, keep_first: Option<usize>) -> Vec<Played> {
    let member = Member::parse(member).expect("a family member");
    let (initial, events) = member.session();
    // `keep_recent` is an attribute of the state's type: one type per value.
    match member.keep_recent {
        1 => play(initial, &events, budget, keep_first),
        2 => play(
            SessionKeep2::from_initial(initial),
            &events,
            budget,
            keep_first,
        ),
        _ => play(
            SessionKeep3::from_initial(initial),
            &events,
            budget,
            keep_first,
        ),
    }
}

fn play<S: SessionState>(
    initial: S,
    events: &[Event],
    budget: usize,
    keep_first: Option<usize>,
) -> Vec<Played> {
    let ledger = MemoryLedger::new();
    let compactor = Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase);
    let mut builder: SessionBuilder<S> = Session::builder("family")
        .compactor(compactor)
        .ledger(ledger.clone());
    if let Some(n) = keep_first {
        builder = builder.keep_first(n);
    }
    let mut session = builder
        .open_blocking(move || initial)
        .expect("a fresh session opens");
    let mut played = Vec::new();
    for event in events {
        if let Event::Request = event {
            let request = session.next_request_blocking().expect("no refusal");
            let transcript = session.state().transcript().messages().to_vec();
            played.push(Played {
                request,
                transcript,
            });
            continue;
        }
        apply(session.state_mut(), event);
        if let Event::Push(message) = event {
            if !message.tool_calls.is_empty() || message.tool_call_id.is_some() {
                let writes = session.state().writes();
                block_on(ledger.sync_log("writes", writes)).expect("the ledger accepts");
            }
        }
    }
    played
}
