//! `#[transcript]` in every form: the schema carries its options.
use compaction::{Compactable, FieldClass, Transcript};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize)]
struct State {
    #[transcript]
    chat: Transcript,
}

#[derive(Compactable, Serialize, Deserialize)]
struct Strict {
    #[transcript(keep_recent = 4, pin_user)]
    chat: Transcript,
}

#[test]
fn transcript_options_reach_the_schema() {
    let class = |s: &compaction::Schema| s.field("chat").unwrap().class;
    assert_eq!(
        class(State::schema()),
        FieldClass::Transcript {
            keep_recent: 1,
            pin_user: false
        }
    );
    assert_eq!(
        class(Strict::schema()),
        FieldClass::Transcript {
            keep_recent: 4,
            pin_user: true
        }
    );
}
