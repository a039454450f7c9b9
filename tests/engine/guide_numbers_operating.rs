//! The guide's rules in numbers, continued (see `guide_numbers.rs`): the pointer tool's parts,
//! the window's forms, the checkpoint format, the stores' and the CLI's defaults, the test
//! suites' sizes and the summarizers' settings.

use crate::common;

use crate::guide_numbers::{stated, RecentDefault, COUNTER};
use common::{spilling_compactor, spilling_state, TempDir};
use compaction::pointer_tool::{PointerResolver, DEFAULT_MAX_BYTES};
use compaction::sqlite::GcOptions;
use compaction::{
    Compactable, Compacted, CompactionError, Compactor, MemoryStore, Message, NoReacquire,
    SqliteOptions, SqliteStore, ToolCall,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// docs/pointers.md: the pointer tool's parts.
// ---------------------------------------------------------------------------------------------

/// docs/pointers.md:72-75: "Content longer than `with_max_bytes` (default `DEFAULT_MAX_BYTES`,
/// 16 KiB) comes in parts, each beginning with a note that gives the bytes it holds and the
/// `offset` for the rest."
#[test]
fn the_pointer_tool_reads_16_kib_at_a_time() {
    stated(
        "docs/pointers.md",
        "(default `DEFAULT_MAX_BYTES`, 16 KiB) comes in parts",
    );
    assert_eq!(DEFAULT_MAX_BYTES, 16 * 1024);
    assert_eq!(PointerResolver::new().max_bytes(), 16 * 1024);
    let mut agent = RecentDefault::default();
    agent.chat.push(Message::user("why did the deploy fail?"));
    let read = ToolCall::new("call_1", "read_file", json!({"path": "deploy.log"}));
    agent
        .chat
        .push(Message::assistant_with_tools("", vec![read]));
    let log = "step 41: ok\n".repeat(4_000); // 48,000 bytes
    agent.chat.push(Message::tool_result("call_1", log.clone()));
    agent.chat.push(Message::assistant("The log is long."));
    agent.chat.push(Message::user("show me all of it"));
    let compactor = Compactor::builder().budget(400).build().unwrap();
    let compacted = compactor.compact_blocking(&agent).unwrap();
    let mut resolver = PointerResolver::new();
    resolver.allow_compacted(&compactor, &compacted).unwrap();
    let pointer = compacted.pointers()[0].to_string();
    let mut parts = Vec::new();
    let mut offset = 0;
    while offset < log.len() {
        let args = json!({ "pointer": pointer, "offset": offset });
        let call = ToolCall::new(format!("read_{offset}"), "resolve_pointer", args);
        let reply = resolver.handle_blocking(&compactor, &call);
        let slice = reply.outcome.unwrap();
        assert_eq!((slice.start, slice.total), (offset, log.len()));
        parts.push(slice.end - slice.start);
        assert!(
            reply.message.content.contains(&format!("{}", slice.end)),
            "the offset for the rest"
        );
        offset = slice.end;
    }
    assert_eq!(parts, [16_384, 16_384, 48_000 - 2 * 16_384]);
}

// ---------------------------------------------------------------------------------------------
// docs/compacting.md: the window's header and its compact form.
// ---------------------------------------------------------------------------------------------

#[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
struct Counter {
    #[protected]
    step: u32,
}

/// docs/compacting.md:55-62: the compact form exactly when the full one does not fit; one `u32`
/// field takes 82 tokens in the full form and 27 in the compact one; `COMPACT_FORM_BELOW`
/// (256) decides nothing.
#[test]
fn the_compact_form_is_taken_when_the_full_one_does_not_fit() {
    stated(
        "docs/compacting.md",
        "When the full form does not fit the budget, and only then",
    );
    stated(
        "docs/compacting.md",
        "takes 82 tokens in the full form and 27 in the compact one, which any budget from 27 to \
         81 tokens gets. (`compaction::render::COMPACT_FORM_BELOW`, 256, is kept for compatibility",
    );
    assert_eq!(compaction::render::COMPACT_FORM_BELOW, 256);
    let window = |budget: usize| {
        Compactor::builder()
            .budget(budget)
            .token_counter(COUNTER)
            .build()
            .unwrap()
            .compact_blocking(&Counter { step: 3 })
            .map(|c| (c.tokens(), c.render().contains("Re-verify")))
    };
    assert!(window(26).is_err());
    assert_eq!(window(27).unwrap(), (27, false), "compact");
    assert_eq!(window(81).unwrap(), (27, false), "compact");
    assert_eq!(window(82).unwrap(), (82, true), "full, though below 256");
    assert_eq!(window(300).unwrap(), (82, true));
}

/// docs/compacting.md:26: the sample window's header is the one the renderer writes (no counter
/// in it, so an unchanged window is the same text from one request to the next).
#[test]
fn the_sample_windows_header_is_the_renderers() {
    let header = "<<< COMPACTED STATE of MigrationState >>>";
    stated("docs/compacting.md", &format!("```text {header}"));
    let store = MemoryStore::new();
    let compacted = spilling_compactor(&store)
        .compact_blocking(&spilling_state())
        .unwrap();
    assert_eq!(compacted.render().lines().next(), Some(header));
}

// ---------------------------------------------------------------------------------------------
// docs/guarantees.md: checkpoint formats.
// ---------------------------------------------------------------------------------------------

/// `compacted` as JSON with its format number set to `format`.
fn with_format<S: Compactable>(compacted: &Compacted<S>, format: u32) -> Compacted<S> {
    let mut value = serde_json::to_value(compacted).unwrap();
    value["format"] = format.into();
    serde_json::from_value(value).unwrap()
}

/// docs/guarantees.md: checkpoints are written as format 4 (format 3 is still read); format 1 is
/// refused; format 2 is refused when it carries a transcript.
#[test]
fn checkpoints_are_format_4_and_older_ones_are_refused_by_their_number() {
    stated(
        "docs/guarantees.md",
        "Checkpoints of format 1 (before the fingerprint) are refused with `CheckpointFormat`",
    );
    stated(
        "docs/guarantees.md",
        "So are checkpoints of format 2 that carry a transcript (format 3 seals",
    );
    stated("docs/guarantees.md", "Checkpoints are written as format 4");
    let compactor = Compactor::builder().budget(2_000).build().unwrap();
    fn refused<T>(result: Result<T, CompactionError>) -> (u32, u32) {
        match result {
            Err(CompactionError::CheckpointFormat { found, supported }) => (found, supported),
            Err(other) => panic!("not refused by its format: {other:?}"),
            Ok(_) => panic!("read"),
        }
    }
    // Without a transcript.
    let counter = compactor.compact_blocking(&Counter { step: 3 }).unwrap();
    assert_eq!(serde_json::to_value(&counter).unwrap()["format"], 4);
    // (A genuine format-2 checkpoint is sealed with its number: one cannot be made here.)
    let old = with_format(&counter, 1);
    assert_eq!(
        refused(compactor.rehydrate_blocking(&old, &NoReacquire)),
        (1, 4)
    );
    // With one.
    let mut agent = RecentDefault::default();
    agent.chat.push(Message::user("hello"));
    let chat = compactor.compact_blocking(&agent).unwrap();
    assert_eq!(serde_json::to_value(&chat).unwrap()["format"], 4);
    let old = with_format(&chat, 2);
    assert_eq!(
        refused(compactor.rehydrate_blocking(&old, &NoReacquire)),
        (2, 4)
    );
}

// ---------------------------------------------------------------------------------------------
// docs/storage.md, docs/operating.md, docs/effects.md: the durable store and the operator's
// tool.
// ---------------------------------------------------------------------------------------------

/// docs/storage.md:72: "waiting up to 5 s for the lock (`SqliteOptions::busy_timeout`)".
#[test]
fn sqlite_waits_5_s_for_a_lock() {
    stated(
        "docs/storage.md",
        "waiting up to 5 s for the lock (`SqliteOptions::busy_timeout`)",
    );
    assert_eq!(
        SqliteOptions::new().get_busy_timeout(),
        Duration::from_secs(5)
    );
}

/// docs/operating.md:127: "the grace period (`--min-age`, default one hour ...)": an
/// unreferenced blob stored just now is kept by default, and removed without a grace period.
#[test]
fn gc_keeps_blobs_younger_than_one_hour_by_default() {
    stated("docs/operating.md", "(`--min-age`, default one hour;");
    assert_eq!(GcOptions::DEFAULT_MIN_AGE, Duration::from_secs(3600));
    assert_eq!(GcOptions::new().get_min_age(), Duration::from_secs(3600));
    let dir = TempDir::new("guide-gc");
    let store = SqliteStore::open(dir.db("agent.db")).unwrap();
    let bytes = b"an unreferenced blob";
    compaction::block_on(compaction::Store::put(
        &store,
        &compaction::ContentHash::of(bytes),
        bytes,
    ))
    .unwrap();
    let kept = store.collect_garbage(&GcOptions::new()).unwrap();
    assert_eq!((kept.removed.len(), kept.kept_recent), (0, 1));
    let gone = store
        .collect_garbage(&GcOptions::new().min_age(Duration::ZERO))
        .unwrap();
    assert_eq!(gone.removed.len(), 1);
}

/// The argument `field` of the CLI (compaction-cli/src), with the `default_value` its
/// attribute gives, wherever the CLI declares it.
fn cli_default(field: &str) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("compaction-cli/src");
    let mut dirs = vec![src];
    let mut found = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            for pair in lines.windows(2) {
                let declared = pair[1].trim_start().starts_with(&format!("{field}:"));
                if let (true, Some(at)) = (declared, pair[0].find("default_value = \"")) {
                    let rest = &pair[0][at + "default_value = \"".len()..];
                    found.push(rest[..rest.find('"').unwrap()].to_owned());
                }
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "`{field}` with a default in compaction-cli/src: {found:?}"
    );
    found.remove(0)
}

/// docs/effects.md:51 ("`--min-claim-age` (10 minutes by default)"), docs/operating.md:17
/// ("`--min-claim-age`, default 10m") and docs/operating.md:127 (gc's `--min-age`, default
/// one hour): the CLI's defaults.
#[test]
fn the_clis_defaults_are_10_minutes_and_one_hour() {
    stated(
        "docs/effects.md",
        "`--min-claim-age` (10 minutes by default)",
    );
    stated("docs/operating.md", "`--min-claim-age`, default 10m");
    assert_eq!(cli_default("min_claim_age"), "10m");
    assert_eq!(cli_default("min_age"), "1h");
}

// ---------------------------------------------------------------------------------------------
// docs/testing.md and docs/postgres.md: what the suites run.
// ---------------------------------------------------------------------------------------------

/// docs/testing.md:17-20: "`prop_compact` runs 2,000 random cases by default"; "`prop_repeated`
/// runs `PROPTEST_CASES / 250` sequences (8 by default) of 1,000 mutate/compact/rehydrate
/// steps".
#[test]
fn the_property_suites_run_what_testing_md_says() {
    stated(
        "docs/testing.md",
        "`prop_compact` runs 2,000 random cases by default",
    );
    stated(
        "docs/testing.md",
        "`prop_repeated` runs `PROPTEST_CASES / 250` sequences (8 by default) of 1,000",
    );
    assert!(include_str!("prop_compact.rs").contains("cases: cases(2000),"));
    let repeated = include_str!("prop_repeated.rs");
    assert!(repeated.contains("cases: (cases(2000) / 250).max(1),"));
    assert!(repeated.contains("const STEPS: usize = 1_000;"));
    assert_eq!(2000 / 250, 8);
}

/// docs/postgres.md:116-117: "(`tests/pg_processes.rs`: 8 processes x 50 rounds, 50
/// `SIGKILL`s)".
#[test]
fn the_fleet_test_runs_8_processes_50_rounds_50_kills() {
    stated(
        "docs/postgres.md",
        "(`tests/pg_processes.rs`: 8 processes x 50 rounds, 50 `SIGKILL`s)",
    );
    let suite = include_str!("../pg_processes.rs");
    for constant in [
        "const WORKERS: usize = 8;",
        "const ROUNDS: usize = 50;",
        "const KILLS: usize = 50;",
    ] {
        assert!(suite.contains(constant), "{constant}");
    }
}

/// docs/postgres.md:99-100: "`PgOptions` sets the pool size (8 per handle), the connect timeout
/// (10 s) and how long an operation waits for a pooled connection (30 s)". (The values are
/// checked with the `postgres` feature.)
#[test]
fn pg_options_default_to_8_connections_10_s_and_30_s() {
    stated(
        "docs/postgres.md",
        "`PgOptions` sets the pool size (8 per handle), the connect timeout (10 s) and how long an \
         operation waits for a pooled connection (30 s)",
    );
    #[cfg(feature = "postgres")]
    {
        use compaction::postgres::PgOptions;
        let stated = PgOptions::new()
            .max_connections(8)
            .connect_timeout(Duration::from_secs(10))
            .wait_timeout(Duration::from_secs(30));
        assert_eq!(PgOptions::new(), stated);
        assert_ne!(PgOptions::new(), stated.clone().max_connections(9));
    }
}

// ---------------------------------------------------------------------------------------------
// docs/models.md: the summarizers' defaults (checked with the `openai` and `anthropic`
// features; the retries and backoff are exercised in tests/openai_summarizer.rs).
// ---------------------------------------------------------------------------------------------

/// docs/models.md:51-53: `.timeout(d)` 60 s, `.max_retries(n)` 3, `.max_backoff(d)` 30 s.
#[test]
fn the_openai_summarizer_defaults_to_60_s_3_retries_30_s() {
    stated("docs/models.md", "| `.timeout(d)` | 60 s |");
    stated("docs/models.md", "| `.max_retries(n)` | 3 |");
    stated("docs/models.md", "| `.max_backoff(d)` | 30 s |");
    #[cfg(feature = "openai")]
    {
        use compaction::openai::OpenAiSummarizer;
        let default = format!("{:?}", OpenAiSummarizer::new("gpt-4o-mini"));
        let stated = OpenAiSummarizer::new("gpt-4o-mini")
            .timeout(Duration::from_secs(60))
            .max_retries(3)
            .max_backoff(Duration::from_secs(30));
        assert_eq!(default, format!("{stated:?}"));
        assert!(default.contains("max_retries: 3"), "{default}");
    }
}

/// docs/models.md:112-113: "`ClaudeEstimate` counts `ceil(o200k × 1.6)` by default".
#[test]
fn claude_estimate_defaults_to_1_6_times_o200k() {
    stated(
        "docs/models.md",
        "`ClaudeEstimate` counts `ceil(o200k × 1.6)` by default",
    );
    #[cfg(feature = "anthropic")]
    {
        use compaction::anthropic::ClaudeEstimate;
        use compaction::TokenCounter;
        assert_eq!(ClaudeEstimate::default().factor(), 1.6);
        let text = "fn main() { println!(\"hello, world\"); }";
        let o200k = COUNTER.count(text);
        let expected = (o200k as f64 * 1.6).ceil() as usize;
        assert_eq!(ClaudeEstimate::default().count(text), expected);
    }
}
