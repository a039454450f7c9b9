//! What reaches the `log` facade, not only `tracing` (issue 21 item 8): a `log` logger records
//! every record of the process at TRACE while an agent runs on every backend this build has
//! (SQLite always; PostgreSQL, the OpenAI summarizer and a Hugging Face tokenizer with their
//! features), with a marker in every string of its state, its effect records and its agent id.
//! No marker, no spilled value's bytes and no blob address (a pointer) is ever in it, nor in
//! the `tracing` capture of the same run.
//!
//! Dependencies log through `log`: `tokio-postgres` the `Debug` of every bound parameter at
//! DEBUG (`tokio_postgres::query`), which the backend silences from inside by binding every
//! value behind a wrapper printed `<hidden>`; `tokenizers` every character it normalizes at
//! TRACE, which no library can silence without changing the process's global log level: the
//! guide (docs/errors-async-logging.md, "Logging") names that target ([`FILTERED`]) and this
//! logger filters it, as an application must.

mod support;

use compaction::{
    block_on, Compacted, Compactor, EffectLedger, EffectLog, FieldOutcome, Store, Tokenizer,
};
use std::sync::{Mutex, Once};
use support::capture::{capturing, Capture, Marker, Recording};
use support::states::{oracle_reacquirer, PropState};

#[cfg(feature = "postgres")]
mod pg;

/// The `log` targets the guide's "Logging" (docs/errors-async-logging.md) tells applications to
/// filter out below WARN: what a dependency logs that this crate cannot keep values out of.
const FILTERED: &[&str] = &["tokenizers"];

/// Every `log` record of the process, as `LEVEL target: message`.
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The targets of the records the filter dropped.
static DROPPED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let target = record.target();
        if FILTERED
            .iter()
            .any(|f| target == *f || target.starts_with(&format!("{f}::")))
        {
            DROPPED.lock().unwrap().push(target.to_owned());
            return;
        }
        let line = format!("{} {target}: {}", record.level(), record.args());
        LOG.lock().unwrap().push(line);
    }

    fn flush(&self) {}
}

/// Installs the logger at TRACE (once: `log` has one logger per process).
fn capture_log() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&Logger).expect("no other logger in this binary");
        log::set_max_level(log::LevelFilter::Trace);
    });
}

fn log_text() -> String {
    LOG.lock().unwrap().join("\n")
}

/// What must never be logged: every marker, as text and as the bytes `Debug` prints for a
/// `Vec<u8>` parameter (`[81, 122, ...]`), and every blob address the run stored.
fn needles(marker: &Marker, addresses: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for m in &marker.markers {
        out.push(m.clone());
        let bytes: Vec<String> = m.bytes().map(|b| b.to_string()).collect();
        out.push(bytes.join(", "));
    }
    out.extend(addresses.iter().cloned());
    out
}

fn assert_nothing_logged(what: &str, needles: &[String], tracing: &Capture) {
    let log = log_text();
    let traced = tracing.text();
    for needle in needles {
        assert!(
            !log.contains(needle.as_str()),
            "{what}: {needle} was logged:\n{log}"
        );
        assert!(
            !traced.contains(needle.as_str()),
            "{what}: {needle} was traced:\n{traced}"
        );
    }
}

/// The state, marked, and its agent id.
fn marked() -> (Marker, PropState, String) {
    let mut marker = Marker::default();
    let state = marker.state(&support::fixtures::rich_state());
    let agent = marker.mark("agent-7");
    (marker, state, agent)
}

/// Every ledger operation on every scope of `state`, with marked keys, targets, payloads.
async fn drive_ledger<L: EffectLedger>(ledger: &L, state: &PropState, marker: &mut Marker) {
    for (scope, log) in [("migrations", &state.migrations), ("reads", &state.reads)] {
        ledger.sync_log(scope, log).await.unwrap();
        for effect in log {
            let key = &effect.idempotency_key;
            ledger.get(scope, key).await.unwrap();
            ledger.history(scope, key).await.unwrap();
        }
        ledger.load_log(scope).await.unwrap();
    }
    let fresh = compaction::Effect::new(
        marker.mark("charge"),
        marker.mark("psp://cards"),
        marker.mark("charge-key"),
    );
    let key = fresh.idempotency_key.clone();
    ledger.record("migrations", &fresh).await.unwrap();
    ledger.begin("migrations", &key).await.unwrap();
    let payload = serde_json::json!({ "receipt": marker.mark("receipt") });
    ledger
        .set_payload("migrations", &key, &payload)
        .await
        .unwrap();
    ledger.commit("migrations", &key).await.unwrap();
    // Refusals carry keys in their messages: they are values, never logged.
    assert!(ledger.begin("migrations", &key).await.is_err());
    let other = marker.mark("refund-key");
    ledger.begin("reads", &other).await.unwrap();
    ledger.fail("reads", &other).await.unwrap();
    ledger
        .reconcile("reads", &other, compaction::EffectStatus::Committed)
        .await
        .unwrap();
    ledger.load_all().await.unwrap();
}

/// Compacts with the ledger twice (the second from the summary cache), resolves every pointer,
/// saves, loads and rehydrates through `save`/`load`. Returns the compaction.
fn drive_compactor<L: EffectLedger>(
    state: &PropState,
    compactor: &Compactor,
    ledger: &L,
    save: impl Fn(&Compacted<PropState>),
    load: impl Fn() -> Compacted<PropState>,
) -> Compacted<PropState> {
    let mut last = None;
    for _ in 0..2 {
        let compacted = block_on(compactor.compact_with_ledger(state, ledger)).unwrap();
        for row in &compacted.report().fields {
            if let FieldOutcome::Spilled { pointer }
            | FieldOutcome::Summarized {
                source: pointer, ..
            } = &row.outcome
            {
                compactor.resolve_blocking(pointer).unwrap();
            }
        }
        save(&compacted);
        last = Some(compacted);
    }
    let loaded = load();
    // The ledger's records replaced the state's (they are the source of truth): rehydrate
    // against what the checkpoint holds.
    let _ = compactor.rehydrate_blocking(&loaded, &oracle_reacquirer(state));
    last.expect("two compactions")
}

fn summarizing_compactor<S: Store + Clone + 'static>(store: &S) -> (Compactor, Recording) {
    let summarizer = Recording::default();
    let compactor = Compactor::builder()
        .budget(900)
        .token_counter(Tokenizer::Heuristic)
        .summarizer(summarizer.clone())
        .store(store.clone())
        .build()
        .unwrap();
    (compactor, summarizer)
}

fn summarized(compacted: &Compacted<PropState>) -> bool {
    compacted
        .report()
        .fields
        .iter()
        .any(|f| matches!(f.outcome, FieldOutcome::Summarized { .. }))
}

#[test]
fn sqlite_backends_log_no_value_key_or_pointer() {
    capture_log();
    let dir = std::env::temp_dir().join(format!("compaction-log-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agent.db");
    let (mut marker, state, agent) = marked();
    let tracing = Capture::default();
    let addresses = capturing(&tracing, || {
        let store = compaction::SqliteStore::open(&path).unwrap();
        let ledger = compaction::SqliteLedger::open(&path).unwrap();
        block_on(drive_ledger(&ledger, &state, &mut marker));
        let (compactor, _) = summarizing_compactor(&store);
        let compacted = drive_compactor(
            &state,
            &compactor,
            &ledger,
            |c| store.save_checkpoint(&agent, c).unwrap(),
            || store.load_checkpoint(&agent).unwrap().unwrap(),
        );
        assert!(summarized(&compacted), "{}", compacted.report());
        store
            .collect_garbage(&compaction::sqlite::GcOptions::new())
            .unwrap();
        store
            .blobs()
            .unwrap()
            .into_iter()
            .map(|b| b.address)
            .collect::<Vec<_>>()
    });
    assert!(!addresses.is_empty());
    assert_nothing_logged("sqlite", &needles(&marker, &addresses), &tracing);
    let _ = std::fs::remove_dir_all(&dir);
}

/// tokio-postgres logs every statement it runs with its parameters at DEBUG: they are all
/// `<hidden>`, and the records are there (so the capture saw the client at work).
#[cfg(feature = "postgres")]
#[test]
fn postgres_backends_log_no_value_key_or_pointer() {
    capture_log();
    let (mut marker, state, agent) = marked();
    let namespace = pg::fresh_namespace(&marker.mark("tenant"));
    let url = pg::shared_db().url().to_string();
    let tracing = Capture::default();
    let addresses = capturing(&tracing, || {
        let store = block_on(compaction::PgStore::connect(&url, &namespace)).unwrap();
        let ledger = block_on(compaction::PgLedger::connect(&url, &namespace)).unwrap();
        block_on(drive_ledger(&ledger, &state, &mut marker));
        block_on(ledger.reconcile_with_note(
            "x",
            compaction::EffectStatus::Committed,
            &marker.mark("note"),
            &marker.mark("oncall"),
        ))
        .unwrap_err(); // no such key: refused, and its text never logged
        let (compactor, _) = summarizing_compactor(&store);
        let compacted = drive_compactor(
            &state,
            &compactor,
            &ledger,
            |c| block_on(store.save_checkpoint(&agent, c)).unwrap(),
            || block_on(store.load_checkpoint(&agent)).unwrap().unwrap(),
        );
        assert!(summarized(&compacted), "{}", compacted.report());
        block_on(store.collect_garbage(&compaction::postgres::GcOptions::new())).unwrap();
        block_on(store.entries()).unwrap();
        block_on(store.blobs())
            .unwrap()
            .into_iter()
            .map(|b| b.address)
            .collect::<Vec<_>>()
    });
    assert!(!addresses.is_empty());
    let mut needles = needles(&marker, &addresses);
    needles.push(namespace.clone());
    assert_nothing_logged("postgres", &needles, &tracing);
    let log = log_text();
    assert!(
        log.contains("tokio_postgres::query: executing statement") && log.contains("<hidden>"),
        "the client's statements were not captured:\n{log}"
    );
}

/// reqwest logs its connections and responses: the server's address, never a request body.
#[cfg(feature = "openai")]
#[test]
fn the_openai_summarizer_logs_no_value() {
    use compaction::openai::OpenAiSummarizer;
    use compaction_fixtures::openai_server::FakeOpenAi;
    capture_log();
    let (marker, state, _) = marked();
    let server = FakeOpenAi::start([]).expect("a loopback server");
    let tracing = Capture::default();
    let compacted = capturing(&tracing, || {
        let summarizer = OpenAiSummarizer::new("fake-model")
            .base_url(server.base_url())
            .api_key("sk-test-key");
        let compactor = Compactor::builder()
            .budget(900)
            .token_counter(Tokenizer::Heuristic)
            .summarizer(summarizer)
            .build()
            .unwrap();
        compactor.compact_blocking(&state).unwrap()
    });
    assert!(server.request_count() > 0, "{}", compacted.report());
    let mut needles = needles(&marker, &[]);
    needles.push("sk-test-key".into());
    assert_nothing_logged("openai", &needles, &tracing);
}

/// `tokenizers` logs every character it normalizes at TRACE: filtered by its target, as the
/// guide says to; nothing else leaks.
#[cfg(feature = "hf-tokenizers")]
#[test]
fn a_hugging_face_tokenizer_logs_no_value_once_its_target_is_filtered() {
    use compaction::hf_tokenizers::tokenizers::models::wordlevel::WordLevel;
    use compaction::hf_tokenizers::tokenizers::normalizers::Lowercase;
    use compaction::hf_tokenizers::tokenizers::pre_tokenizers::byte_level::ByteLevel;
    use compaction::HfTokenizer;
    capture_log();
    let (marker, state, _) = marked();
    let vocab = [("[UNK]".to_string(), 0u32), ("qz".to_string(), 1)];
    let model = WordLevel::builder()
        .vocab(vocab.into_iter().collect())
        .unk_token("[UNK]".into())
        .build()
        .unwrap();
    let mut tokenizer = compaction::hf_tokenizers::tokenizers::Tokenizer::new(model);
    tokenizer.with_normalizer(Some(Lowercase));
    tokenizer.with_pre_tokenizer(Some(ByteLevel::default()));
    let counter = HfTokenizer::from_tokenizer(tokenizer).unwrap();
    let tracing = Capture::default();
    capturing(&tracing, || {
        let compactor = Compactor::builder()
            .budget(2_000)
            .token_counter(counter)
            .build()
            .unwrap();
        let _ = compactor.compact_blocking(&state);
    });
    assert_nothing_logged("hf-tokenizers", &needles(&marker, &[]), &tracing);
    assert!(
        DROPPED
            .lock()
            .unwrap()
            .iter()
            .any(|t| t.starts_with("tokenizers")),
        "the filter had nothing to do: update docs/errors-async-logging.md \"Logging\" and FILTERED"
    );
}

/// `EffectLog` keys are values too: a marked log through the in-memory ledger logs nothing
/// (the guard's refusals name keys in their messages, never in a log).
#[test]
fn the_in_memory_ledger_logs_nothing() {
    capture_log();
    let (mut marker, state, _) = marked();
    let ledger = compaction::MemoryLedger::new();
    let tracing = Capture::default();
    capturing(&tracing, || {
        block_on(drive_ledger(&ledger, &state, &mut marker));
        let log: EffectLog = block_on(ledger.load_log("migrations")).unwrap();
        assert!(!log.is_empty());
    });
    assert_nothing_logged("memory", &needles(&marker, &[]), &tracing);
}
