//! The opening (rule 15): the transcript's first messages (the task as stated, the first
//! steps), kept verbatim in place at the start of every request while a compaction point can
//! keep them without a hard step, so a provider's prompt cache keeps serving them across
//! compaction points. Where it ends, and how many of a request's slots it takes.
//!
//! Why: a compaction point frees room oldest first (rule 8), so without an opening the first
//! message it changes is the transcript's first old message, and nothing after the window is
//! read from the cache at the request right after a point. With the opening in place, the
//! request's stable prefix (where `anthropic_request` puts a breakpoint) ends after it.

use crate::conversation::message::Message;
use crate::planner::layout::is_cut;
use crate::planner::memory::{MemoryRecord, SlotMeta};

/// Where the opening of `keep_first` messages ends in `messages` (an input index): after the
/// first `keep_first` messages, extended to the end of the unit the last one is in, so a call
/// never stays without its results. `0` when `keep_first` is `0`.
pub(crate) fn opening_end(messages: &[Message], keep_first: usize) -> usize {
    let mut end = keep_first.min(messages.len());
    if end == 0 {
        return 0;
    }
    while !is_cut(messages, end) {
        end += 1;
    }
    end
}

/// The end of the opening a request grown from `base` keeps (`0`: none): the opening of
/// `keep_first` messages while every one of its messages planned so far is still in place (the
/// request's first slots). Once a point gave part of it up (folded, spilled), it stays given up,
/// as forms only move forward: what is left of it is an old turn like any other.
pub(crate) fn kept_opening(base: &MemoryRecord, messages: &[Message], keep_first: usize) -> usize {
    let end = opening_end(messages, keep_first);
    if leading_opening(&base.slots, end) == end.min(base.len) {
        end
    } else {
        0
    }
}

/// How many of `slots`, from `blocks` (the slots the blocks take) on, stand for messages of an
/// opening that ends at input `end`: the opening messages still in the open zone, which stay
/// where they are until a compaction point cannot keep them.
pub(crate) fn opening_slots(slots: &[SlotMeta], blocks: usize, end: usize) -> usize {
    leading_opening(&slots[blocks.min(slots.len())..], end)
}

/// How many of `slots`, from the first, stand each for one message of the opening that ends
/// at input `end` (kept, paged or tombstoned in place).
fn leading_opening(slots: &[SlotMeta], end: usize) -> usize {
    slots
        .iter()
        .take_while(|meta| meta.slot.index().is_some_and(|index| index < end))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conversation::message::ToolCall;
    use crate::planner::memory::Slot;
    use serde_json::json;

    fn messages() -> Vec<Message> {
        let call = |id: &str| ToolCall::new(id, "read_file", json!({"path": id}));
        vec![
            Message::system("You are an agent."),
            Message::user("Fix the build."),
            Message::assistant_with_tools("Reading both.", vec![call("a"), call("b")]),
            Message::tool_result("a", "file a"),
            Message::tool_result("b", "file b"),
            Message::user("Thanks."),
        ]
    }

    #[test]
    fn the_opening_ends_at_a_cut() {
        let messages = messages();
        assert_eq!(opening_end(&messages, 0), 0);
        assert_eq!(opening_end(&messages, 2), 2);
        // Inside the unit of message 2: its results come with it.
        assert_eq!(opening_end(&messages, 3), 5);
        assert_eq!(opening_end(&messages, 4), 5);
        assert_eq!(opening_end(&messages, 5), 5);
        assert_eq!(opening_end(&messages, 99), 6);
        // A unit still waiting for its second result: the opening holds what has arrived.
        assert_eq!(opening_end(&messages[..4], 3), 4);
    }

    #[test]
    fn the_opening_slots_stop_at_the_first_other_slot() {
        let meta = |slot: Slot| SlotMeta { slot, tokens: 1 };
        let handle = crate::conversation::handle::Handle::new(1).expect("not zero");
        let slots = vec![
            meta(Slot::Folded {
                first: 0,
                last: 0,
                handle,
            }),
            meta(Slot::Kept { index: 1 }),
            meta(Slot::Paged { index: 2, handle }),
            meta(Slot::Update),
            meta(Slot::Kept { index: 3 }),
        ];
        assert_eq!(opening_slots(&slots, 1, 5), 2);
        assert_eq!(opening_slots(&slots, 1, 2), 1);
        assert_eq!(opening_slots(&slots, 1, 0), 0);
        assert_eq!(opening_slots(&slots, 9, 5), 0);
    }

    #[test]
    fn an_opening_part_of_which_left_is_given_up() {
        let messages = messages();
        let handle = crate::conversation::handle::Handle::new(1).expect("not zero");
        let meta = |slot: Slot| SlotMeta { slot, tokens: 1 };
        let mut base = crate::planner::memory::TranscriptMemory::empty("test").record;
        // Nothing planned yet, then two messages planned: in place either way.
        assert_eq!(kept_opening(&base, &messages, 4), 5);
        base.len = 2;
        base.slots = vec![meta(Slot::Kept { index: 0 }), meta(Slot::Kept { index: 1 })];
        assert_eq!(kept_opening(&base, &messages, 4), 5);
        // The whole opening in place (its tool results tombstoned or paged count).
        base.len = 6;
        base.slots = vec![
            meta(Slot::Kept { index: 0 }),
            meta(Slot::Kept { index: 1 }),
            meta(Slot::Kept { index: 2 }),
            meta(Slot::Tombstoned { index: 3, handle }),
            meta(Slot::Paged { index: 4, handle }),
            meta(Slot::Kept { index: 5 }),
        ];
        assert_eq!(kept_opening(&base, &messages, 4), 5);
        assert_eq!(kept_opening(&base, &messages, 0), 0);
        // The user message spilled to a run: the rest of the opening is an old turn.
        base.slots.remove(1);
        base.slots.insert(
            1,
            meta(Slot::Users {
                first: 1,
                last: 1,
                handle,
            }),
        );
        assert_eq!(kept_opening(&base, &messages, 4), 0);
    }
}
