//! `Compactor::compact_with_ledger`: every `#[effect]` field is read from its own scope of the
//! ledger, so a view the agent forgot to refresh cannot reach the window, and two effect fields
//! on one ledger never see each other's records. Run on the in-memory and the SQLite ledger.

use crate::common;
#[cfg(feature = "postgres")]
use crate::pg;

use common::TempDir;
use compaction::{
    Compactable, CompactionError, Compactor, Effect, EffectLedger, EffectLog, EffectStatus,
    MemoryLedger, NoReacquire, SqliteLedger,
};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Errand {
    #[protected]
    name: String,
    #[effect(idempotent = false)]
    effects: EffectLog,
}

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Payments {
    #[protected]
    customer: String,
    /// Scope: its path, `charges`.
    #[effect(idempotent = false)]
    charges: EffectLog,
    /// Scope named by the author; the key space is the same as `charges`' on purpose.
    #[effect(idempotent = false, scope = "refund-ledger")]
    refunds: EffectLog,
    #[nested]
    errands: Vec<Errand>,
}

fn compactor() -> Compactor {
    Compactor::builder().budget(2_000).build().unwrap()
}

fn keys(log: &EffectLog) -> Vec<&str> {
    log.iter().map(|e| e.idempotency_key.as_str()).collect()
}

/// The scenario on any ledger: a charge in flight, a committed refund under the same key, an
/// errand's effect in its element's scope.
fn seed<L: EffectLedger>(ledger: &L) {
    compaction::block_on(async {
        let charge = Effect::new("charge", "stripe://cus_42", "pay-1");
        ledger.record("charges", &charge).await.unwrap();
        ledger.begin("charges", "pay-1").await.unwrap(); // the process died here: unknown
        let refund = Effect::new("refund", "stripe://cus_42", "pay-1");
        ledger.record("refund-ledger", &refund).await.unwrap();
        ledger.begin("refund-ledger", "pay-1").await.unwrap();
        ledger.commit("refund-ledger", "pay-1").await.unwrap();
        let email = Effect::new("send_email", "mail://cus_42", "mail-1");
        ledger
            .begin_effect("errands[1].effects", &email)
            .await
            .unwrap();
    });
}

fn state() -> Payments {
    Payments {
        customer: "cus_42".into(),
        errands: vec![Errand::default(), Errand::default()],
        ..Payments::default()
    }
}

/// Compacts with the ledger and rehydrates the checkpoint.
fn bound_round_trip<L: EffectLedger>(state: &Payments, ledger: &L) -> Payments {
    let bound = compactor()
        .compact_with_ledger_blocking(state, ledger)
        .unwrap();
    compactor()
        .rehydrate_blocking(&bound, &NoReacquire)
        .unwrap()
}

fn stale_view_cannot_reach_the_window<L: EffectLedger>(ledger: L) {
    seed(&ledger);
    // The agent never wrote `state.charges = ledger.load_log("charges")`.
    let state = state();
    let plain = compactor().compact_blocking(&state).unwrap();
    assert!(plain
        .render()
        .contains("charges (idempotent=false, 0 records)"));

    let bound = compactor()
        .compact_with_ledger_blocking(&state, &ledger)
        .unwrap();
    let window = bound.render();
    assert!(!window.contains("0 records):\n  charge"), "{window}");
    assert!(
        window.contains("charges (idempotent=false, 1 records)"),
        "{window}"
    );
    assert!(window.contains(r#""status":"unknown""#), "{window}");

    // Each field got its own scope only: the refund is not under charges, nor the charge
    // under refunds, though both use the key `pay-1`; the errand got its element's scope.
    let back: Payments = compactor()
        .rehydrate_blocking(&bound, &NoReacquire)
        .unwrap();
    assert_eq!(keys(&back.charges), ["pay-1"]);
    assert_eq!(back.charges.get("pay-1").unwrap().action, "charge");
    assert_eq!(back.charges.status("pay-1"), Some(EffectStatus::Unknown));
    assert_eq!(back.refunds.get("pay-1").unwrap().action, "refund");
    assert_eq!(back.refunds.status("pay-1"), Some(EffectStatus::Committed));
    assert!(back.errands[0].effects.is_empty());
    assert_eq!(keys(&back.errands[1].effects), ["mail-1"]);
    assert_eq!(back.customer, "cus_42");
}

#[test]
fn memory_ledger_stale_view_cannot_reach_the_window() {
    stale_view_cannot_reach_the_window(MemoryLedger::new());
}

#[test]
fn sqlite_ledger_stale_view_cannot_reach_the_window() {
    let dir = TempDir::new("binding");
    stale_view_cannot_reach_the_window(SqliteLedger::open(dir.db("ledger.db")).unwrap());
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_ledger_stale_view_cannot_reach_the_window() {
    stale_view_cannot_reach_the_window(pg::fresh_ledger());
}

#[test]
fn the_ledger_status_wins_over_a_view_that_disagrees() {
    let ledger = MemoryLedger::new();
    seed(&ledger);
    let mut state = state();
    // A stale view that still thinks the charge never started.
    let charge = Effect::new("charge", "stripe://cus_42", "pay-1");
    state.charges.record(charge).unwrap();
    let back = bound_round_trip(&state, &ledger);
    assert_eq!(back.charges.status("pay-1"), Some(EffectStatus::Unknown));

    // With refuse_on_unknown_effects, the ledger's unknown charge is refused even though the
    // state's own view holds nothing unknown.
    let strict = Compactor::builder()
        .budget(2_000)
        .refuse_on_unknown_effects(true)
        .build()
        .unwrap();
    assert!(strict.compact_blocking(&state).is_ok());
    let err = strict
        .compact_with_ledger_blocking(&state, &ledger)
        .unwrap_err();
    assert!(
        matches!(&err, CompactionError::UnknownEffect { field, key } if field == "charges" && key == "pay-1"),
        "{err:?}"
    );
}

#[test]
fn a_record_only_the_view_holds_is_refused_not_dropped() {
    let ledger = MemoryLedger::new();
    seed(&ledger);
    let mut state = state();
    state
        .refunds
        .record(Effect::new("refund", "stripe://cus_42", "pay-9"))
        .unwrap();
    let before = state.clone();
    let err = compactor()
        .compact_with_ledger_blocking(&state, &ledger)
        .unwrap_err();
    match &err {
        CompactionError::EffectNotInLedger { field, scope, key } => {
            assert_eq!(
                (field.as_str(), scope.as_str(), key.as_str()),
                ("refunds", "refund-ledger", "pay-9")
            );
        }
        other => panic!("expected EffectNotInLedger, got {other:?}"),
    }
    assert!(err.to_string().contains("sync_log"), "{err}");
    assert_eq!(state, before);

    // Synced into its scope, the same state compacts.
    compaction::block_on(ledger.sync_log("refund-ledger", &state.refunds)).unwrap();
    let back = bound_round_trip(&state, &ledger);
    assert_eq!(keys(&back.refunds), ["pay-1", "pay-9"]);
}

#[test]
fn the_scope_is_in_the_schema() {
    let schema = Payments::schema();
    let charges = schema.field("charges").unwrap();
    assert_eq!(charges.effect_scope, None);
    assert_eq!(charges.ledger_scope("charges"), "charges");
    let refunds = schema.field("refunds").unwrap();
    assert_eq!(refunds.effect_scope, Some("refund-ledger"));
    let errand = schema.field("errands[].effects").unwrap();
    assert_eq!(
        errand.ledger_scope("errands[3].effects"),
        "errands[3].effects"
    );
}

/// Agents run on tokio: the bound compaction's future must be `Send` (checked at compile
/// time) and finish on a spawned task.
#[test]
fn compact_with_ledger_runs_on_a_spawned_task() {
    fn assert_send<T: Send>(value: T) -> T {
        value
    }
    let dir = TempDir::new("bindingspawn");
    let ledger = SqliteLedger::open(dir.db("ledger.db")).unwrap();
    seed(&ledger);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let compacted = runtime.block_on(async move {
        let task = tokio::spawn(async move {
            let (state, compactor) = (state(), compactor());
            let future = assert_send(compactor.compact_with_ledger(&state, &ledger));
            future.await.map(|c| c.render().to_string())
        });
        task.await.unwrap()
    });
    assert!(compacted.unwrap().contains("mail-1"));
}
