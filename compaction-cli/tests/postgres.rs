//! Every command on a `postgres://` target with `--namespace`, against a throwaway server the
//! test starts (the facade's harness): reads see one namespace only, `verify` catches a changed
//! checkpoint row, the SQLite-only commands refuse clearly, and a password never reaches the
//! output.

mod common;
#[path = "../../tests/pg/harness.rs"]
mod harness;

use common::*;
use compaction::{block_on, Compacted, Effect, PgLedger, PgStore, Tokenizer};
use harness::TestDb;

const OTHER_AGENT: &str = "other-tenant-agent";

/// A database with two namespaces: `billing` (the fixture's spilling agent and a ledger with
/// an unknown charge) and `other` (one agent of another tenant).
fn fleet(tag: &str) -> (TestDb, Compacted<AgentState>) {
    let db = TestDb::new(tag);
    let store = block_on(PgStore::connect(db.url(), "billing")).unwrap();
    let spilling = compactor(&store, SPILLING_BUDGET, Tokenizer::O200kBase)
        .compact_blocking(&state(6))
        .unwrap();
    block_on(store.save_checkpoint(SPILLING_AGENT, &spilling)).unwrap();
    let ledger = block_on(PgLedger::connect(db.url(), "billing")).unwrap();
    let charge = |key: &str| Effect::new("charge_card", "psp://cards/4242", key);
    block_on(ledger.record(&charge("charge-001"))).unwrap();
    block_on(ledger.begin("charge-001")).unwrap();
    block_on(ledger.commit("charge-001")).unwrap();
    block_on(ledger.record(&charge("charge-002"))).unwrap();
    block_on(ledger.begin("charge-002")).unwrap(); // the worker died here: unknown

    let other = block_on(PgStore::connect(db.url(), "other")).unwrap();
    let roomy = compactor(&other, 40_000, Tokenizer::O200kBase)
        .compact_blocking(&AgentState::default())
        .unwrap();
    block_on(other.save_checkpoint(OTHER_AGENT, &roomy)).unwrap();
    (db, spilling)
}

#[test]
fn read_commands_work_on_one_namespace() {
    let (db, spilling) = fleet("cli_reads");
    let url = db.url();
    let ns = ["--namespace", "billing"];

    let (code, json) = run_json(&[&["agents", url, "--json"][..], &ns].concat());
    assert_eq!(code, 0, "{json}");
    let agents = json["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{json}");
    assert_eq!(agents[0]["agent_id"], SPILLING_AGENT);
    assert_eq!(agents[0]["intact"], true);
    let (code, json) = run_json(&["agents", url, "--namespace", "other", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json["agents"][0]["agent_id"], OTHER_AGENT, "{json}");

    let (code, stdout, stderr) = run(&[&["show", url, SPILLING_AGENT][..], &ns].concat());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout, format!("{}\n", spilling.render()));
    let (code, _, stderr) = run(&["show", url, SPILLING_AGENT, "--namespace", "other"]);
    assert_eq!(code, 4, "another tenant's agent is not found: {stderr}");

    let args = [&["effects", url, "--status", "unknown", "--json"][..], &ns].concat();
    let (code, json) = run_json(&args);
    assert_eq!(code, 0);
    let effects = json["effects"].as_array().unwrap();
    assert_eq!(effects.len(), 1, "{json}");
    assert_eq!(effects[0]["key"], "charge-002", "{json}");
    let (code, json) = run_json(&[&["history", url, "charge-001", "--json"][..], &ns].concat());
    assert_eq!(code, 0, "{json}");
    let ops: Vec<&str> = json["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["to"].as_str().unwrap())
        .collect();
    assert_eq!(ops.last(), Some(&"committed"), "{json}");

    let pointer = spilling.pointers()[0].to_string();
    let (code, _, stderr) = run(&[&["resolve", url, &pointer][..], &ns].concat());
    assert_eq!(code, 0, "{stderr}");
    let (code, _, stderr) = run(&["resolve", url, &pointer, "--namespace", "other"]);
    assert_eq!(code, 4, "another tenant's blob is not found: {stderr}");
}

#[test]
fn verify_catches_a_changed_checkpoint_row() {
    let (db, spilling) = fleet("cli_verify");
    let url = db.url();
    let (code, json) = run_json(&["verify", url, "--namespace", "billing", "--json"]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["checked"]["checkpoints"], 1);
    assert_eq!(json["checked"]["pointers"], spilling.pointers().len());
    assert_eq!(json["checked"]["effects"], 2);

    // A digit of the budget changes: the row still parses, its checksum no longer matches.
    db.sql(&format!(
        "UPDATE compaction.checkpoints
         SET json = regexp_replace(json, '\"budget\":{SPILLING_BUDGET}', '\"budget\":{}')
         WHERE namespace = 'billing'",
        SPILLING_BUDGET + 1
    ));
    let (code, json) = run_json(&["verify", url, "--namespace", "billing", "--json"]);
    assert_eq!(code, 1, "{json}");
    let subject = format!("checkpoint `{SPILLING_AGENT}`");
    assert!(
        json["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["subject"] == subject.as_str()),
        "{json}"
    );
    let (code, _, _) = run(&["verify", url, "--namespace", "other"]);
    assert_eq!(code, 0, "the other tenant is untouched");
}

#[test]
fn sqlite_only_commands_missing_namespaces_and_passwords() {
    let (db, _) = fleet("cli_refusals");
    let url = db.url();
    for args in [
        vec!["gc", url, "--namespace", "billing"],
        vec![
            "reconcile",
            url,
            "charge-002",
            "--to",
            "committed",
            "--note",
            "seen in the PSP",
            "--namespace",
            "billing",
        ],
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{stderr}");
        assert!(
            stderr.contains("not available on PostgreSQL targets yet"),
            "{stderr}"
        );
    }
    // Nothing was settled.
    let ledger = block_on(PgLedger::connect(url, "billing")).unwrap();
    assert_eq!(
        block_on(ledger.status("charge-002")).unwrap(),
        Some(compaction::EffectStatus::Unknown)
    );

    let (code, _, stderr) = run(&["agents", url]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--namespace"), "{stderr}");

    let secret = "postgres://agent:hunter2-secret@127.0.0.1:1/fleet";
    let (code, stdout, stderr) = run(&["agents", secret, "--namespace", "billing"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(
        !stderr.contains("hunter2") && !stdout.contains("hunter2"),
        "{stderr}"
    );
}
