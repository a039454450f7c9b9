//! No stored string drives the operator's terminal (issue 21 item 10). Every string a command
//! prints from the database (agent ids, state types, field paths, pointers, window values,
//! scopes, keys, actions, targets, dependencies, notes, operators, blob addresses) holds ESC,
//! CR, BEL, U+202E (right-to-left override) and a newline, as a model-chosen tool argument
//! could. Text output shows each escaped (`\u{1b}`, `\r`, ...) on the line it belongs to, so an
//! in-flight charge can never be redrawn as committed; `--json` output carries the exact
//! strings (JSON escapes them), and no raw control or bidi character either.

use crate::common;

use common::{cli, run, TempDir};
use compaction::sqlite::rusqlite::{params, Connection};
use compaction::{
    block_on, Compactable, Compacted, Compactor, ContentHash, Effect, EffectLog, EffectStatus,
    SqliteLedger, SqliteStore, Store,
};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What a model-chosen argument may hold: a terminal escape that clears the line, a carriage
/// return, the word the attacker wants the operator to read, a bell, a right-to-left override
/// and a newline followed by a fake line.
const H: &str = "\u{1b}[2K\rcommitted\u{7}\u{202e}\nFAKE";

/// Characters that must never reach the terminal as themselves.
const RAW: [char; 4] = ['\u{1b}', '\r', '\u{7}', '\u{202e}'];

fn hostile(tag: &str) -> String {
    format!("{tag}{H}")
}

#[derive(Compactable, Serialize, Deserialize, Default)]
struct Hostile {
    #[protected]
    note: String,
    #[protected]
    path: String,
    #[derivable(pointer = "file://{path}")]
    zzcontents: String,
    #[effect(idempotent = false)]
    charges: EffectLog,
}

struct Db {
    _dir: TempDir,
    path: PathBuf,
    agent: String,
    forged_agent: String,
    scope: String,
    key: String,
    text_blob: ContentHash,
    json_blob: ContentHash,
}

impl Db {
    fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

/// A database whose every printed string is hostile.
fn database() -> Db {
    let dir = TempDir::new("escapes");
    let path = dir.0.join("agents.db");
    let store = SqliteStore::open(&path).unwrap();
    let compactor = Compactor::builder()
        .budget(400)
        .store(store.clone())
        .build()
        .unwrap();
    let state = Hostile {
        note: hostile("note"),
        path: hostile("/srv/"),
        zzcontents: "x".repeat(4000),
        charges: EffectLog::new(),
    };
    let compacted = compactor.compact_blocking(&state).unwrap();
    let agent = hostile("agent");
    store.save_checkpoint(&agent, &compacted).unwrap();

    // A forger with write access re-seals a checkpoint whose field path is hostile (without
    // a seal key, the plain seal can be recomputed; the tool must still print it inertly).
    let forged_agent = hostile("forged");
    let escaped = serde_json::to_string(&hostile("zz")).unwrap();
    let json = serde_json::to_string(&compacted)
        .unwrap()
        .replace("zzcontents", escaped.trim_matches('"'));
    let json =
        String::from_utf8(compaction_fixtures::checkpoint::reseal_bytes(json.as_bytes()).unwrap())
            .unwrap();
    let forged: Compacted<()> = serde_json::from_str(&json).unwrap();
    assert!(forged.verify_seal(), "the forgery is consistent");
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO checkpoints (agent_id, state_type, json, sha256, saved_at_ms)
         VALUES (?1, ?2, ?3, ?4, 0)",
        params![
            forged_agent,
            hostile("State"),
            json,
            ContentHash::of(json.as_bytes()).to_hex()
        ],
    )
    .unwrap();
    // A blob row whose address is not a hash, stored long ago (verify names it, gc removes it).
    conn.execute(
        "INSERT INTO blobs (hash, bytes, size, created_at_ms) VALUES (?1, x'00', 1, 0)",
        params![hostile("address")],
    )
    .unwrap();
    drop(conn);

    let text_blob = ContentHash::of(H.as_bytes());
    block_on(store.put(&text_blob, H.as_bytes())).unwrap();
    let json_bytes = serde_json::to_vec(&serde_json::json!({ "k": H })).unwrap();
    let json_blob = ContentHash::of(&json_bytes);
    block_on(store.put(&json_blob, &json_bytes)).unwrap();

    let scope = hostile("scope");
    let key = hostile("charge");
    let ledger = SqliteLedger::open(&path).unwrap().scope(&scope);
    let effect =
        Effect::new(hostile("charge_card"), hostile("psp://"), &key).depends_on(hostile("quote"));
    ledger.record(&effect).unwrap();
    ledger.begin(&key).unwrap(); // in flight: the attacker wants it to read "committed"
    Db {
        _dir: dir,
        path,
        agent,
        forged_agent,
        scope,
        key,
        text_blob,
        json_blob,
    }
}

/// No raw control or bidi character, no line the hostile newline started, and (when `shown`)
/// the hostile string's escaped newline is there: it was printed, not dropped.
fn assert_inert(what: &str, output: &str, shown: bool) {
    for c in RAW {
        assert!(
            !output.contains(c),
            "{what}: raw {:?} reached the terminal:\n{output}",
            c
        );
    }
    assert!(
        !output
            .lines()
            .any(|line| line.trim_start().starts_with("FAKE")),
        "{what}: a stored newline started a line of its own:\n{output}"
    );
    if shown {
        assert!(
            output.contains(r"\nFAKE"),
            "{what}: the hostile string is not shown escaped:\n{output}"
        );
    }
}

fn text(what: &str, args: &[&str], shown: bool) -> (i32, String) {
    let (code, stdout, stderr) = run(args);
    assert_inert(what, &stdout, shown);
    assert_inert(&format!("{what} (stderr)"), &stderr, false);
    (code, stdout)
}

/// A `--json` command: no raw control or bidi byte, and the value parses back.
fn json(what: &str, args: &[&str]) -> serde_json::Value {
    let (_, stdout, stderr) = run(args);
    for c in RAW {
        assert!(!stdout.contains(c), "{what}: raw {c:?} in JSON:\n{stdout}");
    }
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {stdout}\n{stderr}"))
}

#[test]
fn every_column_of_every_command_is_escaped_and_json_is_faithful() {
    let db = database();
    let d = db.arg();

    // agents: agent ids and state types.
    let (code, out) = text("agents", &["agents", d], true);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(r"State\u{1b}"), "{out}");
    let value = json("agents --json", &["agents", d, "--json"]);
    let ids: Vec<&str> = value["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["agent_id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&db.agent.as_str()) && ids.contains(&db.forged_agent.as_str()));
    assert!(value["agents"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["state_type"] == hostile("State")));

    // show: the window (a protected value, a pointer) and, forged, a field path. The window is
    // the renderer's text, multi-line by nature: the renderer escapes every value's newlines,
    // so only a forger's window (its text rewritten, plain seal recomputed: the reason for
    // keyed seals) holds one, and that one stays; controls and bidi characters never do.
    let (code, _) = text("show", &["show", d, &db.agent], true);
    assert_eq!(code, 0);
    let (code, stdout, _) = run(&["show", d, &db.forged_agent]);
    assert_eq!(code, 0);
    for c in RAW {
        assert!(!stdout.contains(c), "forged show: raw {c:?}:\n{stdout}");
    }
    for agent in [&db.agent, &db.forged_agent] {
        let (code, out) = text("show --budget", &["show", d, agent, "--budget"], true);
        assert_eq!(code, 0, "{out}");
        let value = json("show --json", &["show", d, agent, "--budget", "--json"]);
        let compacted: Compacted<()> = SqliteStore::open(&db.path)
            .unwrap()
            .load_checkpoint(agent)
            .unwrap()
            .unwrap();
        assert_eq!(value["window"], compacted.render(), "faithful window");
        assert_eq!(value["agent_id"], agent.as_str());
    }
    let value = json(
        "show forged --json",
        &["show", d, &db.forged_agent, "--budget", "--json"],
    );
    assert!(
        value["breakdown"]["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["field"] == hostile("zz")),
        "{value}"
    );

    // effects: scope, key, action, target, depends on.
    let (code, out) = text("effects", &["effects", d], true);
    assert_eq!(code, 0);
    assert!(out.contains(r"charge_card\u{1b}"), "{out}");
    let value = json("effects --json", &["effects", d, "--json"]);
    let effect = &value["effects"][0];
    assert_eq!(effect["scope"], db.scope.as_str());
    assert_eq!(effect["key"], db.key.as_str());
    assert_eq!(effect["action"], hostile("charge_card"));
    assert_eq!(effect["target"], hostile("psp://"));
    assert_eq!(effect["depends_on"][0], hostile("quote"));
    assert_eq!(effect["status"], "unknown");

    // reconcile (an operator name and a note from outside, and the stored key and scope),
    // then history.
    let by = hostile("ana");
    let (code, out) = text(
        "reconcile",
        &[
            "reconcile",
            d,
            &db.key,
            "--scope",
            &db.scope,
            "--to",
            "committed",
            "--note",
            H,
            "--by",
            &by,
            "--force",
        ],
        true,
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = text(
        "history",
        &["history", d, &db.key, "--scope", &db.scope],
        true,
    );
    assert_eq!(code, 0, "{out}");
    let value = json(
        "history --json",
        &["history", d, &db.key, "--scope", &db.scope, "--json"],
    );
    let last = value["events"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["note"], H);
    assert_eq!(last["actor"], by.as_str());
    assert_eq!(value["effect"]["key"], db.key.as_str());
    let ledger = SqliteLedger::open(&db.path).unwrap().scope(&db.scope);
    assert_eq!(
        ledger.status(&db.key).unwrap(),
        Some(EffectStatus::Committed)
    );

    // A key given on the command line that is not stored: the error echoes it escaped.
    let (code, _) = text("history missing", &["history", d, H], false);
    assert_eq!(code, 4);

    // resolve: a JSON blob holding the string, as text and as JSON.
    let pointer = format!("store://{}", db.json_blob);
    let (code, out) = text("resolve", &["resolve", d, &pointer], false);
    assert_eq!(code, 0, "{out}");
    let value = json("resolve --json", &["resolve", d, &pointer, "--json"]);
    assert_eq!(value["json"]["k"], H);
    let pointer = format!("store://{}", db.text_blob);
    let value = json("resolve text --json", &["resolve", d, &pointer, "--json"]);
    assert_eq!(value["text"], H);

    // verify names the blob row with the hostile address; gc removes it and says so.
    let (code, _) = text("verify", &["verify", d], true);
    assert_eq!(code, 1);
    let value = json("verify --json", &["verify", d, "--json"]);
    assert!(
        value["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["subject"].as_str().unwrap().contains(H)),
        "{value}"
    );
    let (code, out) = text(
        "gc --dry-run",
        &["gc", d, "--dry-run", "--min-age", "0s"],
        true,
    );
    assert_eq!(code, 0, "{out}");
    let value = json(
        "gc --json",
        &["gc", d, "--dry-run", "--min-age", "0s", "--json"],
    );
    assert!(
        value["removed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["address"] == hostile("address")),
        "{value}"
    );
}

/// The same escaping on the way in: a stored string is never echoed raw in an error either.
#[test]
fn failures_echo_stored_and_given_strings_escaped() {
    let db = database();
    let d = db.arg();
    for args in [
        vec!["show", d, H],
        vec!["history", d, &db.key],
        vec!["reconcile", d, H, "--to", "committed", "--note", "n"],
    ] {
        let output = cli().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success() || args[0] == "history");
        assert_inert(&format!("{args:?}"), &stderr, false);
        assert_inert(
            &format!("{args:?} stdout"),
            &String::from_utf8_lossy(&output.stdout),
            false,
        );
    }
    assert!(Path::new(d).exists());
}
