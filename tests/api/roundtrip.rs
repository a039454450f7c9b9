use crate::common;

use common::*;
use compaction::{
    Compactor, Effect, EffectStatus, Extractive, FieldOutcome, FnReacquire, MemoryStore,
    NoReacquire, TokenCounter, Tokenizer,
};

fn sample() -> MigrationState {
    let mut s = MigrationState {
        constraints: vec!["never touch /etc/prod".into(), "numpy<2.0".into()],
        plan_step: 6,
        config_path: "/srv/app/config.toml".into(),
        config_contents: "[db]\nurl = \"postgres://db/app\"\n".into(),
        ci_log: "step ok\n".repeat(400),
        tool_output: (0..200).map(|i| format!("ls output {i}: a b c")).collect(),
        subtask: Subtask {
            title: "rotate keys".into(),
            blocked_on: Some("human approval".into()),
            notes: vec!["looked at vault".into()],
        },
        ..Default::default()
    };
    s.migrations
        .record(Effect::new("apply_migration", "db://app/users", "mig-0001"))
        .unwrap();
    s.migrations.begin("mig-0001").unwrap();
    s.migrations.commit("mig-0001").unwrap();
    s.migrations
        .record(Effect::new("apply_migration", "db://app/users", "mig-0002").depends_on("mig-0001"))
        .unwrap();
    s.migrations.begin("mig-0002").unwrap();
    s
}

#[test]
fn a_state_that_fits_comes_back_equal() {
    let compactor = Compactor::builder().budget(32_000).build().unwrap();
    let state = sample();
    let compacted = compactor.compact_blocking(&state).unwrap();
    println!("{}", compacted.render());
    assert!(
        compacted.report().nothing_evicted(),
        "{}",
        compacted.report()
    );
    assert_eq!(
        compacted.tokens(),
        Tokenizer::O200kBase.count(compacted.render())
    );
    let restored = compactor
        .rehydrate_blocking(&compacted, &NoReacquire)
        .unwrap();
    assert_eq!(restored, state);
}

#[test]
fn a_tight_budget_evicts_in_order_and_rehydrates() {
    let store = MemoryStore::new();
    let compactor = Compactor::builder()
        .budget(700)
        .summarizer(Extractive)
        .store(store.clone())
        .build()
        .unwrap();
    let state = sample();
    let compacted = compactor.compact_blocking(&state).unwrap();
    println!("{}\n{}", compacted.render(), compacted.report());
    assert!(compacted.tokens() <= 700);
    let window = compacted.render();
    assert!(window.contains(r#"constraints [pinned] = ["never touch /etc/prod","numpy<2.0"]"#));
    assert!(window
        .contains(r#""idempotency_key":"mig-0002","status":"unknown","depends_on":["mig-0001"]"#));
    assert_eq!(
        compacted.report().outcome("tool_output"),
        Some(&FieldOutcome::Tombstoned)
    );
    let reacquire = FnReacquire::new(|field: &str, pointer: &str| {
        Ok(match (field, pointer) {
            ("config_contents", "file:///srv/app/config.toml") => {
                serde_json::json!("[db]\nurl = \"postgres://db/app\"\n")
            }
            ("ci_log", "https://ci.example/runs/6") => serde_json::json!("step ok\n".repeat(400)),
            other => return Err(format!("unexpected {other:?}").into()),
        })
    });
    let restored = compactor
        .rehydrate_blocking(&compacted, &reacquire)
        .unwrap();
    assert_eq!(restored.constraints, state.constraints);
    assert_eq!(restored.plan_step, 6);
    assert_eq!(restored.migrations, state.migrations);
    assert_eq!(
        restored.migrations.status("mig-0002"),
        Some(EffectStatus::Unknown)
    );
    assert_eq!(restored.subtask.blocked_on, state.subtask.blocked_on);
}

fn assert_send<T: Send>(value: T) -> T {
    value
}

#[test]
fn futures_are_send_and_run_on_any_executor() {
    let compactor = Compactor::builder()
        .budget(700)
        .summarizer(Extractive)
        .build()
        .unwrap();
    let state = sample();
    // Spawnable on a multi-threaded runtime: the futures are Send.
    let compacted = compaction::block_on(assert_send(compactor.compact(&state))).unwrap();
    let reacquire = FnReacquire::new(|_: &str, pointer: &str| {
        Ok(serde_json::json!(format!("re-read {pointer}")))
    });
    let restored =
        compaction::block_on(assert_send(compactor.rehydrate(&compacted, &reacquire))).unwrap();
    assert_eq!(restored.constraints, state.constraints);
    let pointer = compacted
        .pointers()
        .into_iter()
        .next()
        .expect("something spilled");
    let bytes = compaction::block_on(assert_send(compactor.resolve(pointer.to_string()))).unwrap();
    assert!(!bytes.is_empty());
    // A compaction on another thread sees the same state.
    let handle = std::thread::spawn(move || compactor.compact_blocking(&state).map(|c| c.tokens()));
    assert!(handle.join().unwrap().unwrap() <= 700);
}

#[test]
fn checkpoint_round_trips_through_json_and_detects_tampering() {
    let compactor = Compactor::builder().budget(700).build().unwrap();
    let compacted = compactor.compact_blocking(&sample()).unwrap();
    let json = serde_json::to_string(&compacted).unwrap();
    let loaded: compaction::Compacted<common::MigrationState> =
        serde_json::from_str(&json).unwrap();
    assert_eq!(loaded.render(), compacted.render());
    let reacquire = FnReacquire::new(|_: &str, _: &str| Ok(serde_json::json!("x")));
    assert!(compactor.rehydrate_blocking(&loaded, &reacquire).is_ok());
    // Change the plan step inside the checkpoint: the seal no longer matches.
    let forged = json.replacen("plan_step = 6", "plan_step = 7", 1);
    assert_ne!(forged, json);
    let forged: compaction::Compacted<common::MigrationState> =
        serde_json::from_str(&forged).unwrap();
    assert!(matches!(
        compactor.rehydrate_blocking(&forged, &reacquire),
        Err(compaction::CompactionError::Integrity { .. })
    ));
}
