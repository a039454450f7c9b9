//! `effects`, `history` and `reconcile` against a ledger the library wrote: the operator's
//! settlement is what the library's guard then enforces.

use crate::common;

use common::*;
use compaction::{EffectError, EffectStatus, SqliteLedger, SqliteLedgerError};

#[test]
fn effects_lists_every_scope_and_filters_by_status_and_scope() {
    let fx = fixture("effects");
    let db = fx.path.to_str().unwrap();
    let (code, stdout, stderr) = run(&["effects", db]);
    assert_eq!(code, 0, "{stderr}");
    redactions(&fx).bind(|| insta::assert_snapshot!("effects_all", stdout));

    let (code, stdout, _) = run(&["effects", db, "--status", "unknown"]);
    assert_eq!(code, 0);
    redactions(&fx).bind(|| insta::assert_snapshot!("effects_unknown", stdout));

    let (code, json) = run_json(&["effects", db, "--json"]);
    assert_eq!(code, 0);
    let effects = json["effects"].as_array().unwrap();
    let ledger = SqliteLedger::open(&fx.path).unwrap();
    let total: usize = ledger
        .load_all()
        .unwrap()
        .values()
        .map(|log| log.len())
        .sum();
    assert_eq!(effects.len(), total);
    let unknown = effects.iter().find(|e| e["key"] == "charge-002").unwrap();
    assert_eq!(unknown["status"], "unknown");
    assert_eq!(unknown["scope"], "");
    assert_eq!(unknown["depends_on"], serde_json::json!(["charge-001"]));

    let (code, json) = run_json(&["effects", db, "--scope", "refunds", "--json"]);
    assert_eq!(code, 0);
    let keys: Vec<&str> = json["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["refund-001", "charge-001"]);
    let (code, json) = run_json(&["effects", db, "--scope", "nobody", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json["effects"], serde_json::json!([]));
}

#[test]
fn reconcile_settles_an_unknown_key_and_the_guard_follows_it() {
    let fx = fixture("reconcile");
    let db = fx.path.to_str().unwrap();
    let ledger = SqliteLedger::open(&fx.path).unwrap();
    assert!(matches!(
        ledger.begin("charge-002"),
        Err(SqliteLedgerError::Effect(
            EffectError::OutcomeUnknown { .. }
        ))
    ));

    let note = "ch_002 is in the PSP dashboard, captured";
    let (code, stdout, stderr) = reconcile(db, "charge-002", "committed", note);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        format!("effect charge-002: unknown -> committed (by oncall-ana: {note})\n")
    );
    assert_eq!(
        ledger.status("charge-002").unwrap(),
        Some(EffectStatus::Committed)
    );
    assert!(matches!(
        ledger.begin("charge-002"),
        Err(SqliteLedgerError::Effect(
            EffectError::AlreadyCommitted { .. }
        ))
    ));

    // The note is in the history, with who; the text output is reviewed as a snapshot.
    let (code, stdout, _) = run(&["history", db, "charge-002"]);
    assert_eq!(code, 0);
    redactions(&fx).bind(|| insta::assert_snapshot!("history_after_reconcile", stdout));
    let (code, json) = run_json(&["history", db, "charge-002", "--json"]);
    assert_eq!(code, 0);
    let events = json["events"].as_array().unwrap();
    let ops: Vec<&str> = events.iter().map(|e| e["op"].as_str().unwrap()).collect();
    assert_eq!(ops, ["record", "begin", "reconcile"]);
    let last = events.last().unwrap();
    assert_eq!(last["from"], "unknown");
    assert_eq!(last["to"], "committed");
    assert_eq!(last["actor"], "oncall-ana");
    assert_eq!(last["note"], note);
    assert_eq!(events[0]["note"], serde_json::Value::Null);

    // A settled key is refused without --force, saying why; nothing changes.
    let (code, stdout, stderr) = reconcile(db, "charge-002", "not-started", "oops");
    assert_eq!(code, 1, "{stdout}");
    assert!(stderr.contains("it is committed"), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(
        ledger.status("charge-002").unwrap(),
        Some(EffectStatus::Committed)
    );
}

/// What the operator checked, with a line that imitates a history event.
const FORGED_NOTE: &str =
    "no charge in the PSP for this key\n2020-01-01T00:00:00Z  commit  unknown  committed";

#[test]
fn reconcile_to_not_started_lets_the_agent_run_it_again() {
    let fx = fixture("reconcile-retry");
    let db = fx.path.to_str().unwrap();
    let (code, _, stderr) = run(&[
        "reconcile",
        db,
        "charge-002",
        "--to",
        "not-started",
        "--note",
        FORGED_NOTE,
        "--by",
        "oncall-bo",
    ]);
    assert_eq!(code, 0, "{stderr}");
    // A note imitating a history line stays inside its own line.
    let (code, stdout, _) = run(&["history", db, "charge-002"]);
    assert_eq!(code, 0);
    // The history table: a title, a header and three events (the refused claims follow it).
    let table = stdout.split("\n\n").next().unwrap();
    assert_eq!(table.lines().count(), 2 + 3, "{stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with("2020-")), "{stdout}");
    let ledger = SqliteLedger::open(&fx.path).unwrap();
    ledger
        .begin("charge-002")
        .expect("not started: the agent may claim it again");
    ledger.commit("charge-002").unwrap();
    let history = ledger.annotated_history("charge-002").unwrap();
    let noted: Vec<_> = history.iter().filter(|a| a.note.is_some()).collect();
    assert_eq!(noted.len(), 1);
    assert_eq!(noted[0].actor.as_deref(), Some("oncall-bo"));
    assert_eq!(noted[0].transition.to, EffectStatus::NotStarted);
    assert_eq!(
        noted[0].note.as_deref(),
        Some(FORGED_NOTE),
        "stored verbatim"
    );
}

#[test]
fn reconcile_refuses_not_started_and_missing_keys_and_force_overrides() {
    let fx = fixture("reconcile-refuse");
    let db = fx.path.to_str().unwrap();
    // `refund-001` is only in the `refunds` scope; `charge-001` is in two scopes.
    let (code, _, stderr) = reconcile(db, "refund-001", "committed", "x");
    assert_eq!(code, 1);
    assert!(stderr.contains("it is not_started"), "{stderr}");
    let (code, _, stderr) = reconcile(db, "charge-001", "committed", "x");
    assert_eq!(code, 2, "ambiguous key: {stderr}");
    assert!(stderr.contains("--scope"), "{stderr}");
    let (code, _, stderr) = reconcile(db, "no-such-key", "committed", "x");
    assert_eq!(code, 4);
    assert!(stderr.contains("no effect `no-such-key`"), "{stderr}");
    let (code, _, stderr) = reconcile(db, "charge-002", "committed", "  ");
    assert_eq!(code, 2, "{stderr}");

    let (code, _, stderr) = run(&[
        "reconcile",
        db,
        "refund-001",
        "--scope",
        "refunds",
        "--to",
        "committed",
        "--note",
        "refund re_1 found in the PSP after all",
        "--force",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let refunds = SqliteLedger::open(&fx.path).unwrap().scope("refunds");
    assert_eq!(
        refunds.status("refund-001").unwrap(),
        Some(EffectStatus::Committed)
    );
    let ledger = SqliteLedger::open(&fx.path).unwrap();
    assert_eq!(
        ledger.status("charge-001").unwrap(),
        Some(EffectStatus::Committed),
        "the other scope's key is untouched"
    );
}

#[test]
fn reconcile_without_an_operator_name_is_a_usage_error() {
    let fx = fixture("reconcile-who");
    let db = fx.path.to_str().unwrap();
    let output = cli()
        .env_remove("USER")
        .args([
            "reconcile",
            db,
            "charge-002",
            "--to",
            "committed",
            "--note",
            "checked",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--by NAME"));
    let ledger = SqliteLedger::open(&fx.path).unwrap();
    assert_eq!(
        ledger.status("charge-002").unwrap(),
        Some(EffectStatus::Unknown)
    );
}

/// `compaction reconcile DB KEY --to TO --note NOTE`.
fn reconcile(db: &str, key: &str, to: &str, note: &str) -> (i32, String, String) {
    run(&["reconcile", db, key, "--to", to, "--note", note])
}
