//! `PgLedger` on a real PostgreSQL: claims from many threads, the append-only history, and a
//! connection cut mid-transaction (`pg_terminate_backend` from another session) for a claim, a
//! multi-key sync and a checkpoint save: a typed error, and nothing half-written.

mod common;
mod pg;

use common::*;
use compaction::postgres::SCHEMA_VERSION;
use compaction::{
    block_on, Compactor, Effect, EffectError, EffectLedger, EffectLog, EffectStatus, Extractive,
    PgError, PgErrorKind, PgLedger, PgLedgerError,
};
use pg::harness::{hold, scalar, terminate_lock_waiter, try_sql, TestDb};
use pg::store;
use std::sync::{Arc, Barrier};

fn ledger(db: &TestDb, namespace: &str) -> PgLedger {
    block_on(PgLedger::connect(db.url(), namespace)).unwrap()
}

fn backend_kind(result: Result<(), PgLedgerError>) -> (PgErrorKind, Option<String>) {
    match result {
        Err(PgLedgerError::Backend(e)) => (e.kind(), e.sql_state().map(str::to_string)),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

#[test]
fn handles_are_clone_send_sync_and_work_through_the_trait_on_tokio() {
    fn assert_shareable<T: Clone + Send + Sync + 'static>() {}
    assert_shareable::<PgLedger>();
    fn assert_error<T: std::error::Error + Send + Sync + 'static>() {}
    assert_error::<PgLedgerError>();
    let db = TestDb::new("objectsafe");
    // Code written against any ledger backend, run inside a tokio runtime: the futures are
    // Send and need no runtime of the caller's.
    async fn claim<L: EffectLedger>(ledger: &L) -> Option<EffectStatus> {
        ledger.begin("charges", "k").await.ok()?;
        ledger.status("charges", "k").await.ok()?
    }
    let ledger = ledger(&db, "ns");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let status = runtime
        .block_on(async move { tokio::spawn(async move { claim(&ledger).await }).await })
        .unwrap();
    assert_eq!(status, Some(EffectStatus::Unknown));
}

#[test]
fn life_cycle_scopes_and_history_through_the_blocking_api() {
    let db = TestDb::new("lifecycle");
    let base = ledger(&db, "ns");
    let charges = base.scope("charges");
    assert_eq!(charges.scope_name(), "charges");
    assert_eq!(charges.namespace(), "ns");
    block_on(charges.record(&Effect::new("charge", "stripe://cus_1", "c1").depends_on("quote")))
        .unwrap();
    block_on(charges.begin("c1")).unwrap();
    assert!(matches!(
        block_on(charges.begin("c1")),
        Err(PgLedgerError::Effect(EffectError::OutcomeUnknown { .. }))
    ));
    block_on(charges.set_payload(
        "c1",
        &serde_json::json!({"id": "ch_1", "text": "store://sha256:00"}),
    ))
    .unwrap();
    block_on(charges.commit("c1")).unwrap();
    assert!(matches!(
        block_on(charges.begin("c1")),
        Err(PgLedgerError::Effect(EffectError::AlreadyCommitted { .. }))
    ));
    // The same key in another scope is another effect.
    block_on(base.scope("refunds").begin("c1")).unwrap();
    block_on(base.scope("refunds").fail("c1")).unwrap();
    assert_eq!(
        block_on(base.scope("refunds").status("c1")).unwrap(),
        Some(EffectStatus::NotStarted)
    );
    let all = block_on(base.load_all()).unwrap();
    assert_eq!(all.keys().collect::<Vec<_>>(), ["charges", "refunds"]);
    let log = block_on(base.load_log("charges")).unwrap();
    let c1 = log.get("c1").unwrap();
    assert_eq!(c1.status, EffectStatus::Committed);
    assert_eq!(c1.depends_on, ["quote"]);
    assert_eq!(c1.payload.as_ref().unwrap()["id"], "ch_1");
    assert_eq!(
        block_on(charges.list(EffectStatus::Committed))
            .unwrap()
            .len(),
        1
    );
    assert!(block_on(charges.list(EffectStatus::Unknown))
        .unwrap()
        .is_empty());

    let history = block_on(charges.history("c1")).unwrap();
    let ops: Vec<_> = history.iter().map(|t| t.op.as_str()).collect();
    assert_eq!(ops, ["record", "begin", "commit"]);
    assert!(history.iter().all(|t| t.pid == std::process::id()));

    // The history is append-only in the database itself.
    for statement in [
        "UPDATE compaction.effect_events SET to_status = 'not_started'",
        "DELETE FROM compaction.effect_events",
        "TRUNCATE compaction.effect_events",
    ] {
        let err = try_sql(db.url(), statement).unwrap_err();
        assert!(
            format!("{err:?}").contains("append-only"),
            "{statement}: {err:?}"
        );
    }
    assert_eq!(block_on(charges.history("c1")).unwrap().len(), 3);

    // A sync moves forward only and reports what it kept.
    let mut stale = EffectLog::new();
    stale
        .record(Effect::new("charge", "stripe://cus_1", "c1"))
        .unwrap();
    stale
        .record(Effect::new("charge", "stripe://cus_2", "c2"))
        .unwrap();
    let summary = block_on(charges.sync_log(&stale)).unwrap();
    assert_eq!(summary.inserted, 1);
    assert_eq!(
        summary.kept,
        [(
            "c1".to_string(),
            EffectStatus::Committed,
            EffectStatus::NotStarted
        )]
    );
    assert_eq!(
        block_on(charges.status("c1")).unwrap(),
        Some(EffectStatus::Committed)
    );
}

#[test]
fn threads_racing_for_one_key_have_exactly_one_winner() {
    let db = TestDb::new("threads");
    let ledger = ledger(&db, "ns");
    for round in 0..10 {
        let key = format!("round-{round}");
        let barrier = Arc::new(Barrier::new(6));
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let (ledger, barrier, key) = (ledger.clone(), barrier.clone(), key.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    block_on(ledger.begin(&key))
                })
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(winners, 1, "round {round}: {results:?}");
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(
                matches!(r, PgLedgerError::Effect(EffectError::OutcomeUnknown { .. })),
                "{r:?}"
            );
        }
        assert_eq!(block_on(ledger.history(&key)).unwrap().len(), 1);
    }
}

#[test]
fn a_cut_connection_while_claiming_is_a_typed_error_and_claims_nothing() {
    let db = TestDb::new("cutclaim");
    let ledger = ledger(&db, "ns");
    block_on(ledger.record(&Effect::new("charge", "stripe://cus_1", "k"))).unwrap();
    // Another session locks the row, so the claim waits inside its transaction.
    let held = hold(
        db.url(),
        "SELECT 1 FROM compaction.effects WHERE key = 'k' FOR UPDATE",
    );
    let claiming = {
        let ledger = ledger.clone();
        std::thread::spawn(move || block_on(ledger.begin("k")))
    };
    terminate_lock_waiter(db.url());
    let (kind, state) = backend_kind(claiming.join().unwrap());
    assert_eq!(kind, PgErrorKind::ConnectionLost);
    assert_eq!(state.as_deref(), Some("57P01"));
    drop(held);
    assert_eq!(
        block_on(ledger.status("k")).unwrap(),
        Some(EffectStatus::NotStarted)
    );
    let ops: Vec<_> = block_on(ledger.history("k"))
        .unwrap()
        .into_iter()
        .map(|t| t.op)
        .collect();
    assert_eq!(ops, ["record"]);
    // The pool replaced the dead connection: the next claim works.
    block_on(ledger.begin("k")).unwrap();
    assert_eq!(
        block_on(ledger.status("k")).unwrap(),
        Some(EffectStatus::Unknown)
    );
}

#[test]
fn a_cut_connection_in_a_multi_key_sync_writes_none_of_it() {
    let db = TestDb::new("cutsync");
    let ledger = ledger(&db, "ns");
    block_on(ledger.record(&Effect::new("charge", "t", "k3"))).unwrap();
    let held = hold(
        db.url(),
        "SELECT 1 FROM compaction.effects WHERE key = 'k3' FOR UPDATE",
    );
    // k1 and k2 are written first, then the sync waits for k3's lock.
    let mut log = EffectLog::new();
    for key in ["k1", "k2", "k3"] {
        log.record(Effect::new("charge", "t", key)).unwrap();
        log.begin(key).unwrap();
    }
    let syncing = {
        let ledger = ledger.clone();
        std::thread::spawn(move || block_on(ledger.sync_log(&log)).map(drop))
    };
    terminate_lock_waiter(db.url());
    let (kind, _) = backend_kind(syncing.join().unwrap());
    assert_eq!(kind, PgErrorKind::ConnectionLost);
    drop(held);
    assert_eq!(
        block_on(ledger.status("k1")).unwrap(),
        None,
        "half a sync was kept"
    );
    assert_eq!(
        block_on(ledger.status("k2")).unwrap(),
        None,
        "half a sync was kept"
    );
    assert_eq!(
        block_on(ledger.status("k3")).unwrap(),
        Some(EffectStatus::NotStarted)
    );
    assert_eq!(
        scalar(db.url(), "SELECT count(*) FROM compaction.effect_events"),
        Some("1".into())
    );
}

#[test]
fn a_cut_connection_while_saving_a_checkpoint_keeps_the_previous_one() {
    let db = TestDb::new("cutcheckpoint");
    let store = store(db.url(), "ns");
    let compactor = Compactor::builder()
        .budget(450)
        .summarizer(Extractive)
        .store(store.clone())
        .build()
        .unwrap();
    let first = compactor.compact_blocking(&spilling_state()).unwrap();
    block_on(store.save_checkpoint("agent", &first)).unwrap();
    let mut changed = spilling_state();
    changed.plan_step = 7;
    let second = compactor.compact_blocking(&changed).unwrap();
    assert_ne!(first.render(), second.render());
    let held = hold(
        db.url(),
        "SELECT 1 FROM compaction.checkpoints WHERE agent_id = 'agent' FOR UPDATE",
    );
    let saving = {
        let store = store.clone();
        std::thread::spawn(move || block_on(store.save_checkpoint("agent", &second)))
    };
    terminate_lock_waiter(db.url());
    let err = saving.join().unwrap().unwrap_err();
    let compaction::CompactionError::Store(store_error) = &err else {
        panic!("expected a store error, got {err:?}");
    };
    let inner = PgError::from_store_error(store_error).expect("a postgres error");
    assert_eq!(inner.kind(), PgErrorKind::ConnectionLost, "{err}");
    drop(held);
    let loaded = block_on(store.load_checkpoint::<MigrationState>("agent"))
        .unwrap()
        .unwrap();
    assert!(loaded.verify_seal());
    assert_eq!(loaded.render(), first.render());
}

#[test]
fn a_newer_schema_refuses_the_ledger_too() {
    let db = TestDb::new("newerledger");
    drop(ledger(&db, "ns"));
    db.sql(&format!(
        "INSERT INTO compaction.schema_version VALUES ({}, 0, 'from the future')",
        SCHEMA_VERSION + 1
    ));
    let err = block_on(PgLedger::connect(db.url(), "ns")).unwrap_err();
    let (kind, _) = backend_kind(Err(err));
    assert_eq!(kind, PgErrorKind::Schema);
}

#[test]
fn a_corrupt_row_is_a_typed_error_not_a_panic() {
    let db = TestDb::new("corrupt");
    let ledger = ledger(&db, "ns");
    block_on(ledger.record(&Effect::new("charge", "t", "k"))).unwrap();
    db.sql("UPDATE compaction.effects SET depends_on = '{not json' WHERE key = 'k'");
    let err = block_on(ledger.get("k")).unwrap_err();
    let PgLedgerError::Backend(inner) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(inner.kind(), PgErrorKind::Corrupt, "{err}");
    assert!(err.to_string().contains("`k`"), "{err}");
}
