//! One worker of a fleet on PostgreSQL, as the guide's "Running a fleet on PostgreSQL" shows it
//! (`src/lib.rs` tests that docs/postgres.md's block is this file below these lines). Needs the
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

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = "postgres://agent:secret@db.internal:5432/agents"; // or "host=... dbname=..."
    let tenant = "acme"; // one namespace per customer
    let store = PgStore::connect(url, tenant).await?; // blobs + checkpoints of this namespace
    let ledger = PgLedger::connect(url, tenant).await?; // the effect ledger of this namespace

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
    // Every call that talks to the server is awaited: the worker's tokio threads keep serving
    // other agents meanwhile.
    let mut state: BillingState = match store.load_checkpoint(agent).await? {
        Some(checkpoint) => {
            compactor.advance_checkpoint(&checkpoint, &ledger).await?;
            compactor.rehydrate(&checkpoint, &NoReacquire).await?
        }
        None => BillingState::default(),
    };
    state.customer = "cus_42".into();

    let charges = ledger.scope("charges");
    let charge = Effect::new("charge", "stripe://cus_42", "charge-2026-11-001");
    charges.record(&charge).await?;
    charges.begin("charge-2026-11-001").await?; // exactly one worker of the fleet gets past
    charge_card()?;
    charges.commit("charge-2026-11-001").await?;

    let compacted = compactor.compact_with_ledger(&state, &ledger).await?;
    store.save_checkpoint(agent, &compacted).await?;
    compactor.advance_checkpoint(&compacted, &ledger).await?; // now the newest, forward only
    Ok(())
}
