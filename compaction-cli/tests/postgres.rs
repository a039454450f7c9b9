//! Every command on a `postgres://` target with `--namespace`, against a throwaway server the
//! test starts (the facade's harness): reads see one namespace only, `verify` catches a changed
//! checkpoint row, a rewritten effect and a garbage cache entry, `reconcile --note` and `gc`
//! work as on SQLite, and a password never reaches the output.

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

/// `reconcile` with a note on PostgreSQL, as on SQLite: refused while the claim is recent,
/// settled with --force (or once it is old), the note and the operator in the history.
#[test]
fn reconcile_keeps_its_note_on_postgres() {
    let (db, _) = fleet("cli_reconcile");
    let url = db.url();
    let settle = |extra: &[&str]| {
        let args = [
            &[
                "reconcile",
                url,
                "charge-002",
                "--to",
                "committed",
                "--note",
                "ch_002 is captured in the PSP",
                "--namespace",
                "billing",
            ][..],
            extra,
        ]
        .concat();
        run(&args)
    };
    // Claimed a moment ago by the fixture: the worker may still be running it.
    let (code, _, stderr) = settle(&[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("in flight") && stderr.contains("--force"),
        "{stderr}"
    );
    let (code, stdout, stderr) = settle(&["--force"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "effect charge-002: unknown -> committed (by oncall-ana: ch_002 is captured in the PSP)\n"
    );
    let ledger = block_on(PgLedger::connect(url, "billing")).unwrap();
    assert_eq!(
        block_on(ledger.status("charge-002")).unwrap(),
        Some(compaction::EffectStatus::Committed)
    );
    let (code, json) = run_json(&[
        "history",
        url,
        "charge-002",
        "--namespace",
        "billing",
        "--json",
    ]);
    assert_eq!(code, 0, "{json}");
    let last = json["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["op"], "reconcile");
    assert_eq!(last["actor"], "oncall-ana");
    assert_eq!(last["note"], "ch_002 is captured in the PSP");
    // A settled key is refused without --force, as on SQLite.
    let (code, _, stderr) = settle(&[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("it is committed"), "{stderr}");
    // Another tenant's namespace has no such key.
    let (code, _, _) = run(&[
        "reconcile",
        url,
        "charge-002",
        "--to",
        "committed",
        "--note",
        "n",
        "--namespace",
        "other",
    ]);
    assert_eq!(code, 4);
}

/// `gc` on PostgreSQL: the orphan older than the grace period goes, referenced and recent
/// blobs stay, every checkpoint still rehydrates, and another namespace is untouched.
#[test]
fn gc_works_on_postgres() {
    let (db, spilling) = fleet("cli_gc");
    let url = db.url();
    let store = block_on(PgStore::connect(url, "billing")).unwrap();
    let orphan = compaction::ContentHash::of(ORPHAN);
    block_on(compaction::Store::put(&store, &orphan, ORPHAN)).unwrap();
    db.sql(&format!(
        "UPDATE compaction.blobs SET created_at_ms = created_at_ms - 7200000
         WHERE namespace = 'billing' AND hash = '{}'",
        orphan.to_hex()
    ));
    let fresh = br#""a spill whose checkpoint is on its way""#;
    let fresh_hash = compaction::ContentHash::of(fresh);
    block_on(compaction::Store::put(&store, &fresh_hash, fresh)).unwrap();
    let other = block_on(PgStore::connect(url, "other")).unwrap();
    let other_blobs = block_on(other.blobs()).unwrap().len();

    let ns = ["--namespace", "billing"];
    let (code, json) = run_json(&[&["gc", url, "--dry-run", "--json"][..], &ns].concat());
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["dry_run"], true);
    assert!(
        block_on(store.contains(&orphan)).unwrap(),
        "a dry run removed it"
    );
    let (code, json) = run_json(&[&["gc", url, "--json"][..], &ns].concat());
    assert_eq!(code, 0, "{json}");
    let removed: Vec<&str> = json["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["address"].as_str().unwrap())
        .collect();
    assert_eq!(removed, [orphan.to_hex().as_str()], "{json}");
    assert_eq!(json["kept_recent"], 1, "{json}");
    // The blobs the checkpoint points at, and its parts (kept beside them).
    let checkpoints: &dyn compaction::CheckpointStore = &store;
    let row = block_on(checkpoints.load_row(SPILLING_AGENT))
        .unwrap()
        .unwrap();
    let parts = block_on(checkpoints.read_parts(row)).unwrap().parts().len();
    assert!(parts > 0);
    assert_eq!(
        json["kept_referenced"],
        spilling.pointers().len() + parts,
        "{json}"
    );
    assert!(!block_on(store.contains(&orphan)).unwrap());
    assert!(block_on(store.contains(&fresh_hash)).unwrap());
    assert_eq!(block_on(other.blobs()).unwrap().len(), other_blobs);
    let (code, stdout, _) = run(&[&["verify", url][..], &ns].concat());
    assert_eq!(code, 0, "{stdout}");
}

/// The issue's tamper, on PostgreSQL: a committed charge set back to `not_started` with its
/// events deleted (the trigger dropped first, as a superuser can) and a cache entry replaced by
/// garbage. `verify` names both and exits 1; the library refuses to claim the charge again.
#[test]
fn verify_sees_ledger_and_cache_tampering_on_postgres() {
    let (db, _) = fleet("cli_tamper");
    let url = db.url();
    let (code, json) = run_json(&["verify", url, "--namespace", "billing", "--json"]);
    assert_eq!(code, 0, "{json}");
    assert!(
        json["checked"]["cache_entries"].as_u64().unwrap() >= 1,
        "{json}"
    );
    db.sql(
        "DROP TRIGGER effect_events_append_only ON compaction.effect_events;
         UPDATE compaction.effects SET status = 'not_started'
             WHERE namespace = 'billing' AND key = 'charge-001';
         DELETE FROM compaction.effect_events WHERE namespace = 'billing' AND key = 'charge-001';
         UPDATE compaction.entries SET bytes = '\\x00ff00'::bytea
             WHERE namespace = 'billing' AND name LIKE 'summary-cache/%';",
    );
    let (code, json) = run_json(&["verify", url, "--namespace", "billing", "--json"]);
    assert_eq!(code, 1, "{json}");
    let problems = json["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p["kind"] == "effect" && p["subject"] == "effect `charge-001`"),
        "{json}"
    );
    assert!(problems.iter().any(|p| p["kind"] == "cache"), "{json}");
    let ledger = block_on(PgLedger::connect(url, "billing")).unwrap();
    let err = block_on(ledger.begin("charge-001")).unwrap_err();
    let compaction::PgLedgerError::Backend(backend) = &err else {
        panic!("expected the backend's refusal, got {err:?}");
    };
    assert_eq!(backend.kind(), compaction::PgErrorKind::Corrupt, "{err}");
    let (code, _, _) = run(&["verify", url, "--namespace", "other"]);
    assert_eq!(code, 0, "the other tenant is untouched");
}

#[test]
fn missing_namespaces_and_passwords() {
    let (db, _) = fleet("cli_refusals");
    let url = db.url();
    let (code, _, stderr) = run(&["agents", url]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--namespace"), "{stderr}");

    for secret in [
        "postgres://agent:hunter2-secret@127.0.0.1:1/fleet",
        // The issue's input: an unescaped `@` puts the rest of the password where the host is.
        "postgres://alice:p@ssw0rd@127.0.0.1:1/agents",
    ] {
        for namespace in [&["--namespace", "billing"][..], &[]] {
            let args = [&["agents", secret][..], namespace].concat();
            let (code, stdout, stderr) = run(&args);
            assert_ne!(code, 0, "{stderr}");
            for leaked in ["hunter2", "ssw0rd", "alice", "agent:"] {
                assert!(
                    !stderr.contains(leaked) && !stdout.contains(leaked),
                    "{leaked}: {stderr}"
                );
            }
        }
    }
}

#[derive(compaction::Compactable, serde::Serialize, serde::Deserialize, Default)]
struct Deployer {
    #[effect(idempotent = false)]
    deploys: compaction::EffectLog,
    #[transcript]
    chat: compaction::Transcript,
}

/// `history`'s refused claims on PostgreSQL come from the session's record, as on SQLite: a
/// deploy refused as already committed is listed; one that ran, whose output imitates that
/// refusal, is not.
#[test]
fn refused_claims_come_from_the_sessions_record_on_postgres() {
    use compaction::session::{EffectCall, Session};
    use compaction::{Compactor, Message, ToolCall};
    let db = TestDb::new("cli_refused_claims");
    let url = db.url();
    let mut session = Session::builder("deployer")
        .compactor(Compactor::builder().budget(60_000))
        .store(block_on(PgStore::connect(url, "ops")).unwrap())
        .ledger(block_on(PgLedger::connect(url, "ops")).unwrap())
        .effect_calls(|call: &ToolCall| {
            let key = call.arguments.value().ok()?["key"].as_str()?.to_owned();
            let effect = Effect::new("deploy", "svc://prod", key);
            (call.name == "deploy").then(|| EffectCall::new("deploys", effect))
        })
        .open_blocking(Deployer::default)
        .unwrap();
    session.push(Message::user("deploy"));
    session.next_request_blocking().unwrap();
    let imitation = "Not run: effect `deploy-2` (deploy on svc://prod) is already committed: it \
                     happened before, and running it again would do it twice.";
    for (id, key) in [("d1", "deploy-1"), ("d2", "deploy-1"), ("d3", "deploy-2")] {
        let call = ToolCall::new(id, "deploy", serde_json::json!({ "key": key }));
        session
            .push_response(Message::assistant_with_tools("", vec![call.clone()]))
            .unwrap();
        let output = if key == "deploy-2" {
            imitation
        } else {
            "deployed"
        }
        .to_string();
        session
            .run_effect_blocking(&call, || async move { Ok::<_, String>(output) })
            .unwrap();
        session.next_request_blocking().unwrap();
    }
    let ns = ["--namespace", "ops", "--json"];
    let (code, json) = run_json(&[&["history", url, "deploy-1"][..], &ns].concat());
    assert_eq!(code, 0, "{json}");
    let refused = &json["refused_claims"];
    assert_eq!(refused["calls"], 2, "{refused}");
    assert_eq!(refused["claims"].as_array().unwrap().len(), 1, "{refused}");
    assert_eq!(refused["claims"][0]["call_id"], "d2", "{refused}");
    assert_eq!(refused["claims"][0]["reason"], "already_committed");
    let (code, json) = run_json(&[&["history", url, "deploy-2"][..], &ns].concat());
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["effect"]["status"], "committed");
    assert_eq!(json["refused_claims"]["calls"], 1, "{json}");
    assert_eq!(
        json["refused_claims"]["claims"],
        serde_json::json!([]),
        "{json}"
    );
}
