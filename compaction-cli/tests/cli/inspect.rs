//! `agents`, `show`, `resolve` and the failures every command shares, against a database the
//! library wrote.

use crate::common;

use common::*;
use compaction::{Compacted, SqliteStore};

#[test]
fn agents_lists_every_checkpoint_with_its_counts() {
    let fx = fixture("agents");
    let db = fx.path.to_str().unwrap();
    let (code, stdout, stderr) = run(&["agents", db]);
    assert_eq!(code, 0, "{stderr}");
    redactions(&fx).bind(|| insta::assert_snapshot!("agents", stdout));

    let (code, json) = run_json(&["agents", db, "--json"]);
    assert_eq!(code, 0);
    let agents = json["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 2);
    let store = SqliteStore::open(&fx.path).unwrap();
    let billing: Compacted<AgentState> = store.load_checkpoint(SPILLING_AGENT).unwrap().unwrap();
    let row = agents
        .iter()
        .find(|a| a["agent_id"] == SPILLING_AGENT)
        .unwrap();
    assert_eq!(row["tokens"], billing.tokens());
    assert_eq!(row["budget"], SPILLING_BUDGET);
    assert_eq!(row["intact"], true);
    assert!(row["state_type"].as_str().unwrap().contains("AgentState"));
    let outcomes = &billing.report().fields;
    let total = ["kept", "spilled", "summarized", "evicted"]
        .iter()
        .map(|k| row[*k].as_u64().unwrap() as usize)
        .sum::<usize>();
    assert_eq!(total, outcomes.len());
    assert!(row["spilled"].as_u64().unwrap() >= 1, "{row}");
    assert!(row["summarized"].as_u64().unwrap() >= 1, "{row}");
    assert!(row["evicted"].as_u64().unwrap() >= 1, "{row}");
}

#[test]
fn show_prints_the_window_and_where_its_tokens_go() {
    let fx = fixture("show");
    let db = fx.path.to_str().unwrap();
    let store = SqliteStore::open(&fx.path).unwrap();
    let billing: Compacted<AgentState> = store.load_checkpoint(SPILLING_AGENT).unwrap().unwrap();

    let (code, stdout, _) = run(&["show", db, SPILLING_AGENT]);
    assert_eq!(code, 0);
    assert_eq!(stdout, format!("{}\n", billing.render()));

    let (code, stdout, stderr) = run(&["show", db, SPILLING_AGENT, "--budget"]);
    assert_eq!(code, 0, "{stderr}");
    redactions(&fx).bind(|| insta::assert_snapshot!("show_budget", stdout));
    for pointer in &fx.pointers {
        assert!(stdout.contains(pointer.as_str()), "{pointer} missing");
    }

    let (code, json) = run_json(&["show", db, SPILLING_AGENT, "--budget", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json["window"], billing.render());
    let breakdown = &json["breakdown"];
    assert_eq!(breakdown["counter"], "o200k_base");
    let fields = breakdown["fields"].as_array().unwrap();
    let tokens: Vec<u64> = fields
        .iter()
        .map(|f| f["tokens"].as_u64().unwrap())
        .collect();
    assert!(
        tokens.windows(2).all(|w| w[0] >= w[1]),
        "not largest first: {tokens:?}"
    );
    let classes: u64 = breakdown["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(classes, tokens.iter().sum::<u64>());
    // Per-field lines are counted apart, so their sum is close to the window's count.
    let whole = billing.tokens() as u64;
    assert!(classes <= whole + whole / 20, "{classes} vs {whole}");
    let left: Vec<&str> = breakdown["left_window"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["pointer"].as_str())
        .collect();
    for pointer in &fx.pointers {
        assert!(
            left.contains(&pointer.as_str()),
            "{pointer} not in {left:?}"
        );
    }
    assert!(
        left.contains(&"file:///srv/billing/config.toml"),
        "{left:?}"
    );
}

#[test]
fn show_refuses_an_altered_checkpoint_and_a_missing_agent() {
    let fx = fixture("show-refuses");
    let db = fx.path.to_str().unwrap();
    let (code, _, stderr) = run(&["show", db, "no-such-agent"]);
    assert_eq!(code, 4);
    assert!(
        stderr.contains("no checkpoint of agent `no-such-agent`"),
        "{stderr}"
    );
    assert!(stderr.contains(db), "{stderr}");
    assert!(stderr.contains("compaction agents"), "{stderr}");

    // A changed digit in the window: the JSON still parses, the checksum does not match.
    sql(
        &fx.path,
        "UPDATE checkpoints SET json = replace(json, '\"plan_step\"', '\"plan_stop\"') WHERE agent_id = ?1",
        &[&SPILLING_AGENT],
    );
    let (code, stdout, stderr) = run(&["show", db, SPILLING_AGENT]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.is_empty(), "printed an altered window: {stdout}");
    assert!(stderr.contains("was altered"), "{stderr}");
    let (_, json) = run_json(&["agents", db, "--json"]);
    let intact: Vec<(&str, bool)> = json["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["agent_id"].as_str().unwrap(),
                a["intact"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(intact, [(SPILLING_AGENT, false), (ROOMY_AGENT, true)]);

    sql(
        &fx.path,
        "UPDATE checkpoints SET json = 'not a checkpoint' WHERE agent_id = ?1",
        &[&SPILLING_AGENT],
    );
    let (code, stdout, _) = run(&["agents", db]);
    assert_eq!(code, 0);
    let line = stdout
        .lines()
        .find(|l| l.starts_with(SPILLING_AGENT))
        .unwrap();
    assert!(line.ends_with("UNREADABLE"), "{line}");
    let (code, _, stderr) = run(&["show", db, SPILLING_AGENT, "--budget"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("cannot be read"), "{stderr}");
}

#[test]
fn resolve_prints_verified_bytes() {
    let fx = fixture("resolve");
    let db = fx.path.to_str().unwrap();
    let orphan = format!("store://sha256:{}", fx.orphan.to_hex());
    let (code, stdout, _) = run(&["resolve", db, &orphan]);
    assert_eq!(code, 0);
    let expected: serde_json::Value = serde_json::from_slice(ORPHAN).unwrap();
    assert_eq!(
        stdout,
        format!("{}\n", serde_json::to_string_pretty(&expected).unwrap())
    );
    let (code, json) = run_json(&["resolve", db, &orphan, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json["json"], expected);
    assert_eq!(json["size"], ORPHAN.len());
    assert_eq!(json["verified"], true);

    // Every pointer of the spilling checkpoint resolves.
    for pointer in &fx.pointers {
        let (code, _, stderr) = run(&["resolve", db, pointer]);
        assert_eq!(code, 0, "{pointer}: {stderr}");
    }

    let missing = format!("store://sha256:{}", "ab".repeat(32));
    let (code, _, stderr) = run(&["resolve", db, &missing]);
    assert_eq!(code, 4, "{stderr}");
    let (code, _, stderr) = run(&["resolve", db, HOSTILE]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("not a store pointer"), "{stderr}");

    sql(
        &fx.path,
        "UPDATE blobs SET bytes = CAST(replace(CAST(bytes AS TEXT), 'left', 'LEFT') AS BLOB) WHERE hash = ?1",
        &[&fx.orphan.to_hex()],
    );
    let (code, stdout, stderr) = run(&["resolve", db, &orphan]);
    assert_eq!(code, 1);
    assert!(stdout.is_empty(), "printed unverified bytes: {stdout}");
    assert!(stderr.contains("fails verification"), "{stderr}");
}

#[test]
fn a_database_that_cannot_be_opened_is_named_with_what_to_do() {
    let dir = TempDir::new("cannot-open");
    let missing = dir.0.join("missing.db");
    let missing = missing.to_str().unwrap();
    for command in ["agents", "verify", "effects"] {
        let (code, _, stderr) = run(&[command, missing]);
        assert_eq!(code, 3, "{command}: {stderr}");
        assert!(stderr.contains(missing), "{stderr}");
        assert!(stderr.contains("hint: check the path"), "{stderr}");
    }
    assert!(
        !dir.0.join("missing.db").exists(),
        "a read command created the file"
    );

    let not_a_db = dir.0.join("notes.txt");
    std::fs::write(&not_a_db, "## protected (verbatim)\n".repeat(500)).unwrap();
    let (code, _, stderr) = run(&["agents", not_a_db.to_str().unwrap()]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("not a SQLite database"), "{stderr}");

    let (code, _, stderr) = run(&["agents", "postgres://ops@db/agents"]);
    if cfg!(feature = "postgres") {
        assert_eq!(code, 2, "{stderr}");
        assert!(stderr.contains("needs a namespace"), "{stderr}");
    } else {
        assert_eq!(code, 3, "{stderr}");
        assert!(stderr.contains("no PostgreSQL support"), "{stderr}");
        assert!(stderr.contains("--features postgres"), "{stderr}");
    }

    let (code, _, _) = run(&["agents"]);
    assert_eq!(code, 2, "usage errors exit 2");
    let (code, stdout, _) = run(&["--help"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("Exit codes"), "{stdout}");
    assert!(stdout.contains("postgres://"), "{stdout}");
}
