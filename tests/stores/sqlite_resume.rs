//! Resume after a kill: one process compacts its state into a SQLite file and checkpoints it,
//! is killed with SIGKILL, and another process loads the checkpoint and rehydrates it.

use crate::common;

use common::*;
use compaction::sqlite::rusqlite::Connection;
use compaction::{
    CompactionError, Compactor, EffectStatus, FieldOutcome, FnReacquire, SqliteStore, StoreError,
};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const RESUME_ENV: &str = "COMPACTION_SQLITE_RESUME_DB";
const AGENT: &str = "migration-agent-7";
/// The agent's state; deterministic, so both processes know it.
fn state() -> MigrationState {
    spilling_state()
}

fn compactor(store: &SqliteStore) -> Compactor {
    spilling_compactor(store)
}

/// The child: compact, checkpoint, report, then wait to be killed.
#[test]
fn child_resume_entry() {
    let Ok(path) = std::env::var(RESUME_ENV) else {
        return;
    };
    let store = SqliteStore::open(&path).unwrap();
    let compacted = compactor(&store).compact_blocking(&state()).unwrap();
    store.save_checkpoint(AGENT, &compacted).unwrap();
    println!("SAVED {}", compacted.pointers().len());
    std::thread::sleep(std::time::Duration::from_secs(120));
}

#[test]
fn a_killed_agent_resumes_from_its_checkpoint() {
    let dir = TempDir::new("resume");
    let path = dir.0.join("agent.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            common::test_name(module_path!(), "child_resume_entry").as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(RESUME_ENV, &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("child exited before saving").unwrap();
        if line.contains("SAVED ") {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL: no destructor, no clean close of the database
    assert!(!child.wait().unwrap().success());

    // This process never compacted anything: all it has is the file.
    let store = SqliteStore::open(&path).unwrap();
    let compactor = compactor(&store);
    let loaded = store
        .load_checkpoint::<MigrationState>(AGENT)
        .unwrap()
        .expect("checkpoint saved by the killed process");
    assert!(loaded.verify_seal());
    let spilled: Vec<_> = loaded
        .report()
        .fields
        .iter()
        .filter_map(|f| match &f.outcome {
            FieldOutcome::Spilled { pointer } => Some((f.field.clone(), pointer.clone())),
            _ => None,
        })
        .collect();
    let spilled_fields: Vec<&str> = spilled.iter().map(|(f, _)| f.as_str()).collect();
    assert!(
        spilled_fields.contains(&"subtask.title"),
        "{}",
        loaded.report()
    );
    assert!(
        spilled_fields.contains(&"migrations"),
        "{}",
        loaded.report()
    );
    for (_, pointer) in &spilled {
        assert!(store.contains(&pointer.hash()).unwrap());
    }

    let reacquire = FnReacquire::new(|field: &str, pointer: &str| {
        Ok(match (field, pointer) {
            ("config_contents", "file:///srv/app/config.toml") => {
                serde_json::json!("[db]\nurl = \"postgres://db/app\"\n")
            }
            ("ci_log", "https://ci.example/runs/6") => serde_json::json!("step ok\n".repeat(400)),
            other => return Err(format!("unexpected {other:?}").into()),
        })
    });
    let restored = compactor.rehydrate_blocking(&loaded, &reacquire).unwrap();
    let original = state();
    // Protected fields byte-identical, including the spilled ones.
    let bytes = |v: &dyn erased::Json| v.json();
    assert_eq!(bytes(&restored.constraints), bytes(&original.constraints));
    assert_eq!(bytes(&restored.plan_step), bytes(&original.plan_step));
    assert_eq!(bytes(&restored.config_path), bytes(&original.config_path));
    assert_eq!(
        bytes(&restored.subtask.title),
        bytes(&original.subtask.title)
    );
    assert_eq!(
        bytes(&restored.subtask.blocked_on),
        bytes(&original.subtask.blocked_on)
    );
    for (path, fingerprint) in &loaded.report().fingerprints {
        let value = match path.as_str() {
            "constraints" => bytes(&restored.constraints),
            "plan_step" => bytes(&restored.plan_step),
            "config_path" => bytes(&restored.config_path),
            "subtask.title" => bytes(&restored.subtask.title),
            "subtask.blocked_on" => bytes(&restored.subtask.blocked_on),
            _ => continue,
        };
        assert!(fingerprint.matches(&value), "{path}");
    }
    // Effect records verbatim: the in-flight migration is still unknown, not retryable.
    assert_eq!(restored.migrations, original.migrations);
    assert_eq!(
        restored.migrations.status("mig-0029"),
        Some(EffectStatus::Unknown)
    );
    assert_eq!(restored.config_contents, original.config_contents);

    // The spilled values really come from the store: without the blob, rehydrate fails.
    let (_, title_pointer) = spilled.iter().find(|(f, _)| f == "subtask.title").unwrap();
    Connection::open(&path)
        .unwrap()
        .execute(
            "DELETE FROM blobs WHERE hash = ?1",
            [title_pointer.hash().to_hex()],
        )
        .unwrap();
    let err = compactor
        .rehydrate_blocking(&loaded, &reacquire)
        .unwrap_err();
    assert!(
        matches!(err, CompactionError::Store(StoreError::NotFound { .. })),
        "{err:?}"
    );
}

/// Canonical JSON bytes of a value, as the engine fingerprints them.
mod erased {
    pub trait Json {
        fn json(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> Vec<u8> {
            serde_json::to_vec(self).unwrap()
        }
    }
}
