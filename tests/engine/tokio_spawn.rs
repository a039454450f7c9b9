//! The async API on a real multi-threaded runtime: `compact`, `rehydrate` and `resolve` run
//! inside `tokio::spawn`, which only accepts `Send` futures, with an async summarizer and an
//! async `Reacquire` that await the runtime themselves.

use crate::common;

use common::*;
use compaction::{
    Compactor, FieldOutcome, MemoryStore, Reacquire, ReacquireError, Summarizer, SummarizerError,
    SummaryRequest,
};
use std::sync::Arc;

/// A summarizer that yields to the runtime, as a model call would.
struct SlowFirstWords;

impl Summarizer for SlowFirstWords {
    async fn summarize(&self, req: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        tokio::task::yield_now().await;
        Ok(req
            .text
            .split_whitespace()
            .take(req.target_tokens / 4)
            .collect::<Vec<_>>()
            .join(" "))
    }
}

/// Re-reads derivable fields, yielding to the runtime first.
struct Environment;

impl Reacquire for Environment {
    async fn reacquire(
        &self,
        field: &str,
        pointer: &str,
    ) -> Result<serde_json::Value, ReacquireError> {
        tokio::task::yield_now().await;
        match field {
            "config_contents" | "ci_log" => Ok(serde_json::json!(format!("re-read {pointer}"))),
            other => Err(format!("nothing to re-read for {other}").into()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_runs_inside_tokio_spawn() {
    let compactor = Arc::new(
        Compactor::builder()
            .budget(700)
            .summarizer(SlowFirstWords)
            .store(MemoryStore::default())
            .build()
            .unwrap(),
    );
    let state = Arc::new(spilling_state());

    let task = {
        let (compactor, state) = (compactor.clone(), state.clone());
        tokio::spawn(async move {
            let compacted = compactor.compact(&*state).await?;
            let restored = compactor.rehydrate(&compacted, &Environment).await?;
            Ok::<_, compaction::CompactionError>((compacted, restored))
        })
    };
    let (compacted, restored) = task.await.unwrap().unwrap();

    assert!(compacted.tokens() <= 700);
    assert_eq!(restored.constraints, state.constraints);
    assert_eq!(restored.migrations, state.migrations);
    // A summarized field comes back from its stored source, not re-acquired.
    assert_eq!(restored.ci_log, state.ci_log);
    assert!(matches!(
        compacted.report().outcome("ci_log"),
        Some(FieldOutcome::Summarized { .. })
    ));

    let pointer = compacted
        .pointers()
        .into_iter()
        .next()
        .expect("something spilled");
    let bytes = tokio::spawn(async move { compactor.resolve(&pointer).await })
        .await
        .unwrap()
        .unwrap();
    assert!(!bytes.is_empty());
}
