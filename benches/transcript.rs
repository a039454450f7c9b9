//! Transcript benchmarks (issues 10 and 20), 32k-token budget for the whole request:
//!
//! - the coding conversation (`fixtures/src/chat.rs`, `session`: 10,000 messages, 30% tool
//!   results, writes recorded as effects);
//! - the chat-heavy one (`ChatHeavy`: about 39% short user messages, each answered or followed
//!   by one call and its result) at 1,000, 10,000 and 100,000 messages.
//!
//! For each: the first compaction (a new compactor: empty caches, empty store) and the
//! re-compaction after one appended turn (the same compactor compacted the conversation, then
//! the turn is pushed onto *that* transcript: a planner that keeps state by transcript sees an
//! append, not a new conversation); for the chat-heavy one also the re-compaction after the
//! same turn at every size, and the floors under a first compaction (`part`: hashing every
//! message as JSON and as bytes, counting what is sent). `main` checks and prints, untimed,
//! what the timings cannot: whether each compaction succeeds (a refusal is printed, and the
//! timings then measure the time to refuse) and what its checkpoint carries beyond the
//! messages it sends, the planner state the compactor keeps per message (the heap that
//! dropping it frees, its store's blobs excluded, counted by this binary's allocator) and the
//! tokens of the smallest transcript (the planner's floor).
//!
//! ```text
//! cargo bench -p compaction-benches --bench transcript
//! cargo bench -p compaction-benches --bench transcript -- chat   # one group (divan filter)
//! COMPACTION_BENCH_TINY=1 cargo bench -p compaction-benches --bench transcript -- --sample-count 1   # smoke run
//! python3 benches/peers/trim_messages.py   # LangChain's trim_messages on the same messages, same run
//! ```

use compaction::transcript::chat_tokens;
use compaction::TokenCounter;
use compaction::{
    CompactionError, Compactor, ContentHash, Extractive, MemoryStore, Message, NoReacquire, Role,
    Tokenizer, ToolCall,
};
use compaction_fixtures::chat::{self, ChatAgent, ChatHeavy};
use compaction_fixtures::realistic::{prose, tool_output_words, Rng};
use divan::Bencher;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

/// Counts live heap bytes (planner state per message).
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; only a counter is updated.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The request budget, the whole `messages()` list by the chat formula.
pub const BUDGET: usize = 32_000;

fn tiny() -> bool {
    std::env::var_os("COMPACTION_BENCH_TINY").is_some()
}

/// Messages of the coding conversation (300 on the smoke run: enough to need compaction).
fn coding_length() -> usize {
    if tiny() {
        300
    } else {
        10_000
    }
}

/// The chat-heavy sizes the benches name; 10, 50 and 250 messages on the smoke run (CI time).
fn chat_length(named: usize) -> usize {
    match (tiny(), named) {
        (false, _) => named,
        (true, 1_000) => 10,
        (true, 10_000) => 50,
        (true, _) => 250,
    }
}

/// A conversation and the turn appended to it.
struct Case {
    base: ChatAgent,
    turn: Vec<Message>,
}

/// The same turn at every size: a 60-word question, a call and a 600-word test log. Each
/// size's own next turn differs in length (the 10k conversation's is four times the 1k one's),
/// and a re-compaction counts what is new, so only the same turn isolates the history's length.
static SAME_TURN: LazyLock<Vec<Message>> = LazyLock::new(|| {
    let mut rng = Rng::new(2026);
    let id = "call_same_turn";
    vec![
        Message::user(prose(&mut rng, 60)),
        Message::assistant_with_tools(
            "Running the tests.",
            vec![ToolCall::new(
                id,
                "run_tests",
                serde_json::json!({ "filter": "ledger" }),
            )],
        ),
        Message::tool_result(id, tool_output_words(&mut rng, 600)),
    ]
});

static CODING: LazyLock<Case> = LazyLock::new(|| Case {
    base: chat::session(coding_length(), 10),
    turn: vec![
        Message::user("And now the integration tests, please."),
        Message::assistant("Running them now; the two flaky ones first."),
    ],
});

/// The chat-heavy cases, built on first use (100,000 messages are about 200 MB).
fn chat_case(named: usize) -> Arc<Case> {
    static CASES: LazyLock<Mutex<HashMap<usize, Arc<Case>>>> = LazyLock::new(Default::default);
    let mut cases = CASES.lock().expect("not poisoned");
    cases
        .entry(named)
        .or_insert_with(|| {
            let mut generator = ChatHeavy::new(20);
            let base = generator.agent(chat_length(named));
            Arc::new(Case {
                base,
                turn: generator.turn(),
            })
        })
        .clone()
}

fn compactor_with(budget: usize, store: MemoryStore) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .store(store)
        .build()
        .expect("valid configuration")
}

fn compactor() -> Compactor {
    compactor_with(BUDGET, MemoryStore::new())
}

/// A compactor that compacted a copy of `case.base`, and that copy with the turn pushed onto
/// it (the same transcript value, so a planner that keeps state by transcript sees an append).
fn compacted_then_grown(case: &Case) -> (Compactor, ChatAgent) {
    compacted_then(case, &case.turn)
}

/// A compactor that compacted a copy of `case.base`, and that copy with `turn` pushed onto it.
fn compacted_then(case: &Case, turn: &[Message]) -> (Compactor, ChatAgent) {
    let compactor = compactor();
    let mut agent = case.base.clone();
    let _ = compactor.compact_blocking(&agent);
    for message in turn {
        agent.chat.push(message.clone());
    }
    (compactor, agent)
}

fn main() {
    let named: &[usize] = &[1_000, 10_000, 100_000];
    println!("budget {BUDGET} tokens for the whole request (chat formula, o200k)");
    // What a thread's first exact count allocates (the encoding itself is loaded first, on
    // this thread): counting the empty text, then a sentence.
    let _ = Tokenizer::O200kBase.count("warm up the encoding");
    let (empty, sentence) = std::thread::spawn(|| {
        let live = || LIVE.load(Ordering::Relaxed);
        let before = live();
        let _ = Tokenizer::O200kBase.count("");
        let empty = live().saturating_sub(before);
        let _ = Tokenizer::O200kBase.count("the first count on this thread");
        (empty, live().saturating_sub(before))
    })
    .join()
    .expect("counts");
    println!("a thread's first count allocates {empty} B for the empty text, {sentence} B after a sentence");
    describe("coding", &CODING);
    for &n in named {
        describe(&format!("chat-heavy {n}"), &chat_case(n));
    }
    divan::main();
}

/// Prints, untimed: the conversation; whether the first compaction and the re-compaction
/// succeed (checked: within budget, valid on the wire, rehydrates to the input); the planner
/// state the compactor keeps per message; the smallest transcript's tokens.
fn describe(name: &str, case: &Case) {
    let base = &case.base;
    let messages = base.chat.messages();
    let bytes: usize = messages.iter().map(|m| m.content.len()).sum();
    let count = |role: Role| messages.iter().filter(|m| m.role == role).count();
    println!(
        "{name}: {} messages ({} user, {} tool results), {bytes} content bytes, {} tokens (chat formula)",
        messages.len(),
        count(Role::User),
        count(Role::Tool),
        chat_tokens(messages, &Tokenizer::O200kBase)
    );
    let store = MemoryStore::new();
    let compactor = compactor_with(BUDGET, store.clone());
    let live_before = LIVE.load(Ordering::Relaxed);
    let mut agent = base.clone();
    let transcript_bytes = LIVE.load(Ordering::Relaxed) - live_before;
    let first = check(&compactor, &agent);
    let before_turn = LIVE.load(Ordering::Relaxed);
    for message in &case.turn {
        agent.chat.push(message.clone());
    }
    let turn_bytes = LIVE.load(Ordering::Relaxed) - before_turn;
    let again = check(&compactor, &agent);
    println!("  first compaction: {first}\n  after one more turn: {again}");
    let stored: usize = store
        .hashes()
        .iter()
        .filter_map(|h| store.raw(h))
        .map(|b| b.len())
        .sum();
    let live = LIVE.load(Ordering::Relaxed);
    let grown =
        live as isize - (live_before + transcript_bytes + turn_bytes) as isize - stored as isize;
    // What the compactor holds is what dropping it frees (the store lives on in `store`).
    drop(compactor);
    let held = live.saturating_sub(LIVE.load(Ordering::Relaxed));
    let per_message = |bytes: f64| bytes / agent.chat.len() as f64;
    println!(
        "  planner state kept by the compactor: {held} B = {:.1} B per message (freed by dropping \
         it after both compactions; its store's {stored} B of blobs live on); the process's live \
         heap grew by {grown} B = {:.1} B per message beyond the transcript and the blobs \
         (the compactor's state and anything else that grew, such as the tokenizer's caches)",
        per_message(held as f64),
        per_message(grown as f64)
    );
    println!("  smallest transcript: {}", smallest(&agent));
}

/// One compaction, checked; what it did, or why it refused.
fn check(compactor: &Compactor, agent: &ChatAgent) -> String {
    match compactor.compact_blocking(agent) {
        Ok(compacted) => {
            let messages = compacted.messages();
            let tokens = chat_tokens(&messages, &Tokenizer::O200kBase);
            assert!(tokens <= compacted.budget(), "{tokens} tokens sent");
            let sent: compaction::Transcript = messages[1..].iter().cloned().collect();
            sent.validate().expect("no orphaned call or result");
            let back: ChatAgent = compactor
                .rehydrate_blocking(&compacted, &NoReacquire)
                .expect("rehydrates");
            assert!(&back == agent, "rehydrates to the input");
            // What a checkpoint carries besides the messages it sends (planner state kept
            // there, so a restarted process plans alike, shows up here).
            let checkpoint = serde_json::to_vec(&compacted).map_or(0, |b| b.len());
            let sent_bytes = serde_json::to_vec(&messages).map_or(0, |b| b.len());
            let extra = checkpoint.saturating_sub(sent_bytes);
            format!(
                "{tokens} tokens sent; {}; checkpoint {checkpoint} B of JSON, {extra} B beyond \
                 the messages sent ({:.1} B per message)",
                compacted.report(),
                extra as f64 / agent.chat.len() as f64
            )
        }
        Err(error) => format!("REFUSED: {error}"),
    }
}

/// The smallest transcript the planner can send: compacted at a budget too small for it, the
/// refusal names its tokens; compacted again at the budget that leaves exactly that much, it
/// must fit (the smallest working budget).
fn smallest(agent: &ChatAgent) -> String {
    let small = 2_000;
    match compactor_with(small, MemoryStore::new()).compact_blocking(agent) {
        Ok(compacted) => {
            let tokens = compacted
                .report()
                .transcript
                .as_ref()
                .map_or(0, |t| t.tokens);
            format!("it fits a {small}-token budget: {tokens} tokens of transcript")
        }
        Err(CompactionError::TranscriptOverBudget {
            required_tokens,
            available,
            budget,
            ..
        }) => {
            let working = budget - available + required_tokens;
            let verdict = match compactor_with(working, MemoryStore::new()).compact_blocking(agent)
            {
                Ok(_) => "compacts".to_owned(),
                Err(error) => format!("REFUSED ({error})"),
            };
            format!(
                "{required_tokens} tokens (the planner's floor); at the budget that leaves \
                 exactly that ({working}) it {verdict}"
            )
        }
        Err(error) => format!("not measured: {error}"),
    }
}

/// The first compaction of the coding conversation (a new compactor).
#[divan::bench(sample_count = 10, sample_size = 1)]
fn coding_first(bencher: Bencher) {
    let base = &CODING.base;
    bencher
        .with_inputs(compactor)
        .bench_local_refs(|compactor| compactor.compact_blocking(base));
}

/// Re-compaction of the coding conversation after one appended turn (user message and answer).
#[divan::bench(sample_count = 10, sample_size = 1)]
fn coding_recompact(bencher: Bencher) {
    bencher
        .with_inputs(|| compacted_then_grown(&CODING))
        .bench_local_refs(|(compactor, agent)| compactor.compact_blocking(agent));
}

/// Part of a first compaction: counting the whole coding conversation once, exactly.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn coding_part_count_everything(bencher: Bencher) {
    let base = &CODING.base;
    bencher.bench_local(|| chat_tokens(base.chat.messages(), &Tokenizer::O200kBase));
}

/// The first compaction of the chat-heavy conversation (a new compactor), by messages.
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 5, sample_size = 1)]
fn chat_first(bencher: Bencher, messages: usize) {
    let case = chat_case(messages);
    bencher
        .with_inputs(compactor)
        .bench_local_refs(|compactor| compactor.compact_blocking(&case.base));
}

/// Part of a first compaction, the least that storing every message in today's span format
/// takes: its JSON written once and hashed once with SHA-256 (no store, no count, no copy).
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 5, sample_size = 1)]
fn chat_part_hash_everything(bencher: Bencher, messages: usize) {
    let case = chat_case(messages);
    let mut json = Vec::new();
    bencher.bench_local(|| {
        // One message at a time into one buffer: no copy of a growing buffer is timed.
        for message in case.base.chat.messages() {
            json.clear();
            serde_json::to_writer(&mut json, message).expect("a message serializes");
            std::hint::black_box(ContentHash::of(&json));
        }
    });
}

/// Part of a first compaction, below any storage format: every message's content bytes hashed
/// once with SHA-256 (no JSON, no store, no count, no copy).
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 5, sample_size = 1)]
fn chat_part_hash_content(bencher: Bencher, messages: usize) {
    let case = chat_case(messages);
    bencher.bench_local(|| {
        for message in case.base.chat.messages() {
            std::hint::black_box(ContentHash::of(message.content.as_bytes()));
        }
    });
}

/// Part of a first compaction: counting exactly the messages it sends (the window of a 32k
/// budget), once.
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 5, sample_size = 1)]
fn chat_part_count_sent(bencher: Bencher, messages: usize) {
    let case = chat_case(messages);
    let sent = compactor()
        .compact_blocking(&case.base)
        .map(|compacted| compacted.messages())
        .unwrap_or_default();
    bencher.bench_local(|| chat_tokens(&sent, &Tokenizer::O200kBase));
}

/// Re-compaction of the chat-heavy conversation after one appended turn, by messages.
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 15, sample_size = 1)]
fn chat_recompact(bencher: Bencher, messages: usize) {
    let case = chat_case(messages);
    bencher
        .with_inputs(|| compacted_then_grown(&case))
        .bench_local_refs(|(compactor, agent)| compactor.compact_blocking(agent));
}

/// Re-compaction after the same appended turn ([`SAME_TURN`]) at every size.
#[divan::bench(args = [1_000, 10_000, 100_000], sample_count = 15, sample_size = 1)]
fn chat_recompact_same_turn(bencher: Bencher, messages: usize) {
    let case = chat_case(messages);
    bencher
        .with_inputs(|| compacted_then(&case, &SAME_TURN))
        .bench_local_refs(|(compactor, agent)| compactor.compact_blocking(agent));
}
