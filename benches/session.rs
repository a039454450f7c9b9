//! The session bench's run of this library (issues 22 and 30): plays a deterministic session
//! (the coding session of `fixtures/src/session.rs`, or a member of `fixtures/src/family.rs`'s
//! family) and writes every request the agent would send, as JSONL, for
//! `benches/peers/session.py` and `benches/peers/family.py`, which score it with the same code
//! as LangChain's policies and the ceiling (prefix reuse, request tokens, time per request,
//! refusals) and price it with `benches/price.rs`.
//!
//! ```text
//! cargo run --release -p compaction-benches --example session -- TURNS|MEMBER BUDGET OUT_DIR [--export]
//! ```
//!
//! `TURNS`: the coding session of that many turns (seed 22); `MEMBER`: a family member by name
//! (`coding-300-s2-k3`, see `Member`'s `Display`). Writes `OUT_DIR/compaction-NAME-BUDGET.jsonl`
//! (NAME: TURNS or MEMBER); with `--export`, also the session itself as OpenAI chat messages
//! (`OUT_DIR/session-NAME.json`) for the Python policies. The file format (one JSON object a
//! line): `{"message": ID, "value": MESSAGE}` defines a message the first time a request uses
//! it; `{"request": N, "turn": U, "ids": [ID, ...], "stable": S, "ms": T}` is a request (the
//! user turns pushed before it, its messages in order, how many of them are its stable prefix
//! when the policy says, and the policy's own time to produce it; with
//! `SESSION_CHECKPOINT_BYTES=1`, also `"checkpoint_bytes"`: the sizes of the checkpoint it
//! saved); `{"request": N, "turn": U, "refused": "why", "ms": T}` a request the policy could
//! not produce.

use compaction::session::Session;
use compaction::transcript::chat_tokens;
use compaction::{block_on, EffectLedger, MemoryLedger};
use compaction::{
    Compactor, ContentHash, Extractive, Message, Role, SealKey, Store, StoreError, Tokenizer,
};
use compaction_fixtures::chat::openai_message;
use compaction_fixtures::family::{Member, SessionKeep2, SessionKeep3};
use compaction_fixtures::session::{self, apply, CodingSession, Event, SessionState};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The seed of the session every policy plays.
const SEED: u64 = 22;

/// How an agent built on this library turns its state into the next request: a
/// [`SessionPolicy`] (the default), or [`CompactEveryRequest`] with `--every-request`.
trait Policy {
    /// A message joins the conversation, or the agent's state changes.
    fn event(&mut self, event: &Event);
    /// The messages of the next request and how many of them are its stable prefix, or why
    /// there is none.
    fn request(&mut self) -> Result<(Vec<Message>, Option<usize>), String>;
    /// The sizes of the checkpoint the last request saved, when the run measures them.
    fn checkpoint_bytes(&self) -> Option<Value> {
        None
    }
}

/// Compacts the whole state before every request with no hysteresis marks: the 0.2 agent loop,
/// kept to compare with.
struct CompactEveryRequest<S> {
    state: S,
    compactor: Compactor,
}

impl<S: SessionState> CompactEveryRequest<S> {
    fn new(state: S, budget: usize, store: CountingStore) -> Self {
        CompactEveryRequest {
            state,
            compactor: compactor(budget, store),
        }
    }
}

impl<S: SessionState> Policy for CompactEveryRequest<S> {
    fn event(&mut self, event: &Event) {
        apply(&mut self.state, event);
    }
    fn request(&mut self) -> Result<(Vec<Message>, Option<usize>), String> {
        self.compactor
            .compact_blocking(&self.state)
            .map(|compacted| (compacted.messages(), None))
            .map_err(|e| e.to_string())
    }
}

/// The agent loop as a user writes it with [`Session`]: each message is pushed into the
/// session's transcript, a state change applied to its state, and every request is
/// `next_request` (hysteresis at the session's default marks, 0.9 and 0.6 of the budget; each
/// compaction point checkpoints to the session's store and advances the ledger's sequence).
struct SessionPolicy<S> {
    session: Session<S>,
    ledger: MemoryLedger,
    /// A state change was applied and the next user message still announces it.
    announced: bool,
    /// `SESSION_CHECKPOINT_BYTES=1`: each request's row gets its checkpoint's sizes.
    measure_checkpoint: bool,
}

impl<S: SessionState> SessionPolicy<S> {
    fn new(state: S, budget: usize) -> Self {
        let mut compactor = Compactor::builder()
            .budget(budget)
            .token_counter(Tokenizer::O200kBase)
            .summarizer(Extractive);
        // `SESSION_SEAL_KEY=1` signs every checkpoint with a keyed seal (HMAC-SHA-256), as a
        // deployment that sets `CompactorBuilder::seal_key` would: its cost per request.
        if std::env::var("SESSION_SEAL_KEY").is_ok_and(|v| v == "1") {
            let key = SealKey::new("bench-key", [7u8; 32]).expect("a 32-byte key");
            compactor = compactor.seal_key(key);
        }
        let ledger = MemoryLedger::new();
        let mut builder = Session::builder("bench-agent");
        // `SESSION_MARKS=HIGH,LOW` tries other hysteresis marks (shares of the budget).
        if let Ok(marks) = std::env::var("SESSION_MARKS") {
            let (high, low) = marks.split_once(',').expect("SESSION_MARKS=HIGH,LOW");
            let share = |s: &str| s.trim().parse::<f64>().expect("a share of the budget");
            builder = builder.water_marks(share(high), share(low));
        }
        // `SESSION_WINDOW=SHARE` tries another cap on the window.
        if let Ok(share) = std::env::var("SESSION_WINDOW") {
            builder = builder.window_share(share.trim().parse().expect("a share"));
        }
        // `SESSION_VERBATIM_FIRST=1` sends a new result verbatim whenever its turn fits.
        if std::env::var("SESSION_VERBATIM_FIRST").is_ok_and(|v| v == "1") {
            builder = builder.verbatim_first(true);
        }
        // `SESSION_KEEP_FIRST=N` keeps another number of first messages in place (0: none).
        if let Ok(n) = std::env::var("SESSION_KEEP_FIRST") {
            builder = builder.keep_first(n.trim().parse().expect("a number of messages"));
        }
        // `SESSION_PAGE=SHARE` tries another share for paging new results on arrival.
        if let Ok(page) = std::env::var("SESSION_PAGE") {
            builder = builder.page_results_over(page.trim().parse().expect("a share"));
        }
        let session = builder
            .compactor(compactor)
            .ledger(ledger.clone())
            .open_blocking(|| state)
            .expect("a fresh session opens");
        SessionPolicy {
            session,
            ledger,
            announced: false,
            measure_checkpoint: std::env::var("SESSION_CHECKPOINT_BYTES").is_ok_and(|v| v == "1"),
        }
    }
}

impl<S: SessionState> Policy for SessionPolicy<S> {
    fn event(&mut self, event: &Event) {
        // The fixture announces each state change in the next user message ("Status: ...",
        // a paragraph of its own) for the policies without typed state; this agent records
        // it in its state, which the session sends (its window, or a state update), so the
        // user message reaches it without the announcement: every policy is told once.
        if let Event::State { .. } = event {
            self.announced = true;
        }
        let unannounced;
        let event = match event {
            Event::Push(message) if self.announced && message.role == Role::User => {
                self.announced = false;
                let mut message = message.clone();
                if let Some((_, rest)) = message.content.split_once("\n\n") {
                    message.content = rest.to_owned();
                }
                unannounced = Event::Push(message);
                &unannounced
            }
            _ => event,
        };
        // The fixture's `apply` pushes a message into the state's `#[transcript]` field (the
        // session's transcript) and keeps the write effects' log, as the agent's code would.
        apply(self.session.state_mut(), event);
        // The writes are claimed and committed in the ledger as they happen (an agent would
        // call `run_effect`; the fixture's tools are simulated, so their log is synced).
        if let Event::Push(message) = event {
            if !message.tool_calls.is_empty() || message.tool_call_id.is_some() {
                let writes = self.session.state().writes();
                block_on(self.ledger.sync_log("writes", writes)).expect("the ledger accepts");
            }
        }
    }
    fn request(&mut self) -> Result<(Vec<Message>, Option<usize>), String> {
        self.session
            .next_request_blocking()
            .map(|request| {
                let stable = request.stable_prefix_len();
                (request.into_messages(), Some(stable))
            })
            .map_err(|e| e.to_string())
    }
    /// `SESSION_CHECKPOINT_BYTES=1`: the JSON bytes of the checkpoint the request saved, whole
    /// and in the parts that can grow with a session (the state's fields, the transcript's
    /// messages, the planner's memory). Measured after the request's time is taken, and a
    /// count of bytes does not vary between runs as a VM's time does.
    fn checkpoint_bytes(&self) -> Option<Value> {
        if !self.measure_checkpoint {
            return None;
        }
        let checkpoint = serde_json::to_value(self.session.last_checkpoint()?).expect("JSON");
        let bytes = |part: &str| checkpoint.pointer(part).map_or(0, |v| v.to_string().len());
        Some(json!({
            "whole": bytes(""),
            "state": bytes("/entries"),
            "messages": bytes("/transcript/messages"),
            "planner_memory": bytes("/transcript/memory"),
        }))
    }
}

/// The compactor of [`CompactEveryRequest`]: the request budget, exact o200k counts,
/// the offline extractive summarizer, a store that counts what it is given.
fn compactor(budget: usize, store: CountingStore) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .store(store)
        .build()
        .expect("valid configuration")
}

/// A store that verifies and counts the new blobs it is given and keeps none of them: the
/// session never reads a blob back, and today's planner stores a new fold span, as long as the
/// folded history, at every compaction (a `MemoryStore` grew past 23 GB by request 3,686 of
/// the 2,000-turn session at 64k). What was stored is reported instead.
#[derive(Clone, Default)]
struct CountingStore {
    seen: Arc<Mutex<(HashSet<ContentHash>, usize)>>,
}

impl CountingStore {
    /// New blobs and their bytes so far.
    fn stored(&self) -> (usize, usize) {
        let seen = self.seen.lock().expect("not poisoned");
        (seen.0.len(), seen.1)
    }
}

impl Store for CountingStore {
    async fn put(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        if !hash.matches(bytes) {
            return Err(StoreError::Integrity { hash: *hash });
        }
        let mut seen = self.seen.lock().expect("not poisoned");
        if seen.0.insert(*hash) {
            seen.1 += bytes.len();
        }
        Ok(())
    }
    async fn get(&self, hash: &ContentHash) -> Result<Vec<u8>, StoreError> {
        Err(StoreError::NotFound { hash: *hash })
    }
}

/// The JSONL file of one policy's requests, each message written once.
struct Requests {
    out: BufWriter<File>,
    ids: HashMap<String, usize>,
}

impl Requests {
    fn create(path: &Path) -> Requests {
        let file = File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Requests {
            out: BufWriter::new(file),
            ids: HashMap::new(),
        }
    }

    fn line(&mut self, value: Value) {
        serde_json::to_writer(&mut self.out, &value).expect("writes");
        self.out.write_all(b"\n").expect("writes");
    }

    /// A request as sent: its messages by id, at user turn `turn` (those pushed so far).
    fn sent(
        &mut self,
        at: At,
        messages: &[Message],
        stable: Option<usize>,
        ms: f64,
        checkpoint: Option<Value>,
    ) {
        let At { index, turn } = at;
        let mut ids = Vec::with_capacity(messages.len());
        for message in messages {
            let value = openai_message(message);
            let key = value.to_string();
            let next = self.ids.len();
            let id = *self.ids.entry(key).or_insert(next);
            if id == next {
                self.line(json!({ "message": id, "value": value }));
            }
            ids.push(id);
        }
        let mut row = json!({ "request": index, "turn": turn, "ids": ids, "ms": ms });
        if let Some(stable) = stable {
            row["stable"] = json!(stable);
        }
        if let Some(checkpoint) = checkpoint {
            row["checkpoint_bytes"] = checkpoint;
        }
        self.line(row)
    }

    fn refused(&mut self, at: At, why: &str, ms: f64) {
        let At { index, turn } = at;
        self.line(json!({ "request": index, "turn": turn, "refused": why, "ms": ms }));
    }
}

/// Where a request falls: its index, and the user turns pushed before it (`request_times.py
/// flat` compares one session's requests at its start and at its end by turn).
#[derive(Clone, Copy)]
struct At {
    index: usize,
    turn: usize,
}

/// The session as the Python policies replay it: the initial conversation, the agent's state
/// as the text a policy without typed state puts in its system prompt (task, rules, plan: the
/// `Session` sends them in its window; `family.py` gives them to the peers and the ceiling, so
/// every policy carries the same information), and the events.
fn export(path: &Path, initial: &CodingSession, events: &[Event]) {
    let events: Vec<Value> = events
        .iter()
        .map(|event| match event {
            Event::Push(message) => json!({ "push": openai_message(message) }),
            Event::Request => json!({ "request": true }),
            Event::State {
                plan_step,
                decision,
            } => json!({ "state": { "plan_step": plan_step, "decision": decision } }),
        })
        .collect();
    let initial_messages: Vec<Value> = initial.chat.iter().map(openai_message).collect();
    let state = json!({
        "task": initial.task,
        "constraints": initial.constraints,
        "plan": initial.plan,
        "plan_step": initial.plan_step,
        "decisions": initial.decisions,
    });
    let state = format!(
        "The agent's state (its changes are announced in the user's messages):\n{}",
        serde_json::to_string_pretty(&state).expect("serializes")
    );
    let file = json!({ "initial": initial_messages, "state": state, "events": events });
    std::fs::write(path, serde_json::to_vec(&file).expect("serializes")).expect("writes");
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: session TURNS|MEMBER BUDGET OUT_DIR [--export] [--every-request]";
    let name = args.first().expect(usage).clone();
    // A number: the coding session of issue 22; a name: a member of the family (issue 30).
    let member = match name.parse::<usize>() {
        Ok(_) => None,
        Err(_) => {
            Some(Member::parse(&name).unwrap_or_else(|| panic!("{usage}: not a member: {name}")))
        }
    };
    let (initial, events) = match (&member, name.parse::<usize>()) {
        (Some(member), _) => member.session(),
        (None, Ok(turns)) => session::session(turns, SEED),
        (None, Err(_)) => unreachable!("a member or a number"),
    };
    let budget: usize = args.get(1).expect(usage).parse().expect(usage);
    let dir = PathBuf::from(args.get(2).expect(usage));
    std::fs::create_dir_all(&dir).expect("creates the output directory");
    if args.iter().any(|a| a == "--export") {
        export(&dir.join(format!("session-{name}.json")), &initial, &events);
    }
    let every_request = args.iter().any(|a| a == "--every-request");
    let run_as = Run {
        name: &name,
        budget,
        dir: &dir,
        every_request,
    };
    // `keep_recent` is an attribute of the state's type: one type per value.
    match member.map_or(1, |m| m.keep_recent) {
        1 => run_as.play(initial, &events),
        2 => run_as.play(SessionKeep2::from_initial(initial), &events),
        _ => run_as.play(SessionKeep3::from_initial(initial), &events),
    }
}

/// One run's settings: the session's name, the budget, where the requests go, the policy.
struct Run<'a> {
    name: &'a str,
    budget: usize,
    dir: &'a Path,
    every_request: bool,
}

impl Run<'_> {
    /// Plays `events` from `initial` with the run's policy and writes its requests.
    fn play<S: SessionState>(&self, initial: S, events: &[Event]) {
        let Run {
            name,
            budget,
            dir,
            every_request,
        } = *self;
        let store = CountingStore::default();
        // The policy: a `Session` (the agent loop this library offers), or with `--every-request`
        // the 0.2 loop (a plain `compact` of the whole state before every request, no marks).
        let mut policy: Box<dyn Policy> = if every_request {
            Box::new(CompactEveryRequest::new(initial, budget, store.clone()))
        } else {
            Box::new(SessionPolicy::new(initial, budget))
        };
        let path = dir.join(format!("compaction-{name}-{budget}.jsonl"));
        let mut requests = Requests::create(&path);
        let turns = events
            .iter()
            .filter(|e| matches!(e, Event::Push(m) if m.role == Role::User))
            .count();
        let (mut index, mut turn, mut refused, mut total_ms) = (0, 0, 0, 0.0);
        for event in events {
            if *event != Event::Request {
                if matches!(event, Event::Push(m) if m.role == Role::User) {
                    turn += 1;
                }
                policy.event(event);
                continue;
            }
            let at = At { index, turn };
            let start = Instant::now();
            let request = if turn <= 300 {
                request_in_first_300_turns(&mut *policy)
            } else if turn > turns.saturating_sub(300) {
                request_in_last_300_turns(&mut *policy)
            } else {
                request_in_middle_turns(&mut *policy)
            };
            let ms = start.elapsed().as_secs_f64() * 1e3;
            total_ms += ms;
            match request {
                Ok((messages, stable)) => {
                    let tokens = chat_tokens(&messages, &Tokenizer::O200kBase);
                    assert!(
                        tokens <= budget,
                        "request {index}: {tokens} tokens > {budget}"
                    );
                    requests.sent(at, &messages, stable, ms, policy.checkpoint_bytes());
                }
                Err(why) => {
                    refused += 1;
                    requests.refused(at, &why, ms);
                }
            }
            index += 1;
            if index % 500 == 0 {
                eprintln!("  {index} requests, {refused} refused, {total_ms:.0} ms so far");
            }
        }
        requests.out.flush().expect("writes");
        let (blobs, bytes) = store.stored();
        println!(
            "compaction: {name}, budget {budget}: {index} requests, {refused} refused, \
         {:.2} ms per request, {blobs} new blobs of {:.1} MB stored -> {}",
            total_ms / index.max(1) as f64,
            bytes as f64 / 1e6,
            path.display()
        );
    }
}

// Instruction counts (`request_times.py 64000 instructions`): each request is made through the
// function named after the part of the session its turn is in (the first 300 user turns, the
// last 300, the rest), so callgrind's inclusive count of each function is the instructions
// spent on that part's requests: a measure of the work per request that, unlike a VM's time,
// is the same in every run. Each passes its own constant so that the compiler cannot fold the
// three into one symbol.
macro_rules! counted_part {
    ($(#[doc = $doc:literal] $name:ident = $tag:literal;)*) => {$(
        #[doc = $doc]
        #[inline(never)]
        fn $name(policy: &mut dyn Policy) -> Result<(Vec<Message>, Option<usize>), String> {
            std::hint::black_box($tag);
            policy.request()
        }
    )*};
}

counted_part! {
    /// A request during the session's first 300 user turns.
    request_in_first_300_turns = 1u8;
    /// A request during the session's last 300 user turns (after the first 300).
    request_in_last_300_turns = 2u8;
    /// A request between the first 300 user turns and the last 300.
    request_in_middle_turns = 3u8;
}
