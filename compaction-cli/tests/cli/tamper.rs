//! What someone with write access to a SQLite file does to the ledger and the summary cache,
//! and what the tool and the library make of it (issue 21 item 11), and the operator's guard
//! against settling a claim that may still be running (issue 21, "Smaller").

use crate::common;

use common::*;
use compaction::{EffectError, EffectStatus, SqliteLedger, SqliteLedgerError, SqliteStore};
use std::path::Path;

/// The summary cache entry the fixture's compaction wrote.
fn cache_entry(path: &Path) -> String {
    let store = SqliteStore::open(path).unwrap();
    let entries = store.entries().unwrap();
    let entry = entries
        .iter()
        .find(|e| e.name.starts_with("summary-cache/"))
        .expect("the fixture's compaction summarized a field");
    entry.name.clone()
}

/// The exact tamper: a committed charge rewritten to `not_started`, its events deleted,
/// and a summary cache entry replaced by garbage. `verify` names both and exits 1; the charge
/// cannot be claimed (and so run) again until an operator settles it.
#[test]
fn verify_sees_a_rewritten_effect_and_a_garbage_cache_entry() {
    let fx = fixture("tamper-ledger");
    let db = fx.path.to_str().unwrap();
    let (code, _, _) = run(&["verify", db]);
    assert_eq!(code, 0, "the fixture is healthy");

    // The history refuses to be rewritten: the triggers are in the file.
    let conn = compaction::sqlite::rusqlite::Connection::open(&fx.path).unwrap();
    for statement in [
        "DELETE FROM effect_events WHERE key = 'charge-001'",
        "UPDATE effect_events SET to_status = 'not_started' WHERE key = 'charge-001'",
    ] {
        let err = conn.execute(statement, []).unwrap_err();
        assert!(
            err.to_string().contains("append-only"),
            "{statement}: {err}"
        );
    }
    // Whoever can write the file can drop them, though.
    conn.execute_batch(
        "DROP TRIGGER effect_events_no_update;
         DROP TRIGGER effect_events_no_delete;
         UPDATE effects SET status = 'not_started' WHERE key = 'charge-001' AND scope = '';
         DELETE FROM effect_events WHERE key = 'charge-001' AND scope = '';",
    )
    .unwrap();
    let entry = cache_entry(&fx.path);
    conn.execute(
        "UPDATE entries SET bytes = X'00FF00' WHERE name = ?1",
        [&entry],
    )
    .unwrap();
    drop(conn);

    let (code, stdout, stderr) = run(&["verify", db]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(!stdout.contains("no problems found"), "{stdout}");
    assert!(stdout.contains("effect `charge-001`"), "{stdout}");
    assert!(stdout.contains("no history"), "{stdout}");
    assert!(stdout.contains(&entry), "{stdout}");
    let (code, json) = run_json(&["verify", db, "--json"]);
    assert_eq!(code, 1);
    let kinds: Vec<&str> = json["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"effect") && kinds.contains(&"cache"),
        "{json}"
    );

    // The charge is not claimed again: the guard sees a status its history does not explain.
    let ledger = SqliteLedger::open(&fx.path).unwrap();
    let err = ledger.begin("charge-001").unwrap_err();
    let SqliteLedgerError::Backend(backend) = &err else {
        panic!("expected the backend's refusal, got {err:?}");
    };
    assert_eq!(
        backend.kind(),
        compaction::SqliteErrorKind::Corrupt,
        "{err}"
    );
    assert_eq!(
        ledger.status("charge-001").unwrap(),
        Some(EffectStatus::NotStarted)
    );

    // An operator who checked the outside world settles it (the one step that may): the
    // guard then follows the settlement. The cache entry goes with the next gc.
    let (code, _, stderr) = run(&[
        "reconcile",
        db,
        "charge-001",
        "--to",
        "committed",
        "--note",
        "ch_001 is captured in the PSP",
        "--scope",
        "",
        "--force",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(matches!(
        ledger.begin("charge-001"),
        Err(SqliteLedgerError::Effect(
            EffectError::AlreadyCommitted { .. }
        ))
    ));
    let (code, json) = run_json(&["gc", db, "--min-age", "0s", "--json"]);
    assert_eq!(code, 0, "{json}");
    let removed: Vec<&str> = json["removed_entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(removed, [entry.as_str()], "{json}");
}

/// A file written before the history was append-only gets its triggers when a writer opens it.
#[test]
fn an_older_file_is_migrated_to_an_append_only_history() {
    let fx = fixture("tamper-migrate");
    let conn = compaction::sqlite::rusqlite::Connection::open(&fx.path).unwrap();
    conn.execute_batch(
        "DROP TRIGGER effect_events_no_update;
         DROP TRIGGER effect_events_no_delete;
         DROP TRIGGER checkpoint_sequences_forward_only;
         DROP TRIGGER checkpoint_sequences_kept;
         DROP TABLE checkpoint_sequences;
         DROP TABLE agent_fences;
         DELETE FROM schema_version WHERE version >= 5;",
    )
    .unwrap();
    conn.execute("DELETE FROM effect_events WHERE key = 'refund-001'", [])
        .expect("no trigger yet");
    drop(conn);
    // Read commands never migrate; a writer does.
    drop(SqliteLedger::open(&fx.path).unwrap());
    let conn = compaction::sqlite::rusqlite::Connection::open(&fx.path).unwrap();
    let err = conn
        .execute("DELETE FROM effect_events WHERE key = 'charge-001'", [])
        .unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
}

/// An in-flight key: `reconcile` always warns with the claim's time and process, and refuses
/// a claim more recent than `--min-claim-age` (10 minutes) without `--force`.
#[test]
fn reconciling_a_recent_claim_needs_force() {
    let fx = fixture("tamper-recent");
    let db = fx.path.to_str().unwrap();
    let ledger = SqliteLedger::open(&fx.path).unwrap();
    ledger
        .record(&compaction::Effect::new(
            "charge_card",
            "psp://cards/1",
            "charge-003",
        ))
        .unwrap();
    ledger.begin("charge-003").unwrap(); // claimed a moment ago: the agent may be running it
    let settle = |extra: &[&str]| {
        let mut args = vec![
            "reconcile",
            db,
            "charge-003",
            "--to",
            "committed",
            "--note",
            "seen in the PSP",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    let (code, stdout, stderr) = settle(&[]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("warning: effect charge-003 is in flight"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("pid {}", std::process::id())),
        "{stderr}"
    );
    assert!(
        stderr.contains("--min-claim-age") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(
        ledger.status("charge-003").unwrap(),
        Some(EffectStatus::Unknown)
    );
    // A shorter window, or --force, settles it (still with the warning).
    let (code, _, stderr) = settle(&["--min-claim-age", "0s"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("in flight"), "{stderr}");
    assert_eq!(
        ledger.status("charge-003").unwrap(),
        Some(EffectStatus::Committed)
    );

    // The fixture's charge-002 was claimed two hours ago: settled with the warning only.
    let (code, _, stderr) = run(&[
        "reconcile",
        db,
        "charge-002",
        "--to",
        "committed",
        "--note",
        "seen in the PSP",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("claimed (begin)"), "{stderr}");
}
