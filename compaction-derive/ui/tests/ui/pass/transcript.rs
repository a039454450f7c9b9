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

/// A generic state: the accessor carries the impl's bounds.
#[derive(Compactable, Serialize, Deserialize)]
struct Generic<T> {
    #[protected]
    tag: T,
    #[transcript]
    chat: Transcript,
}

#[test]
fn the_transcript_field_is_reached_generically() {
    use compaction::{HasTranscript, Message};
    fn push<S: HasTranscript>(state: &mut S, text: &str) -> usize {
        state.transcript_mut().push(Message::user(text));
        state.transcript().len()
    }
    let mut state = State {
        chat: Transcript::new(),
    };
    assert_eq!(push(&mut state, "hi"), 1);
    assert_eq!(state.chat.messages()[0].content, "hi");
    let mut generic = Generic {
        tag: 7u8,
        chat: Transcript::new(),
    };
    push(&mut generic, "a");
    assert_eq!(push(&mut Box::new(generic), "b"), 2);
}
