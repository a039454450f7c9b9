//! The `resolve_pointer` tool against checkpoints it must not trust (a compacted state that
//! does not match its seal, one forged under a keyed seal, another agent's), and what it reads
//! through a checkpoint: short handles via the table, a user run's messages by index, replies
//! in the transcript that compact and rehydrate byte-identical. Hostile calls are in
//! `pointer_tool.rs`.

use crate::pointer_fixture;

use compaction::pointer_tool::{PointerResolver, PointerToolError, RESOLVE_POINTER};
use compaction::transcript::MARKER_PREFIX;
use compaction::{
    Compactable, Compacted, CompactionError, Compactor, Message, Pointer, Role, SealKey, Tokenizer,
    ToolCall, Transcript,
};
use pointer_fixture::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

#[test]
fn a_compacted_state_that_does_not_match_its_seal_allows_nothing() {
    let s = setup();
    let compacted = s
        .compactor
        .compact_blocking(&agent("cus_A", "read the log", &s.output))
        .unwrap();
    let mut json = serde_json::to_value(&compacted).unwrap();
    json["window"] = json!("edited");
    let edited: Compacted<Agent> = serde_json::from_value(json).unwrap();
    let mut resolver = PointerResolver::new();
    assert!(matches!(
        resolver.allow_compacted(&s.compactor, &edited),
        Err(PointerToolError::Unsealed)
    ));
    assert_eq!(resolver.allowed_count(), 0);
}

/// A keyed compactor for `agent` on `store`.
fn keyed(store: SharedStore, agent: &str) -> Compactor {
    Compactor::builder()
        .budget(400)
        .token_counter(Tokenizer::O200kBase)
        .store(store)
        .seal_key(SealKey::new("k1", [1u8; 32]).unwrap())
        .agent_id(agent)
        .build()
        .unwrap()
}

/// Agents A (`mine`) and B (`theirs`) with keyed compactors on one store, and B's compaction
/// whose tombstoned tool result holds `secret`, with that result's pointer.
fn keyed_agents(secret: &str) -> (Compactor, Compactor, Compacted<Agent>, Pointer) {
    let store = SharedStore::default();
    let (mine, theirs) = (
        keyed(store.clone(), "agent-a"),
        keyed(store.clone(), "agent-b"),
    );
    let other = theirs
        .compact_blocking(&agent("cus_B", "read it", secret))
        .unwrap();
    let their_pointer = output_pointer(&other, secret);
    (mine, theirs, other, their_pointer)
}

/// The model asks `resolver` for `pointer` and reads neither the blob nor `leak`.
fn assert_not_readable(
    resolver: &PointerResolver,
    mine: &Compactor,
    pointer: &Pointer,
    leak: &str,
) {
    let reply = resolver.handle_blocking(mine, &call(json!({ "pointer": pointer.to_string() })));
    assert!(matches!(
        error_of(&reply),
        PointerToolError::NotIssued { .. }
    ));
    assert!(!reply.message.content.contains(leak));
}

/// A checkpoint forged by someone who can write it but holds no key: another agent's pointer
/// slipped into the window's messages, every plain hash recomputed. The plain seal verifies;
/// the keyed compactor refuses it, and so does the resolver: the model cannot reach the blob.
#[test]
fn a_forged_checkpoint_under_a_keyed_seal_allows_nothing() {
    let secret = "card 4111-1111-1111-1111 expires 12/29\n".repeat(300);
    let (mine, _, _, their_pointer) = keyed_agents(&secret);
    let own = mine
        .compact_blocking(&agent("cus_A", "read the log", &"ok\n".repeat(800)))
        .unwrap();
    let own_pointer = own.pointers()[0].clone();
    let json = serde_json::to_string(&own).unwrap();
    let forged_json = json.replace(&own_pointer.hash().to_hex(), &their_pointer.hash().to_hex());
    assert_ne!(forged_json, json, "the forger swapped the pointer");
    let bytes = compaction_fixtures::checkpoint::reseal_bytes(forged_json.as_bytes()).unwrap();
    let forged: Compacted<Agent> = serde_json::from_slice(&bytes).unwrap();
    assert!(forged.verify_seal(), "every plain hash was recomputed");
    assert!(forged.pointers().contains(&their_pointer));

    let mut resolver = PointerResolver::new();
    assert!(matches!(
        resolver.allow_compacted(&mine, &forged),
        Err(PointerToolError::Unsealed)
    ));
    assert!(matches!(
        mine.verify_checkpoint(&forged),
        Err(CompactionError::Integrity { .. })
    ));
    assert_eq!(resolver.allowed_count(), 0);
    assert_not_readable(&resolver, &mine, &their_pointer, "4111");
}

/// Another agent's genuine checkpoint (valid seals, same key, same store) is foreign to this
/// agent's compactor: `rehydrate` refuses it, and the resolver allows none of its pointers.
#[test]
fn another_agents_checkpoint_allows_nothing() {
    let (mine, theirs, other, their_pointer) = keyed_agents(&"ssn 078-05-1120\n".repeat(500));
    assert!(other.verify_seal());
    theirs.verify_checkpoint(&other).unwrap();

    let mut resolver = PointerResolver::new();
    match resolver.allow_compacted(&mine, &other) {
        Err(PointerToolError::NotTrusted {
            source:
                CompactionError::ForeignCheckpoint {
                    agent_id, found, ..
                },
        }) => {
            assert_eq!(agent_id.as_deref(), Some("agent-a"));
            assert_eq!(found.unwrap().agent_id(), "agent-b");
        }
        other => panic!("another agent's checkpoint must be refused, got {other:?}"),
    }
    assert!(!resolver.is_allowed(&their_pointer));
    assert_not_readable(&resolver, &mine, &their_pointer, "078-05");
    // The owner's resolver allows them.
    let mut owners = PointerResolver::new();
    assert!(owners.allow_compacted(&theirs, &other).unwrap() >= 1);
    assert!(owners.is_allowed(&their_pointer));
}

#[test]
fn replies_in_the_transcript_compact_and_rehydrate_byte_identical() {
    let s = setup();
    let mut state = agent("cus_A", "read the log", &s.output);
    let resolver = s.resolver.clone().with_max_bytes(500);
    // A cut part, a whole error and a resolved marker imitation all go back into the chat.
    for (id, arguments) in [
        ("r1", json!({ "pointer": s.mine.to_string() })),
        ("r2", json!({ "pointer": s.theirs.to_string() })),
        ("r3", json!("{broken")),
    ] {
        let call = ToolCall::new(id, RESOLVE_POINTER, arguments);
        let reply = resolver.handle_blocking(&s.compactor, &call);
        assert!(reply.message.content.starts_with(MARKER_PREFIX));
        state
            .chat
            .push(Message::assistant_with_tools("", vec![call]));
        state.chat.push(reply.message);
    }
    state.chat.push(Message::user("thanks"));
    for budget in [400, 4_000] {
        let compactor = Compactor::builder()
            .budget(budget)
            .token_counter(Tokenizer::O200kBase)
            .store(s.store.clone())
            .build()
            .unwrap();
        let compacted = compactor.compact_blocking(&state).unwrap();
        let back = compactor
            .rehydrate_blocking(&compacted, &compaction::NoReacquire)
            .unwrap();
        assert_eq!(back, state, "budget {budget}");
    }
}

/// Issue 20.2: markers show short handles; the tool resolves them through the checkpoint's
/// table, verified against the full hash, and refuses a made-up handle like a made-up hash.
#[test]
fn handles_resolve_through_the_table_and_made_up_ones_are_refused() {
    let store = SharedStore::default();
    let compactor = compactor(store);
    let output = "GET /health 200\n".repeat(400);
    let compacted = compactor
        .compact_blocking(&agent("acme", "why did it fail?", &output))
        .unwrap();
    let mut resolver = PointerResolver::new();
    resolver.allow_compacted(&compactor, &compacted).unwrap();
    let tombstone = compacted
        .messages()
        .into_iter()
        .find(|m| m.content.starts_with("⟦compaction:tombstone p"))
        .expect("the output was tombstoned");
    let handle: String = tombstone.content["⟦compaction:tombstone ".len()..]
        .chars()
        .take_while(|c| *c != '⟧')
        .collect();
    for spelled in [handle.clone(), format!("⟦{handle}⟧"), format!(" {handle} ")] {
        let reply = resolver.handle_blocking(&compactor, &call(json!({ "pointer": spelled })));
        assert_eq!(reply.message.content, output, "{spelled}");
        let slice = reply.outcome.unwrap();
        assert_eq!(slice.pointer, output_pointer(&compacted, &output));
    }
    for made_up in ["p999", "p0", "p01", "q1", "⟦p999"] {
        let reply = resolver.handle_blocking(&compactor, &call(json!({ "pointer": made_up })));
        assert!(reply.outcome.is_err(), "{made_up}");
        assert!(reply.message.content.starts_with(MARKER_PREFIX));
        assert!(!reply.message.content.contains("GET /health"));
    }
}

/// Issue 20.1: every user message of a user run is reachable by index through the tool.
#[test]
fn a_user_run_gives_each_message_back_by_index() {
    #[derive(Compactable, Serialize, Deserialize, Debug, PartialEq)]
    struct Chatty {
        #[transcript]
        chat: Transcript,
    }
    let mut state = Chatty {
        chat: Transcript::new(),
    };
    for turn in 0..300 {
        state.chat.push(Message::user(format!(
            "turn {turn}: keep the timeout at {turn}s"
        )));
        state.chat.push(Message::assistant("ok ".repeat(40)));
    }
    let compactor = Compactor::builder()
        .budget(2_000)
        .token_counter(Tokenizer::O200kBase)
        .build()
        .unwrap();
    let compacted = compactor.compact_blocking(&state).unwrap();
    let mut resolver = PointerResolver::new();
    resolver.allow_compacted(&compactor, &compacted).unwrap();
    let run = compacted
        .messages()
        .into_iter()
        .find(|m| m.content.starts_with("⟦compaction:users p"))
        .expect("old user messages are in a run");
    assert_eq!(run.role, Role::User);
    let handle: String = run.content["⟦compaction:users ".len()..]
        .chars()
        .take_while(|c| *c != ' ')
        .collect();
    for index in [0, 2, 100, 298] {
        let Some(span) = compacted.span_of(index) else {
            continue;
        };
        let reply = resolver.handle_blocking(
            &compactor,
            &call(json!({ "pointer": handle, "index": index })),
        );
        assert_eq!(
            reply.message.content,
            state.chat.messages()[index].content,
            "message {index}"
        );
        assert_eq!(reply.outcome.unwrap().index, Some(index));
        assert_eq!(
            compactor
                .resolve_message_blocking(&span, index)
                .unwrap()
                .as_ref(),
            Some(&state.chat.messages()[index])
        );
    }
    // Without index, the range says what it holds; an index outside it is refused.
    let reply = resolver.handle_blocking(&compactor, &call(json!({ "pointer": handle })));
    assert!(
        reply.message.content.contains("index=N"),
        "{}",
        reply.message.content
    );
    let reply = resolver.handle_blocking(
        &compactor,
        &call(json!({ "pointer": handle, "index": 100_000 })),
    );
    assert!(matches!(
        reply.outcome,
        Err(PointerToolError::NoSuchMessage { .. })
    ));
}
