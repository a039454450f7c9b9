//! The operator's view of a `Session`'s agent (issue 22.4): `agents` counts the folded,
//! tombstoned and spilled messages, `history` lists the claims the ledger refused (read from the
//! session's record on its answers: the ledger records none), and `show` says when the ledger's
//! status of an effect has moved on from the checkpoint's. Agent ids, keys, notes and tool output
//! are hostile: escape sequences, fake history lines, bidi overrides, imitations of the
//! session's refusals.

use crate::common;

use common::{read_log_turns, run, run_json, session_on, Deployer, TempDir};
use compaction::session::{EffectCall, EffectOutcome, ToolFailure};
use compaction::{Compacted, Effect, Message, ToolCall};
use serde_json::json;
use std::path::PathBuf;

const AGENT: &str = "deployer\u{1b}[2J\u{202e}";
/// Committed, then called again: refused as already committed.
const DONE: &str = "deploy-1\u{1b}]0;pwned\u{7}\n2020-01-01T00:00:00Z  commit  unknown  committed";
/// Left unknown by a timeout, then called again: refused as unknown; reconciled afterwards.
const LOST: &str = "migrate\u{202e}-7\r";
/// Ran and committed; its output imitates the session's refusal of `DONE`.
const MIMIC: &str = "deploy-3";
/// A note that imitates a table row of `show`.
const NOTE: &str = "saw it in the dashboard\n  deploy-9  deploys  unknown  committed";

fn refusal_of(key: &str) -> String {
    format!(
        "Not run: effect `{key}` (deploy on svc://prod) is already committed: it happened before"
    )
}

fn deploy(id: &str, key: &str) -> ToolCall {
    ToolCall::new(id, "deploy", json!({ "key": key }))
}

/// A session whose conversation outgrew its budget, with effects committed, left unknown and
/// refused; returns the database and the last checkpoint.
fn database(dir: &TempDir) -> (PathBuf, Compacted<Deployer>) {
    let path = dir.0.join("agents.db");
    let mut session = session_on(&path, AGENT, 3_000)
        .effect_calls(|call| {
            let arguments: serde_json::Value = serde_json::from_str(call.arguments_text()).ok()?;
            let key = arguments["key"].as_str()?;
            (call.name == "deploy")
                .then(|| EffectCall::new("deploys", Effect::new("deploy", "svc://prod", key)))
        })
        .open_blocking(|| Deployer {
            rules: vec!["never touch /etc/prod".into()],
            ..Deployer::default()
        })
        .unwrap();
    // A plain tool's output imitating a refusal: it is no effect's answer.
    read_log_turns(&mut session, 6, "app.log", &refusal_of(DONE));
    session.push(Message::user("deploy, then migrate"));
    session.next_request_blocking().unwrap();
    let steps: [(&str, &str, Result<String, ToolFailure>); 5] = [
        ("d1", DONE, Ok("deployed".into())),
        ("d2", DONE, Ok("deployed again?".into())),
        (
            "m1",
            LOST,
            Err(ToolFailure::unknown("timed out after the request left")),
        ),
        ("m2", LOST, Ok("migrated?".into())),
        ("d3", MIMIC, Ok(refusal_of(DONE))),
    ];
    let mut outcomes = Vec::new();
    for (id, key, result) in steps {
        session
            .push_response(Message::assistant_with_tools("", vec![deploy(id, key)]))
            .unwrap();
        let call = session.pending_calls()[0].clone();
        outcomes.push(
            session
                .run_effect_blocking(&call, || async move { result })
                .unwrap(),
        );
        session.next_request_blocking().unwrap();
    }
    assert_eq!(
        outcomes,
        [
            EffectOutcome::Committed,
            EffectOutcome::AlreadyCommitted,
            EffectOutcome::LeftUnknown {
                error: "timed out after the request left".into()
            },
            EffectOutcome::OutcomeUnknown,
            EffectOutcome::Committed,
        ]
    );
    let last = session.last_checkpoint().unwrap().clone();
    (path, last)
}

/// A fresh database for one test: its directory (removed on drop), its path, the last
/// checkpoint.
fn fresh(tag: &str) -> (TempDir, String, Compacted<Deployer>) {
    let dir = TempDir::new(tag);
    let (path, last) = database(&dir);
    let db = path.to_str().unwrap().to_string();
    (dir, db, last)
}

fn assert_terminal_safe(stdout: &str) {
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "{stdout}"
    );
    assert!(!stdout.contains('\u{202e}'), "{stdout}");
    assert!(!stdout.lines().any(|l| l.starts_with("2020-")), "{stdout}");
}

#[test]
fn agents_count_folded_tombstoned_and_spilled_messages() {
    let (_dir, db, last) = fresh("session-agents");
    let db = db.as_str();
    let t = last.report().transcript.clone().unwrap();
    assert!(
        t.folded + t.tombstoned > 0,
        "the conversation was compacted: {t:?}"
    );
    let spilled = t.stubbed + t.paged.len();

    let (code, json) = run_json(&["agents", db, "--json"]);
    assert_eq!(code, 0);
    let agent = &json["agents"][0];
    assert_eq!(agent["agent_id"], AGENT);
    assert_eq!(agent["folded_messages"], t.folded);
    assert_eq!(agent["tombstoned_messages"], t.tombstoned);
    assert_eq!(agent["spilled_messages"], spilled);
    assert_eq!(agent["messages_in"], t.messages_in);

    let (code, stdout, stderr) = run(&["agents", db]);
    assert_eq!(code, 0, "{stderr}");
    assert_terminal_safe(&stdout);
    let header: Vec<&str> = stdout.lines().next().unwrap().split("  ").collect();
    assert!(
        header.contains(&"FOLDED") && header.contains(&"TOMBSTONED"),
        "{stdout}"
    );
    let row: Vec<&str> = stdout.lines().nth(1).unwrap().split_whitespace().collect();
    assert!(row[0].starts_with(r"deployer\u{1b}[2J\u{202e}"), "{stdout}");
    let counts = [t.folded, t.tombstoned, spilled].map(|n| n.to_string());
    assert_eq!(row[row.len() - 4..row.len() - 1], counts, "{stdout}");
}

#[test]
fn history_lists_the_refused_claims_from_the_conversation() {
    let (_dir, db, last) = fresh("session-history");
    let db = db.as_str();
    // What the checkpoint's request holds: the session's answer to `d2` and `m2`. A
    // compaction point paged `d2`'s (an old turn's read result, like any other); `history`
    // reads it back whole from the store.
    let sent = last.messages();
    let answer = |id: &str| sent.iter().find(|m| m.tool_call_id.as_deref() == Some(id));
    assert!(answer("d2")
        .unwrap()
        .content
        .starts_with("⟦compaction:paged p"));
    assert!(answer("m2").unwrap().content.starts_with("Not run:"));

    let (code, json) = run_json(&["history", db, DONE, "--json"]);
    assert_eq!(code, 0);
    let refused = &json["refused_claims"];
    assert_eq!(refused["recorded_by_ledger"], false);
    assert_eq!(refused["calls"], 2, "d1 and d2 call it: {refused}");
    let claims = refused["claims"].as_array().unwrap();
    // d1 ran; neither the plain tool's imitations nor `d3`'s output (another key) count.
    assert_eq!(claims.len(), 1, "{refused}");
    assert_eq!(claims[0]["call_id"], "d2");
    assert_eq!(claims[0]["agent_id"], AGENT);
    assert_eq!(claims[0]["reason"], "already_committed");
    let whole = claims[0]["answer"].as_str().unwrap();
    assert!(whole.starts_with(&refusal_of(DONE)), "{whole}");
    assert_eq!(claims[0]["answer_read_back"], true);
    assert_eq!(json["effect"]["status"], "committed");

    let (code, json) = run_json(&["history", db, LOST, "--json"]);
    assert_eq!(code, 0);
    let claims = json["refused_claims"]["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 1, "{json}");
    assert_eq!(claims[0]["call_id"], "m2");
    assert_eq!(claims[0]["reason"], "outcome_unknown");
    assert_eq!(claims[0]["answer_read_back"], false);

    let (code, stdout, stderr) = run(&["history", db, DONE]);
    assert_eq!(code, 0, "{stderr}");
    assert_terminal_safe(&stdout);
    assert!(stdout.contains("the ledger records none"), "{stdout}");
    assert!(stdout.contains("2 calls of this effect"), "{stdout}");
    let row = stdout
        .lines()
        .find(|l| l.contains("already_committed"))
        .unwrap();
    assert!(row.starts_with(r"  deployer\u{1b}[2J\u{202e}"), "{row}");
    assert!(
        row.contains(r"Not run: effect `deploy-1\u{1b}]0;pwned\u{7}\n2020-"),
        "{row}"
    );

    // A key no call names: no claim, and nothing invented.
    let (_, json) = run_json(&["history", db, MIMIC, "--json"]);
    assert_eq!(json["refused_claims"]["calls"], 1);
    assert_eq!(json["refused_claims"]["claims"], json!([]));
}

#[test]
fn show_says_when_the_ledger_moved_on_from_the_checkpoint() {
    let (_dir, db, last) = fresh("session-drift");
    let db = db.as_str();
    // The checkpoint saw `LOST` unknown.
    let seen = last
        .fields()
        .find_map(|f| match f.form {
            compaction::FormView::Effects(view) => view
                .records()
                .find(|e| e.idempotency_key == LOST)
                .map(|e| e.status),
            _ => None,
        })
        .expect("the window holds the record");
    assert_eq!(seen, compaction::EffectStatus::Unknown);
    let (_, json) = run_json(&["show", db, AGENT, "--json"]);
    assert_eq!(
        json["ledger_drift"]["moved"],
        json!([]),
        "nothing moved yet"
    );
    assert_eq!(json["ledger_drift"]["compared"], 3);
    let (_, stdout, _) = run(&["show", db, AGENT]);
    assert!(!stdout.contains("moved on"), "{stdout}");

    // An operator settles it after checking (the claim is recent: --force).
    let (code, _, stderr) = run(&[
        "reconcile",
        db,
        LOST,
        "--to",
        "committed",
        "--note",
        NOTE,
        "--force",
    ]);
    assert_eq!(code, 0, "{stderr}");

    let (code, json) = run_json(&["show", db, AGENT, "--json"]);
    assert_eq!(code, 0);
    let moved = json["ledger_drift"]["moved"].as_array().unwrap();
    assert_eq!(moved.len(), 1, "{json}");
    assert_eq!(moved[0]["key"], LOST);
    assert_eq!(moved[0]["scope"], "deploys");
    assert_eq!(moved[0]["checkpoint_status"], "unknown");
    assert_eq!(moved[0]["ledger_status"], "committed");
    assert_eq!(moved[0]["last_op"], "reconcile");
    assert_eq!(moved[0]["last_actor"], "oncall-ana");
    assert_eq!(moved[0]["last_note"], NOTE);

    let (code, stdout, stderr) = run(&["show", db, AGENT]);
    assert_eq!(code, 0, "{stderr}");
    assert_terminal_safe(&stdout);
    assert!(stdout.contains("the ledger has moved on since this checkpoint (1 effects)"));
    let (_, section) = stdout.split_once("moved on since").unwrap();
    let row = section.lines().find(|l| l.contains("migrate")).unwrap();
    assert!(
        row.starts_with(r"  migrate\u{202e}-7\r  deploys  unknown"),
        "{row}"
    );
    assert!(
        row.contains(r"by oncall-ana: saw it in the dashboard\n  deploy-9"),
        "{row}"
    );
    assert!(
        !stdout.lines().any(|l| l.starts_with("  deploy-9")),
        "{stdout}"
    );
}
