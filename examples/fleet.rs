//! One worker of a fleet on PostgreSQL, as README "Running a fleet on PostgreSQL" shows it
//! (`src/lib.rs` tests that the README's block is this file below these lines). Needs the
//! `postgres` feature and a server: `cargo run --example fleet --features postgres`.

use compaction::{
    Compactable, Compactor, Effect, EffectLog, NoReacquire, PgLedger, PgStore, SealKey,
};
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Default)]
struct BillingState {
    #[protected]
    customer: String,
    #[effect(idempotent = false)]
    charges: EffectLog,
}

fn charge_card() -> std::io::Result<()> {
    Ok(()) // the call to the payment provider
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = "postgres://agent:secret@db.internal:5432/agents"; // or "host=... dbname=..."
    let tenant = "acme"; // one namespace per customer
    let store = PgStore::connect(url, tenant)?; // blobs + checkpoints of this namespace only
    let ledger = PgLedger::connect(url, tenant)?; // the effect ledger of this namespace

    // 32 random bytes from your secret manager, the same on every worker of the fleet; the id
    // is stored with each seal, so a rotated-out key can stay as `.verify_key(..)`.
    let key = SealKey::from_hex("2026-11", &std::env::var("COMPACTION_SEAL_KEY")?)?;
    let agent = "billing-agent-7";
    let compactor = Compactor::builder()
        .budget(32_000)
        .store(store.clone())
        .seal_key(key)
        .agent_id(agent) // sealed into every checkpoint, with the namespace and a sequence
        .namespace(tenant)
        .build()?;

    // Whichever worker picks this agent up resumes from its checkpoint. Refused: a keyed seal
    // that does not verify (`Integrity`), another agent's or tenant's checkpoint copied here
    // (`ForeignCheckpoint`), an older one put back (`CheckpointRollback`, against the ledger).
    let mut state: BillingState = match store.load_checkpoint(agent)? {
        Some(checkpoint) => {
            compactor.advance_checkpoint_blocking(&checkpoint, &ledger)?;
            compactor.rehydrate_blocking(&checkpoint, &NoReacquire)?
        }
        None => BillingState::default(),
    };
    state.customer = "cus_42".into();

    let charges = ledger.scope("charges");
    charges.record(&Effect::new(
        "charge",
        "stripe://cus_42",
        "charge-2026-11-001",
    ))?;
    charges.begin("charge-2026-11-001")?; // exactly one worker of the fleet gets past this line
    charge_card()?;
    charges.commit("charge-2026-11-001")?;

    let compacted = compactor.compact_with_ledger_blocking(&state, &ledger)?;
    store.save_checkpoint(agent, &compacted)?;
    compactor.advance_checkpoint_blocking(&compacted, &ledger)?; // now the newest, forward only
    Ok(())
}
