//! What the pointer tool's tests share: an agent whose old tool result and user message leave
//! the window, a store the test can corrupt, a compactor on it, and two agents compacted into
//! one store with a resolver that knows the first one's compactions only.
// Each test binary uses a part of what is shared.
#![allow(dead_code, unused_imports)]

use compaction::pointer_tool::{PointerResolver, PointerToolError, RESOLVE_POINTER};
use compaction::{
    Compactable, Compacted, Compactor, ContentHash, Message, Pointer, Store, StoreError, Tokenizer,
    ToolCall, Transcript,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq)]
pub struct Agent {
    #[protected]
    pub customer: String,
    #[transcript(keep_recent = 1)]
    pub chat: Transcript,
}

/// A store the test can corrupt: a shared map.
#[derive(Clone, Default)]
pub struct SharedStore(pub Arc<Mutex<HashMap<ContentHash, Vec<u8>>>>);

impl Store for SharedStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        self.0.lock().unwrap().insert(*hash, bytes.to_vec());
        Ok(())
    }
    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        let blobs = self.0.lock().unwrap();
        blobs
            .get(hash)
            .cloned()
            .ok_or(StoreError::NotFound { hash: *hash })
    }
}

/// An agent whose old tool result (`output`) and old user message leave the window.
pub fn agent(customer: &str, ask: &str, output: &str) -> Agent {
    let mut chat = Transcript::new();
    chat.push(Message::system("You help with logs."));
    chat.push(Message::user(ask));
    chat.push(Message::assistant_with_tools(
        "",
        vec![ToolCall::new("c1", "read_file", json!({"path": "app.log"}))],
    ));
    chat.push(Message::tool_result("c1", output));
    chat.push(Message::assistant("Read it."));
    chat.push(Message::user("what failed?"));
    Agent {
        customer: customer.into(),
        chat,
    }
}

pub fn compactor(store: SharedStore) -> Compactor {
    Compactor::builder()
        .budget(400)
        .token_counter(Tokenizer::O200kBase)
        .store(store)
        .build()
        .unwrap()
}

/// The tombstone's pointer of a compacted agent: the pointer of `output`.
pub fn output_pointer(compacted: &Compacted<Agent>, output: &str) -> Pointer {
    let pointer = Pointer::for_hash(ContentHash::of(output.as_bytes()));
    assert!(
        compacted.pointers().contains(&pointer),
        "the tool output left the window"
    );
    pointer
}

pub fn call(arguments: Value) -> ToolCall {
    ToolCall::new("call_7", RESOLVE_POINTER, arguments)
}

/// Two agents compacted into one store; the resolver knows the first one's compactions only.
pub struct Setup {
    pub compactor: Compactor,
    pub store: SharedStore,
    pub resolver: PointerResolver,
    pub mine: Pointer,
    pub theirs: Pointer,
    pub output: String,
}

pub fn setup() -> Setup {
    let store = SharedStore::default();
    let compactor = compactor(store.clone());
    let output = "GET /health 200 ✓\n".repeat(400);
    let secret = "card 4111-1111-1111-1111 expires 12/29\n".repeat(300);
    let a = compactor
        .compact_blocking(&agent("cus_A", "read the log", &output))
        .unwrap();
    let b = compactor
        .compact_blocking(&agent("cus_B", "read my card", &secret))
        .unwrap();
    let mut resolver = PointerResolver::new();
    assert!(resolver.allow_compacted(&compactor, &a).unwrap() >= 1);
    let mine = output_pointer(&a, &output);
    let theirs = output_pointer(&b, &secret);
    Setup {
        compactor,
        store,
        resolver,
        mine,
        theirs,
        output,
    }
}

pub fn error_of(reply: &compaction::PointerToolReply) -> &PointerToolError {
    reply.outcome.as_ref().expect_err("the call must fail")
}
