//! A session holds the state's conversation: a state without a `#[transcript]` field does not
//! implement `HasTranscript`, and the error says what to add.
use compaction::{Compactable, HasTranscript};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct NoChat {
    #[protected]
    step: u32,
}

fn push_into<S: HasTranscript>(_state: &mut S) {}

fn main() {
    let mut state = NoChat { step: 1 };
    push_into(&mut state);
}
