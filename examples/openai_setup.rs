//! Summaries from a model: the `OpenAiSummarizer` set up as the guide's "Using a model" shows it
//! (`src/lib.rs` tests that docs/models.md's block is this file below these lines). Needs the
//! `openai` feature: `cargo run --example openai_setup --features openai` builds the compactor
//! and sends nothing; `support_agent` shows a whole run.

use compaction::openai::OpenAiSummarizer;
use compaction::{CompactionError, Compactor, Tokenizer};
use std::time::Duration;

/// A compactor whose `summarize` fields are summarized by a chat model.
fn compactor_with_model() -> Result<Compactor, CompactionError> {
    let summarizer = OpenAiSummarizer::new("gpt-4o-mini") // key and server: OPENAI_API_KEY, OPENAI_BASE_URL
        .base_url("http://localhost:8080/v1") // e.g. a local llama.cpp or vLLM server
        .timeout(Duration::from_secs(30)) // per request
        .max_retries(3) // 429, 5xx, refused connections
        .instructions("Summarize for a support agent. Keep order ids exactly as written.");
    Compactor::builder()
        .budget(8_000)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(summarizer)
        .build()
}

fn main() -> Result<(), CompactionError> {
    let compactor = compactor_with_model()?; // nothing is sent until a field is summarized
    println!(
        "budget {} tokens, counted with {}",
        compactor.budget(),
        compactor.counter().name()
    );
    Ok(())
}
