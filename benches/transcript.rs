//! Transcript benchmarks (issue 10): compact a 10,000-message conversation (30% tool results)
//! to 32k tokens, then re-compact it after one appended message (goal: at most 0.2x the first).
//!
//! ```text
//! cargo bench -p compaction-benches --bench transcript
//! COMPACTION_BENCH_TINY=1 cargo bench -p compaction-benches --bench transcript -- --sample-count 1   # smoke run
//! python3 benches/peers/trim_messages.py   # LangChain's trim_messages on the same messages
//! ```
//!
//! `main` checks the result first (within budget, pairs kept, rehydrates to the input) and
//! prints what the compaction did, so a number is never measured on a wrong answer.

use compaction::transcript::chat_tokens;
use compaction::{Compactor, Extractive, MemoryStore, Message, NoReacquire, Tokenizer};
use compaction_fixtures::chat::{self, ChatAgent};
use divan::Bencher;
use std::sync::LazyLock;

/// The request budget, the whole `messages()` list by the chat formula.
pub const BUDGET: usize = 32_000;

/// Messages in the conversation (300 on the smoke run: enough to need compaction).
fn length() -> usize {
    if std::env::var_os("COMPACTION_BENCH_TINY").is_some() {
        300
    } else {
        10_000
    }
}

/// The conversation, and the same plus one user message.
static BASE: LazyLock<ChatAgent> = LazyLock::new(|| chat::session(length(), 10));
static GROWN: LazyLock<ChatAgent> = LazyLock::new(|| {
    let mut grown = BASE.clone();
    grown
        .chat
        .push(Message::user("And now the integration tests, please."));
    grown
});

fn compactor() -> Compactor {
    Compactor::builder()
        .budget(BUDGET)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(Extractive)
        .store(MemoryStore::new())
        .build()
        .expect("valid configuration")
}

fn main() {
    let base = &*BASE;
    let bytes: usize = base.chat.iter().map(|m| m.content.len()).sum();
    let tools = base
        .chat
        .iter()
        .filter(|m| m.role == compaction::Role::Tool)
        .count();
    println!(
        "transcript: {} messages ({tools} tool results), {bytes} content bytes, {} tokens (chat formula)",
        base.chat.len(),
        chat_tokens(base.chat.messages(), &Tokenizer::O200kBase)
    );
    let compactor = compactor();
    for agent in [base, &*GROWN] {
        let compacted = compactor.compact_blocking(agent).expect("compacts");
        let messages = compacted.messages();
        let tokens = chat_tokens(&messages, &Tokenizer::O200kBase);
        assert!(tokens <= BUDGET, "{tokens} > {BUDGET}");
        let sent: compaction::Transcript = messages[1..].iter().cloned().collect();
        sent.validate().expect("no orphaned call or result");
        let back: ChatAgent = compactor
            .rehydrate_blocking(&compacted, &NoReacquire)
            .expect("rehydrates");
        assert_eq!(&back, agent, "rehydrates to the input");
        println!("{tokens} tokens sent; {}", compacted.report());
    }
    divan::main();
}

/// The first compaction: a new compactor (empty caches, empty store).
#[divan::bench(sample_count = 10, sample_size = 1)]
fn compact_first(bencher: Bencher) {
    let base = &*BASE;
    bencher
        .with_inputs(compactor)
        .bench_local_refs(|compactor| compactor.compact_blocking(base).expect("compacts"));
}

/// Re-compaction after one appended message: the compactor compacted the conversation before
/// (untimed), then compacts it with one more message (timed). `sample_size = 1`, so every
/// timed run follows its own untimed compaction of the shorter conversation.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn recompact_after_append(bencher: Bencher) {
    let (base, grown) = (&*BASE, &*GROWN);
    let compactor = compactor();
    bencher
        .with_inputs(|| {
            compactor.compact_blocking(base).expect("compacts");
        })
        .bench_local_values(|()| compactor.compact_blocking(grown).expect("compacts"));
}

/// Part of every compaction: counting the whole conversation once, exactly (what a first
/// compaction cannot avoid).
#[divan::bench(sample_count = 10, sample_size = 1)]
fn part_count_everything(bencher: Bencher) {
    let base = &*BASE;
    bencher.bench_local(|| chat_tokens(base.chat.messages(), &Tokenizer::O200kBase));
}
