//! `verify` finds every damaged byte and names it; `gc` removes only what no checkpoint needs.

use crate::common;

use common::*;
use compaction::{Compacted, Compactor, SqliteStore, Tokenizer};

#[test]
fn verify_passes_a_healthy_database() {
    let fx = fixture("verify-ok");
    let db = fx.path.to_str().unwrap();
    let (code, stdout, stderr) = run(&["verify", db]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    redactions(&fx).bind(|| insta::assert_snapshot!("verify_ok", stdout));
    let (code, json) = run_json(&["verify", db, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json["ok"], true);
    assert_eq!(json["checked"]["checkpoints"], 2);
    assert_eq!(json["checked"]["pointers"], fx.pointers.len());
    assert_eq!(
        json["checked"]["effects"], 4,
        "every scope's effects are read"
    );
    assert_eq!(
        json["checked"]["blobs"],
        SqliteStore::open(&fx.path).unwrap().blob_count().unwrap()
    );
}

#[test]
fn verify_names_a_flipped_byte_in_a_blob_and_in_a_checkpoint_row() {
    let fx = fixture("verify-damage");
    let db = fx.path.to_str().unwrap();
    let spilled = fx.pointers[0]
        .trim_start_matches("store://sha256:")
        .to_string();
    flip_blob_byte(&fx.path, &spilled);
    flip_checkpoint_byte(&fx.path, ROOMY_AGENT);
    let (code, stdout, stderr) = run(&["verify", db]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    redactions(&fx).bind(|| insta::assert_snapshot!("verify_damage", stdout));
    assert!(
        stdout.contains(&format!("blob sha256:{spilled}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("checkpoint `{ROOMY_AGENT}`")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "checkpoint `{SPILLING_AGENT}`: points at store://sha256:{spilled}"
        )),
        "the checkpoint that needs the damaged blob is named too: {stdout}"
    );

    let (code, json) = run_json(&["verify", db, "--json"]);
    assert_eq!(code, 1);
    assert_eq!(json["ok"], false);
    let problems = json["problems"].as_array().unwrap();
    let kinds: Vec<&str> = problems
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["blob", "pointer", "checkpoint"], "{problems:?}");

    // Bytes that no longer parse are named as well.
    sql(
        &fx.path,
        "UPDATE checkpoints SET json = substr(json, 2) WHERE agent_id = ?1",
        &[&SPILLING_AGENT],
    );
    let (code, stdout, _) = run(&["verify", db]);
    assert_eq!(code, 1);
    assert!(
        stdout.contains(&format!(
            "checkpoint `{SPILLING_AGENT}`: stored bytes do not parse"
        )),
        "{stdout}"
    );
}

#[test]
fn gc_removes_only_old_blobs_no_checkpoint_needs() {
    let fx = fixture("gc");
    let db = fx.path.to_str().unwrap();
    let store = SqliteStore::open(&fx.path).unwrap();
    let before = store.blob_count().unwrap();
    // A blob stored just now and not yet referenced: a compaction whose checkpoint is not saved.
    let pending = br#""a spill whose checkpoint is on its way""#;
    let pending_hash = compaction::ContentHash::of(pending);
    compaction::block_on(compaction::Store::put(&store, &pending_hash, pending)).unwrap();

    let (code, stdout, stderr) = run(&["gc", db, "--dry-run"]);
    assert_eq!(code, 0, "{stderr}");
    redactions(&fx).bind(|| insta::assert_snapshot!("gc_dry_run", stdout));
    assert_eq!(
        store.blob_count().unwrap(),
        before + 1,
        "a dry run removed something"
    );

    let (code, json) = run_json(&["gc", db, "--json"]);
    assert_eq!(code, 0);
    let removed: Vec<&str> = json["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["address"].as_str().unwrap())
        .collect();
    assert_eq!(removed, [fx.orphan.to_hex().as_str()]);
    assert_eq!(json["freed_bytes"], ORPHAN.len());
    assert_eq!(json["kept_recent"], 1);
    assert!(!store.contains(&fx.orphan).unwrap());
    assert!(
        store.contains(&pending_hash).unwrap(),
        "the grace period keeps a fresh blob"
    );

    // Every checkpoint still rehydrates, and verify finds nothing wrong.
    let loaded: Compacted<AgentState> = store.load_checkpoint(SPILLING_AGENT).unwrap().unwrap();
    let compactor: Compactor = compactor(&store, SPILLING_BUDGET, Tokenizer::O200kBase);
    let reacquire = compaction::FnReacquire::new(|_field: &str, _pointer: &str| {
        Ok(serde_json::Value::String(String::new()))
    });
    compactor.rehydrate_blocking(&loaded, &reacquire).unwrap();
    let (code, _, _) = run(&["verify", db]);
    assert_eq!(code, 0);

    // With no grace period the fresh blob goes too; referenced ones never.
    let (code, json) = run_json(&["gc", db, "--min-age", "0s", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(json["removed"].as_array().unwrap().len(), 1);
    // The checkpoints' parts are kept beside the blobs they point at.
    let checkpoints: &dyn compaction::CheckpointStore = &store;
    let mut parts = std::collections::BTreeSet::new();
    for info in compaction::block_on(checkpoints.list()).unwrap() {
        let row = compaction::block_on(checkpoints.load_row(&info.agent_id))
            .unwrap()
            .unwrap();
        let row = compaction::block_on(checkpoints.read_parts(row)).unwrap();
        parts.extend(row.parts().iter().map(|p| *p.hash()));
    }
    assert!(!parts.is_empty());
    assert_eq!(json["kept_referenced"], fx.pointers.len() + parts.len());
}

#[test]
fn gc_refuses_when_a_checkpoint_cannot_be_read() {
    let fx = fixture("gc-unreadable");
    let db = fx.path.to_str().unwrap();
    let store = SqliteStore::open(&fx.path).unwrap();
    let before = store.blob_count().unwrap();
    sql(
        &fx.path,
        "UPDATE checkpoints SET json = 'not json' WHERE agent_id = ?1",
        &[&SPILLING_AGENT],
    );
    let (code, _, stderr) = run(&["gc", db, "--min-age", "0s"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains(SPILLING_AGENT), "{stderr}");
    assert!(stderr.contains("removed nothing"), "{stderr}");
    assert_eq!(store.blob_count().unwrap(), before);
}

#[test]
fn gc_keeps_old_content_that_a_new_compaction_stores_again() {
    let fx = fixture("gc-restore");
    let db = fx.path.to_str().unwrap();
    let store = SqliteStore::open(&fx.path).unwrap();
    // The blobs of a compaction, left unreferenced two hours ago (their checkpoint replaced).
    let rehearsal = compaction::MemoryStore::new();
    compactor(&rehearsal, SPILLING_BUDGET, Tokenizer::O200kBase)
        .compact_blocking(&state(42))
        .unwrap();
    for hash in rehearsal.hashes() {
        let bytes = rehearsal.raw(&hash).unwrap();
        compaction::block_on(compaction::Store::put(&store, &hash, &bytes)).unwrap();
        age_blob(&fx.path, &hash, 2 * 3600);
    }
    // An agent compacts the same content again: its blobs are stored (again) before its
    // checkpoint is saved, and a gc runs in between.
    let compacted = compactor(&store, SPILLING_BUDGET, Tokenizer::O200kBase)
        .compact_blocking(&state(42))
        .unwrap();
    let (code, json) = run_json(&["gc", db, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        json["removed"].as_array().unwrap().len(),
        1,
        "only the orphan: {json}"
    );
    for hash in rehearsal.hashes() {
        assert!(store.contains(&hash).unwrap(), "{hash} removed: {json}");
    }
    store
        .save_checkpoint("late-saver", &compacted)
        .expect("gc removed a blob the compaction had just stored");
}

#[test]
fn a_checkpoint_saved_while_gc_scans_keeps_its_blobs() {
    let fx = fixture("gc-race");
    let gc_handle = SqliteStore::open(&fx.path).unwrap();
    let agent_handle = SqliteStore::open(&fx.path).unwrap(); // its own connection
    let compacted = compactor(&agent_handle, SPILLING_BUDGET, Tokenizer::O200kBase)
        .compact_blocking(&state(77))
        .unwrap();
    // Its blobs look old and unreferenced to the scan.
    for pointer in compacted.pointers() {
        age_blob(&fx.path, &pointer.hash(), 2 * 3600);
    }
    let mut saved = false;
    let report = gc_handle
        .collect_garbage_with_progress(&compaction::sqlite::GcOptions::new(), &mut |_, _| {
            if !saved {
                // The agent saves while gc reads the checkpoints (gc holds no write lock yet).
                agent_handle
                    .save_checkpoint("saved-during-gc", &compacted)
                    .unwrap();
                saved = true;
            }
        })
        .unwrap();
    assert!(saved);
    assert_eq!(report.checkpoints, 3, "the new checkpoint was re-read");
    for pointer in compacted.pointers() {
        assert!(
            gc_handle.contains(&pointer.hash()).unwrap(),
            "{pointer} removed under a saved checkpoint"
        );
    }
    let removed: Vec<&str> = report.removed.iter().map(|b| b.address.as_str()).collect();
    assert_eq!(removed, [fx.orphan.to_hex().as_str()]);
    let (code, stdout, _) = run(&["verify", fx.path.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");
}

#[test]
fn verify_checks_keyed_seals_with_the_keys_in_the_environment() {
    let dir = TempDir::new("verify-keys");
    let path = dir.0.join("keyed.db");
    let store = SqliteStore::open(&path).unwrap();
    let secret = [7u8; 32];
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let keyed = Compactor::builder()
        .budget(40_000)
        .store(store.clone())
        .seal_key(compaction::SealKey::new("k1", secret).unwrap())
        .agent_id("keyed")
        .build()
        .unwrap();
    let plain = Compactor::builder()
        .budget(40_000)
        .store(store.clone())
        .build()
        .unwrap();
    store
        .save_checkpoint("keyed", &keyed.compact_blocking(&state(2)).unwrap())
        .unwrap();
    let db = path.to_str().unwrap();
    let verify = |keys: Option<&str>| {
        let mut cmd = cli();
        cmd.args(["verify", db, "--json"]);
        match keys {
            Some(keys) => cmd.env("COMPACTION_SEAL_KEYS", keys),
            None => cmd.env_remove("COMPACTION_SEAL_KEYS"),
        };
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !stdout.contains(&hex) && !stderr.contains(&hex),
            "{stdout}{stderr}"
        );
        (out.status.code().unwrap(), stdout, stderr)
    };
    let right = format!("old={},k1={hex}", "11".repeat(32));
    // Without keys the keyed seal is not checked, and verify says which and why.
    let (code, stdout, _) = verify(None);
    assert_eq!(code, 0, "{stdout}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report["not_checked"]["keyed_seals"],
        serde_json::json!([{"checkpoint": "keyed", "key": "k1"}])
    );
    assert_eq!(
        report["not_checked"]["why"],
        "COMPACTION_SEAL_KEYS is not set"
    );
    let text = cli()
        .args(["verify", db])
        .env_remove("COMPACTION_SEAL_KEYS")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("not checked: the keyed seals of 1 checkpoint (keys `k1`)")
            && text.contains("COMPACTION_SEAL_KEYS is not set"),
        "{text}"
    );
    // With the keys, nothing is left unchecked.
    let (_, stdout, _) = verify(Some(&right));
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["not_checked"]["keyed_seals"], serde_json::json!([]));
    assert_eq!(verify(Some(&right)).0, 0, "the key is among the given ones");
    let (code, stdout, _) = verify(Some(&format!("k1={}", "22".repeat(32))));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("checkpoint `keyed`") && stdout.contains("key `k1`"),
        "{stdout}"
    );

    // A checkpoint without a keyed seal, once keys are given.
    store
        .save_checkpoint("plain", &plain.compact_blocking(&state(3)).unwrap())
        .unwrap();
    let (code, stdout, _) = verify(Some(&right));
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("checkpoint `plain`") && stdout.contains("no keyed seal"),
        "{stdout}"
    );
    assert!(!stdout.contains("checkpoint `keyed`"), "{stdout}");

    let (code, _, stderr) = verify(Some("k1=abc"));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("COMPACTION_SEAL_KEYS"), "{stderr}");

    // Another agent's checkpoint copied over `keyed`'s row (JSON and checksum): a problem
    // with or without keys, since the load itself refuses it.
    let other = Compactor::builder()
        .budget(40_000)
        .store(store.clone())
        .seal_key(compaction::SealKey::new("k1", secret).unwrap())
        .agent_id("other")
        .build()
        .unwrap();
    store
        .save_checkpoint("other", &other.compact_blocking(&state(4)).unwrap())
        .unwrap();
    let raw = compaction::sqlite::rusqlite::Connection::open(&path).unwrap();
    raw.execute(
        "UPDATE checkpoints SET (json, sha256) =
             (SELECT json, sha256 FROM checkpoints WHERE agent_id = 'other')
         WHERE agent_id = 'keyed'",
        [],
    )
    .unwrap();
    for keys in [None, Some(right.as_str())] {
        let (code, stdout, _) = verify(keys);
        assert_eq!(code, 1, "{stdout}");
        assert!(
            stdout.contains("checkpoint `keyed`") && stdout.contains("another agent's"),
            "{stdout}"
        );
        assert!(!stdout.contains("checkpoint `other`"), "{stdout}");
    }
}
